// The lease table's rules for a store a round trip away (LeaseTable::ObserveRoundTrip), on
// explicit monotonic times: the first ask's size, the renewal point, and the refusals of a dry key
// (LeaseTableTest, leasing units alone); share mode's entry, renewals, local refusals and exit
// (ShareModeTest); an identity's share of a shared capacity (IdentityShareTest).
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
        table_({.defaults = terms_, .shares = false}) {}

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

class ShareModeTest : public ::testing::Test {
 protected:
  // 3,000 a second: a share renewal over a ttl of 1 s grants at most 3,000.
  ShareModeTest()
      : limit_(Bucket(3'000, {3'000, seconds(1)})),
        terms_{.enabled = true, .ttl = kTtl, .max_share_ppm = 100'000},
        table_({.defaults = terms_}) {}

  LeasePlan Begin(Nanos at, int64_t cost = 1) {
    const ConsumeEntry e{.key = "k", .limit = &limit_, .cost = cost, .lease_terms = &terms_};
    return table_.Begin({.consumes = {&e, 1}}, at);
  }
  int64_t Grant(Nanos sent, int64_t leased, bool allowed = true) {
    const Decision d{
        .limit = 3'000, .remaining = 0, .reset_after = milliseconds(900), .leased = leased};
    return table_.Granted("k", limit_, sent, allowed, &d);
  }
  // A share renewal's answer: `leased` granted, `remaining` left in the bucket, the consumers
  // wanting `demand_total` a second.
  int64_t Share(Nanos sent, int64_t leased, int64_t remaining = 0, int64_t demand_total = 6'000) {
    const Decision d{.limit = 3'000, .remaining = remaining, .leased = leased};
    const ShareState share{.allocation = 1'500, .consumers = 2, .demand_total = demand_total};
    return table_.GrantedShare("k", limit_, sent, &d, &share);
  }
  // An ask granted one unit less than it asked for (47 of 48 with the store 80 ms away): the
  // key is dry, and in share mode if it may be.
  void GoDry(bool round_trip = true) {
    if (round_trip) table_.ObserveRoundTrip(milliseconds(80));
    Begin(Nanos(0));
    const LeasePlan ask = Begin(milliseconds(2));
    ASSERT_EQ(ask.asks.size(), 1u);
    ASSERT_EQ(Grant(milliseconds(2), ask.asks[0].units - 1), ask.asks[0].units - 1);
  }

  Limit limit_;
  LeaseTerms terms_;
  LeaseTable table_;
};

TEST_F(ShareModeTest, ADryBucketKeyTakesItsShareAndRefusesHereWhatTheShareDoesNotCover) {
  GoDry();
  ASSERT_EQ(table_.Counts().sharing, 1u);
  // 47 units left of the lease: spent here; then a share renewal is due at once (none sent yet).
  LeasePlan first = Begin(milliseconds(90));
  ASSERT_TRUE(first.local && first.allowed);
  ASSERT_EQ(first.renewals.size(), 1u);
  const LeaseAsk& ask = first.renewals[0];
  EXPECT_TRUE(ask.share);
  EXPECT_EQ(ask.units, 3'000) << "at most the whole refill over a ttl";
  EXPECT_EQ(ask.ttl, kTtl);
  // Three units in the current period of a ttl of 1 s: 3 a second.
  EXPECT_EQ(ask.demand, 3);
  for (int i = 0; i < 46; ++i) ASSERT_TRUE(Begin(milliseconds(91)).allowed);
  // The lease spent, the share not back: refused here, nothing spent, no second renewal.
  const LeasePlan refused = Begin(milliseconds(92));
  ASSERT_TRUE(refused.local);
  EXPECT_FALSE(refused.allowed);
  EXPECT_TRUE(refused.renewals.empty()) << "one renewal in flight at a time";
  // Worth asking again once the next renewal (half a ttl after the last) can be back.
  EXPECT_EQ(refused.decisions[0].retry_after, milliseconds(90 + 500 + 80 - 92));
  // The grant is a lot spent here.
  ASSERT_EQ(Share(milliseconds(90), 200), 200);
  const LeasePlan spent = Begin(milliseconds(170), 150);
  ASSERT_TRUE(spent.local && spent.allowed);
  EXPECT_EQ(spent.decisions[0].remaining, 50);
  EXPECT_TRUE(spent.renewals.empty()) << "covered: the next renewal waits for ttl/2";
  EXPECT_EQ(table_.Counts().held, 50);
}

TEST_F(ShareModeTest, RenewsEveryHalfTtlWhetherCoveredOrRefusing) {
  GoDry();
  ASSERT_EQ(Begin(milliseconds(10)).renewals.size(), 1u);
  ASSERT_EQ(Share(milliseconds(10), 1'000), 1'000);
  // 1,046 left: plenty, whatever the demand (4 units in this period of a ttl).
  EXPECT_TRUE(Begin(milliseconds(300)).renewals.empty());
  EXPECT_TRUE(Begin(milliseconds(509)).renewals.empty());
  const LeasePlan half = Begin(milliseconds(510));
  ASSERT_EQ(half.renewals.size(), 1u);
  EXPECT_TRUE(half.renewals[0].share);
  ASSERT_EQ(Share(milliseconds(510), 0), 0);
  // Nothing left by 600 ms (46 + 1,000 − 3): refused here, renewed again only from 1,010 ms.
  const LeasePlan last = Begin(milliseconds(600), 1'043);
  ASSERT_TRUE(last.local && last.allowed);
  EXPECT_EQ(last.decisions[0].remaining, 0);
  const LeasePlan early = Begin(milliseconds(1'009), 10'000);
  EXPECT_FALSE(early.allowed);
  EXPECT_TRUE(early.renewals.empty());
  const LeasePlan again = Begin(milliseconds(1'010), 10'000);
  EXPECT_FALSE(again.allowed);
  ASSERT_EQ(again.renewals.size(), 1u);
  EXPECT_TRUE(again.renewals[0].share);
}

TEST_F(ShareModeTest, ACoveredKeyRenewsFromAQuarterTtlOnceWhatIsLeftCoversLessThanTwoRoundTrips) {
  GoDry();
  ASSERT_EQ(Begin(milliseconds(10)).renewals.size(), 1u);
  ASSERT_EQ(Share(milliseconds(10), 200), 200);
  // Demand: 3 + 97 units in this period of a ttl of 1 s: 16 units for two round trips.
  ASSERT_TRUE(Begin(milliseconds(100), 97).allowed);
  // 148 left at 200 ms, 15 at 259 ms: the renewal waits for a quarter of a ttl since the last.
  EXPECT_TRUE(Begin(milliseconds(200)).renewals.empty());
  ASSERT_TRUE(Begin(milliseconds(259), 133).allowed);
  const LeasePlan low = Begin(milliseconds(260));
  ASSERT_TRUE(low.local && low.allowed);
  EXPECT_EQ(low.decisions[0].remaining, 14);
  ASSERT_EQ(low.renewals.size(), 1u);
  EXPECT_TRUE(low.renewals[0].share);
}

TEST_F(ShareModeTest, DemandIsCountedPerRatePeriod) {
  limit_ = Bucket(3'000, {3'000, std::chrono::minutes(1)});
  GoDry();
  const LeasePlan p = Begin(milliseconds(100), 40);
  ASSERT_EQ(p.renewals.size(), 1u);
  // 1 + 1 + 40 units in this period of a second: 42 · 60 a minute.
  EXPECT_EQ(p.renewals[0].demand, 42 * 60);
  EXPECT_EQ(p.renewals[0].units, 50) << "the refill over a ttl: 3,000 a minute for 1 s";
}

TEST_F(ShareModeTest, StaysInShareModeUntilAGrantFindsTheBucketHalfFull) {
  GoDry();
  ASSERT_EQ(Begin(milliseconds(10)).renewals.size(), 1u);
  // The consumers' demand fits the refill: the shares, the spare spread among them, grant it.
  Share(milliseconds(10), 10, /*remaining=*/1'499, /*demand_total=*/1'000);
  EXPECT_EQ(table_.Counts().sharing, 1u);
  ASSERT_EQ(Begin(milliseconds(600)).renewals.size(), 1u);
  Share(milliseconds(600), 10, /*remaining=*/1'500, /*demand_total=*/1'000);
  EXPECT_EQ(table_.Counts().sharing, 0u) << "half full";
  // Leasing units again: a request the lots do not cover goes to the store and asks.
  const LeasePlan p = Begin(milliseconds(700), 100);
  EXPECT_FALSE(p.local);
  EXPECT_EQ(p.asks.size(), 1u);
}

TEST_F(ShareModeTest, ARenewalUnansweredForThreeRoundTripsEndsTheLocalRefusals) {
  GoDry();
  ASSERT_EQ(Begin(milliseconds(10)).renewals.size(), 1u);
  ASSERT_EQ(Share(milliseconds(10), 5), 5);
  ASSERT_TRUE(Begin(milliseconds(20), 51).allowed);
  const LeasePlan refused = Begin(milliseconds(250));
  EXPECT_TRUE(refused.local && !refused.allowed);
  EXPECT_TRUE(refused.renewals.empty());
  const LeasePlan renewing = Begin(milliseconds(510));
  EXPECT_TRUE(renewing.local && !renewing.allowed);
  ASSERT_EQ(renewing.renewals.size(), 1u);
  // The renewal is never answered: refused here until it is three round trips late.
  EXPECT_FALSE(Begin(milliseconds(749)).allowed);
  const LeasePlan forwarded = Begin(milliseconds(750));
  EXPECT_FALSE(forwarded.local) << "to the store, and so to its failure mode";
  EXPECT_TRUE(forwarded.asks.empty());
}

TEST_F(ShareModeTest, WhileTheStoreDoesNotAnswerRequestsTheLotsDoNotCoverGoToIt) {
  GoDry();
  ASSERT_EQ(Begin(milliseconds(10)).renewals.size(), 1u);
  ASSERT_EQ(table_.GrantedShare("k", limit_, milliseconds(10), nullptr, nullptr), 0);
  for (int i = 0; i < 46; ++i) ASSERT_TRUE(Begin(milliseconds(20)).local);
  // Past the lease's dry mark (2 + 3 · 80 ms), with no renewal ever answered.
  const LeasePlan p = Begin(milliseconds(245));
  EXPECT_FALSE(p.local) << "decided by the store (or its failure mode), not refused here";
  EXPECT_TRUE(p.asks.empty()) << "a sharing key leases no units";
  // The failed renewal is tried again an eighth of a ttl after the last, not half.
  ASSERT_EQ(p.renewals.size(), 1u);
  EXPECT_TRUE(p.renewals[0].share);
  ASSERT_EQ(table_.GrantedShare("k", limit_, milliseconds(245), nullptr, nullptr), 0);
  EXPECT_TRUE(Begin(milliseconds(369)).renewals.empty());
  const LeasePlan later = Begin(milliseconds(370));
  EXPECT_FALSE(later.local);
  ASSERT_EQ(later.renewals.size(), 1u);
}

TEST_F(ShareModeTest, AnAskFilledFromABucketUnderAQuarterFullTurnsToShares) {
  table_.ObserveRoundTrip(milliseconds(80));
  Begin(Nanos(0));
  const LeasePlan ask = Begin(milliseconds(2));
  ASSERT_EQ(ask.asks.size(), 1u);
  const int64_t units = ask.asks[0].units;
  Decision d{.limit = 3'000, .remaining = 750, .reset_after = milliseconds(900), .leased = units};
  ASSERT_EQ(table_.Granted("k", limit_, milliseconds(2), true, &d), units);
  EXPECT_EQ(table_.Counts().sharing, 0u) << "a quarter full: still leasing units";
  const LeasePlan more = Begin(milliseconds(3), units + 1);
  ASSERT_EQ(more.asks.size(), 1u);
  d.remaining = 749;
  d.leased = more.asks[0].units;
  ASSERT_EQ(table_.Granted("k", limit_, milliseconds(3), true, &d), d.leased);
  EXPECT_EQ(table_.Counts().sharing, 1u);
}

TEST_F(ShareModeTest, AKeyBackFromIdlenessAsksTheStoreRatherThanRefusingHere) {
  GoDry();
  ASSERT_EQ(Begin(milliseconds(10)).renewals.size(), 1u);
  ASSERT_EQ(Share(milliseconds(10), 5), 5);
  ASSERT_TRUE(Begin(milliseconds(20), 51).allowed);
  // No request for a ttl after its last renewal: what the store answered then no longer says the
  // bucket is dry.
  const LeasePlan back = Begin(milliseconds(1'010));
  EXPECT_FALSE(back.local) << "decided by the store";
  ASSERT_EQ(back.renewals.size(), 1u);
  EXPECT_TRUE(back.renewals[0].share);
}

TEST_F(ShareModeTest, FixedWindowsNeverShare) {
  limit_ = *Limit::Create(LimitSpec::Window(Algorithm::kFixedWindow, 3'000, seconds(1)));
  GoDry();
  EXPECT_EQ(table_.Counts().sharing, 0u);
}

TEST_F(ShareModeTest, AStoreAnsweringAtOnceIsNeverShared) {
  GoDry(/*round_trip=*/false);
  EXPECT_EQ(table_.Counts().sharing, 0u);
}

// A capacity of 1,000 a second shared among identities, a window (the shares' ttl) of 1 s, the
// store 10 ms away.
class IdentityShareTest : public ::testing::Test {
 protected:
  IdentityShareTest()
      : limit_(Bucket(1'000, {1'000, seconds(1)})),
        of_{.policy = "p",
            .identity = "5:alice",
            .weight = 3,
            .fairness = Fairness::kProportional,
            .window = kTtl},
        table_({.max_keys = 65'536}) {
    table_.ObserveRoundTrip(milliseconds(10));
  }

  EntryRef Entry(int64_t cost = 1) const {
    return {.key = "cap", .limit = &limit_, .cost = cost, .share_of = &of_};
  }
  SharePlan Begin(Nanos at, int64_t cost = 1, bool waited = false) {
    const EntryRef e = Entry(cost);
    return table_.BeginShared({&e, 1}, at, waited);
  }
  // The answer to the renewal sent at `sent`: `leased` units at `allocation` a second; `failed`:
  // the call failed. Returns the requests it wakes.
  size_t Answer(Nanos sent, int64_t leased, int64_t allocation = 500, bool failed = false,
                int64_t remaining = 1'000) {
    const Decision d{.limit = 1'000, .remaining = remaining, .leased = leased};
    const ShareState share{.allocation = allocation, .consumers = 2, .demand_total = 2'000};
    std::vector<std::function<void()>> woken;
    table_.GrantedShare(LeaseTable::SharedKey(Entry()), limit_, sent, failed ? nullptr : &d,
                        failed ? nullptr : &share, &woken);
    for (const auto& wake : woken) wake();
    return woken.size();
  }

  Limit limit_;
  ShareOf of_;
  LeaseTable table_;
};

TEST_F(IdentityShareTest, TheFirstRequestWaitsForTheIdentitysFirstShareThenSpendsIt) {
  const SharePlan first = Begin(Nanos(0));
  ASSERT_EQ(first.kind, SharePlan::Kind::kWait);
  ASSERT_EQ(first.waits, std::vector<size_t>{0});
  ASSERT_EQ(first.renewals.size(), 1u);
  const LeaseAsk& ask = first.renewals[0];
  EXPECT_TRUE(ask.share);
  EXPECT_EQ(ask.StoreKey(), "cap") << "the capacity's key, one for every identity";
  EXPECT_NE(ask.key, "cap") << "the table's entry is the identity's";
  EXPECT_EQ(ask.group, "5:alice");
  EXPECT_EQ(ask.weight, 3);
  EXPECT_EQ(ask.fairness, Fairness::kProportional);
  EXPECT_EQ(ask.ttl, kTtl) << "the share's window";
  // One unit seen at once, its rate taken over a 64th of the window: 64 a second, a tenth more
  // and a unit.
  EXPECT_EQ(ask.demand, 64 + 6 + 1);
  int woken = 0;
  const EntryRef e = Entry();
  table_.Await({&e, 1}, first.waits, [&] { ++woken; });
  // A second request meanwhile waits for the same renewal: no second one is sent.
  const SharePlan second = Begin(milliseconds(1));
  ASSERT_EQ(second.kind, SharePlan::Kind::kWait);
  EXPECT_TRUE(second.renewals.empty());
  table_.Await({&e, 1}, second.waits, [&] { ++woken; });
  EXPECT_EQ(woken, 0);
  EXPECT_EQ(Answer(Nanos(0), 5), 2u);
  EXPECT_EQ(woken, 2);
  // Run again, both are covered, and report the identity's share.
  const SharePlan again = Begin(milliseconds(11), 1, /*waited=*/true);
  ASSERT_EQ(again.kind, SharePlan::Kind::kAllowed);
  EXPECT_EQ(again.decisions[0].remaining, 4);
  EXPECT_EQ(again.decisions[0].share, 500);
  ASSERT_EQ(Begin(milliseconds(11), 1, /*waited=*/true).kind, SharePlan::Kind::kAllowed);
  EXPECT_EQ(table_.Counts().held, 3);
}

TEST_F(IdentityShareTest, BeyondItsShareARequestIsRefusedHereUntilTheShareAccrues) {
  ASSERT_EQ(Begin(Nanos(0)).kind, SharePlan::Kind::kWait);
  // 20 a second: less than it asks (6 units in its first 30 ms, 200 a second).
  Answer(Nanos(0), 3, /*allocation=*/20);
  for (int i = 0; i < 3; ++i) ASSERT_EQ(Begin(milliseconds(20)).kind, SharePlan::Kind::kAllowed);
  const SharePlan refused = Begin(milliseconds(30), 2);
  ASSERT_EQ(refused.kind, SharePlan::Kind::kDenied);
  EXPECT_TRUE(refused.renewals.empty()) << "the next renewal is half a window after the last";
  const Decision& d = refused.decisions[0];
  EXPECT_EQ(d.verdict, Verdict::kDenied);
  EXPECT_EQ(d.share, 20);
  // The next renewal is sent at 500 ms and back 10 ms later; 2 units take 100 ms to accrue at
  // 20 a second, which is sooner.
  EXPECT_EQ(d.retry_after, milliseconds(500 + 10 - 30));
  EXPECT_EQ(table_.Counts().held, 0) << "nothing spent";
  // Half a window on, its demand (7 units in 500 ms) is within its share: the renewal is sent
  // and the request waits for it.
  const SharePlan due = Begin(milliseconds(500), 1);
  ASSERT_EQ(due.kind, SharePlan::Kind::kWait);
  ASSERT_EQ(due.renewals.size(), 1u);
  // A share that accrues slower than the next renewal: the wait is the accrual's.
  Answer(milliseconds(500), 0, /*allocation=*/1);
  const SharePlan slow = Begin(milliseconds(520), 3);
  ASSERT_EQ(slow.kind, SharePlan::Kind::kDenied);
  EXPECT_EQ(slow.decisions[0].retry_after, seconds(3) + Micros(1));
}

TEST_F(IdentityShareTest, AnIdentityAskingWithinItsShareRenewsAndWaitsRatherThanBeingRefused) {
  ASSERT_EQ(Begin(Nanos(0)).kind, SharePlan::Kind::kWait);
  // A newcomer's first grant counted its first moments: 2 units, at 300 a second.
  Answer(Nanos(0), 2, /*allocation=*/300);
  for (int i = 0; i < 2; ++i) ASSERT_EQ(Begin(milliseconds(10)).kind, SharePlan::Kind::kAllowed);
  // 4 units in its first 20 ms: 200 a second, within its 300. What accrued since is the store's
  // to grant: renewed now, and the request waits for it.
  const SharePlan wait = Begin(milliseconds(20));
  ASSERT_EQ(wait.kind, SharePlan::Kind::kWait);
  ASSERT_EQ(wait.renewals.size(), 1u);
  const EntryRef e = Entry();
  int woken = 0;
  table_.Await({&e, 1}, wait.waits, [&] { ++woken; });
  Answer(milliseconds(20), 2, 300);
  EXPECT_EQ(woken, 1);
  EXPECT_EQ(Begin(milliseconds(30), 1, /*waited=*/true).kind, SharePlan::Kind::kAllowed);
  // Once waited, a request its grant still does not cover is refused, not sent again.
  ASSERT_EQ(Begin(milliseconds(30)).kind, SharePlan::Kind::kAllowed);
  EXPECT_EQ(Begin(milliseconds(30), 1, /*waited=*/true).kind, SharePlan::Kind::kDenied);
}

TEST_F(IdentityShareTest, AnIdentityAlwaysSharesEvenWhenTheCapacityIsFull) {
  ASSERT_EQ(Begin(Nanos(0)).kind, SharePlan::Kind::kWait);
  Answer(Nanos(0), 5, /*allocation=*/10, false, /*remaining=*/1'000);
  EXPECT_EQ(table_.Counts().sharing, 1u);
  // Spent, then refused here, not sent to the store as a unit lease would be.
  for (int i = 0; i < 5; ++i) ASSERT_EQ(Begin(milliseconds(20)).kind, SharePlan::Kind::kAllowed);
  EXPECT_EQ(Begin(milliseconds(21)).kind, SharePlan::Kind::kDenied);
}

TEST_F(IdentityShareTest, WithoutAnAnsweredShareARequestThatWaitedIsTheStoresFailure) {
  ASSERT_EQ(Begin(Nanos(0)).kind, SharePlan::Kind::kWait);
  Answer(Nanos(0), 0, 0, /*failed=*/true);
  EXPECT_EQ(Begin(milliseconds(10), 1, /*waited=*/true).kind, SharePlan::Kind::kUnavailable);
  // A new request an eighth of a window later tries again, and waits.
  EXPECT_EQ(Begin(milliseconds(50)).kind, SharePlan::Kind::kUnavailable)
      << "the renewal failed a moment ago";
  const SharePlan retry = Begin(milliseconds(125));
  ASSERT_EQ(retry.kind, SharePlan::Kind::kWait);
  EXPECT_EQ(retry.renewals.size(), 1u);
}

TEST_F(IdentityShareTest, ItsShareIsSpentUntilTheWindowEndsWhileTheStoreIsDown) {
  ASSERT_EQ(Begin(Nanos(0)).kind, SharePlan::Kind::kWait);
  Answer(Nanos(0), 10);
  for (int i = 0; i < 4; ++i) ASSERT_EQ(Begin(milliseconds(100)).kind, SharePlan::Kind::kAllowed);
  const SharePlan renew = Begin(milliseconds(600));
  ASSERT_EQ(renew.kind, SharePlan::Kind::kAllowed);
  ASSERT_EQ(renew.renewals.size(), 1u);
  Answer(milliseconds(600), 0, 0, /*failed=*/true);
  for (int i = 0; i < 5; ++i) ASSERT_EQ(Begin(milliseconds(700)).kind, SharePlan::Kind::kAllowed);
  // Spent: the renewals fail, so the next request is the store's failure, not a refusal.
  EXPECT_EQ(Begin(milliseconds(701)).kind, SharePlan::Kind::kUnavailable);
}

TEST_F(IdentityShareTest, AnEndedLotIsGivenBackToTheCapacitysKey) {
  ASSERT_EQ(Begin(Nanos(0)).kind, SharePlan::Kind::kWait);
  Answer(Nanos(0), 10);
  const std::vector<EndedLot> ended = table_.TakeEnded(seconds(2));
  ASSERT_EQ(ended.size(), 1u);
  EXPECT_EQ(ended[0].key, "cap");
  EXPECT_EQ(ended[0].units, 10);
}

TEST_F(IdentityShareTest, AfterTakeAllTheNextRequestAsksAgainAtOnce) {
  ASSERT_EQ(Begin(Nanos(0)).kind, SharePlan::Kind::kWait);
  Answer(Nanos(0), 10);
  ASSERT_EQ(Begin(milliseconds(1)).kind, SharePlan::Kind::kAllowed);
  // An admin change ends every lot (LeaseStore::ReturnAll): the share is taken again at once,
  // with the new terms, and the request waits for it; it is neither refused nor failed.
  const std::vector<EndedLot> ended = table_.TakeAll();
  ASSERT_EQ(ended.size(), 1u);
  EXPECT_EQ(ended[0].units, 9);
  const SharePlan again = Begin(milliseconds(2));
  ASSERT_EQ(again.kind, SharePlan::Kind::kWait);
  EXPECT_EQ(again.renewals.size(), 1u);
}

TEST_F(IdentityShareTest, UnspendPutsBackWhatTheRestOfItsRequestRefused) {
  ASSERT_EQ(Begin(Nanos(0)).kind, SharePlan::Kind::kWait);
  Answer(Nanos(0), 10);
  ASSERT_EQ(Begin(milliseconds(20), 4).kind, SharePlan::Kind::kAllowed);
  EXPECT_EQ(table_.Counts().held, 6);
  const EntryRef e = Entry(4);
  table_.Unspend({&e, 1});
  EXPECT_EQ(table_.Counts().held, 10);
  table_.Unspend({&e, 1});
  EXPECT_EQ(table_.Counts().held, 10) << "never more than the lot was granted";
}

TEST_F(IdentityShareTest, TwoIdentitiesHoldSharesOfTheirOwn) {
  const ShareOf bob{.policy = "p", .identity = "3:bob", .window = kTtl};
  const EntryRef b{.key = "cap", .limit = &limit_, .cost = 1, .share_of = &bob};
  ASSERT_EQ(Begin(Nanos(0)).kind, SharePlan::Kind::kWait);
  Answer(Nanos(0), 2);
  const SharePlan first = table_.BeginShared({&b, 1}, milliseconds(1), false);
  ASSERT_EQ(first.kind, SharePlan::Kind::kWait) << "alice's share is not bob's";
  EXPECT_EQ(first.renewals[0].group, "3:bob");
  EXPECT_EQ(Begin(milliseconds(2)).kind, SharePlan::Kind::kAllowed);
}

TEST_F(IdentityShareTest, AVeryLongIdentityTakesAHashedGroupName) {
  const std::string identity(200, 'x');
  of_.identity = identity;
  const SharePlan first = Begin(Nanos(0));
  ASSERT_EQ(first.renewals.size(), 1u);
  EXPECT_EQ(first.renewals[0].group.size(), 33u);
  EXPECT_EQ(first.renewals[0].group[0], '#');
  EXPECT_LE(first.renewals[0].group.size() + 17, kMaxShareNameLength);
}

TEST_F(IdentityShareTest, RequestsBeyondTheWaitersCapAreRefused) {
  const EntryRef e = Entry();
  for (size_t i = 0; i < kMaxShareWaiters; ++i) {
    const SharePlan p = Begin(Nanos(0));
    ASSERT_EQ(p.kind, SharePlan::Kind::kWait);
    table_.Await({&e, 1}, p.waits, [] {});
  }
  EXPECT_EQ(Begin(Nanos(0)).kind, SharePlan::Kind::kDenied);
}

TEST_F(IdentityShareTest, ATableFullOfLiveIdentitiesRefusesANewOneForAWindow) {
  LeaseTable small({.max_keys = 1});
  // Fill every shard's one place (64 shards), then find an identity with no room.
  std::vector<std::string> names;
  for (int i = 0; i < 2'000; ++i) names.push_back("id" + std::to_string(i));
  std::vector<ShareOf> ofs;
  ofs.reserve(names.size());
  bool refused = false;
  for (const std::string& n : names) {
    ofs.push_back({.policy = "p", .identity = n, .window = kTtl});
    const EntryRef e{.key = "cap", .limit = &limit_, .cost = 1, .share_of = &ofs.back()};
    const SharePlan p = small.BeginShared({&e, 1}, Nanos(0), false);
    if (p.kind == SharePlan::Kind::kDenied) {
      EXPECT_EQ(p.decisions[0].retry_after, kTtl);
      refused = true;
      break;
    }
  }
  EXPECT_TRUE(refused);
}

}  // namespace
}  // namespace caudal::engine_internal
