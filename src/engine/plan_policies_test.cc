// PlanPolicies: which policies apply to a request, their store keys, costs and modes, and the
// requests refused before any store is asked.
#include <gtest/gtest.h>

#include "common/cat.h"
#include "engine/plan.h"

namespace caudal::engine_internal {
namespace {

using std::chrono::minutes;

Limit Bucket(int64_t capacity) {
  return *Limit::Create(
      LimitSpec::Bucket(Algorithm::kTokenBucket, capacity, {capacity, minutes(1)}));
}

Limit Window(int64_t limit) {
  return *Limit::Create(LimitSpec::Window(Algorithm::kFixedWindow, limit, minutes(1)));
}

PolicySpec Spec(std::string name, std::vector<std::string> identity, std::vector<Limit> limits) {
  PolicySpec s;
  s.name = std::move(name);
  s.identity = std::move(identity);
  s.limits = std::move(limits);
  return s;
}

CheckRequest Req(Descriptors descriptors, std::optional<int64_t> cost = std::nullopt,
                 bool refund = false) {
  return {.descriptors = std::move(descriptors), .cost = cost, .refund = refund};
}

Engine::Snapshot PolicySnap(std::vector<PolicySpec> specs, PolicySetOptions options = {}) {
  auto set = PolicySet::Create(std::move(specs), options);
  EXPECT_TRUE(set.ok()) << set.status().ToString();
  Engine::Snapshot snap;
  snap.policies = *set;
  return snap;
}

Plan MustPlanCheck(const Engine::Snapshot& snap, CheckRequest request) {
  Result<Plan> plan = PlanPolicies(snap, request);
  EXPECT_TRUE(plan.ok()) << plan.status().ToString();
  return plan.ok() ? std::move(*plan) : Plan{};
}

// The message of the refusal of `request`, which must be kInvalidArgument.
std::string CheckRefusal(const Engine::Snapshot& snap, CheckRequest request) {
  Result<Plan> plan = PlanPolicies(snap, request);
  if (plan.ok()) return "planned";
  EXPECT_EQ(plan.status().code(), StatusCode::kInvalidArgument);
  return plan.status().message();
}

TEST(PlanPolicies, OnlyPoliciesWhoseWholeIdentityIsPresentApplyInConfigOrder) {
  const Engine::Snapshot snap =
      PolicySnap({Spec("per-tenant-key", {"tenant", "api_key"}, {Bucket(5)}),
                  Spec("per-key", {"api_key"}, {Bucket(5)}), Spec("per-ip", {"ip"}, {Bucket(5)})});
  Plan plan = MustPlanCheck(snap, Req({{"api_key", "k1"}}));
  ASSERT_EQ(plan.checks.size(), 1u);
  EXPECT_EQ(plan.checks[0].result.name, "per-key");
  EXPECT_EQ(plan.checks[0].result.policy, &snap.policies->policies()[1]);

  plan = MustPlanCheck(snap, Req({{"api_key", "k1"}, {"tenant", "t"}}));
  ASSERT_EQ(plan.checks.size(), 2u);
  EXPECT_EQ(plan.checks[0].result.name, "per-tenant-key");
  EXPECT_EQ(plan.checks[1].result.name, "per-key");

  plan = MustPlanCheck(snap, Req({{"user", "u"}}));
  EXPECT_TRUE(plan.checks.empty()) << "no policy applies: not an error";
}

TEST(PlanPolicies, EachLimitHasItsKeyThePolicysPrefixAndTheIdentityAsHashTag) {
  const Engine::Snapshot snap =
      PolicySnap({Spec("p", {"tenant", "api_key"}, {Bucket(5), Window(100)})});
  const PolicySet::Policy& p = snap.policies->policies()[0];
  // The identity follows the policy's field order, whatever the request's.
  const Plan plan = MustPlanCheck(snap, Req({{"api_key", "key-1"}, {"tenant", "t"}}));
  ASSERT_EQ(plan.checks.size(), 1u);
  const Check& c = plan.checks[0];
  ASSERT_EQ(c.keys.size(), 2u);
  EXPECT_EQ(c.keys[0], p.key_prefixes[0] + "{1:t5:key-1}");
  EXPECT_EQ(c.keys[1], p.key_prefixes[1] + "{1:t5:key-1}");
  EXPECT_NE(p.key_prefixes[0], p.key_prefixes[1]);
  ASSERT_EQ(c.result.limits.size(), 2u);
  EXPECT_EQ(c.result.limits[0], &p.spec.limits[0]);
  EXPECT_EQ(c.result.limits[1], &p.spec.limits[1]);
  ASSERT_EQ(c.local_limits.size(), 2u);
  EXPECT_EQ(c.local_limits[0], &p.local_limits[0]);
  EXPECT_EQ(c.local_limits[1], &p.local_limits[1]);
}

// A policy with tiers: pro plans, one named tenant, and a network, over a default.
PolicySpec Tiered() {
  PolicySpec spec = Spec("per-tenant", {"tenant"}, {Bucket(5)});
  spec.overrides = {{.match = {{"tenant", "acme"}}, .limits = {Bucket(50), Window(500)}},
                    {.match = {{"plan", "pro"}, {"region", "eu"}}, .limits = {Bucket(20)}},
                    {.match = {{"plan", "pro"}}, .limits = {Bucket(10)}},
                    {.match = {{"ip", "10.1.0.0/16"}}, .limits = {Bucket(7)}}};
  return spec;
}

TEST(PlanPolicies, TheFirstStaticOverrideWhoseEveryValueTheRequestHoldsGivesTheLimits) {
  const Engine::Snapshot snap = PolicySnap({Tiered()});
  const PolicySet::Policy& p = snap.policies->policies()[0];
  const auto capacity = [&](Descriptors d) {
    const Plan plan = MustPlanCheck(snap, Req(std::move(d)));
    return plan.checks.empty() ? int64_t{-1} : plan.checks[0].result.limits[0]->capacity();
  };
  EXPECT_EQ(capacity({{"tenant", "t"}}), 5) << "no override matches: the policy's limits";
  EXPECT_EQ(capacity({{"tenant", "acme"}}), 50) << "the identity's own value";
  EXPECT_EQ(capacity({{"tenant", "acme"}, {"plan", "pro"}}), 50) << "the first match wins";
  EXPECT_EQ(capacity({{"tenant", "t"}, {"plan", "pro"}}), 10) << "another descriptor's value";
  EXPECT_EQ(capacity({{"tenant", "t"}, {"plan", "pro"}, {"region", "eu"}}), 20);
  EXPECT_EQ(capacity({{"tenant", "t"}, {"region", "eu"}}), 5) << "every value must be held";
  EXPECT_EQ(capacity({{"tenant", "t"}, {"plan", "Pro"}}), 5) << "values compare exactly";
  EXPECT_EQ(capacity({{"tenant", "t"}, {"ip", "10.1.2.3"}}), 7) << "an ip within the block";
  EXPECT_EQ(capacity({{"tenant", "t"}, {"ip", "10.2.0.1"}}), 5);

  const Plan plan = MustPlanCheck(snap, Req({{"tenant", "acme"}}));
  const Check& c = plan.checks[0];
  EXPECT_EQ(LimitsFromName(c), "overrides[0]");
  ASSERT_EQ(c.keys.size(), 2u);
  EXPECT_EQ(c.result.limits[1], &p.tiers[0].set.limits[1]);
  EXPECT_EQ(c.local_limits[1], &p.tiers[0].set.local_limits[1]);
  EXPECT_EQ(c.keys[0], p.tiers[0].set.key_prefixes[0] + "{4:acme}");
  EXPECT_NE(c.keys[0], p.key_prefixes[0] + "{4:acme}") << "other limits, other state";
  EXPECT_EQ(LimitsFromName(MustPlanCheck(snap, Req({{"tenant", "t"}})).checks[0]), "limits");
}

TEST(PlanPolicies, ACostAboveATiersCapacityNamesTheTiersLimit) {
  PolicySpec spec = Tiered();
  spec.limits = {Bucket(100)};
  const Engine::Snapshot snap = PolicySnap({spec});
  EXPECT_EQ(CheckRefusal(snap, Req({{"tenant", "t"}, {"plan", "pro"}}, 11)),
            "cost: 11 exceeds the capacity 10 of policy \"per-tenant\" (overrides[2].limits[0]), "
            "so it could never pass");
}

TEST(PlanPolicies, ValuesAreLengthPrefixedSoNoTwoIdentitiesShareAKey) {
  const Engine::Snapshot snap = PolicySnap({Spec("p", {"a", "b"}, {Bucket(5)})});
  const auto key = [&](std::string a, std::string b) {
    const Plan plan = MustPlanCheck(snap, Req({{"a", std::move(a)}, {"b", std::move(b)}}));
    return plan.checks.empty() ? std::string() : plan.checks[0].keys[0];
  };
  EXPECT_NE(key("x1:y", "z"), key("x", "y1:z"));
  EXPECT_NE(key("ab", "c"), key("a", "bc"));
  EXPECT_EQ(key("ab", "c"), key("ab", "c"));
}

TEST(PlanPolicies, AnIpIsKeyedByThePolicysPrefix) {
  PolicySpec spec = Spec("per-net", {"ip"}, {Bucket(5)});
  spec.ip_prefix = {.v4 = 24, .v6 = 64};
  const Engine::Snapshot snap = PolicySnap({spec});
  const auto key = [&](std::string ip) {
    const Plan plan = MustPlanCheck(snap, Req({{"ip", std::move(ip)}}));
    return plan.checks.empty() ? std::string() : plan.checks[0].keys[0];
  };
  EXPECT_EQ(key("10.1.2.3"), key("10.1.2.200"));
  EXPECT_NE(key("10.1.2.3"), key("10.1.3.3"));
  EXPECT_NE(key("10.1.2.3").find("{11:10.1.2.0/24}"), std::string::npos) << key("10.1.2.3");
  EXPECT_EQ(key("2001:db8:0:1::1"), key("2001:db8:0:1:ffff::2"));
  EXPECT_NE(key("2001:db8:0:1::1"), key("2001:db8:0:2::1"));
  EXPECT_NE(key("2001:db8:0:1::1").find("/64}"), std::string::npos) << key("2001:db8:0:1::1");
}

TEST(PlanPolicies, TheRequestsCostWinsOverThePolicysAndARefundIsCarried) {
  PolicySpec costly = Spec("costly", {"k"}, {Bucket(10)});
  costly.cost = 3;
  const Engine::Snapshot snap = PolicySnap({costly, Spec("plain", {"k"}, {Bucket(10)})});
  Plan plan = MustPlanCheck(snap, Req({{"k", "v"}}));
  ASSERT_EQ(plan.checks.size(), 2u);
  EXPECT_EQ(plan.checks[0].result.cost, 3);
  EXPECT_EQ(plan.checks[1].result.cost, 1);
  EXPECT_FALSE(plan.checks[0].result.refund);

  plan = MustPlanCheck(snap, Req({{"k", "v"}}, 7, true));
  ASSERT_EQ(plan.checks.size(), 2u);
  EXPECT_EQ(plan.checks[0].result.cost, 7);
  EXPECT_EQ(plan.checks[1].result.cost, 7);
  EXPECT_TRUE(plan.checks[0].result.refund);
  EXPECT_TRUE(plan.checks[1].result.refund);
}

TEST(PlanPolicies, ACostThatCouldNeverPassIsRefusedButRefundedFreely) {
  const Engine::Snapshot snap = PolicySnap({Spec("small", {"k"}, {Window(100), Bucket(5)})});
  EXPECT_EQ(
      CheckRefusal(snap, Req({{"k", "v"}}, 6)),
      "cost: 6 exceeds the capacity 5 of policy \"small\" (limits[1]), so it could never pass");
  EXPECT_EQ(MustPlanCheck(snap, Req({{"k", "v"}}, 5)).checks.size(), 1u);
  EXPECT_EQ(MustPlanCheck(snap, Req({{"k", "v"}}, 6, true)).checks.size(), 1u);
  for (int64_t cost : {int64_t{0}, int64_t{-1}, kMaxCost + 1}) {
    EXPECT_EQ(CheckRefusal(snap, Req({{"k", "v"}}, cost)).rfind("cost: ", 0), 0u) << cost;
  }
  // A cost is checked against the applicable policies only.
  EXPECT_TRUE(MustPlanCheck(snap, Req({{"other", "v"}}, 1'000)).checks.empty());
}

TEST(PlanPolicies, EachCheckCarriesItsPolicysModesAndTheSetsOptions) {
  PolicySpec shadow = Spec("shadow", {"k"}, {Bucket(5)});
  shadow.enforcement = Enforcement::kShadow;
  shadow.on_failure = FailureMode::kAllow;
  PolicySpec counted = Spec("counted", {"k"}, {Bucket(5)});
  counted.count_rejected = RejectedCounting::kCounted;
  const Engine::Snapshot snap = PolicySnap(
      {shadow, counted},
      {.on_failure = FailureMode::kDeny, .instances = 4, .mode = DescriptorMode::kConsumeEach});
  const Plan plan = MustPlanCheck(snap, Req({{"k", "v"}}));
  EXPECT_EQ(plan.mode, DescriptorMode::kConsumeEach);
  EXPECT_EQ(plan.instances, 4);
  EXPECT_FALSE(plan.blocked);
  ASSERT_EQ(plan.checks.size(), 2u);
  EXPECT_TRUE(plan.checks[0].result.shadow);
  EXPECT_EQ(plan.checks[0].on_failure, FailureMode::kAllow);
  EXPECT_FALSE(plan.checks[0].count_rejected);
  EXPECT_EQ(plan.checks[0].stat_name, "shadow");
  EXPECT_FALSE(plan.checks[1].result.shadow);
  EXPECT_EQ(plan.checks[1].on_failure, FailureMode::kDeny) << "the set's default";
  EXPECT_TRUE(plan.checks[1].count_rejected);
  for (const Check& c : plan.checks) {
    EXPECT_EQ(c.result.kind, CheckKind::kLimited);
    EXPECT_EQ(c.counters, nullptr) << "no counters in the snapshot";
    EXPECT_EQ(c.used_before, -1);
  }
}

TEST(PlanPolicies, CountersAreThePolicysOwn) {
  Engine::Snapshot snap =
      PolicySnap({Spec("a", {"k"}, {Bucket(5)}), Spec("b", {"k"}, {Bucket(5)})});
  PolicyCounters a, b;
  snap.policy_counters = {&a, &b};
  const Plan plan = MustPlanCheck(snap, Req({{"k", "v"}}));
  ASSERT_EQ(plan.checks.size(), 2u);
  EXPECT_EQ(plan.checks[0].counters, &a);
  EXPECT_EQ(plan.checks[1].counters, &b);
}

TEST(PlanPolicies, MalformedDescriptorsAreRefusedNamingTheField) {
  const Engine::Snapshot snap = PolicySnap({Spec("p", {"k"}, {Bucket(5)})});
  struct Case {
    Descriptors descriptors;
    std::string message;
  };
  Descriptors too_many;
  for (size_t i = 0; i <= kMaxDescriptors; ++i) too_many.push_back({Cat("d", i), "v"});
  const std::vector<Case> cases = {
      {{}, "descriptors: at least one descriptor is required"},
      {too_many, "descriptors: at most 32 descriptors (got 33)"},
      {{{"bad name", "v"}},
       "descriptors: \"bad name\" is not a descriptor name (expected 1 to 64 characters of "
       "[A-Za-z0-9_.-])"},
      {{{"k", ""}}, "descriptors.k: expected a string of 1 to 256 bytes"},
      {{{"k", std::string(257, 'x')}}, "descriptors.k: expected a string of 1 to 256 bytes"},
      {{{"k", "a"}, {"k", "b"}}, "descriptors.k: given twice"},
      {{{"k", std::string("a\0b", 3)}},
       "descriptors.k: control characters (such as NUL) are not allowed in a value"},
      {{{"k", "tab\there"}},
       "descriptors.k: control characters (such as NUL) are not allowed in a value"},
      {{{"k", "\xC3"}}, "descriptors.k: not valid UTF-8"},
      // An address whether or not a policy keys by it.
      {{{"ip", "10.0.0.300"}}, ""},
  };
  for (const Case& c : cases) {
    const std::string got = CheckRefusal(snap, Req(c.descriptors));
    if (c.message.empty()) {
      EXPECT_EQ(got.rfind("descriptors.ip: ", 0), 0u) << got;
    } else {
      EXPECT_EQ(got, c.message);
    }
  }
  EXPECT_EQ(MustPlanCheck(snap, Req({{"k", std::string(256, 'x')}})).checks.size(), 1u);
}

TEST(PlanPolicies, AnIdentityTooLongForAKeyIsRefused) {
  const Engine::Snapshot snap = PolicySnap({Spec("p", {"a", "b"}, {Bucket(5)})});
  const std::string v(kMaxDescriptorValueLength, 'x');
  EXPECT_NE(CheckRefusal(snap, Req({{"a", v}, {"b", v}}))
                .find("the identity of policy \"p\" is too long for a key"),
            std::string::npos);
  EXPECT_EQ(MustPlanCheck(snap, Req({{"a", v}, {"b", "short"}})).checks.size(), 1u);
}

TEST(ValidateValue, AcceptsUtf8AndRefusesWhatIsNot) {
  for (std::string_view ok : {"plain", "caf\xC3\xA9", "\xE2\x82\xAC", "\xF0\x9F\x98\x80",
                              "\xED\x9F\xBF", "\xF4\x8F\xBF\xBF"}) {
    EXPECT_TRUE(ValidateValue("f", ok).ok()) << ok;
  }
  for (std::string_view bad : {
           "\xC0\xAF",          // overlong '/'
           "\xE0\x80\xAF",      // overlong, 3 bytes
           "\xED\xA0\x80",      // a surrogate
           "\xF0\x80\x80\xAF",  // overlong, 4 bytes
           "\xF4\x90\x80\x80",  // past U+10FFFF
           "\xE2\x82",          // cut short
           "\x80",              // a lone continuation byte
           "\xFF",
       }) {
    const Status s = ValidateValue("f", bad);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(s.message(), "f: not valid UTF-8");
  }
  EXPECT_TRUE(ValidateValue("f", "tab\there", /*allow_controls=*/true).ok());
  EXPECT_TRUE(ValidateValue("f", "\x7F", /*allow_controls=*/true).ok());
  EXPECT_FALSE(ValidateValue("f", "\x7F").ok());
  EXPECT_FALSE(ValidateValue("f", std::string_view("\0", 1), /*allow_controls=*/true).ok())
      << "NUL is refused even where controls are allowed";
}

TEST(PrepareLocal, KeepsAPolicysPrecomputedLimits) {
  const Engine::Snapshot snap = PolicySnap({Spec("p", {"k"}, {Bucket(10)})}, {.instances = 5});
  Plan plan = MustPlanCheck(snap, Req({{"k", "v"}}));
  ASSERT_EQ(plan.checks.size(), 1u);
  Check& c = plan.checks[0];
  const Limit* precomputed = c.local_limits[0];
  ASSERT_TRUE(PrepareLocal(c, 5));
  EXPECT_EQ(c.local_limits[0], precomputed);
  EXPECT_EQ(precomputed->capacity(), 2);
  EXPECT_TRUE(c.local_owned.empty());
}

TEST(PrepareLocal, DividesLimitsComputedForTheRequest) {
  Check c;
  const Limit window = Window(10);
  const Limit bucket = Bucket(9);
  c.result.limits = {&window, &bucket};
  ASSERT_TRUE(PrepareLocal(c, 3));
  ASSERT_EQ(c.local_limits.size(), 2u);
  EXPECT_EQ(c.local_limits[0]->capacity(), 3);  // rounded down
  EXPECT_EQ(c.local_limits[0]->window(), window.window());
  EXPECT_EQ(c.local_limits[1]->capacity(), 3);
  EXPECT_EQ(c.local_limits[1]->rate().count, 3);
  EXPECT_EQ(c.local_limits[1]->rate().period, bucket.rate().period);
  EXPECT_EQ(c.local_limits[0], &c.local_owned[0]);
  EXPECT_EQ(c.local_limits[1], &c.local_owned[1]);
}

TEST(PrepareLocal, FailsWhenALimitCannotBeDivided) {
  // 3 per 300 days over 2 instances: the period would double past a year.
  const Limit slow = *Limit::Create(
      LimitSpec::Bucket(Algorithm::kTokenBucket, 3, {3, std::chrono::hours(24 * 300)}));
  Check c;
  c.result.limits = {&slow};
  EXPECT_FALSE(PrepareLocal(c, 2));
}

}  // namespace
}  // namespace caudal::engine_internal
