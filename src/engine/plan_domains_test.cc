// PlanDomain: an Envoy request's descriptors matched against envoyproxy/ratelimit's rules, one
// check per descriptor, with its kind, key, cost, statistics name and how it is decided.
#include <gtest/gtest.h>

#include "algorithms/algorithm.h"
#include "common/cat.h"
#include "engine/plan.h"

namespace caudal::engine_internal {
namespace {

using envoy::DescriptorEntry;
using envoy::DescriptorNode;
using envoy::RateLimitRule;
using envoy::Unit;

RateLimitRule Rule(std::string name, uint32_t per_minute,
                   Algorithm algorithm = Algorithm::kFixedWindow) {
  RateLimitRule r;
  r.name = std::move(name);
  r.unit = Unit::kMinute;
  r.requests_per_unit = per_minute;
  if (per_minute > 0) r.limit = *envoy::MakeLimit(algorithm, per_minute, Unit::kMinute);
  return r;
}

// Adds a descriptor under `parent`; returns it, for its own children.
DescriptorNode& Add(DescriptorNode& parent, std::string key, std::string value,
                    std::optional<RateLimitRule> rule = std::nullopt) {
  auto node = std::make_unique<DescriptorNode>();
  node->key = std::move(key);
  node->value = std::move(value);
  node->rule = std::move(rule);
  Result<DescriptorNode*> added = parent.AddChild(std::move(node));
  EXPECT_TRUE(added.ok()) << added.status().ToString();
  return **added;
}

// Domain "d":
//   one, five: 1 and 5 per minute for any value; bucket: a token bucket; unlimited;
//   block=bad: requests_per_unit 0, and shadow_block=bad the same in shadow mode;
//   quota and shadow_quota: quota_mode; outer → inner: a nested rule;
//   files=a*: a shared wildcard, docs=d*: one counter per value;
//   new replaces old; metric: detailed_metric; charged (a token bucket) and charged_window:
//   always_charge.
std::shared_ptr<const envoy::RateLimitConfig> Domains() {
  auto root = std::make_shared<DescriptorNode>();
  Add(*root, "one", "", Rule("one", 1));
  Add(*root, "five", "", Rule("five", 5));
  Add(*root, "bucket", "", Rule("bucket", 5, Algorithm::kTokenBucket));
  RateLimitRule unlimited;
  unlimited.name = "unlimited";
  unlimited.unlimited = true;
  Add(*root, "unlimited", "", unlimited);
  Add(*root, "block", "bad", Rule("block", 0));
  RateLimitRule shadow_block = Rule("shadow_block", 0);
  shadow_block.shadow_mode = true;
  Add(*root, "shadow_block", "bad", shadow_block);
  RateLimitRule quota = Rule("quota", 2);
  quota.quota_mode = true;
  Add(*root, "quota", "", quota);
  RateLimitRule shadow_quota = quota;
  shadow_quota.name = "shadow_quota";
  shadow_quota.shadow_mode = true;
  Add(*root, "shadow_quota", "", shadow_quota);
  Add(Add(*root, "outer", ""), "inner", "", Rule("nested", 10));
  Add(*root, "files", "a*", Rule("files", 3)).share_threshold = true;
  Add(*root, "docs", "d*", Rule("docs", 3));
  RateLimitRule replacing = Rule("new", 10);
  replacing.replaces = {"old"};
  Add(*root, "new", "", replacing);
  Add(*root, "old", "", Rule("old", 1));
  RateLimitRule detailed = Rule("metric", 10);
  detailed.detailed_metric = true;
  Add(*root, "metric", "", detailed);
  RateLimitRule charged = Rule("charged", 5, Algorithm::kTokenBucket);
  charged.always_charge = true;
  Add(*root, "charged", "", charged);
  RateLimitRule charged_window = Rule("charged_window", 5);
  charged_window.always_charge = true;
  Add(*root, "charged_window", "", charged_window);
  auto config = std::make_shared<envoy::RateLimitConfig>();
  EXPECT_TRUE(config->AddDomain("d", root).ok());
  return config;
}

// What Engine::SetDomains installs, without counters.
Engine::Snapshot Snap(DomainOptions options = {}) {
  Engine::Snapshot snap;
  snap.domains = Domains();
  snap.domain_options = options;
  snap.domains->ForEachRule([&](const RateLimitRule& rule, std::string_view stat_key) {
    snap.rule_stats[&rule] = {.name = std::string(stat_key), .counters = nullptr};
  });
  return snap;
}

using Entries = std::vector<DescriptorEntry>;

DomainRequest Request(std::vector<Entries> descriptors, std::string_view domain = "d") {
  DomainRequest r;
  r.domain = domain;
  for (Entries& e : descriptors) {
    DomainDescriptor d;
    d.entries = std::move(e);
    r.descriptors.push_back(std::move(d));
  }
  return r;
}

Plan MustPlan(const Engine::Snapshot& snap, const DomainRequest& request) {
  Result<Plan> plan = PlanDomain(snap, request);
  EXPECT_TRUE(plan.ok()) << plan.status().ToString();
  return plan.ok() ? std::move(*plan) : Plan{};
}

std::string Refusal(const Engine::Snapshot& snap, const DomainRequest& request) {
  Result<Plan> plan = PlanDomain(snap, request);
  if (plan.ok()) return "planned";
  EXPECT_EQ(plan.status().code(), StatusCode::kInvalidArgument);
  return plan.status().message();
}

TEST(PlanDomain, AMatchedDescriptorIsKeyedByItsLimitTheDomainAndItsEntries) {
  const Engine::Snapshot snap = Snap({.on_failure = FailureMode::kDeny, .instances = 3});
  const Plan plan = MustPlan(snap, Request({{{"outer", "o"}, {"inner", "in"}}}));
  EXPECT_EQ(plan.mode, DescriptorMode::kAllOrNothing);
  EXPECT_EQ(plan.instances, 3);
  EXPECT_FALSE(plan.blocked);
  ASSERT_EQ(plan.checks.size(), 1u);
  const Check& c = plan.checks[0];
  ASSERT_NE(c.result.rule, nullptr);
  EXPECT_EQ(c.result.name, "nested");
  EXPECT_EQ(c.result.kind, CheckKind::kLimited);
  ASSERT_EQ(c.result.limits.size(), 1u);
  EXPECT_EQ(c.result.limits[0], &*c.result.rule->limit);
  EXPECT_EQ(c.result.cost, 1);
  EXPECT_EQ(c.on_failure, FailureMode::kDeny);
  // The domain and the first entry are the hash tag; every field is length-prefixed.
  ASSERT_EQ(c.keys.size(), 1u);
  EXPECT_EQ(c.keys[0], Cat("rls|", c.result.limits[0]->ToString(), "|{1:d5:outer1:o}5:inner2:in"));
  EXPECT_EQ(c.stat_name, "d.outer.inner");
  EXPECT_EQ(c.detailed_name, "") << "named by the rule alone";
  EXPECT_FALSE(c.charge);
  EXPECT_FALSE(c.quota);
}

TEST(PlanDomain, OneCheckPerDescriptorInRequestOrderWhetherOrNotItMatches) {
  const Engine::Snapshot snap = Snap();
  const Plan plan = MustPlan(snap, Request({{},
                                            {{"nobody", "x"}},
                                            {{"one", "x"}},
                                            {{"outer", "o"}},
                                            {{"one", "x"}, {"deeper", "y"}}}));
  ASSERT_EQ(plan.checks.size(), 5u);
  EXPECT_EQ(plan.checks[0].result.kind, CheckKind::kNoLimit) << "no entries";
  EXPECT_EQ(plan.checks[1].result.kind, CheckKind::kNoLimit) << "no rule";
  EXPECT_EQ(plan.checks[2].result.kind, CheckKind::kLimited);
  EXPECT_EQ(plan.checks[3].result.kind, CheckKind::kNoLimit) << "a level without a limit";
  EXPECT_EQ(plan.checks[4].result.kind, CheckKind::kNoLimit) << "deeper than the configuration";
  for (size_t i : {0u, 1u, 3u, 4u}) {
    EXPECT_TRUE(plan.checks[i].keys.empty()) << i;
    EXPECT_TRUE(plan.checks[i].result.limits.empty()) << i;
  }
}

TEST(PlanDomain, AnUnknownDomainHasNoLimitEvenForADescriptorCarryingItsOwn) {
  DomainRequest r = Request({{{"one", "x"}}, {{"one", "y"}}}, "elsewhere");
  r.descriptors[1].limit = DomainDescriptor::Override{.requests_per_unit = 5, .unit = 2};
  const Plan plan = MustPlan(Snap(), r);
  ASSERT_EQ(plan.checks.size(), 2u);
  for (const Check& c : plan.checks) {
    EXPECT_EQ(c.result.kind, CheckKind::kNoLimit);
    EXPECT_TRUE(c.keys.empty());
  }
  Engine::Snapshot none;  // no domains installed at all
  EXPECT_EQ(MustPlan(none, Request({{{"one", "x"}}})).checks[0].result.kind, CheckKind::kNoLimit);
}

TEST(PlanDomain, ADescriptorsHitsWinOverTheRequestsAndTheRequestsZeroMeansOne) {
  const Engine::Snapshot snap = Snap();
  DomainRequest r = Request({{{"five", "a"}}, {{"five", "b"}}, {{"five", "c"}}});
  r.descriptors[1].hits = 0;  // a check that consumes nothing
  r.descriptors[2].hits = 4;
  Plan plan = MustPlan(snap, r);
  EXPECT_EQ(plan.checks[0].result.cost, 1);
  EXPECT_EQ(plan.checks[1].result.cost, 0);
  EXPECT_EQ(plan.checks[2].result.cost, 4);
  r.hits_addend = 3;
  plan = MustPlan(snap, r);
  EXPECT_EQ(plan.checks[0].result.cost, 3);
  EXPECT_EQ(plan.checks[1].result.cost, 0);
  EXPECT_EQ(plan.checks[2].result.cost, 4);
  r.descriptors[2].hits = static_cast<uint64_t>(kMaxCost) + 1;
  EXPECT_EQ(Refusal(snap, r), Cat("descriptor 2: hits_addend ", kMaxCost + 1, " exceeds 2^40"));
  r.descriptors[2].hits = static_cast<uint64_t>(kMaxCost);
  EXPECT_EQ(MustPlan(snap, r).checks[2].result.cost, kMaxCost);
}

TEST(PlanDomain, NegativeHitsAreARefundOnlyWhenThereAreHits) {
  const Engine::Snapshot snap = Snap();
  DomainRequest r = Request({{{"five", "a"}}, {{"five", "b"}}});
  r.descriptors[0].refund = true;
  r.descriptors[1].refund = true;
  r.descriptors[1].hits = 0;
  const Plan plan = MustPlan(snap, r);
  EXPECT_TRUE(plan.checks[0].result.refund);
  EXPECT_FALSE(plan.checks[1].result.refund) << "nothing to give back";
}

TEST(PlanDomain, UnlimitedAndBlockingRulesNeedNoStore) {
  const Engine::Snapshot snap = Snap();
  Plan plan =
      MustPlan(snap, Request({{{"unlimited", "u"}}, {{"block", "bad"}}, {{"block", "ok"}}}));
  ASSERT_EQ(plan.checks.size(), 3u);
  EXPECT_EQ(plan.checks[0].result.kind, CheckKind::kUnlimited);
  EXPECT_EQ(plan.checks[1].result.kind, CheckKind::kBlocked);
  EXPECT_EQ(plan.checks[2].result.kind, CheckKind::kNoLimit) << "only the value bad is blocked";
  for (const Check& c : plan.checks) EXPECT_TRUE(c.keys.empty());
  EXPECT_TRUE(plan.blocked) << "an enforced block refuses the request";

  plan = MustPlan(snap, Request({{{"shadow_block", "bad"}}, {{"five", "f"}}}));
  EXPECT_EQ(plan.checks[0].result.kind, CheckKind::kBlocked);
  EXPECT_TRUE(plan.checks[0].result.shadow);
  EXPECT_FALSE(plan.blocked) << "a shadow block never refuses";
}

TEST(PlanDomain, AnOverrideIsAFixedWindowOfItsOwnWithItsOwnKey) {
  const Engine::Snapshot snap = Snap();
  DomainRequest r = Request({{{"one", "x"}}, {{"one", "x"}}});
  r.descriptors[1].limit = DomainDescriptor::Override{.requests_per_unit = 7, .unit = 3};  // HOUR
  const Plan plan = MustPlan(snap, r);
  ASSERT_EQ(plan.checks.size(), 2u);
  const Check& c = plan.checks[1];
  EXPECT_EQ(c.result.kind, CheckKind::kLimited);
  EXPECT_EQ(c.result.rule, nullptr);
  ASSERT_EQ(c.result.limits.size(), 1u);
  EXPECT_EQ(c.result.limits[0], c.override_limit.get());
  EXPECT_EQ(c.result.limits[0]->ToString(),
            envoy::MakeLimit(Algorithm::kFixedWindow, 7, Unit::kHour)->ToString());
  ASSERT_EQ(c.keys.size(), 1u);
  EXPECT_EQ(c.keys[0], Cat("rls|", c.override_limit->ToString(), "|{1:d3:one1:x}"));
  EXPECT_NE(c.keys[0], plan.checks[0].keys[0]) << "not the configured limit's counter";
  EXPECT_EQ(c.detailed_name, "d.one_x");

  r.descriptors[1].limit = DomainDescriptor::Override{.requests_per_unit = 0, .unit = 3};
  EXPECT_EQ(MustPlan(snap, r).checks[1].result.kind, CheckKind::kBlocked);
  for (int unit : {0, 8}) {
    r.descriptors[1].limit = DomainDescriptor::Override{.requests_per_unit = 7, .unit = unit};
    EXPECT_EQ(Refusal(snap, r), "descriptor 1: limit override has no valid unit") << unit;
  }
}

TEST(PlanDomain, AMatchedRuleNamedInAnotherMatchedRulesReplacesIsDropped) {
  const Engine::Snapshot snap = Snap();
  Plan plan = MustPlan(snap, Request({{{"old", "x"}}, {{"new", "y"}}}));
  ASSERT_EQ(plan.checks.size(), 2u);
  EXPECT_EQ(plan.checks[0].result.kind, CheckKind::kNoLimit);
  EXPECT_EQ(plan.checks[0].result.rule, nullptr);
  EXPECT_TRUE(plan.checks[0].keys.empty());
  EXPECT_EQ(plan.checks[1].result.kind, CheckKind::kLimited);
  EXPECT_EQ(plan.checks[1].result.name, "new");

  plan = MustPlan(snap, Request({{{"old", "x"}}}));
  EXPECT_EQ(plan.checks[0].result.kind, CheckKind::kLimited) << "nothing replaces it here";
}

TEST(PlanDomain, AQuotaRuleDecidesTheRequestOneByOneCountingEveryHit) {
  const Engine::Snapshot snap = Snap({.mode = DescriptorMode::kAllOrNothing});
  Plan plan = MustPlan(snap, Request({{{"quota", "q"}}, {{"five", "f"}}}));
  EXPECT_EQ(plan.mode, DescriptorMode::kConsumeEach);
  EXPECT_TRUE(plan.checks[0].quota);
  EXPECT_FALSE(plan.checks[1].quota);
  EXPECT_TRUE(plan.checks[0].charge);
  EXPECT_TRUE(plan.checks[1].charge) << "every descriptor of the request, as the reference";

  plan = MustPlan(snap, Request({{{"shadow_quota", "q"}}, {{"five", "f"}}}));
  EXPECT_EQ(plan.mode, DescriptorMode::kAllOrNothing) << "a shadow quota decides nothing";
  EXPECT_FALSE(plan.checks[1].charge);

  plan = MustPlan(snap, Request({{{"five", "f"}}}));
  EXPECT_EQ(plan.mode, DescriptorMode::kAllOrNothing);
  EXPECT_FALSE(plan.checks[0].charge) << "all-or-nothing charges nothing";
}

TEST(PlanDomain, ConsumeEachChargesLimitedFixedWindowsOnly) {
  const Engine::Snapshot snap = Snap({.mode = DescriptorMode::kConsumeEach});
  DomainRequest r =
      Request({{{"five", "a"}}, {{"bucket", "b"}}, {{"five", "c"}}, {{"unlimited", "u"}}});
  r.descriptors[2].refund = true;
  const Plan plan = MustPlan(snap, r);
  EXPECT_EQ(plan.mode, DescriptorMode::kConsumeEach);
  EXPECT_TRUE(plan.checks[0].charge);
  EXPECT_FALSE(plan.checks[1].charge) << "a token bucket consumes, unless always_charge";
  EXPECT_FALSE(plan.checks[2].charge) << "a refund";
  EXPECT_FALSE(plan.checks[3].charge) << "nothing to count";
}

// An always_charge rule's check charges in either mode, a refund excepted, and never leases,
// whatever the domain's lease terms; the other checks are as before.
TEST(PlanDomain, AnAlwaysChargedRuleChargesInEitherModeAndNeverLeases) {
  for (const DescriptorMode mode : {DescriptorMode::kAllOrNothing, DescriptorMode::kConsumeEach}) {
    SCOPED_TRACE(mode == DescriptorMode::kConsumeEach ? "consume_each" : "all_or_nothing");
    const Engine::Snapshot snap = Snap({.mode = mode, .lease = {.enabled = true}});
    DomainRequest r = Request({{{"charged", "a"}},
                               {{"charged_window", "b"}},
                               {{"bucket", "c"}},
                               {{"five", "d"}},
                               {{"charged", "e"}}});
    r.descriptors[4].refund = true;
    r.descriptors[4].hits = 2;
    const Plan plan = MustPlan(snap, r);
    EXPECT_EQ(plan.mode, mode);
    for (size_t i : {0, 1}) {
      EXPECT_TRUE(plan.checks[i].always_charge) << i;
      EXPECT_TRUE(plan.checks[i].charge) << i;
      ASSERT_NE(plan.checks[i].lease, nullptr);
      EXPECT_FALSE(plan.checks[i].lease->enabled) << i << " never leases";
    }
    EXPECT_FALSE(plan.checks[2].always_charge);
    EXPECT_FALSE(plan.checks[2].charge) << "a bucket not always_charge consumes";
    EXPECT_TRUE(plan.checks[2].lease->enabled) << "the domain's terms";
    EXPECT_EQ(plan.checks[3].charge, mode == DescriptorMode::kConsumeEach);
    EXPECT_FALSE(plan.checks[4].always_charge) << "a refund gives back, it charges nothing";
    EXPECT_FALSE(plan.checks[4].charge);
  }
}

// An always_charge rule's runtime override (one that fits it: override_fit_test.cc) is charged.
TEST(PlanDomain, AnAlwaysChargedRulesOverrideIsCharged) {
  Engine::Snapshot snap = Snap();
  RuntimeOverride o{.kind = OverrideKind::kEnvoyRule,
                    .policy = "d.charged",
                    .identity = {{"charged", "a"}},
                    .identity_key = EncodeEntries(Entries{{"charged", "a"}}),
                    .limits = {*Limit::Create(
                        LimitSpec::Window(Algorithm::kFixedWindow, 5, std::chrono::seconds(1)))},
                    .expires_at = {},
                    .set_by = "test"};
  snap.runtime = RuntimeOverrides::Create({o}, 1);
  const Plan plan = MustPlan(snap, Request({{{"charged", "a"}}}));
  EXPECT_EQ(plan.checks[0].limits_from, LimitsFrom::kRuntime);
  EXPECT_TRUE(plan.checks[0].always_charge);
  EXPECT_TRUE(plan.checks[0].charge);
}

TEST(PlanDomain, AShareThresholdWildcardCountsEveryValueItMatchesOnOneKey) {
  const Engine::Snapshot snap = Snap();
  const Plan plan = MustPlan(
      snap, Request({{{"files", "a1"}}, {{"files", "a2"}}, {{"docs", "d1"}}, {{"docs", "d2"}}}));
  ASSERT_EQ(plan.checks.size(), 4u);
  for (const Check& c : plan.checks) ASSERT_EQ(c.keys.size(), 1u);
  EXPECT_EQ(plan.checks[0].keys[0], plan.checks[1].keys[0]);
  EXPECT_NE(plan.checks[0].keys[0].find("{1:d5:files2:a*}"), std::string::npos)
      << plan.checks[0].keys[0];
  EXPECT_NE(plan.checks[2].keys[0], plan.checks[3].keys[0]) << "one counter per value";
  EXPECT_NE(plan.checks[2].keys[0].find("{1:d4:docs2:d1}"), std::string::npos)
      << plan.checks[2].keys[0];
}

TEST(PlanDomain, ADetailedMetricIsNamedByTheValuesAsTheReferenceSanitizesThem) {
  const Engine::Snapshot snap = Snap();
  const Plan plan = MustPlan(snap, Request({{{"metric", "v1"}}, {{"metric", "10.0.0.1"}}}));
  EXPECT_EQ(plan.checks[0].stat_name, "d.metric");
  EXPECT_EQ(plan.checks[0].detailed_name, "d.metric_v1");
  EXPECT_EQ(plan.checks[1].detailed_name, "d.metric_10_0_0_1");
}

TEST(PlanDomain, MalformedRequestsAreRefusedNamingWhatIsWrong) {
  const Engine::Snapshot snap = Snap({.max_request_bytes = 1000});
  DomainRequest big = Request({{{"one", "x"}}});
  big.wire_bytes = 1001;
  EXPECT_EQ(Refusal(snap, big), "request of 1001 bytes exceeds 1000");
  big.wire_bytes = 1000;
  EXPECT_EQ(MustPlan(snap, big).checks.size(), 1u);

  EXPECT_EQ(Refusal(snap, Request({{{"one", "x"}}}, "")), "domain must not be empty");
  EXPECT_EQ(Refusal(snap, Request({{{"one", "x"}}}, std::string_view("d\0", 2))),
            "domain: control characters (such as NUL) are not allowed in a value");
  EXPECT_EQ(Refusal(snap, Request({})), "a request needs at least one descriptor");
  EXPECT_EQ(Refusal(snap, Request(std::vector<Entries>(kMaxEntriesPerRequest + 1,
                                                       Entries{{"one", "x"}}))),
            "a request carries at most 64 descriptors");
  EXPECT_EQ(
      MustPlan(snap, Request(std::vector<Entries>(kMaxEntriesPerRequest, Entries{{"one", "x"}})))
          .checks.size(),
      kMaxEntriesPerRequest);
  EXPECT_EQ(Refusal(snap, Request({{}, Entries(33, {"k", "v"})})),
            "descriptor 1: has more than 32 entries");
  EXPECT_EQ(Refusal(snap, Request({{{"one", "x"}, {"two", "\xC3"}}})),
            "descriptor 0 entry 1 value: not valid UTF-8");
  EXPECT_EQ(Refusal(snap, Request({{{std::string_view("o\0", 2), "x"}}})),
            "descriptor 0 entry 0 key: control characters (such as NUL) are not allowed in a "
            "value");
  // Other control characters are the reference's business: matched like any value.
  EXPECT_EQ(MustPlan(snap, Request({{{"one", "tab\there"}}}, "d")).checks[0].result.kind,
            CheckKind::kLimited);
}

TEST(PlanDomain, AKeyOverTheStoresBoundIsRefused) {
  const Engine::Snapshot snap = Snap();
  const std::string value(kMaxKeyLength, 'v');
  EXPECT_EQ(Refusal(snap, Request({{{"five", "f"}}, {{"one", value}}})),
            "descriptor 1: domain, keys and values together exceed 512 bytes");
}

}  // namespace
}  // namespace caudal::engine_internal
