// A policy with `share` through the engine, on the memory store behind the lease decorator (as
// the service runs it), on a manual clock: one capacity divided among its identities by demand,
// max-min fair or weighted, never more than the capacity's bound; an identity under its fair share
// is not refused because another floods; a newcomer gets its part within two windows; the
// decision reports the identity's share.
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "caudal/engine/engine.h"
#include "caudal/store/memory_store.h"
#include "decorators/lease_store.h"
#include "observe/metrics.h"
#include "support/fake_store.h"
#include "support/manual_clock.h"
#include "support/test_limits.h"

namespace caudal {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

constexpr int64_t kRate = 1'000;  // the capacity: a bucket of 1,000 refilling 1,000 a second
constexpr Micros kWindow = seconds(1);

using testing::Bucket;

PolicySpec Shared(Fairness fairness = Fairness::kMaxMin) {
  PolicySpec s;
  s.name = "provider-tokens";
  s.identity = {"tenant"};
  s.limits = {Bucket(kRate, {kRate, seconds(1)})};
  s.share = ShareTerms{.fairness = fairness, .window = kWindow};
  return s;
}

class ShareEngineTest : public ::testing::Test {
 protected:
  ShareEngineTest()
      : store_(std::make_unique<MemoryStore>(clock_)),
        leases_(store_, clock_, {.lease_by_default = false, .leases = false, .metrics = &metrics_}),
        engine_(leases_, clock_, {}) {}

  void Install(std::vector<PolicySpec> specs) {
    auto set = PolicySet::Create(std::move(specs), {});
    ASSERT_TRUE(set.ok()) << set.status().ToString();
    ASSERT_TRUE(engine_.SetPolicies(*set).ok());
  }

  Result<CheckResult> Ask(const std::string& tenant, int64_t cost = 1,
                          const std::string& plan = "") {
    CheckRequest r{.descriptors = {{"tenant", tenant}}, .cost = cost};
    if (!plan.empty()) r.descriptors.push_back({"plan", plan});
    return engine_.Check(r);
  }

  struct Tally {
    int64_t admitted = 0;
    int64_t refused = 0;
  };
  // Offers, every millisecond from now for `span`, `per_ms[tenant]` requests of each tenant (a
  // negative count n: one request every -n milliseconds); counts what each was told.
  void Offer(const std::map<std::string, int>& per_ms, Nanos span,
             std::map<std::string, Tally>& tally) {
    for (Nanos t{0}; t < span; t += milliseconds(1)) {
      clock_.Advance(milliseconds(1));
      ++ms_;
      for (const auto& [tenant, n] : per_ms) {
        const int count = n >= 0 ? n : (ms_ % -n == 0 ? 1 : 0);
        for (int i = 0; i < count; ++i) {
          const Result<CheckResult> r = Ask(tenant, 1, plans_[tenant]);
          ASSERT_TRUE(r.ok()) << r.status().ToString();
          ASSERT_FALSE(r->degraded) << r->store_error.ToString();
          (r->allowed() ? tally[tenant].admitted : tally[tenant].refused) += 1;
        }
      }
      if (ms_ % 50 == 0) leases_.ReturnEnded();
    }
  }

  ManualClock clock_;
  Metrics metrics_;
  testing::FakeStore store_;
  LeaseStore leases_;
  Engine engine_;
  int64_t ms_ = 0;
  std::map<std::string, std::string> plans_;
};

TEST_F(ShareEngineTest, AFloodTakesOnlyWhatTheOthersLeaveAndTheTotalStaysWithinTheBound) {
  Install({Shared()});
  std::map<std::string, Tally> tally;
  // "calm" offers 250 a second, under its fair half; "flood" 10,000 a second.
  Offer({{"flood", 10}, {"calm", -4}}, seconds(10), tally);
  EXPECT_EQ(tally["calm"].refused, 0) << "an identity under its fair share is never refused";
  EXPECT_EQ(tally["calm"].admitted, 2'500);
  const int64_t total = tally["flood"].admitted + tally["calm"].admitted;
  EXPECT_LE(total, kRate + kRate * 10) << "B + r·t";
  // Max-min leaves the flood all that calm does not ask for (calm asks a tenth more than it
  // spends): at least 0.9 of the refill is admitted.
  EXPECT_GE(total, 9'000);
  std::printf("shared capacity 1,000/s over 10 s: flood admitted %lld of %lld, calm %lld of %lld\n",
              static_cast<long long>(tally["flood"].admitted),
              static_cast<long long>(tally["flood"].admitted + tally["flood"].refused),
              static_cast<long long>(tally["calm"].admitted),
              static_cast<long long>(tally["calm"].admitted + tally["calm"].refused));
}

TEST_F(ShareEngineTest, ANewcomerGetsItsFairShareWithinTwoWindows) {
  Install({Shared()});
  std::map<std::string, Tally> before, during;
  Offer({{"flood", 10}}, seconds(5), before);
  // "late" floods too from t = 5 s: two windows later, the two share the refill alike.
  Offer({{"flood", 10}, {"late", 10}}, 2 * kWindow, before);
  Offer({{"flood", 10}, {"late", 10}}, seconds(3), during);
  const int64_t fair = kRate / 2 * 3;  // each's half over the 3 s measured
  EXPECT_GE(during["late"].admitted, fair * 9 / 10);
  EXPECT_GE(during["flood"].admitted, fair * 9 / 10);
  EXPECT_LE(during["late"].admitted + during["flood"].admitted, kRate + kRate * 3);
}

TEST_F(ShareEngineTest, ATiersWeightTakesItsPartInProportion) {
  PolicySpec s = Shared();
  s.overrides = {{.match = {{.descriptor = "plan", .value = "gold"}}, .limits = {}, .weight = 3}};
  Install({s});
  plans_["g"] = "gold";
  std::map<std::string, Tally> warm, tally;
  Offer({{"g", 10}, {"p", 10}}, seconds(2), warm);
  Offer({{"g", 10}, {"p", 10}}, seconds(4), tally);
  // Both flood: 3 to 1, 750 and 250 a second.
  EXPECT_NEAR(static_cast<double>(tally["g"].admitted), 3'000.0, 300.0);
  EXPECT_NEAR(static_cast<double>(tally["p"].admitted), 1'000.0, 100.0);
}

TEST_F(ShareEngineTest, TheDecisionCarriesTheIdentitysShare) {
  Install({Shared()});
  std::map<std::string, Tally> tally;
  Offer({{"flood", 10}, {"calm", -4}}, seconds(3), tally);
  const Result<CheckResult> r = Ask("flood");
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->results.size(), 1u);
  const Decision& d = r->results[0].decisions[0];
  // calm asks about 276 a second (250 measured, a tenth more and a unit): the flood has the rest.
  EXPECT_GT(d.share, 600);
  EXPECT_LT(d.share, 750);
  EXPECT_EQ(d.limit, kRate);
  const Result<CheckResult> c = Ask("calm");
  ASSERT_TRUE(c.ok());
  EXPECT_TRUE(c->allowed());
  // The policy's gauges: two identities, their shares adding up to the refill.
  EXPECT_EQ(metrics_.Series(MetricId::kShareIdentities, {"provider-tokens"}).load(), 2u);
  EXPECT_NEAR(
      static_cast<double>(metrics_.Series(MetricId::kShareAllotted, {"provider-tokens"}).load()),
      static_cast<double>(kRate), 10.0);
  // Each as allotted at its own renewal: they add up to the refill, give or take the calm
  // demand's change between the two.
  EXPECT_NEAR(static_cast<double>(c->results[0].decisions[0].share + d.share),
              static_cast<double>(kRate), 10.0);
}

TEST_F(ShareEngineTest, WithoutTheLeaseDecoratorASharedPolicyFollowsItsFailureMode) {
  // An engine straight on a store: the store refuses a shared capacity's consume.
  Engine bare(store_, clock_, {});
  auto set = PolicySet::Create({Shared()}, {.on_failure = FailureMode::kDeny});
  ASSERT_TRUE(set.ok());
  ASSERT_TRUE(bare.SetPolicies(*set).ok());
  const Result<CheckResult> r = bare.Check({.descriptors = {{"tenant", "a"}}, .cost = 1});
  const Status error = r.ok() ? r->store_error : r.status();
  EXPECT_TRUE(!r.ok() || (r->degraded && !r->allowed()));
  EXPECT_NE(error.message().find("shared among identities"), std::string::npos) << error.ToString();
}

TEST_F(ShareEngineTest, ASharedPolicyTakesNoReservations) {
  Install({Shared()});
  const Result<CheckResult> r =
      engine_.Check({.descriptors = {{"tenant", "a"}}, .cost = 1, .reserve = seconds(60)});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("reservations"), std::string::npos);
}

}  // namespace
}  // namespace caudal
