// One validation of a limit, whichever way it arrives: the config file (a reload reads it the
// same way), the admin API's runtime override, and a held override checked again when a reload
// changes its policy or rule. Each refuses the same limits with the same message, the one
// function's (PolicyLimitProblem, envoy::CheckRuleLimit), behind the field that names it there.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "admin/admin.h"
#include "caudal/config/config.h"
#include "caudal/store/memory_store.h"
#include "common/cat.h"
#include "config/ratelimit_config_yaml.h"
#include "support/manual_clock.h"

namespace caudal {
namespace {

using std::chrono::seconds;
using ::testing::EndsWith;

// An engine over the memory store (with a local store for `local` failure mode) and its admin.
struct Instance {
  Instance()
      : store(clock),
        local(clock),
        overrides(MakeMemoryOverrideStore(clock)),
        engine(store, clock, {.local_store = &local}),
        admin(engine, *overrides, clock, {}) {}
  ManualClock clock;
  MemoryStore store;
  MemoryStore local;
  std::unique_ptr<OverrideStore> overrides;
  Engine engine;
  Admin admin;
};

// The reason the one held override is not applied, or "applied".
std::string HeldReason(const Engine& engine) {
  const auto held = engine.runtime_overrides();
  if (held == nullptr || held->not_applied().size() != 1) return "applied";
  return held->not_applied()[0].reason;
}

struct PolicyCase {
  std::string name;
  std::string top;     // top-level settings that make `limit` not fit
  std::string policy;  // the policy's settings that do
  std::string limit;   // as written in the file
  Limit parsed;
};

// Policy p keyed by user, 10 per minute; with a tier for vip of `limit` when `tier`.
std::string PolicyYaml(const PolicyCase& c, bool misfit, bool tier) {
  std::string yaml = misfit ? c.top : "";
  yaml += "policies:\n  - name: p\n    identity: [user]\n";
  yaml += "    limits: [{algorithm: token_bucket, capacity: 10, refill: 10/1m}]\n";
  if (misfit) yaml += c.policy;
  if (tier)
    yaml += Cat("    overrides:\n      - match: {user: vip}\n        limits: [", c.limit, "]\n");
  return yaml;
}

TEST(OneLimitValidation, APolicysLimitIsRefusedAlikeByTheFileTheAdminAndTheReload) {
  const std::vector<PolicyCase> cases = {
      {"concurrency under consume_each", "descriptor_mode: consume_each\n", "",
       "{algorithm: concurrency, limit: 1, hold: 30s}",
       *Limit::Create(LimitSpec::Concurrency(1, seconds(30)))},
      {"concurrency with count_rejected", "", "    count_rejected: true\n",
       "{algorithm: concurrency, limit: 1, hold: 30s}",
       *Limit::Create(LimitSpec::Concurrency(1, seconds(30)))},
      {"a capacity below the cost", "", "    cost: 5\n",
       "{algorithm: token_bucket, capacity: 3, refill: 3/1m}",
       *Limit::Create(LimitSpec::Bucket(Algorithm::kTokenBucket, 3, {3, std::chrono::minutes(1)}))},
      {"a limit local failure mode cannot divide", "store: {on_failure: local, instances: 2}\n", "",
       "{algorithm: token_bucket, capacity: 3, refill: 3/365d}",
       *Limit::Create(
           LimitSpec::Bucket(Algorithm::kTokenBucket, 3, {3, std::chrono::hours(24 * 365)}))},
  };
  for (const PolicyCase& c : cases) {
    SCOPED_TRACE(c.name);
    auto fits = ParseConfig(PolicyYaml(c, false, false), "t.yaml");
    auto misfits = ParseConfig(PolicyYaml(c, true, false), "t.yaml");
    ASSERT_TRUE(fits.ok()) << fits.status().ToString();
    ASSERT_TRUE(misfits.ok()) << misfits.status().ToString();
    const PolicySet& set = *misfits->policies;
    const auto problem = PolicyLimitProblem(set.policies()[0].spec, set.options(), c.parsed);
    ASSERT_TRUE(problem.has_value());
    const std::string& message = *problem;

    // The file (and a reload, which reads it alike): a tier of that limit.
    auto file = ParseConfig(PolicyYaml(c, true, true), "t.yaml");
    ASSERT_FALSE(file.ok());
    EXPECT_THAT(file.status().message(),
                EndsWith(Cat("policies[0].overrides[0].limits[0]: ", message)));

    // The admin API.
    Instance i;
    ASSERT_TRUE(i.engine.SetPolicies(misfits->policies).ok());
    const AdminTarget target{.policy = "p", .params = {{"user", "u"}}};
    auto set_override = i.admin.SetOverride(target, {c.parsed}, std::nullopt, "t");
    ASSERT_FALSE(set_override.ok());
    EXPECT_EQ(set_override.status().reason(), admin_reason::kInvalidLimits);
    EXPECT_EQ(set_override.status().message(), Cat("limits[0]: ", message));

    // Held, then a reload into the config where it does not fit.
    ASSERT_TRUE(i.engine.SetPolicies(fits->policies).ok());
    ASSERT_TRUE(i.admin.SetOverride(target, {c.parsed}, std::nullopt, "t").ok());
    EXPECT_EQ(HeldReason(i.engine), "applied");
    ASSERT_TRUE(i.engine.SetPolicies(misfits->policies).ok());
    EXPECT_EQ(HeldReason(i.engine), Cat("limits[0]: ", message));
  }
}

struct RuleCase {
  std::string name;
  std::string misfit;  // the rule's setting that makes `limit` not fit; empty: nothing fits it
  std::string algorithm;
  Limit parsed;
};

std::string RuleYaml(std::string_view settings) {
  return Cat("domain: edge\ndescriptors:\n  - key: user\n",
             "    rate_limit: {unit: minute, requests_per_unit: 5", settings, "}\n");
}

std::shared_ptr<const envoy::RateLimitConfig> Rules(std::string_view settings) {
  auto c = envoy::ParseRateLimitConfigText(RuleYaml(settings), "edge.yaml");
  EXPECT_TRUE(c.ok()) << c.status().ToString();
  return std::make_shared<const envoy::RateLimitConfig>(c.ok() ? std::move(*c)
                                                               : envoy::RateLimitConfig());
}

TEST(OneLimitValidation, AnEnvoyRulesLimitIsRefusedAlikeByTheFileTheAdminAndTheReload) {
  const std::vector<RuleCase> cases = {
      {"concurrency", "", "concurrency", *Limit::Create(LimitSpec::Concurrency(1, seconds(30)))},
      {"a sliding window on an always_charge rule", ", always_charge: true", "sliding_window_log",
       *Limit::Create(LimitSpec::Window(Algorithm::kSlidingWindowLog, 5, seconds(60)))},
  };
  for (const RuleCase& c : cases) {
    SCOPED_TRACE(c.name);
    const auto misfits = Rules(c.misfit);
    const envoy::DescriptorEntry entry{"user", "u"};
    const envoy::RateLimitRule* rule = misfits->Match("edge", {&entry, 1});
    ASSERT_NE(rule, nullptr);
    const auto problem = envoy::CheckRuleLimit(*rule, c.parsed.algorithm());
    ASSERT_TRUE(problem.has_value());
    const std::string& message = problem->message;

    // The file (and a reload, which reads it alike).
    auto file = envoy::ParseRateLimitConfigText(
        RuleYaml(Cat(c.misfit, ", algorithm: ", c.algorithm)), "edge.yaml");
    ASSERT_FALSE(file.ok());
    EXPECT_THAT(file.status().message(),
                EndsWith(Cat("descriptors[0].rate_limit.", problem->field, ": ", message)));

    // The admin API.
    Instance i;
    ASSERT_TRUE(i.engine.SetDomains(misfits, {}).ok());
    const AdminTarget target{.policy = "edge.user", .params = {{"user", "u"}}};
    auto set_override = i.admin.SetOverride(target, {c.parsed}, std::nullopt, "t");
    ASSERT_FALSE(set_override.ok());
    EXPECT_EQ(set_override.status().reason(), admin_reason::kInvalidLimits);
    EXPECT_EQ(set_override.status().message(), Cat("limits[0]: ", message));

    // Held: set where it fits, or (when nothing does) written by an earlier version; then
    // installed with the rules it does not fit.
    if (c.misfit.empty()) {
      const RuntimeOverride o{.kind = OverrideKind::kEnvoyRule,
                              .policy = "edge.user",
                              .identity = {{"user", "u"}},
                              .identity_key = "4:user1:u",
                              .limits = {c.parsed},
                              .expires_at = {},
                              .set_by = "t"};
      ASSERT_TRUE(i.overrides->Put(OverrideId(o), EncodeOverride(o), std::nullopt, 10).ok());
      ASSERT_TRUE(i.admin.Sync().ok());
    } else {
      ASSERT_TRUE(i.engine.SetDomains(Rules(""), {}).ok());
      ASSERT_TRUE(i.admin.SetOverride(target, {c.parsed}, std::nullopt, "t").ok());
      EXPECT_EQ(HeldReason(i.engine), "applied");
      ASSERT_TRUE(i.engine.SetDomains(misfits, {}).ok());
    }
    EXPECT_EQ(HeldReason(i.engine), Cat("limits[0]: ", message));
  }
}

}  // namespace
}  // namespace caudal
