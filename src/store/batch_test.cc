// Each verb's request as the stores receive it (batch.h): the one place a typed request becomes
// a batch, entry by entry and field by field.
#include "store/batch.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace caudal {
namespace {

Limit Bucket() {
  return *Limit::Create(
      LimitSpec::Bucket(Algorithm::kTokenBucket, 10, {10, std::chrono::seconds(1)}));
}

TEST(EncodedBatch, ADecisionIsItsConsumesHoldsReservesRefundsThenCharges) {
  const Limit limit = Bucket();
  const Limit slots = *Limit::Create(LimitSpec::Concurrency(3, std::chrono::seconds(1)));
  const ReservationTerms terms{.max_open = 7};
  const ConsumeEntry consumes[] = {
      {.key = "c0", .limit = &limit, .cost = 2, .lease = 5, .reservations = &terms}};
  const HoldEntry holds[] = {{.key = "s0", .limit = &slots, .hold = {1, 2}}};
  const ReserveEntry reserves[] = {
      {.key = "v0", .limit = &limit, .cost = 3, .id = {3, 4}, .terms = {.max_open = 8}}};
  const RefundEntry refunds[] = {{.key = "r0",
                                  .limit = &limit,
                                  .cost = 4,
                                  .native = true,
                                  .forget_reservations = true,
                                  .reservations = &terms}};
  const ChargeEntry charges[] = {{.key = "h0", .limit = &limit, .cost = 6, .native = true}};
  const EncodedBatch batch({.consumes = consumes,
                            .holds = holds,
                            .reserves = reserves,
                            .refunds = refunds,
                            .charges = charges});
  const std::span<const EntryRef> e = batch.entries();
  ASSERT_EQ(e.size(), 5u);

  EXPECT_EQ(e[0].key, "c0");
  EXPECT_EQ(e[0].op, EntryOp::kConsume);
  EXPECT_EQ(e[0].cost, 2);
  EXPECT_EQ(e[0].lease, 5);
  EXPECT_EQ(e[0].hold, nullptr);
  EXPECT_EQ(e[0].reservation, &terms);

  EXPECT_EQ(e[1].key, "s0");
  EXPECT_EQ(e[1].op, EntryOp::kConsume);
  EXPECT_EQ(e[1].cost, 1) << "a hold takes one slot";
  EXPECT_EQ(e[1].limit, &slots);
  EXPECT_EQ(e[1].hold, &holds[0].hold);
  EXPECT_EQ(e[1].lease, 0);

  EXPECT_EQ(e[2].key, "v0");
  EXPECT_EQ(e[2].op, EntryOp::kReserve);
  EXPECT_EQ(e[2].cost, 3);
  ASSERT_NE(e[2].hold, nullptr);
  EXPECT_EQ(*e[2].hold, (HoldId{3, 4})) << "the reservation's id, as the batch names it";
  EXPECT_EQ(e[2].reservation, &reserves[0].terms);

  EXPECT_EQ(e[3].key, "r0");
  EXPECT_EQ(e[3].op, EntryOp::kRefund);
  EXPECT_EQ(e[3].cost, 4);
  EXPECT_TRUE(e[3].native_count);
  EXPECT_TRUE(e[3].forget_reservations);
  EXPECT_EQ(e[3].reservation, &terms);

  EXPECT_EQ(e[4].key, "h0");
  EXPECT_EQ(e[4].op, EntryOp::kCharge);
  EXPECT_EQ(e[4].cost, 6);
  EXPECT_TRUE(e[4].native_count);
}

TEST(EncodedBatch, GiveBacksReleasesAndSettlesTravelAlone) {
  const Limit limit = Bucket();
  const GiveBackEntry backs[] = {{.key = "g",
                                  .limit = &limit,
                                  .units = 9,
                                  .grant = {.at = Micros(5), .reset_after = Micros(6)}}};
  const EncodedBatch given(backs);
  ASSERT_EQ(given.entries().size(), 1u);
  EXPECT_EQ(given.entries()[0].op, EntryOp::kGiveBack);
  EXPECT_EQ(given.entries()[0].cost, 9);
  EXPECT_EQ(given.entries()[0].grant, &backs[0].grant);

  const ReleaseEntry releases[] = {{.key = "l", .limit = &limit, .hold = {7, 8}}};
  const EncodedBatch released(releases);
  EXPECT_EQ(released.entries()[0].op, EntryOp::kRelease);
  EXPECT_EQ(released.entries()[0].cost, 0);
  EXPECT_EQ(released.entries()[0].hold, &releases[0].hold);

  const SettleEntry settles[] = {
      {.key = "s", .limit = &limit, .cost = 11, .id = {1, 9}, .terms = {.max_open = 3}}};
  const EncodedBatch settled(settles);
  const EntryRef& s = settled.entries()[0];
  EXPECT_EQ(s.op, EntryOp::kSettle);
  EXPECT_EQ(s.cost, 11);
  ASSERT_NE(s.hold, nullptr);
  EXPECT_EQ(*s.hold, (HoldId{1, 9}));
  EXPECT_EQ(s.reservation, &settles[0].terms);

  const ShareEntry shares[] = {{.key = "h", .limit = &limit, .consumer = "c", .demand = 3}};
  const EncodedBatch shared(shares);
  EXPECT_EQ(shared.entries()[0].op, EntryOp::kShare);
  EXPECT_EQ(shared.entries()[0].cost, 0);
  EXPECT_EQ(shared.entries()[0].share, &shares[0]);
  EXPECT_TRUE(ValidateEntries(shared.entries()).ok());
}

// Past the few entries kept inline, the batch holds every entry and id all the same, and a
// request past kMaxEntriesPerRequest reaches the stores' validation whole.
TEST(EncodedBatch, HoldsManyEntriesAndLeavesTheBoundToValidation) {
  const Limit limit = Bucket();
  std::vector<std::string> keys;
  for (size_t i = 0; i <= kMaxEntriesPerRequest; ++i) {
    keys.emplace_back("k");  // then the number (GCC 12 warns falsely on "k" + std::to_string)
    keys.back() += std::to_string(i);
  }
  std::vector<ReserveEntry> reserves;
  for (size_t i = 0; i < keys.size(); ++i) {
    reserves.push_back(
        {.key = keys[i], .limit = &limit, .id = {.hi = 1, .lo = static_cast<int64_t>(i)}});
  }
  const EncodedBatch all({.reserves = reserves});
  ASSERT_EQ(all.entries().size(), keys.size());
  for (size_t i = 0; i < keys.size(); ++i) {
    EXPECT_EQ(all.entries()[i].key, keys[i]);
    EXPECT_EQ(all.entries()[i].hold->lo, static_cast<int64_t>(i));
  }
  EXPECT_EQ(ValidateEntries(all.entries()).code(), StatusCode::kInvalidArgument);
  const EncodedBatch bounded({.reserves = std::span(reserves).first(kMaxEntriesPerRequest)});
  EXPECT_TRUE(ValidateEntries(bounded.entries()).ok());
}

}  // namespace
}  // namespace caudal
