#include "caudal/engine/engine.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "caudal/store/memory_store.h"
#include "observe/refusals.h"
#include "support/fake_store.h"
#include "support/manual_clock.h"
#include "support/test_limits.h"

namespace caudal {
namespace {

using std::chrono::minutes;
using std::chrono::seconds;
using testing::FakeStore;

using testing::Bucket;

PolicySpec Spec(std::string name, std::vector<std::string> identity, std::vector<Limit> limits) {
  PolicySpec s;
  s.name = std::move(name);
  s.identity = std::move(identity);
  s.limits = std::move(limits);
  return s;
}

class EngineTest : public ::testing::Test {
 protected:
  EngineTest()
      : store_(clock_),
        local_(clock_),
        log_([this](LogLevel, std::string_view m) { lines_.push_back(std::string(m)); }),
        engine_(store_, clock_, {.local_store = &local_, .metrics = &metrics_, .log = &log_}) {}

  void Install(std::vector<PolicySpec> specs, PolicySetOptions options = {}) {
    auto set = PolicySet::Create(std::move(specs), options);
    ASSERT_TRUE(set.ok()) << set.status().ToString();
    ASSERT_TRUE(engine_.SetPolicies(*set).ok());
  }

  CheckResult MustCheck(Descriptors d, std::optional<int64_t> cost = std::nullopt) {
    auto r = engine_.Check({.descriptors = std::move(d), .cost = cost});
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? *r : CheckResult{};
  }

  ManualClock clock_;
  FakeStore store_;
  FakeStore local_;
  Metrics metrics_;
  std::vector<std::string> lines_;
  Logger log_;
  Engine engine_;
};

TEST_F(EngineTest, AppliesOnlyPoliciesWhoseWholeIdentityIsPresent) {
  Install({Spec("per-key", {"api_key"}, {Bucket(5, {5, minutes(1)})}),
           Spec("per-tenant-key", {"tenant", "api_key"}, {Bucket(5, {5, minutes(1)})})});
  CheckResult r = MustCheck({{"api_key", "k1"}});
  ASSERT_EQ(r.results.size(), 1u);
  EXPECT_EQ(r.results[0].name, "per-key");
  r = MustCheck({{"api_key", "k1"}, {"tenant", "t"}});
  ASSERT_EQ(r.results.size(), 2u);
  EXPECT_EQ(r.results[0].decisions[0].remaining, 3);  // the second request for k1
  EXPECT_EQ(r.results[1].decisions[0].remaining, 4);
  r = MustCheck({{"ip", "10.0.0.1"}});
  EXPECT_TRUE(r.allowed());
  EXPECT_TRUE(r.results.empty());
}

TEST_F(EngineTest, OneRefusalConsumesNothingAnywhere) {
  Install({Spec("small", {"api_key"}, {Bucket(1, {1, minutes(1)})}),
           Spec("large", {"tenant"}, {Bucket(100, {100, minutes(1)})})});
  EXPECT_TRUE(MustCheck({{"api_key", "k"}, {"tenant", "t"}}).allowed());
  const CheckResult refused = MustCheck({{"api_key", "k"}, {"tenant", "t"}});
  EXPECT_EQ(refused.outcome, Outcome::kDenied);
  ASSERT_EQ(refused.Refused().size(), 1u);
  EXPECT_EQ(refused.Refused()[0]->name, "small");
  EXPECT_EQ(refused.results[1].decisions[0].remaining, 99);  // reported without the refused request
  // Another key shows the tenant was charged exactly once.
  const CheckResult other = MustCheck({{"api_key", "k2"}, {"tenant", "t"}});
  EXPECT_EQ(other.results[1].decisions[0].remaining, 98);
}

TEST_F(EngineTest, RetryAfterIsTheLongestWaitAmongRefusedLimits) {
  Install({Spec("a", {"api_key"}, {Bucket(1, {1, seconds(10)}), Bucket(2, {2, minutes(1)})})});
  EXPECT_TRUE(MustCheck({{"api_key", "k"}}).allowed());
  clock_.Advance(seconds(10));
  EXPECT_TRUE(MustCheck({{"api_key", "k"}}).allowed());
  const CheckResult r = MustCheck({{"api_key", "k"}});
  EXPECT_EQ(r.outcome, Outcome::kDenied);
  // The 10 s bucket refills in 10 s; the 2/min bucket (emptied over 10 s) needs 20 s more.
  EXPECT_EQ(r.retry_after, seconds(20));
  int limit = -1;
  const PolicyResult* closest = r.ClosestToLimit(&limit);
  ASSERT_NE(closest, nullptr);
  EXPECT_FALSE(closest->decisions[static_cast<size_t>(limit)].allowed());
}

TEST_F(EngineTest, ClosestToLimitPicksTheSmallestShareLeft) {
  Install({Spec("big", {"api_key"}, {Bucket(100, {100, minutes(1)})}),
           Spec("tiny", {"tenant"}, {Bucket(4, {4, minutes(1)})})});
  const CheckResult r = MustCheck({{"api_key", "k"}, {"tenant", "t"}}, 2);
  int limit = -1;
  const PolicyResult* closest = r.ClosestToLimit(&limit);
  ASSERT_NE(closest, nullptr);
  EXPECT_EQ(closest->name, "tiny");  // 2/4 left beats 98/100
  EXPECT_EQ(closest->decisions[0].remaining, 2);
}

TEST_F(EngineTest, ShadowPolicyCountsButNeverRefuses) {
  Install({[] {
             PolicySpec s = Spec("dark", {"api_key"}, {Bucket(1, {1, minutes(1)})});
             s.enforcement = Enforcement::kShadow;
             return s;
           }(),
           Spec("real", {"api_key"}, {Bucket(10, {10, minutes(1)})})});
  EXPECT_TRUE(MustCheck({{"api_key", "k"}}).allowed());
  const CheckResult r = MustCheck({{"api_key", "k"}});
  EXPECT_TRUE(r.allowed());
  ASSERT_EQ(r.results.size(), 2u);
  EXPECT_FALSE(r.results[0].allowed);  // the shadow policy would have refused
  EXPECT_TRUE(r.Refused().empty());
  EXPECT_EQ(metrics_.ForPolicy(Api::kHttp, "dark").shadow_denied.load(), 1u);
  EXPECT_EQ(metrics_.ForPolicy(Api::kHttp, "real").allowed.load(), 2u);
  ASSERT_FALSE(lines_.empty());
  EXPECT_NE(lines_.back().find("shadow policy \"dark\""), std::string::npos);
}

TEST_F(EngineTest, ShadowRefusalsLogOneLinePerPolicyPerSecond) {
  Install({[] {
    PolicySpec s = Spec("dark", {"api_key"}, {Bucket(1, {1, minutes(10)})});
    s.enforcement = Enforcement::kShadow;
    return s;
  }()});
  const auto shadow_lines = [&] {
    return std::count_if(lines_.begin(), lines_.end(), [](const std::string& l) {
      return l.find("shadow policy \"dark\"") != std::string::npos;
    });
  };
  EXPECT_TRUE(MustCheck({{"api_key", "k"}}).allowed());
  for (int i = 0; i < 50; ++i) EXPECT_TRUE(MustCheck({{"api_key", "k"}}).allowed());
  EXPECT_EQ(shadow_lines(), 1);  // 50 refusals, one line
  EXPECT_EQ(metrics_.ForPolicy(Api::kHttp, "dark").shadow_denied.load(),
            50u);  // every one still counted
  clock_.Advance(std::chrono::milliseconds(999));
  EXPECT_TRUE(MustCheck({{"api_key", "k"}}).allowed());
  EXPECT_EQ(shadow_lines(), 1);
  clock_.Advance(std::chrono::milliseconds(1));
  EXPECT_TRUE(MustCheck({{"api_key", "k"}}).allowed());
  EXPECT_EQ(shadow_lines(), 2);
  EXPECT_NE(lines_.back().find("; 50 such lines held back"), std::string::npos) << lines_.back();
}

TEST_F(EngineTest, ShadowPolicyIsNotChargedWhenTheRequestIsRefused) {
  Install({Spec("real", {"api_key"}, {Bucket(1, {1, minutes(1)})}), [] {
             PolicySpec s = Spec("dark", {"api_key"}, {Bucket(10, {10, minutes(1)})});
             s.enforcement = Enforcement::kShadow;
             return s;
           }()});
  EXPECT_TRUE(MustCheck({{"api_key", "k"}}).allowed());
  const CheckResult r = MustCheck({{"api_key", "k"}});
  EXPECT_EQ(r.outcome, Outcome::kDenied);
  EXPECT_EQ(r.results[1].decisions[0].remaining, 9);  // looked at, not charged
}

TEST_F(EngineTest, CountRejectedChargesAPolicyWhenAnotherRefuses) {
  Install({Spec("strict", {"api_key"}, {Bucket(1, {1, minutes(1)})}), [] {
             PolicySpec s = Spec("per-ip", {"ip"}, {Bucket(10, {10, minutes(1)})});
             s.count_rejected = RejectedCounting::kCounted;
             return s;
           }()});
  const Descriptors d = {{"api_key", "k"}, {"ip", "192.0.2.1"}};
  EXPECT_TRUE(MustCheck(d).allowed());
  EXPECT_EQ(MustCheck(d).outcome, Outcome::kDenied);
  EXPECT_EQ(MustCheck(d).outcome, Outcome::kDenied);
  const CheckResult r = MustCheck({{"ip", "192.0.2.1"}});
  EXPECT_EQ(r.results[0].decisions[0].remaining, 6);  // 1 admitted + 2 refused + this one
}

TEST_F(EngineTest, IpDescriptorsAreKeyedByTheirNetwork) {
  Install({[] {
    PolicySpec s = Spec("per-ip", {"ip"}, {Bucket(2, {2, minutes(1)})});
    s.ip_prefix = {.v4 = 24, .v6 = 64};
    return s;
  }()});
  EXPECT_TRUE(MustCheck({{"ip", "2001:db8:1:2::1"}}).allowed());
  EXPECT_TRUE(MustCheck({{"ip", "2001:db8:1:2:ffff::9"}}).allowed());
  EXPECT_FALSE(MustCheck({{"ip", "2001:db8:1:2::77"}}).allowed());
  EXPECT_TRUE(MustCheck({{"ip", "2001:db8:1:3::1"}}).allowed());  // another /64
  EXPECT_TRUE(MustCheck({{"ip", "198.51.100.7"}}).allowed());
  EXPECT_TRUE(MustCheck({{"ip", "198.51.100.200"}}).allowed());
  EXPECT_FALSE(MustCheck({{"ip", "::ffff:198.51.100.9"}}).allowed());  // v4-mapped, same /24
}

TEST_F(EngineTest, BadInputIsRefusedBeforeTheStoreIsAsked) {
  Install({Spec("p", {"api_key"}, {Bucket(5, {5, minutes(1)})}),
           Spec("ip", {"ip"}, {Bucket(5, {5, minutes(1)})})});
  struct Case {
    Descriptors d;
    std::optional<int64_t> cost;
    std::string field;
  };
  const std::vector<Case> cases = {
      {{}, std::nullopt, "descriptors"},
      {{{"api_key", ""}}, std::nullopt, "descriptors.api_key"},
      {{{"api_key", std::string(300, 'x')}}, std::nullopt, "descriptors.api_key"},
      {{{"api_key", "a"}, {"api_key", "b"}}, std::nullopt, "descriptors.api_key"},
      {{{"bad name", "a"}}, std::nullopt, "descriptors"},
      {{{"ip", "not-an-ip"}}, std::nullopt, "descriptors.ip"},
      {{{"api_key", "k"}}, 0, "cost"},
      {{{"api_key", "k"}}, -3, "cost"},
      {{{"api_key", "k"}}, 6, "cost"},
  };
  for (const Case& c : cases) {
    auto r = engine_.Check({.descriptors = c.d, .cost = c.cost});
    ASSERT_FALSE(r.ok()) << c.field;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(r.status().message().rfind(c.field, 0), 0u) << r.status().message();
  }
  EXPECT_EQ(store_.calls(), 0u);
}

TEST_F(EngineTest, FailureModeAllowAdmitsAndMarksDegraded) {
  Install({Spec("p", {"api_key"}, {Bucket(1, {1, minutes(1)})})},
          {.on_failure = FailureMode::kAllow, .instances = 1});
  store_.FailWith(Status::Unavailable("connection refused"));
  for (int i = 0; i < 3; ++i) {
    const CheckResult r = MustCheck({{"api_key", "k"}});
    EXPECT_TRUE(r.allowed());
    EXPECT_TRUE(r.degraded);
    EXPECT_EQ(r.results[0].decided_by, DecidedBy::kFailOpen);
  }
  EXPECT_EQ(metrics_.ForPolicy(Api::kHttp, "p").fail_open.load(), 3u);
}

TEST_F(EngineTest, FailureModeDenyIsUnavailableNotDenied) {
  Install({Spec("p", {"api_key"}, {Bucket(1, {1, minutes(1)})})});
  store_.FailWith(Status::DeadlineExceeded("timeout"));
  const CheckResult r = MustCheck({{"api_key", "k"}});
  EXPECT_EQ(r.outcome, Outcome::kUnavailable);
  EXPECT_EQ(r.results[0].decided_by, DecidedBy::kFailClosed);
  EXPECT_EQ(metrics_.ForPolicy(Api::kHttp, "p").fail_closed.load(), 1u);
}

TEST_F(EngineTest, FailureModeLocalDividesTheLimitByTheInstances) {
  Install({Spec("p", {"api_key"}, {Bucket(10, {10, minutes(1)})})},
          {.on_failure = FailureMode::kLocal, .instances = 5});
  store_.FailWith(Status::Unavailable("down"));
  EXPECT_TRUE(MustCheck({{"api_key", "k"}}).allowed());
  const CheckResult second = MustCheck({{"api_key", "k"}});
  EXPECT_TRUE(second.allowed());
  EXPECT_EQ(second.results[0].decided_by, DecidedBy::kLocal);
  const CheckResult third = MustCheck({{"api_key", "k"}});
  EXPECT_EQ(third.outcome, Outcome::kDenied);  // 10 / 5 instances = 2 here
  EXPECT_GT(third.retry_after, Micros(0));
  // Refill is divided too: 2 per minute here, so one token after 30 s.
  clock_.Advance(seconds(30));
  EXPECT_TRUE(MustCheck({{"api_key", "k"}}).allowed());
  EXPECT_FALSE(MustCheck({{"api_key", "k"}}).allowed());
}

TEST_F(EngineTest, PerPolicyFailureModesOverrideTheDefault) {
  Install({[] {
             PolicySpec s = Spec("open", {"api_key"}, {Bucket(1, {1, minutes(1)})});
             s.on_failure = FailureMode::kAllow;
             return s;
           }(),
           Spec("closed", {"tenant"}, {Bucket(1, {1, minutes(1)})})},
          {.on_failure = FailureMode::kDeny, .instances = 1});
  store_.FailWith(Status::Unavailable("down"));
  EXPECT_TRUE(MustCheck({{"api_key", "k"}}).allowed());
  EXPECT_EQ(MustCheck({{"tenant", "t"}}).outcome, Outcome::kUnavailable);
  EXPECT_EQ(MustCheck({{"api_key", "k"}, {"tenant", "t"}}).outcome, Outcome::kUnavailable);
}

// CheckRequest::store_failed (an Idempotency-Key request whose record could not be read): each
// check follows its failure mode as if the store had failed, and the store is never asked.
TEST_F(EngineTest, AStoreGivenAsFailedIsNotAskedAndEachCheckFollowsItsFailureMode) {
  Install({[] {
             PolicySpec s = Spec("open", {"api_key"}, {Bucket(1, {1, minutes(1)})});
             s.on_failure = FailureMode::kAllow;
             return s;
           }(),
           [] {
             PolicySpec s = Spec("alone", {"account"}, {Bucket(1, {1, minutes(1)})});
             s.on_failure = FailureMode::kLocal;
             return s;
           }(),
           Spec("closed", {"tenant"}, {Bucket(1, {1, minutes(1)})})},
          {.on_failure = FailureMode::kDeny, .instances = 1});
  const auto failed = [this](Descriptors d) {
    auto r = engine_.Check({.descriptors = std::move(d),
                            .cost = std::nullopt,
                            .store_failed = Status::Unavailable("redis: no answer within 10ms")});
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? std::move(*r) : CheckResult{};
  };
  const CheckResult open = failed({{"api_key", "k"}});
  EXPECT_TRUE(open.allowed());
  EXPECT_TRUE(open.degraded);
  EXPECT_EQ(open.results[0].decided_by, DecidedBy::kFailOpen);
  EXPECT_EQ(open.store_error.message(), "redis: no answer within 10ms");
  EXPECT_EQ(failed({{"account", "a"}}).results[0].decided_by, DecidedBy::kLocal);
  EXPECT_EQ(failed({{"tenant", "t"}}).outcome, Outcome::kUnavailable);
  EXPECT_EQ(store_.calls(), 0u);
  // Nothing was charged: the store still has the whole of each limit (one unit).
  for (const Descriptors& d :
       std::vector<Descriptors>{{{"api_key", "k"}}, {{"account", "a"}}, {{"tenant", "t"}}}) {
    const CheckResult r = MustCheck(d);
    EXPECT_TRUE(r.allowed());
    EXPECT_EQ(r.results[0].decided_by, DecidedBy::kStore);
  }
}

TEST_F(EngineTest, ChangedLimitGetsFreshState) {
  Install({Spec("p", {"api_key"}, {Bucket(1, {1, minutes(1)})})});
  EXPECT_TRUE(MustCheck({{"api_key", "k"}}).allowed());
  EXPECT_FALSE(MustCheck({{"api_key", "k"}}).allowed());
  Install({Spec("p", {"api_key"}, {Bucket(2, {2, minutes(1)})})});
  EXPECT_EQ(MustCheck({{"api_key", "k"}}).results[0].decisions[0].remaining, 1);
}

TEST(EngineReload, InFlightRequestsFinishWithTheSetTheyStartedWith) {
  ManualClock clock;
  FakeStore store(clock);
  store.Hold();  // answers later, from the test, as a remote store would
  Engine engine(store, clock, {});
  auto old_set = *PolicySet::Create({Spec("old", {"api_key"}, {Bucket(1, {1, minutes(1)})})}, {});
  ASSERT_TRUE(engine.SetPolicies(old_set).ok());
  std::optional<Result<CheckResult>> got;
  engine.CheckAsync({.descriptors = {{"api_key", "k"}}, .cost = std::nullopt},
                    [&](Result<CheckResult> r) { got.emplace(std::move(r)); });
  ASSERT_FALSE(got.has_value());
  auto new_set = *PolicySet::Create({Spec("new", {"api_key"}, {Bucket(1, {1, minutes(1)})})}, {});
  ASSERT_TRUE(engine.SetPolicies(new_set).ok());
  old_set.reset();  // only the in-flight request holds it now
  ASSERT_EQ(store.held(), 1u);
  store.ReleaseHeld();
  ASSERT_TRUE(got.has_value() && got->ok());
  EXPECT_EQ((*got)->results.at(0).name, "old");
  EXPECT_EQ(engine.policies()->policies()[0].spec.name, "new");
}

TEST(EngineLocal, RefusesALocalPolicyWithoutALocalStore) {
  ManualClock clock;
  FakeStore store(clock);
  Engine engine(store, clock, {});
  auto set = *PolicySet::Create({Spec("p", {"api_key"}, {Bucket(1, {1, minutes(1)})})},
                                {.on_failure = FailureMode::kLocal, .instances = 1});
  EXPECT_EQ(engine.SetPolicies(set).code(), StatusCode::kInvalidArgument);
}

TEST(EngineRefusals, TheEngineRecordsWhoARefusedRequestWasFor) {
  ManualClock clock;
  MemoryStore store(clock);
  Refusals refusals(clock, nullptr, {.identities = IdentityDisplay::kValue, .log = false});
  Engine engine(store, clock, {.refusals = &refusals});
  PolicySpec p;
  p.name = "per-key";
  p.identity = {"tenant", "api_key"};
  p.limits = {*Limit::Create(LimitSpec::Window(Algorithm::kFixedWindow, 1, seconds(60)))};
  ASSERT_TRUE(engine.SetPolicies(*PolicySet::Create({p}, {})).ok());
  for (int i = 0; i < 3; ++i) {
    CheckRequest r;
    r.descriptors = {{"api_key", "k1"}, {"tenant", "acme"}};
    ASSERT_TRUE(engine.Check(std::move(r)).ok());
  }
  const auto top = refusals.Top(3);
  ASSERT_EQ(top.size(), 1u);
  EXPECT_EQ(top[0].total, 2u);
  EXPECT_EQ(top[0].top[0].identity, "tenant=acme,api_key=k1");
}

}  // namespace
}  // namespace caudal
