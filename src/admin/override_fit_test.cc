// Runtime overrides apply only while they fit their policy or Envoy rule: the admin API refuses
// one that does not, and every install (a poll, a reload) checks those held again, applying one
// that no longer fits nowhere (logged once, counted) until it fits again. The two findings this
// closes: an Envoy rule given a concurrency limit (a slot under a hold id no caller holds, and a
// descriptor left without its limit), and a policy's concurrency override kept through a reload
// into consume_each (refused requests taking slots no caller can release).
#include "engine/override_fit.h"

#include <gtest/gtest.h>

#include "admin/admin.h"
#include "caudal/observe/log.h"
#include "caudal/store/memory_store.h"
#include "common/cat.h"
#include "observe/refusals.h"
#include "support/manual_clock.h"
#include "support/one_rule_domain.h"

namespace caudal {
namespace {

using std::chrono::minutes;
using std::chrono::seconds;

Limit FitBucket(int64_t capacity, Micros period = minutes(1)) {
  return *Limit::Create(LimitSpec::Bucket(Algorithm::kTokenBucket, capacity, {capacity, period}));
}
Limit Slots(int64_t limit, Micros hold) {
  return *Limit::Create(LimitSpec::Concurrency(limit, hold));
}

PolicySpec Policy(std::string name, std::vector<std::string> identity, std::vector<Limit> limits) {
  PolicySpec p;
  p.name = std::move(name);
  p.identity = std::move(identity);
  p.limits = std::move(limits);
  return p;
}

// Domain "edge", one rule: 1 per minute per user (stat key "edge.user").
std::shared_ptr<const envoy::RateLimitConfig> Domains(bool always_charge) {
  return testing::OneRuleDomain("edge", "user", 1, always_charge);
}

class OverrideFitTest : public ::testing::Test {
 protected:
  OverrideFitTest()
      : log_([this](LogLevel level, std::string_view line) {
          if (level == LogLevel::kWarning) warnings_.emplace_back(line);
        }),
        refusals_(clock_, nullptr, {.identities = IdentityDisplay::kValue, .log = false}),
        store_(clock_),
        overrides_(MakeMemoryOverrideStore(clock_)),
        engine_(store_, clock_, {.metrics = &metrics_, .log = &log_, .refusals = &refusals_}),
        admin_(engine_, *overrides_, clock_, {.log = &log_, .metrics = &metrics_}) {}

  void Install(std::vector<PolicySpec> specs, PolicySetOptions options = {}) {
    auto set = PolicySet::Create(std::move(specs), options);
    ASSERT_TRUE(set.ok()) << set.status().ToString();
    ASSERT_TRUE(engine_.SetPolicies(*set).ok());
  }

  CheckResult Check(std::string user) {
    auto r = engine_.Check({.descriptors = {{"user", std::move(user)}}, .cost = std::nullopt});
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? *r : CheckResult{};
  }

  CheckResult Hit(std::string_view user) {
    DomainRequest r{.domain = "edge", .descriptors = {}, .hits_addend = 1};
    r.descriptors.push_back(
        {.entries = {{"user", user}}, .hits = std::nullopt, .limit = std::nullopt});
    auto result = engine_.Check(r);
    EXPECT_TRUE(result.ok()) << result.status().ToString();
    return result.ok() ? *result : CheckResult{};
  }

  // A record written past the admin API's check (by an earlier version of caudal, which let it
  // through), as every instance then reads it at its next poll.
  void PutRecord(const RuntimeOverride& o) {
    ASSERT_TRUE(overrides_->Put(OverrideId(o), EncodeOverride(o), std::nullopt, 100).ok());
    ASSERT_TRUE(admin_.Sync().ok());
  }

  // Why each held override is not applied.
  std::vector<std::string> NotApplied() const {
    std::vector<std::string> out;
    for (const auto& n : engine_.runtime_overrides()->not_applied()) out.push_back(n.reason);
    return out;
  }

  std::string LimitsFrom(const AdminTarget& t) {
    auto s = admin_.GetState(t);
    EXPECT_TRUE(s.ok()) << (s.ok() ? "" : s.status().message());
    return s.ok() ? s->limits_from : "";
  }

  ManualClock clock_;
  std::vector<std::string> warnings_;
  Logger log_;
  Refusals refusals_;
  Metrics metrics_;
  MemoryStore store_;
  std::unique_ptr<OverrideStore> overrides_;
  Engine engine_;
  Admin admin_;
};

constexpr std::string_view kNoSlotForEnvoy =
    "concurrency limits are for caudal's policies: Envoy's rate limit protocol has no way to "
    "release a slot";

TEST_F(OverrideFitTest, AnEnvoyRuleTakesNoConcurrencyOverrideAndOneHeldLeavesItsLimitInForce) {
  ASSERT_TRUE(engine_.SetDomains(Domains(false), {}).ok());
  const AdminTarget target{.policy = "edge.user", .params = {{"user", "u"}}};
  auto set = admin_.SetOverride(target, {Slots(1, seconds(30))}, std::nullopt, "x");
  ASSERT_FALSE(set.ok());
  EXPECT_EQ(set.status().reason(), admin_reason::kInvalidLimits);
  EXPECT_EQ(set.status().message(), Cat("limits[0]: ", kNoSlotForEnvoy));
  EXPECT_EQ(overrides_->Version().value(), 0u) << "nothing was written";

  PutRecord({.kind = OverrideKind::kEnvoyRule,
             .policy = "edge.user",
             .identity = {{"user", "u"}},
             .identity_key =
                 engine_internal::EncodeEntries(std::vector<envoy::DescriptorEntry>{{"user", "u"}}),
             .limits = {Slots(1, seconds(30))},
             .expires_at = {},
             .set_by = "x"});
  EXPECT_EQ(NotApplied(), std::vector<std::string>{Cat("limits[0]: ", kNoSlotForEnvoy)});
  EXPECT_EQ(engine_.runtime_overrides()->size(), 0u);
  EXPECT_EQ(LimitsFrom(target), "limits");
  const CheckResult first = Hit("u");
  EXPECT_TRUE(first.allowed());
  EXPECT_TRUE(first.hold.empty()) << "no slot was taken";
  EXPECT_FALSE(Hit("u").allowed()) << "the rule's 1 per minute decides";
  EXPECT_EQ(metrics_.Value(MetricId::kRuntimeOverrides), 0u);
  EXPECT_EQ(metrics_.Value(MetricId::kRuntimeOverridesNotApplied), 1u);
  EXPECT_EQ(warnings_, std::vector<std::string>{
                           Cat("warning runtime overrides: not applying the override of "
                               "Envoy rule \"edge.user\" identity user=u: limits[0]: ",
                               kNoSlotForEnvoy, " (it applies again once it fits; or delete it)")});

  ASSERT_TRUE(overrides_->Touch().ok());
  ASSERT_TRUE(admin_.Sync().ok());  // read again: the same records
  ASSERT_TRUE(engine_.SetDomains(Domains(false), {}).ok());
  EXPECT_EQ(warnings_.size(), 1u) << "logged once";
}

constexpr std::string_view kNoSlotForConsumeEach =
    "a concurrency limit needs policies decided all_or_nothing: consume_each would hold slots "
    "for a refused request";

// "inflight" is overridden for u by one slot held for up to 10 minutes; "rate" admits u once a
// minute. Reloaded into consume_each, the override does not fit: a refused request would take
// the slot and answer no hold id, locking u out for 10 minutes.
TEST_F(OverrideFitTest, AConcurrencyOverrideIsNotAppliedWhileAReloadMakesThePolicyConsumeEach) {
  const std::vector<PolicySpec> specs = {Policy("inflight", {"user"}, {FitBucket(100)}),
                                         Policy("rate", {"user"}, {FitBucket(1)})};
  Install(specs);
  const AdminTarget target{.policy = "inflight", .params = {{"user", "u"}}};
  ASSERT_TRUE(admin_.SetOverride(target, {Slots(1, minutes(10))}, std::nullopt, "x").ok());
  const CheckResult taken = Check("u");
  ASSERT_TRUE(taken.allowed());
  ASSERT_FALSE(taken.hold.empty());
  ASSERT_TRUE(engine_.Release(taken.hold).ok());

  Install(specs, {.mode = DescriptorMode::kConsumeEach});  // what a reload does
  EXPECT_EQ(engine_.runtime_overrides()->size(), 0u);
  EXPECT_EQ(NotApplied(), std::vector<std::string>{Cat("limits[0]: ", kNoSlotForConsumeEach)});
  EXPECT_EQ(engine_.runtime_overrides()->Find(OverrideKind::kPolicy, "inflight", "1:u"), nullptr);
  EXPECT_EQ(metrics_.Value(MetricId::kRuntimeOverridesNotApplied), 1u);
  EXPECT_EQ(warnings_.size(), 1u);
  EXPECT_NE(warnings_.empty() ? std::string::npos
                              : warnings_[0].find(Cat("policy \"inflight\" identity user=u: "
                                                      "limits[0]: ",
                                                      kNoSlotForConsumeEach)),
            std::string::npos);
  const CheckResult refused = Check("u");  // "rate" is spent
  EXPECT_FALSE(refused.allowed());
  EXPECT_TRUE(refused.hold.empty());
  ASSERT_TRUE(admin_.Sync().ok());
  Install(specs, {.mode = DescriptorMode::kConsumeEach});
  EXPECT_EQ(warnings_.size(), 1u) << "logged once, whatever polls and reloads follow";

  // Reloaded back, it fits and applies again; the refused request above took no slot.
  Install(specs);
  EXPECT_EQ(engine_.runtime_overrides()->size(), 1u);
  EXPECT_TRUE(engine_.runtime_overrides()->not_applied().empty());
  EXPECT_NE(engine_.runtime_overrides()->Find(OverrideKind::kPolicy, "inflight", "1:u"), nullptr);
  EXPECT_EQ(metrics_.Value(MetricId::kRuntimeOverridesNotApplied), 0u);
  clock_.Advance(minutes(1));  // "rate" admits u again
  const CheckResult again = Check("u");
  EXPECT_TRUE(again.allowed()) << "the slot is free";
  EXPECT_FALSE(again.hold.empty());
  EXPECT_EQ(warnings_.size(), 1u);
}

// What else a reload can change under a held override: its policy gone, its identity's fields,
// the ip prefix that keys it, its cost above the override's capacity.
TEST_F(OverrideFitTest, AReloadThatChangesThePolicysIdentityOrCostLeavesItsOverridesUnapplied) {
  PolicySpec p = Policy("per-ip", {"ip"}, {FitBucket(10)});
  Install({p});
  const AdminTarget target{.policy = "per-ip", .params = {{"ip", "10.1.2.3"}}};
  ASSERT_TRUE(admin_.SetOverride(target, {FitBucket(5)}, std::nullopt, "x").ok());
  const auto reason = [&] {
    const auto& n = engine_.runtime_overrides()->not_applied();
    return n.size() == 1 && engine_.runtime_overrides()->size() == 0 ? n[0].reason : "applied";
  };
  EXPECT_EQ(reason(), "applied");

  Install({Policy("other", {"ip"}, {FitBucket(10)})});
  EXPECT_EQ(reason(), "policy: the config has no such policy");
  PolicySpec keyed = p;
  keyed.identity = {"ip", "route"};
  Install({keyed});
  EXPECT_EQ(reason(),
            "identity: not an identity of the policy (its identity fields or ip_prefix "
            "changed)");
  PolicySpec masked = p;
  masked.ip_prefix.v4 = 24;
  Install({masked});
  EXPECT_EQ(reason(),
            "identity: not an identity of the policy (its identity fields or ip_prefix "
            "changed)");
  PolicySpec costly = p;
  costly.cost = 6;
  Install({costly});
  EXPECT_EQ(reason(),
            "limits[0]: a capacity of 5 is below the policy's cost (6): a request of "
            "that cost could never pass");
  Install({p});
  EXPECT_EQ(reason(), "applied");
  EXPECT_EQ(LimitsFrom(target), "runtime_override");
  EXPECT_EQ(warnings_.size(), 3u) << "one per change of reason (the identity's twice alike)";
}

// An override set for a rule that is later marked always_charge, of an algorithm that cannot
// count past itself, no longer applies (it would neither charge nor be the rule's).
TEST_F(OverrideFitTest, ARuleMarkedAlwaysChargeDropsAnOverrideThatCannotCountPastItself) {
  ASSERT_TRUE(engine_.SetDomains(Domains(false), {}).ok());
  const AdminTarget target{.policy = "edge.user", .params = {{"user", "u"}}};
  const Limit log = *Limit::Create(LimitSpec::Window(Algorithm::kSlidingWindowLog, 5, seconds(1)));
  ASSERT_TRUE(admin_.SetOverride(target, {log}, std::nullopt, "x").ok());
  EXPECT_EQ(LimitsFrom(target), "runtime_override");
  ASSERT_TRUE(engine_.SetDomains(Domains(true), {}).ok());
  EXPECT_EQ(LimitsFrom(target), "limits");
  EXPECT_EQ(NotApplied(),
            std::vector<std::string>{
                "limits[0]: an always_charge rule needs an algorithm that counts past its limit "
                "(token_bucket, gcra or fixed_window), not sliding_window_log"});
  EXPECT_TRUE(Hit("u").allowed());
  EXPECT_FALSE(Hit("u").allowed()) << "the rule's own limit, charged";
}

}  // namespace
}  // namespace caudal
