#include "caudal/store/idempotency_store.h"

#include <gtest/gtest.h>

#include <string>

#include "support/idempotency_contract.h"
#include "support/manual_clock.h"

namespace caudal {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using testing::Changed;
using testing::ClaimOf;
using testing::CompleteOf;
using testing::OutcomeOf;
using testing::ReleaseOf;

TEST(MemoryIdempotencyStoreTest, KeepsTheContract) {
  ManualClock clock;
  auto store = MakeMemoryIdempotencyStore(clock, 100);
  testing::ExpectIdempotencyContract(*store, "t-");
}

TEST(MemoryIdempotencyStoreTest, AClaimEndsAfterItsTtlAndTheKeyIsFreeAgain) {
  ManualClock clock;
  auto store = MakeMemoryIdempotencyStore(clock, 100);
  EXPECT_EQ(OutcomeOf(ClaimOf(*store, "k", "fp", "c1", seconds(10))), ClaimOutcome::kClaimed);
  clock.Advance(seconds(10) - milliseconds(1));
  EXPECT_EQ(OutcomeOf(ClaimOf(*store, "k", "fp", "c2", seconds(10))), ClaimOutcome::kInProgress);
  clock.Advance(milliseconds(1));
  // The first request's instance is gone (or slow): its claim ended, a retry decides.
  EXPECT_EQ(OutcomeOf(ClaimOf(*store, "k", "fp", "c2", seconds(10))), ClaimOutcome::kClaimed);
  // The late first request finds its claim taken over and changes nothing.
  EXPECT_EQ(Changed(CompleteOf(*store, "k", "fp", "c1", "late")), false);
  EXPECT_EQ(Changed(ReleaseOf(*store, "k", "fp", "c1")), false);
  EXPECT_EQ(Changed(CompleteOf(*store, "k", "fp", "c2", "second")), true);
  EXPECT_EQ(ClaimOf(*store, "k", "fp", "c3")->result, "second");
}

TEST(MemoryIdempotencyStoreTest, ACompletedClaimFailsToCompleteOnceEnded) {
  ManualClock clock;
  auto store = MakeMemoryIdempotencyStore(clock, 100);
  EXPECT_EQ(OutcomeOf(ClaimOf(*store, "k", "fp", "c1", seconds(1))), ClaimOutcome::kClaimed);
  clock.Advance(seconds(1));
  EXPECT_EQ(Changed(CompleteOf(*store, "k", "fp", "c1", "r")), false);
  EXPECT_EQ(OutcomeOf(ClaimOf(*store, "k", "other", "c2")), ClaimOutcome::kClaimed);
}

TEST(MemoryIdempotencyStoreTest, AResultLastsItsWindowThenAnotherRequestMayUseTheKey) {
  ManualClock clock;
  auto store = MakeMemoryIdempotencyStore(clock, 100);
  ASSERT_EQ(OutcomeOf(ClaimOf(*store, "k", "fp", "c1", seconds(10))), ClaimOutcome::kClaimed);
  clock.Advance(seconds(5));
  // The window counts from the result, not from the claim.
  ASSERT_EQ(Changed(CompleteOf(*store, "k", "fp", "c1", "r", seconds(60))), true);
  clock.Advance(seconds(60) - milliseconds(1));
  EXPECT_EQ(ClaimOf(*store, "k", "fp", "c2")->outcome, ClaimOutcome::kDone);
  EXPECT_EQ(OutcomeOf(ClaimOf(*store, "k", "other", "c2")), ClaimOutcome::kMismatch);
  clock.Advance(milliseconds(1));
  EXPECT_EQ(OutcomeOf(ClaimOf(*store, "k", "other", "c2")), ClaimOutcome::kClaimed);
}

TEST(MemoryIdempotencyStoreTest, WhenFullTheDoneRecordEndingSoonestIsForgotten) {
  ManualClock clock;
  auto store = MakeMemoryIdempotencyStore(clock, 3);
  for (const char* k : {"a", "b", "c"}) {
    ASSERT_EQ(OutcomeOf(ClaimOf(*store, k, "fp", "c")), ClaimOutcome::kClaimed);
  }
  // b ends first, then c, then a; all three are done.
  ASSERT_EQ(Changed(CompleteOf(*store, "b", "fp", "c", "b", seconds(10))), true);
  ASSERT_EQ(Changed(CompleteOf(*store, "c", "fp", "c", "c", seconds(20))), true);
  ASSERT_EQ(Changed(CompleteOf(*store, "a", "fp", "c", "a", seconds(30))), true);
  EXPECT_EQ(OutcomeOf(ClaimOf(*store, "d", "fp", "c")), ClaimOutcome::kClaimed);
  EXPECT_EQ(OutcomeOf(ClaimOf(*store, "b", "fp", "c")), ClaimOutcome::kClaimed);  // forgotten
  // b's new claim took c's place (c ended soonest of the done ones then).
  EXPECT_EQ(OutcomeOf(ClaimOf(*store, "a", "fp", "x")), ClaimOutcome::kDone);
  EXPECT_EQ(OutcomeOf(ClaimOf(*store, "c", "fp", "x")), ClaimOutcome::kClaimed);
}

TEST(MemoryIdempotencyStoreTest, EndedRecordsGoFirstWhenFull) {
  ManualClock clock;
  auto store = MakeMemoryIdempotencyStore(clock, 2);
  ASSERT_EQ(OutcomeOf(ClaimOf(*store, "a", "fp", "c", seconds(1))), ClaimOutcome::kClaimed);
  ASSERT_EQ(OutcomeOf(ClaimOf(*store, "b", "fp", "c")), ClaimOutcome::kClaimed);
  ASSERT_EQ(Changed(CompleteOf(*store, "b", "fp", "c", "b", seconds(100))), true);
  clock.Advance(seconds(1));  // a's claim ends
  EXPECT_EQ(OutcomeOf(ClaimOf(*store, "c", "fp", "c")), ClaimOutcome::kClaimed);
  EXPECT_EQ(ClaimOf(*store, "b", "fp", "x")->outcome, ClaimOutcome::kDone);  // kept
}

TEST(MemoryIdempotencyStoreTest, FullOfClaimsInProgressRefusesClearlyAndGrowsNoFurther) {
  ManualClock clock;
  auto store = MakeMemoryIdempotencyStore(clock, 2);
  ASSERT_EQ(OutcomeOf(ClaimOf(*store, "a", "fp", "c")), ClaimOutcome::kClaimed);
  ASSERT_EQ(OutcomeOf(ClaimOf(*store, "b", "fp", "c")), ClaimOutcome::kClaimed);
  auto refused = ClaimOf(*store, "c", "fp", "c");
  EXPECT_EQ(refused.status().code(), StatusCode::kResourceExhausted);
  // Neither claim was dropped for it.
  EXPECT_EQ(OutcomeOf(ClaimOf(*store, "a", "fp", "x")), ClaimOutcome::kInProgress);
  EXPECT_EQ(OutcomeOf(ClaimOf(*store, "b", "fp", "x")), ClaimOutcome::kInProgress);
  // A released claim makes room.
  ASSERT_EQ(Changed(ReleaseOf(*store, "a", "fp", "c")), true);
  EXPECT_EQ(OutcomeOf(ClaimOf(*store, "c", "fp", "c")), ClaimOutcome::kClaimed);
}

TEST(MemoryIdempotencyStoreTest, TimeGoingBackwardsNeitherEndsNorRevivesRecords) {
  ManualClock clock;
  auto store = MakeMemoryIdempotencyStore(clock, 10);
  ASSERT_EQ(OutcomeOf(ClaimOf(*store, "k", "fp", "c")), ClaimOutcome::kClaimed);
  ASSERT_EQ(Changed(CompleteOf(*store, "k", "fp", "c", "r", seconds(10))), true);
  clock.Advance(-seconds(30));
  EXPECT_EQ(ClaimOf(*store, "k", "fp", "x")->outcome, ClaimOutcome::kDone);
  clock.Advance(seconds(40));
  EXPECT_EQ(OutcomeOf(ClaimOf(*store, "k", "other", "x")), ClaimOutcome::kClaimed);
}

}  // namespace
}  // namespace caudal
