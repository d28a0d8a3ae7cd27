// Reservations through the engine: a reserve consumes its estimate in every enforced policy and
// answers a reservation id that any engine sharing the store settles at the actual cost (the
// rest given back, or the excess charged into debt), once; bad input is refused and charges
// nothing.
#include <gtest/gtest.h>

#include "caudal/engine/engine.h"
#include "observe/metrics.h"
#include "support/fake_store.h"
#include "support/manual_clock.h"
#include "support/test_limits.h"

namespace caudal {
namespace {

using std::chrono::milliseconds;
using std::chrono::minutes;
using std::chrono::seconds;
using testing::FakeStore;

using testing::Bucket;

PolicySpec ReserveSpec(std::string name, std::vector<Limit> limits) {
  PolicySpec s;
  s.name = std::move(name);
  s.identity = {"user"};
  s.limits = std::move(limits);
  return s;
}

class ReserveTest : public ::testing::Test {
 protected:
  ReserveTest()
      : store_(clock_),
        engine_(store_, clock_, {.metrics = &metrics_, .over_limit_cache_keys = 100}),
        other_(store_, clock_, {}) {}

  void Install(std::vector<PolicySpec> specs) {
    auto set = PolicySet::Create(std::move(specs), {});
    ASSERT_TRUE(set.ok()) << set.status().ToString();
    ASSERT_TRUE(engine_.SetPolicies(*set).ok());
    ASSERT_TRUE(other_.SetPolicies(*set).ok());
  }

  Result<CheckResult> Reserve(std::string user, int64_t cost, Micros ttl = seconds(60)) {
    return engine_.Check({.descriptors = {{"user", user}}, .cost = cost, .reserve = ttl});
  }

  int64_t Remaining(std::string user) {
    auto r = engine_.Check({.descriptors = {{"user", user}}, .cost = 1});
    EXPECT_TRUE(r.ok());
    // The check took 1: what was left before it.
    return r.ok() && r->allowed() ? r->results[0].decisions[0].remaining + 1 : 0;
  }

  ManualClock clock_;
  FakeStore store_;
  Metrics metrics_;
  Engine engine_;
  Engine other_;  // another instance on the same store
};

TEST_F(ReserveTest, ReserveThenSettleFromAnotherInstanceCountsTheActualCost) {
  Install({ReserveSpec("tokens", {Bucket(1000, {1000, minutes(1)})})});
  auto r = Reserve("u1", 800);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_TRUE(r->allowed());
  ASSERT_FALSE(r->reservation.empty());
  EXPECT_EQ(r->reservation_ttl, seconds(60));
  EXPECT_EQ(r->results[0].decisions[0].remaining, 200);
  auto s = other_.Settle(r->reservation, 731);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->outcome, Reservation::kSettled);
  ASSERT_EQ(s->limits.size(), 1u);
  EXPECT_EQ(s->limits[0].policy, "tokens");
  EXPECT_EQ(s->limits[0].decision.remaining, 269);
  auto again = engine_.Settle(r->reservation, 731);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->outcome, Reservation::kRepeated);
  EXPECT_EQ(again->limits[0].decision.remaining, 269);
  auto conflict = engine_.Settle(r->reservation, 900);
  ASSERT_TRUE(conflict.ok());
  EXPECT_EQ(conflict->outcome, Reservation::kConflict);
  EXPECT_EQ(Remaining("u1"), 269) << "neither the repeat nor the conflict charged anything";
  EXPECT_EQ(metrics_.Value(MetricId::kReservationsOpened), 1u);
}

TEST_F(ReserveTest, ASettleOverTheEstimateLeavesTheIdentityInDebt) {
  Install({ReserveSpec("tokens", {Bucket(100, {100, seconds(1)})})});
  auto r = Reserve("u1", 100);
  ASSERT_TRUE(r.ok() && r->allowed());
  auto s = engine_.Settle(r->reservation, 150);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->outcome, Reservation::kSettled);
  EXPECT_EQ(s->limits[0].decision.remaining, 0);
  auto next = engine_.Check({.descriptors = {{"user", "u1"}}, .cost = 1});
  ASSERT_TRUE(next.ok());
  EXPECT_EQ(next->outcome, Outcome::kDenied);
  EXPECT_EQ(next->retry_after, milliseconds(510)) << "50 of debt, then 1";
}

TEST_F(ReserveTest, ASettleChargesAtMostTheLimitAboveTheEstimateAndCountsWhatItCharged) {
  Install({ReserveSpec("tokens", {Bucket(100, {100, seconds(1)})})});
  auto r = Reserve("u1", 100);
  ASSERT_TRUE(r.ok() && r->allowed());
  auto s = engine_.Settle(r->reservation, 100 + 250);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->limits[0].decision.overrun, 250);
  EXPECT_EQ(metrics_.Value(MetricId::kReservationOverrun), 100u) << "what was charged";
  auto next = engine_.Check({.descriptors = {{"user", "u1"}}, .cost = 1});
  ASSERT_TRUE(next.ok());
  EXPECT_EQ(next->retry_after, milliseconds(1010)) << "100 of debt, not 250, then 1";
}

TEST_F(ReserveTest, AnExpiredReservationIsUnknownAndItsEstimateComesBackWhenConfigured) {
  PolicySpec spec = ReserveSpec("tokens", {Bucket(10, {1, seconds(1)})});
  spec.reservations.on_expiry = ExpiryOutcome::kGiveBack;
  Install({spec});
  auto r = Reserve("u1", 8, seconds(1));
  ASSERT_TRUE(r.ok() && r->allowed());
  clock_.Advance(seconds(1));
  EXPECT_EQ(Remaining("u1"), 10) << "1 refilled, 7 given back, by the next check on the key";
  auto s = engine_.Settle(r->reservation, 2);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->outcome, Reservation::kUnknown);
}

TEST_F(ReserveTest, ABoundedNumberOfOpenReservationsPerIdentity) {
  PolicySpec spec = ReserveSpec("tokens", {Bucket(100, {100, seconds(1)})});
  spec.reservations.max_open = 2;
  Install({spec});
  ASSERT_TRUE(Reserve("u1", 1)->allowed());
  ASSERT_TRUE(Reserve("u1", 1)->allowed());
  auto full = Reserve("u1", 1);
  ASSERT_TRUE(full.ok());
  EXPECT_EQ(full->outcome, Outcome::kDenied);
  EXPECT_EQ(full->results[0].decisions[0].reservation, Reservation::kFull);
  EXPECT_TRUE(full->reservation.empty());
  EXPECT_TRUE(Reserve("u2", 1)->allowed()) << "per identity";
}

TEST_F(ReserveTest, BadInputIsRefusedAndChargesNothing) {
  PolicySpec log = ReserveSpec(
      "log", {*Limit::Create(LimitSpec::Window(Algorithm::kSlidingWindowLog, 10, seconds(1)))});
  log.identity = {"x"};
  Install({ReserveSpec("tokens", {Bucket(100, {100, seconds(1)})}), log});
  auto ttl_short = Reserve("u1", 5, Micros(999));
  EXPECT_EQ(ttl_short.status().code(), StatusCode::kInvalidArgument);
  auto ttl_long = Reserve("u1", 5, std::chrono::hours(25));
  EXPECT_EQ(ttl_long.status().code(), StatusCode::kInvalidArgument);
  auto huge = Reserve("u1", kMaxCost + 1);
  EXPECT_EQ(huge.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(huge.status().reason(), engine_reason::kInvalidCost);
  auto over_capacity = Reserve("u1", 101);
  EXPECT_EQ(over_capacity.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(over_capacity.status().reason(), engine_reason::kInvalidCost);
  auto no_reserve = engine_.Check(
      {.descriptors = {{"user", "u1"}, {"x", "y"}}, .cost = 1, .reserve = seconds(1)});
  EXPECT_EQ(no_reserve.status().code(), StatusCode::kInvalidArgument)
      << "a sliding_window_log policy applies, and takes no reservations";
  auto none = engine_.Check({.descriptors = {{"tenant", "t"}}, .cost = 1, .reserve = seconds(1)});
  EXPECT_EQ(none.status().code(), StatusCode::kInvalidArgument) << "nothing to reserve";
  EXPECT_EQ(none.status().reason(), "") << "the descriptors are at fault";
  auto r = Reserve("u2", 10);
  ASSERT_TRUE(r.ok() && r->allowed()) << r.status().ToString();
  EXPECT_EQ(engine_.Settle(r->reservation, -1).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(engine_.Settle(r->reservation, kMaxCost + 1).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(engine_.Settle(r->reservation, -1).status().reason(), engine_reason::kInvalidCost);
  EXPECT_EQ(engine_.Settle("nonsense", 1).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(engine_.Settle("nonsense", 1).status().reason(), engine_reason::kInvalidReservation);
  std::string forged = r->reservation;
  forged[0] = forged[0] == 'a' ? 'b' : 'a';
  auto unknown = engine_.Settle(forged, 1);
  ASSERT_TRUE(unknown.ok());
  EXPECT_EQ(unknown->outcome, Reservation::kUnknown);
  auto s = engine_.Settle(r->reservation, 10);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->limits[0].decision.remaining, 90) << "nothing the refusals charged";
}

}  // namespace
}  // namespace caudal
