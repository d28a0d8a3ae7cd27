#include "store/idempotency_store.h"

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
  auto store = MakeMemoryIdempotencyStore(clock, {.max_records = 100});
  testing::ExpectIdempotencyContract(*store, "t-");
}

TEST(MemoryIdempotencyStoreTest, AClaimEndsAfterItsTtlAndTheKeyIsFreeAgain) {
  ManualClock clock;
  auto store = MakeMemoryIdempotencyStore(clock, {.max_records = 100});
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
  auto store = MakeMemoryIdempotencyStore(clock, {.max_records = 100});
  EXPECT_EQ(OutcomeOf(ClaimOf(*store, "k", "fp", "c1", seconds(1))), ClaimOutcome::kClaimed);
  clock.Advance(seconds(1));
  EXPECT_EQ(Changed(CompleteOf(*store, "k", "fp", "c1", "r")), false);
  EXPECT_EQ(OutcomeOf(ClaimOf(*store, "k", "other", "c2")), ClaimOutcome::kClaimed);
}

TEST(MemoryIdempotencyStoreTest, AResultLastsItsWindowThenAnotherRequestMayUseTheKey) {
  ManualClock clock;
  auto store = MakeMemoryIdempotencyStore(clock, {.max_records = 100});
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
  auto store = MakeMemoryIdempotencyStore(clock, {.max_records = 3});
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
  auto store = MakeMemoryIdempotencyStore(clock, {.max_records = 2});
  ASSERT_EQ(OutcomeOf(ClaimOf(*store, "a", "fp", "c", seconds(1))), ClaimOutcome::kClaimed);
  ASSERT_EQ(OutcomeOf(ClaimOf(*store, "b", "fp", "c")), ClaimOutcome::kClaimed);
  ASSERT_EQ(Changed(CompleteOf(*store, "b", "fp", "c", "b", seconds(100))), true);
  clock.Advance(seconds(1));  // a's claim ends
  EXPECT_EQ(OutcomeOf(ClaimOf(*store, "c", "fp", "c")), ClaimOutcome::kClaimed);
  EXPECT_EQ(ClaimOf(*store, "b", "fp", "x")->outcome, ClaimOutcome::kDone);  // kept
}

TEST(MemoryIdempotencyStoreTest, FullOfClaimsInProgressRefusesClearlyAndGrowsNoFurther) {
  ManualClock clock;
  auto store = MakeMemoryIdempotencyStore(clock, {.max_records = 2});
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
  auto store = MakeMemoryIdempotencyStore(clock, {.max_records = 10});
  ASSERT_EQ(OutcomeOf(ClaimOf(*store, "k", "fp", "c")), ClaimOutcome::kClaimed);
  ASSERT_EQ(Changed(CompleteOf(*store, "k", "fp", "c", "r", seconds(10))), true);
  clock.Advance(-seconds(30));
  EXPECT_EQ(ClaimOf(*store, "k", "fp", "x")->outcome, ClaimOutcome::kDone);
  clock.Advance(seconds(40));
  EXPECT_EQ(OutcomeOf(ClaimOf(*store, "k", "other", "x")), ClaimOutcome::kClaimed);
}

// The RSS of an instance went from 16 MB to 1.09 GB with max_keys records of large answers: the
// bytes are bounded too, the same way.
TEST(MemoryIdempotencyStoreTest, ManyLargeAnswersNeverTakeTheBytesPastTheirBound) {
  ManualClock clock;
  constexpr size_t kMaxBytes = size_t{1} << 20;
  MemoryIdempotencyStore store(clock, {.max_records = 100'000, .max_bytes = kMaxBytes});
  const std::string answer(kMaxIdempotentResultBytes, 'x');
  const auto key = [](size_t i) { return "order-" + std::to_string(10'000 + i); };
  const size_t each = RecordBytes(key(0).size(), 2, 1, answer.size());
  constexpr size_t kAnswers = 2000;  // 125 MiB of answers through a 1 MiB bound
  for (size_t i = 0; i < kAnswers; ++i) {
    ASSERT_EQ(OutcomeOf(ClaimOf(store, key(i), "fp", "c")), ClaimOutcome::kClaimed) << i;
    EXPECT_LE(store.usage().bytes, kMaxBytes) << i;
    // Each ends later than the one before: the oldest answers are forgotten first.
    ASSERT_EQ(Changed(CompleteOf(store, key(i), "fp", "c", answer, seconds(60) + milliseconds(i))),
              true)
        << i;
    ASSERT_LE(store.usage().bytes, kMaxBytes) << i;
  }
  // The bound is used, not merely kept: as many of the latest answers as fit.
  const size_t fit = kMaxBytes / each;
  EXPECT_EQ(store.usage().records, fit);
  EXPECT_EQ(store.usage().bytes, fit * each);
  EXPECT_EQ(ClaimOf(store, key(kAnswers - fit), "fp", "x")->result, answer);
  EXPECT_EQ(OutcomeOf(ClaimOf(store, key(kAnswers - fit - 1), "fp", "x")), ClaimOutcome::kClaimed)
      << "forgotten: its retry is decided again";
}

TEST(MemoryIdempotencyStoreTest, CountsEachRecordsBytesUntilItGoes) {
  ManualClock clock;
  MemoryIdempotencyStore store(clock, {});
  ASSERT_EQ(OutcomeOf(ClaimOf(store, "key", "fp", "c", seconds(1))), ClaimOutcome::kClaimed);
  EXPECT_EQ(store.usage().bytes, RecordBytes(3, 2, 1, 0));
  ASSERT_EQ(OutcomeOf(ClaimOf(store, "other", "fp", "c")), ClaimOutcome::kClaimed);
  ASSERT_EQ(Changed(CompleteOf(store, "other", "fp", "c", "answer", seconds(10))), true);
  EXPECT_EQ(store.usage().bytes, RecordBytes(3, 2, 1, 0) + RecordBytes(5, 2, 1, 6));
  clock.Advance(seconds(1));  // "key"'s claim ends; the next call drops it
  ASSERT_EQ(ClaimOf(store, "other", "fp", "x")->outcome, ClaimOutcome::kDone);
  EXPECT_EQ(store.usage().records, 1u);
  EXPECT_EQ(store.usage().bytes, RecordBytes(5, 2, 1, 6));
  ASSERT_EQ(OutcomeOf(ClaimOf(store, "third", "fp", "c")), ClaimOutcome::kClaimed);
  ASSERT_EQ(Changed(ReleaseOf(store, "third", "fp", "c")), true);
  EXPECT_EQ(store.usage().bytes, RecordBytes(5, 2, 1, 6));
}

// Past the bytes as past the records: only records in progress left, a new claim is refused, and
// an answer that does not fit is not kept (its claim ends after its ttl).
TEST(MemoryIdempotencyStoreTest, FullOfClaimsInProgressByBytesRefusesClaimsAndAnswers) {
  ManualClock clock;
  const size_t claim_bytes = RecordBytes(1, 2, 1, 0);
  MemoryIdempotencyStore store(clock, {.max_records = 100, .max_bytes = 2 * claim_bytes + 10});
  ASSERT_EQ(OutcomeOf(ClaimOf(store, "a", "fp", "c", seconds(5))), ClaimOutcome::kClaimed);
  ASSERT_EQ(OutcomeOf(ClaimOf(store, "b", "fp", "c")), ClaimOutcome::kClaimed);
  EXPECT_EQ(ClaimOf(store, "c", "fp", "c").status().code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(CompleteOf(store, "a", "fp", "c", std::string(11, 'r')).status().code(),
            StatusCode::kResourceExhausted);
  EXPECT_EQ(OutcomeOf(ClaimOf(store, "a", "fp", "x")), ClaimOutcome::kInProgress) << "unchanged";
  EXPECT_LE(store.usage().bytes, 2 * claim_bytes + 10);
  // An answer that fits is kept; then a new claim makes room by forgetting it.
  ASSERT_EQ(Changed(CompleteOf(store, "b", "fp", "c", std::string(10, 'r'))), true);
  clock.Advance(seconds(5));  // a's claim ends
  ASSERT_EQ(OutcomeOf(ClaimOf(store, "c", "fp", "c")), ClaimOutcome::kClaimed);
  ASSERT_EQ(OutcomeOf(ClaimOf(store, "d", "fp", "c")), ClaimOutcome::kClaimed)
      << "b's answer forgotten for it";
  EXPECT_EQ(store.usage().records, 2u);
  EXPECT_EQ(store.usage().bytes, 2 * claim_bytes);
}

}  // namespace
}  // namespace caudal
