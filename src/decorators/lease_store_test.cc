#include "decorators/lease_store.h"

#include <gtest/gtest.h>

#include <optional>

#include "caudal/store/memory_store.h"
#include "support/fake_store.h"
#include "support/manual_clock.h"

namespace caudal {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

constexpr Nanos kTtl = milliseconds(250);

Limit Bucket(int64_t capacity, Rate rate) {
  return *Limit::Create(LimitSpec::Bucket(Algorithm::kTokenBucket, capacity, rate));
}
Limit Window(int64_t limit, Micros w) {
  return *Limit::Create(LimitSpec::Window(Algorithm::kFixedWindow, limit, w));
}

class LeaseStoreTest : public ::testing::Test {
 protected:
  LeaseStoreTest()
      : memory_(new MemoryStore(clock_)),
        store_(std::unique_ptr<Store>(memory_)),
        leases_(store_, clock_, Options()) {}

  static LeaseStoreOptions Options() {
    return {.ttl = kTtl, .max_share_ppm = 500'000, .instances = 1};
  }

  Result<DecideResponse> Ask(std::string_view key, const Limit& limit, int64_t cost,
                             bool refund = false) {
    const ConsumeEntry e{.key = key, .limit = &limit, .cost = cost};
    const RefundEntry r{.key = key, .limit = &limit, .cost = cost};
    if (refund) return leases_.Decide({.refunds = {&r, 1}});
    return leases_.Decide({.consumes = {&e, 1}});
  }
  // What the store itself holds for the key (a peek straight at it).
  int64_t StoreRemaining(std::string_view key, const Limit& limit) {
    const ConsumeEntry e{.key = key, .limit = &limit, .cost = 0};
    return memory_->Decide({.consumes = {&e, 1}})->decisions[0].remaining;
  }

  ManualClock clock_;
  MemoryStore* memory_;  // owned by store_
  testing::FakeStore store_;
  LeaseStore leases_;
};

TEST_F(LeaseStoreTest, AKeySeenOnceGoesToTheStoreAsWithoutLeases) {
  const Limit limit = Bucket(100, {100, seconds(1)});
  const Result<DecideResponse> r = Ask("cold", limit, 3);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->decisions[0].remaining, 97);
  EXPECT_EQ(r->decisions[0].leased, 0);
  EXPECT_EQ(StoreRemaining("cold", limit), 97);
  EXPECT_EQ(leases_.UnitsHeld(), 0);
}

TEST_F(LeaseStoreTest, AHotKeyTakesALeaseAndIsAnsweredFromIt) {
  const Limit limit = Bucket(100, {100, seconds(1)});
  ASSERT_TRUE(Ask("hot", limit, 1).ok());
  // The second request asks for what the key's demand says (2 units so far), with its own cost.
  const Result<DecideResponse> second = Ask("hot", limit, 1);
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(second->decisions[0].leased, 2);
  EXPECT_EQ(second->decisions[0].remaining, 98)
      << "what the store has, and what this instance holds";
  EXPECT_EQ(StoreRemaining("hot", limit), 96);
  EXPECT_EQ(leases_.UnitsHeld(), 2);
  // The store is slow from here: the third request is answered at once, from the lease, and
  // the one call made is its renewal (half of the 3 units the key should hold is spent).
  store_.Hold();
  const uint64_t calls = store_.calls();
  std::optional<Result<DecideResponse>> third;
  const ConsumeEntry e{.key = "hot", .limit = &limit, .cost = 1};
  leases_.DecideAsync({.consumes = {&e, 1}},
                      [&](Result<DecideResponse> r) { third = std::move(r); });
  ASSERT_TRUE(third.has_value() && third->ok());
  EXPECT_TRUE((*third)->allowed);
  EXPECT_EQ((*third)->decisions[0].remaining, 1) << "from a lease: the units it still holds";
  EXPECT_EQ(store_.calls(), calls + 1);
  EXPECT_EQ(leases_.counters().local, 1u);
  store_.ReleaseHeld();
  EXPECT_EQ(leases_.counters().renewals, 1u) << "the renewal: a lease of 2, no cost";
  EXPECT_EQ(leases_.UnitsHeld(), 3);
  EXPECT_EQ(StoreRemaining("hot", limit), 100 - 3 - 3) << "three spent, three held";
}

TEST_F(LeaseStoreTest, ALeaseIsNeverSpentAtOrAfterItsExpiry) {
  const Limit limit = Bucket(1000, {1000, seconds(1)});
  for (int i = 0; i < 10; ++i) ASSERT_TRUE(Ask("k", limit, 1).ok());
  ASSERT_GT(leases_.UnitsHeld(), 0);
  store_.Hold();  // renewals stay in flight: only the first lease counts
  // The lease was taken when the second request was sent, at 0: it lives ttl less 1/1024.
  const Nanos life = kTtl - kTtl / 1024;
  clock_.Advance(life - Nanos(1));
  bool local = false;
  const ConsumeEntry live{.key = "k", .limit = &limit, .cost = 1};
  leases_.DecideAsync({.consumes = {&live, 1}},
                      [&](Result<DecideResponse> r) { local = r.ok() && r->allowed; });
  EXPECT_TRUE(local) << "still live 1 ns before its expiry";
  clock_.Advance(Nanos(1));
  const ConsumeEntry e{.key = "k", .limit = &limit, .cost = 1};
  bool answered = false;
  leases_.DecideAsync({.consumes = {&e, 1}}, [&](Result<DecideResponse>) { answered = true; });
  EXPECT_FALSE(answered) << "at its expiry the store decides";
  store_.ReleaseHeld();
  EXPECT_TRUE(answered);
}

TEST_F(LeaseStoreTest, AFixedWindowLeaseEndsWithItsWindow) {
  const Limit limit = Window(1000, milliseconds(100));
  // 40 ms before the window ends, on the store's clock (the manual one).
  clock_.Advance(milliseconds(60) - Nanos(clock_.Now().count() % 100'000'000));
  ASSERT_TRUE(Ask("w", limit, 1).ok());
  ASSERT_TRUE(Ask("w", limit, 1).ok());
  ASSERT_GT(leases_.UnitsHeld(), 0);
  store_.Hold();
  const Nanos life = Nanos(milliseconds(40)) - Nanos(milliseconds(40)) / 1024;
  clock_.Advance(life - Nanos(1));
  bool local = false;
  const ConsumeEntry live{.key = "w", .limit = &limit, .cost = 1};
  leases_.DecideAsync({.consumes = {&live, 1}},
                      [&](Result<DecideResponse> r) { local = r.ok() && r->allowed; });
  EXPECT_TRUE(local) << "still live 1 ns before the window's end";
  clock_.Advance(Nanos(1));
  const ConsumeEntry e{.key = "w", .limit = &limit, .cost = 1};
  bool answered = false;
  leases_.DecideAsync({.consumes = {&e, 1}}, [&](Result<DecideResponse>) { answered = true; });
  EXPECT_FALSE(answered) << "the window's end ends the lease, not the ttl";
  store_.ReleaseHeld();
  EXPECT_TRUE(answered);
}

TEST_F(LeaseStoreTest, UnspentUnitsGoBackOnceWhenTheLeaseEnds) {
  const Limit limit = Window(100, seconds(10));
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(Ask("g", limit, 1).ok());
  const int64_t held = leases_.UnitsHeld();
  ASSERT_GT(held, 0);
  EXPECT_EQ(StoreRemaining("g", limit), 100 - 4 - held) << "what was spent, and what is held";
  clock_.Advance(kTtl);
  leases_.ReturnEnded();
  EXPECT_EQ(leases_.UnitsHeld(), 0);
  EXPECT_EQ(StoreRemaining("g", limit), 96) << "only the spent units stay counted";
  EXPECT_EQ(leases_.counters().units_given_back, static_cast<uint64_t>(held));
  leases_.ReturnEnded();
  EXPECT_EQ(StoreRemaining("g", limit), 96) << "given back once";
}

// Owed(): what the store took for this instance and is neither spent nor back, in one of its three
// places: a live lease, an ask in flight, a lease ended and not given back yet.
TEST_F(LeaseStoreTest, OwedCountsWhatTheStoreTookUntilItIsSpentOrBack) {
  const Limit limit = Window(1000, seconds(10));
  int64_t spent = 0;
  for (; spent < 20; ++spent) ASSERT_TRUE(Ask("o", limit, 1).ok());
  LeaseOwed owed = leases_.Owed();
  ASSERT_GT(owed.held, 0);
  EXPECT_EQ(owed.asked, 0);
  EXPECT_EQ(owed.ending, 0);
  EXPECT_EQ(1000 - StoreRemaining("o", limit), spent + owed.total());
  // A renewal in flight: its units are asked for.
  store_.Hold();
  while (leases_.Owed().asked == 0) {
    const ConsumeEntry e{.key = "o", .limit = &limit, .cost = 1};
    bool allowed = false;
    leases_.DecideAsync({.consumes = {&e, 1}},
                        [&](Result<DecideResponse> r) { allowed = r.ok() && r->allowed; });
    ASSERT_TRUE(allowed) << "from the lease";
    ++spent;
  }
  owed = leases_.Owed();
  store_.ReleaseHeld();
  EXPECT_EQ(leases_.Owed().asked, 0);
  EXPECT_EQ(leases_.Owed().held, owed.held + owed.asked) << "granted in full";
  EXPECT_EQ(1000 - StoreRemaining("o", limit), spent + leases_.Owed().total());
  // Ended, then being given back: ending until the store answers.
  clock_.Advance(kTtl);
  store_.Hold();
  const int64_t held = leases_.Owed().held;
  leases_.ReturnEnded();
  owed = leases_.Owed();
  EXPECT_EQ(owed.held, 0);
  EXPECT_EQ(owed.ending, held) << "in the give-back call";
  store_.ReleaseHeld();
  EXPECT_EQ(leases_.Owed().total(), 0);
  EXPECT_EQ(1000 - StoreRemaining("o", limit), spent);
}

TEST_F(LeaseStoreTest, RenewsAtHalfSpentWithoutMakingARequestWait) {
  const Limit limit = Bucket(1000, {1000, seconds(1)});
  for (int i = 0; i < 20; ++i) ASSERT_TRUE(Ask("r", limit, 1).ok());  // demand: 20 per ttl
  store_.Hold();                                                      // the store is slow now
  const uint64_t calls = store_.calls();
  const uint64_t renewals = leases_.counters().renewals;
  int answered = 0;
  for (int i = 0; i < 12; ++i) {
    const ConsumeEntry e{.key = "r", .limit = &limit, .cost = 1};
    leases_.DecideAsync({.consumes = {&e, 1}},
                        [&](Result<DecideResponse> r) { answered += r.ok() && r->allowed; });
  }
  EXPECT_EQ(answered, 12) << "every request answered while the renewal is in flight";
  EXPECT_EQ(store_.calls(), calls + 1) << "one renewal, however many requests";
  store_.ReleaseHeld();
  EXPECT_EQ(leases_.counters().renewals, renewals + 1);
  // Everything the store consumed is what was spent plus what is held: nothing counted twice.
  EXPECT_EQ(1000 - StoreRemaining("r", limit), 20 + 12 + leases_.UnitsHeld());
}

TEST_F(LeaseStoreTest, TheStoresRoundTripSizesTheFirstAskOfAKeyTurningHot) {
  const Limit limit = Bucket(1000, {1000, seconds(1)});
  store_.Hold();  // every answer waits for ReleaseHeld(), at the clock's time then
  auto ask = [&](std::string_view key) {  // answered whenever the store releases it
    const ConsumeEntry e{.key = key, .limit = &limit, .cost = 1};
    leases_.DecideAsync({.consumes = {&e, 1}}, [](Result<DecideResponse>) {});
  };
  // One call answered 80 ms after it was sent: the store is a round trip away.
  ask("other");
  clock_.Advance(milliseconds(80));
  store_.ReleaseHeld();
  ask("t");
  store_.ReleaseHeld();
  clock_.Advance(milliseconds(2));
  std::optional<Result<DecideResponse>> second;
  const ConsumeEntry e{.key = "t", .limit = &limit, .cost = 1};
  leases_.DecideAsync({.consumes = {&e, 1}},
                      [&](Result<DecideResponse> r) { second = std::move(r); });
  store_.ReleaseHeld();
  ASSERT_TRUE(second.has_value() && second->ok());
  // 2 units in 2 ms, the rate over at least an eighth of the round trip (smoothed to 70 ms by the
  // second, immediate, answer), for three round trips: 48 units, where a store answering at once
  // is asked for the 2 seen.
  EXPECT_EQ((*second)->decisions[0].leased, 48);
}

TEST_F(LeaseStoreTest, ARefundGoesBackIntoTheLease) {
  const Limit limit = Bucket(100, {1, seconds(10)});
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(Ask("f", limit, 1).ok());
  const int64_t held = leases_.UnitsHeld();
  const int64_t in_store = StoreRemaining("f", limit);
  ASSERT_TRUE(Ask("f", limit, 1, /*refund=*/true).ok());
  EXPECT_EQ(leases_.UnitsHeld(), held + 1);
  EXPECT_EQ(StoreRemaining("f", limit), in_store) << "the store was not asked";
  // Never more than the lease was granted: a refund beyond it goes to the store.
  ASSERT_TRUE(Ask("f", limit, 50, /*refund=*/true).ok());
  EXPECT_EQ(leases_.UnitsHeld(), held + 1);
  EXPECT_GT(StoreRemaining("f", limit), in_store);
}

TEST_F(LeaseStoreTest, ARefundGoesBackToTheLeaseItWasSpentFromAndEndsWithIt) {
  const Limit limit = Bucket(1000, {1000, seconds(1)});
  for (int i = 0; i < 20; ++i) ASSERT_TRUE(Ask("e", limit, 1).ok());  // a lease, taken at 0
  clock_.Advance(kTtl / 2);
  store_.Hold();
  const uint64_t calls = store_.calls();
  while (store_.calls() == calls) ASSERT_TRUE(Ask("e", limit, 1).ok());  // until it renews
  const int64_t first = leases_.UnitsHeld();
  ASSERT_GT(first, 0) << "the first lease is not spent out";
  store_.ReleaseHeld();  // the renewal: a second lease, taken at ttl/2
  const int64_t second = leases_.UnitsHeld() - first;
  ASSERT_GT(second, 0);
  ASSERT_TRUE(Ask("e", limit, 1, /*refund=*/true).ok());
  EXPECT_EQ(leases_.UnitsHeld(), first + second + 1);
  // The refunded unit came from the first lease: it ends with it, not with the second.
  clock_.Advance(kTtl - kTtl / 1024 - kTtl / 2);
  leases_.ReturnEnded();
  store_.ReleaseHeld();  // the give-back
  EXPECT_EQ(leases_.UnitsHeld(), second) << "the second lease holds what it was granted";
  EXPECT_EQ(leases_.counters().units_given_back, static_cast<uint64_t>(first + 1));
}

TEST_F(LeaseStoreTest, WhileTheStoreIsDownLiveLeasesAreSpentAndOnlyThen) {
  testing::FakeStore fault(std::make_unique<MemoryStore>(clock_));
  LeaseStore leases(fault, clock_, Options());
  const Limit limit = Bucket(1000, {1000, seconds(1)});
  const ConsumeEntry e{.key = "d", .limit = &limit, .cost = 1};
  for (int i = 0; i < 8; ++i) ASSERT_TRUE(leases.Decide({.consumes = {&e, 1}}).ok());
  const int64_t held = leases.UnitsHeld();
  ASSERT_GT(held, 0);
  fault.FailWith(Status::Unavailable("connection refused"));
  for (int64_t i = 0; i < held; ++i) {
    const Result<DecideResponse> r = leases.Decide({.consumes = {&e, 1}});
    ASSERT_TRUE(r.ok()) << "unit " << i << ": " << r.status().ToString();
    EXPECT_TRUE(r->allowed);
  }
  const Result<DecideResponse> dry = leases.Decide({.consumes = {&e, 1}});
  ASSERT_FALSE(dry.ok()) << "the leases ran out: the store's failure, for the failure mode";
  EXPECT_EQ(dry.status().code(), StatusCode::kUnavailable);
}

TEST_F(LeaseStoreTest, AKeyUsedWithAnotherLimitEndsItsLeases) {
  const Limit before = Window(100, seconds(10));
  const Limit after = Window(50, seconds(10));
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(Ask("c", before, 1).ok());
  const int64_t held = leases_.UnitsHeld();
  ASSERT_GT(held, 0);
  store_.Hold();
  const ConsumeEntry e{.key = "c", .limit = &after, .cost = 1};
  std::optional<Result<DecideResponse>> r;
  leases_.DecideAsync({.consumes = {&e, 1}},
                      [&](Result<DecideResponse> got) { r = std::move(got); });
  EXPECT_FALSE(r.has_value()) << "the old limit's leases cover nothing under the new one";
  EXPECT_EQ(leases_.UnitsHeld(), 0) << "they ended";
  store_.ReleaseHeld();
  ASSERT_TRUE(r.has_value() && r->ok());
  EXPECT_EQ((*r)->decisions[0].limit, 50) << "the new limit decides at once";
  leases_.ReturnEnded();
  store_.ReleaseHeld();  // the give-back (the store still holds its answers)
  EXPECT_EQ(leases_.counters().units_given_back, static_cast<uint64_t>(held));
}

TEST_F(LeaseStoreTest, ReturnAllGivesEveryLeaseBack) {
  const Limit limit = Window(100, seconds(10));
  for (int i = 0; i < 6; ++i) ASSERT_TRUE(Ask("s", limit, 1).ok());
  ASSERT_GT(leases_.UnitsHeld(), 0);
  leases_.ReturnAll(seconds(1));
  EXPECT_EQ(leases_.UnitsHeld(), 0);
  EXPECT_EQ(StoreRemaining("s", limit), 94);
}

TEST_F(LeaseStoreTest, AllInstancesTogetherHoldAtMostTheirShare) {
  const Limit limit = Bucket(100, {100'000, seconds(1)});
  LeaseStore tenth(store_, clock_, {.ttl = kTtl, .max_share_ppm = 100'000, .instances = 2});
  const ConsumeEntry e{.key = "share", .limit = &limit, .cost = 1};
  for (int i = 0; i < 500; ++i) {
    clock_.Advance(Micros(20));  // half the bucket's rate
    ASSERT_TRUE(tenth.Decide({.consumes = {&e, 1}})->allowed);
    ASSERT_LE(tenth.UnitsHeld(), 5) << "a tenth of 100, over two instances";
  }
  EXPECT_GT(tenth.counters().local, 200u);
}

}  // namespace
}  // namespace caudal
