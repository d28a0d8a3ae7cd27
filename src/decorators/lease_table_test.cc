// The lease table's rules for a store a round trip away (LeaseTable::ObserveRoundTrip), on
// explicit monotonic times: the first ask's size, the renewal point, and the refusals of a dry key.
#include "decorators/lease_table.h"

#include <gtest/gtest.h>

#include <chrono>
#include <vector>

namespace caudal::engine_internal {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

constexpr Nanos kTtl = seconds(1);

Limit Bucket(int64_t capacity, Rate rate) {
  return *Limit::Create(LimitSpec::Bucket(Algorithm::kTokenBucket, capacity, rate));
}

class LeaseTableTest : public ::testing::Test {
 protected:
  // A tenth of 3,000 for one instance: at most 300 held.
  LeaseTableTest()
      : limit_(Bucket(3'000, {3'000, seconds(1)})),
        terms_{.enabled = true, .ttl = kTtl, .max_share_ppm = 100'000},
        table_({.defaults = terms_}) {}

  LeasePlan Begin(Nanos at, int64_t cost = 1) {
    const ConsumeEntry e{.key = "k", .limit = &limit_, .cost = cost, .lease_terms = &terms_};
    return table_.Begin({.consumes = {&e, 1}}, at);
  }
  // The store's answer to the ask sent at `sent`: `leased` units (the request itself allowed).
  int64_t Grant(Nanos sent, int64_t leased, bool allowed = true) {
    const Decision d{.limit = 3'000, .remaining = 0, .leased = leased};
    return table_.Granted("k", limit_, sent, allowed, &d);
  }

  Limit limit_;
  LeaseTerms terms_;
  LeaseTable table_;
};

TEST_F(LeaseTableTest, WithoutARoundTripTheFirstAskIsTheDemandSeen) {
  ASSERT_TRUE(Begin(Nanos(0)).asks.empty()) << "a key seen once asks for nothing";
  const LeasePlan second = Begin(milliseconds(2));
  ASSERT_EQ(second.asks.size(), 1u);
  EXPECT_EQ(second.asks[0].units, 2);
}

TEST_F(LeaseTableTest, AStoreARoundTripAwayLeasesAKeyTurningHotWhatThreeRoundTripsNeed) {
  table_.ObserveRoundTrip(milliseconds(80));
  ASSERT_TRUE(Begin(Nanos(0)).asks.empty());
  const LeasePlan second = Begin(milliseconds(2));
  ASSERT_EQ(second.asks.size(), 1u);
  // 2 units in 2 ms, the rate taken over at least 10 ms (an eighth of the round trip): 200 a
  // second, over 240 ms.
  EXPECT_EQ(second.asks[0].units, 48);
  // What the ask brings covers the requests until a renewal sent on its answer is back: 80 ms
  // at 500 a second is 40 units.
  EXPECT_EQ(Grant(milliseconds(2), 48), 48);
  EXPECT_TRUE(Begin(milliseconds(82)).local);
}

TEST_F(LeaseTableTest, ALeaseRenewsOnceWhatIsLeftCoversLessThanTwoRoundTrips) {
  // Demand: 100 units at once; a lease of 100, taken at 0 and living until about 1 s.
  Begin(Nanos(0), 50);
  const LeasePlan ask = Begin(Nanos(0), 50);
  ASSERT_EQ(ask.asks.size(), 1u);
  ASSERT_EQ(ask.asks[0].units, 100);
  ASSERT_EQ(Grant(Nanos(0), 100), 100);
  // Late in the period, with no round trip: 71 left of a target of 129 renews nothing.
  for (int i = 0; i < 29; ++i) ASSERT_TRUE(Begin(milliseconds(990)).renewals.empty());
  // 300 ms away: 70 units left (more than half of 130) cover less than 600 ms of 130 a second.
  table_.ObserveRoundTrip(milliseconds(300));
  const LeasePlan next = Begin(milliseconds(990));
  ASSERT_TRUE(next.local);
  EXPECT_EQ(next.decisions[0].remaining, 70);
  ASSERT_EQ(next.renewals.size(), 1u);
  EXPECT_EQ(next.renewals[0].units, 60);
}

TEST_F(LeaseTableTest, ADryKeyIsRefusedHereWhileItsRenewalIsOut) {
  table_.ObserveRoundTrip(milliseconds(80));
  Begin(Nanos(0));
  const LeasePlan ask = Begin(milliseconds(2));
  ASSERT_EQ(ask.asks.size(), 1u);
  // The store had room for the request and 5 units only: dry.
  ASSERT_EQ(Grant(milliseconds(2), 5), 5);
  std::vector<LeaseAsk> renewals;
  for (int i = 0; i < 5; ++i) {
    LeasePlan p = Begin(milliseconds(82));
    ASSERT_TRUE(p.local && p.allowed);
    renewals.insert(renewals.end(), p.renewals.begin(), p.renewals.end());
  }
  ASSERT_EQ(renewals.size(), 1u) << "the lease running low renewed, once";
  const LeasePlan refused = Begin(milliseconds(83));
  ASSERT_TRUE(refused.local);
  EXPECT_FALSE(refused.allowed);
  ASSERT_EQ(refused.decisions.size(), 1u);
  EXPECT_EQ(refused.decisions[0].verdict, Verdict::kDenied);
  EXPECT_EQ(refused.decisions[0].retry_after, milliseconds(80));
  EXPECT_TRUE(refused.renewals.empty()) << "one renewal in flight at a time";
  EXPECT_EQ(table_.Counts().held, 0) << "a refusal spends nothing";
  // The renewal is filled: the key is not dry any more, and what it brought is spent here.
  ASSERT_EQ(Grant(milliseconds(82), renewals[0].units), renewals[0].units);
  const LeasePlan after = Begin(milliseconds(163));
  EXPECT_TRUE(after.local);
  EXPECT_TRUE(after.allowed);
}

TEST_F(LeaseTableTest, ARefusedAskMakesTheKeyDryAndTheMarkLapsesAfterThreeRoundTrips) {
  table_.ObserveRoundTrip(milliseconds(80));
  Begin(Nanos(0));
  ASSERT_EQ(Begin(milliseconds(2)).asks.size(), 1u);
  ASSERT_EQ(Grant(milliseconds(2), 0, /*allowed=*/false), 0);
  const LeasePlan refused = Begin(milliseconds(100));
  EXPECT_TRUE(refused.local);
  EXPECT_FALSE(refused.allowed);
  ASSERT_EQ(refused.renewals.size(), 1u);
  ASSERT_EQ(Grant(milliseconds(100), 0), 0);  // still nothing: dry until 100 + 240 ms
  EXPECT_FALSE(Begin(milliseconds(339)).allowed);
  // Past the mark, with no renewal out, a request goes to the store again (and asks).
  ASSERT_EQ(Grant(milliseconds(339), 0), 0);  // the renewal the last refusal sent
  const LeasePlan late = Begin(milliseconds(339) + milliseconds(241));
  EXPECT_FALSE(late.local);
  EXPECT_EQ(late.asks.size(), 1u);
}

TEST_F(LeaseTableTest, WithoutARoundTripADryKeyIsNeverRefusedHere) {
  Begin(Nanos(0));
  ASSERT_EQ(Begin(Nanos(1)).asks.size(), 1u);
  ASSERT_EQ(Grant(Nanos(1), 0, /*allowed=*/false), 0);
  const LeasePlan next = Begin(Nanos(2));
  EXPECT_FALSE(next.local) << "the store decides, as without leases";
}

}  // namespace
}  // namespace caudal::engine_internal
