// Admin over two engines sharing one store and one OverrideStore (two instances of one
// deployment): runtime overrides set on one and applied by the other at its next poll, their
// expiry on the store's clock, inspecting without consuming, resetting, and bad input changing
// nothing.
#include "admin/admin.h"

#include <gtest/gtest.h>

#include "caudal/store/memory_store.h"
#include "common/cat.h"
#include "decorators/lease_store.h"
#include "observe/metrics.h"
#include "support/manual_clock.h"
#include "support/one_rule_domain.h"

namespace caudal {
namespace {

using std::chrono::minutes;
using std::chrono::seconds;

Limit Bucket(int64_t capacity) {
  return *Limit::Create(
      LimitSpec::Bucket(Algorithm::kTokenBucket, capacity, {capacity, minutes(1)}));
}

// One instance: its engine (with an over-limit cache, as for a remote store) and its admin.
struct Instance {
  Instance(Store& store, OverrideStore& overrides, const Clock& clock, Metrics* metrics)
      : engine(store, clock, {.metrics = metrics, .over_limit_cache_keys = 1024}),
        admin(engine, overrides, clock, {.metrics = metrics, .max_overrides = 3}) {
    PolicySpec spec;
    spec.name = "per-tenant";
    spec.identity = {"tenant"};
    spec.limits = {Bucket(1)};
    spec.overrides = {{.match = {{"tenant", "gold"}}, .limits = {Bucket(3)}}};
    EXPECT_TRUE(engine.SetPolicies(*PolicySet::Create({spec}, {})).ok());
  }
  bool Allowed(std::string tenant) {
    auto r = engine.Check({.descriptors = {{"tenant", std::move(tenant)}}, .cost = std::nullopt});
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() && r->allowed();
  }
  Engine engine;
  Admin admin;
};

class AdminTest : public ::testing::Test {
 protected:
  AdminTest()
      : store_(clock_),
        overrides_(MakeMemoryOverrideStore(clock_)),
        a_(store_, *overrides_, clock_, &metrics_),
        b_(store_, *overrides_, clock_, nullptr) {}

  static AdminTarget Acme() { return {.policy = "per-tenant", .params = {{"tenant", "acme"}}}; }

  int64_t Remaining(Admin& admin, const AdminTarget& t = Acme()) {
    auto s = admin.GetState(t);
    EXPECT_TRUE(s.ok()) << (s.ok() ? "" : s.status().message());
    return s.ok() && !s->limits.empty() ? s->limits[0].remaining : -1;
  }

  ManualClock clock_;
  MemoryStore store_;
  std::unique_ptr<OverrideStore> overrides_;
  Metrics metrics_;
  Instance a_;
  Instance b_;
};

TEST_F(AdminTest, ARaisedLimitAdmitsAtOnceOnTheInstanceThatSetItAndAtTheOthersNextPoll) {
  ASSERT_TRUE(a_.Allowed("acme"));
  ASSERT_FALSE(a_.Allowed("acme"));  // remembered by a's over-limit cache
  ASSERT_FALSE(b_.Allowed("acme"));  // and by b's

  auto set = a_.admin.SetOverride(Acme(), {Bucket(5)}, std::nullopt, "127.0.0.1");
  ASSERT_TRUE(set.ok()) << set.status().message();
  EXPECT_TRUE(set->second) << "new";
  EXPECT_EQ(set->first.spec.set_by, "127.0.0.1");
  EXPECT_FALSE(set->first.expires_in.has_value());
  EXPECT_TRUE(a_.Allowed("acme")) << "fresh state under the new limits";
  EXPECT_FALSE(b_.Allowed("acme")) << "b has not polled yet";

  ASSERT_TRUE(b_.admin.Sync().ok());
  for (int i = 0; i < 4; ++i) EXPECT_TRUE(b_.Allowed("acme")) << i;
  EXPECT_FALSE(a_.Allowed("acme")) << "5 in all, shared by both instances";
  EXPECT_TRUE(a_.Allowed("other")) << "other identities keep the policy's limits";
  EXPECT_FALSE(a_.Allowed("other"));
  EXPECT_EQ(metrics_.Value(MetricId::kRuntimeOverrides), 1u);

  // Deleted: back to the policy's limits, whose state is where it was left.
  auto removed = b_.admin.DeleteOverride(Acme(), "10.0.0.2");
  ASSERT_TRUE(removed.ok()) << removed.status().message();
  EXPECT_EQ(removed->spec.limits, std::vector<Limit>{Bucket(5)});
  ASSERT_TRUE(a_.admin.Sync().ok());
  EXPECT_FALSE(a_.Allowed("acme"));
  EXPECT_EQ(metrics_.Value(MetricId::kRuntimeOverrides), 0u);
}

TEST_F(AdminTest, NewLimitsGetFreshStateAndTheSameLimitsSetAgainKeepCounting) {
  ASSERT_TRUE(a_.admin.SetOverride(Acme(), {Bucket(5)}, std::nullopt, "x").ok());
  ASSERT_TRUE(a_.Allowed("acme"));
  ASSERT_TRUE(a_.Allowed("acme"));
  EXPECT_EQ(Remaining(a_.admin), 3);
  ASSERT_TRUE(a_.admin.SetOverride(Acme(), {Bucket(5)}, seconds(600), "x").ok());
  EXPECT_EQ(Remaining(a_.admin), 3) << "a new expiry is not a new limit";
  ASSERT_TRUE(a_.admin.SetOverride(Acme(), {Bucket(8)}, std::nullopt, "x").ok());
  EXPECT_EQ(Remaining(a_.admin), 8) << "other limits, other keys: fresh";
  ASSERT_TRUE(a_.admin.SetOverride(Acme(), {Bucket(5)}, std::nullopt, "x").ok());
  EXPECT_EQ(Remaining(a_.admin), 3) << "limits it had before find the state they left";
}

TEST_F(AdminTest, ARuntimeOverrideComesBeforeAStaticOneAndStateSaysWhichApplies) {
  const AdminTarget gold{.policy = "per-tenant", .params = {{"tenant", "gold"}}};
  auto state = a_.admin.GetState(gold);
  ASSERT_TRUE(state.ok());
  EXPECT_EQ(state->limits_from, "overrides[0]");
  EXPECT_EQ(state->limits[0].limit, Bucket(3));
  ASSERT_TRUE(a_.admin.SetOverride(gold, {Bucket(7)}, std::nullopt, "x").ok());
  state = a_.admin.GetState(gold);
  ASSERT_TRUE(state.ok());
  EXPECT_EQ(state->limits_from, "runtime_override");
  EXPECT_EQ(state->limits[0].remaining, 7);
  EXPECT_EQ(a_.admin.GetState(Acme())->limits_from, "limits");
}

TEST_F(AdminTest, AnOverrideEndsOnTheStoresClockOnEveryInstance) {
  ASSERT_TRUE(a_.admin.SetOverride(Acme(), {Bucket(5)}, seconds(60), "x").ok());
  ASSERT_TRUE(b_.admin.Sync().ok());
  auto list = b_.admin.ListOverrides("per-tenant");
  ASSERT_TRUE(list.ok());
  ASSERT_EQ(list->size(), 1u);
  EXPECT_EQ((*list)[0].expires_in, seconds(60));
  EXPECT_EQ((*list)[0].spec.expires_at,
            std::chrono::duration_cast<Micros>(clock_.Now()) + seconds(60));
  EXPECT_TRUE(b_.Allowed("acme"));
  EXPECT_TRUE(b_.Allowed("acme"));

  clock_.Advance(seconds(59));
  ASSERT_TRUE(b_.admin.Sync().ok());
  EXPECT_EQ(b_.admin.GetState(Acme())->limits_from, "runtime_override");
  clock_.Advance(seconds(1));
  ASSERT_TRUE(a_.admin.Sync().ok());
  ASSERT_TRUE(b_.admin.Sync().ok());
  EXPECT_EQ(b_.admin.GetState(Acme())->limits_from, "limits");
  EXPECT_EQ(a_.admin.GetState(Acme())->limits_from, "limits");
  EXPECT_TRUE(b_.admin.ListOverrides("per-tenant")->empty());
  EXPECT_EQ(b_.engine.runtime_overrides()->size(), 0u);
}

TEST_F(AdminTest, InspectingConsumesNothingAndReportsTheWaitForOneUnit) {
  EXPECT_EQ(Remaining(a_.admin), 1);
  EXPECT_EQ(Remaining(a_.admin), 1) << "a look spends nothing";
  ASSERT_TRUE(a_.Allowed("acme"));
  auto s = b_.admin.GetState(Acme());
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->limits[0].remaining, 0);
  EXPECT_EQ(s->limits[0].retry_after, minutes(1)) << "one token refills in a minute";
  EXPECT_EQ(s->limits[0].reset_after, minutes(1));
  clock_.Advance(seconds(15));
  EXPECT_EQ(b_.admin.GetState(Acme())->limits[0].retry_after, seconds(45));
  EXPECT_FALSE(a_.Allowed("acme")) << "still empty: the looks took nothing, and gave nothing";
}

TEST_F(AdminTest, AResetRefillsTheIdentityAndNoInstanceKeepsRefusingItFromItsCache) {
  ASSERT_TRUE(a_.Allowed("acme"));
  ASSERT_FALSE(a_.Allowed("acme"));
  ASSERT_FALSE(b_.Allowed("acme"));
  ASSERT_TRUE(a_.Allowed("beta"));
  auto reset = a_.admin.ResetState(Acme(), "x");
  ASSERT_TRUE(reset.ok()) << reset.status().message();
  EXPECT_EQ(reset->limits[0].remaining, 1);
  EXPECT_EQ(reset->limits[0].retry_after, Micros(0));
  EXPECT_EQ(metrics_.Series(MetricId::kAdminChanges, {"reset_state"}).load(), 1u);
  ASSERT_TRUE(b_.admin.Sync().ok()) << "the reset touched the version: b forgets its refusals";
  EXPECT_TRUE(b_.Allowed("acme"));
  EXPECT_FALSE(a_.Allowed("acme"));
  EXPECT_EQ(Remaining(a_.admin, {.policy = "per-tenant", .params = {{"tenant", "beta"}}}), 0)
      << "other identities keep their state";
}

// What the Service ends the leases through: told of every change where it took effect, a
// reset at once, a change made elsewhere at the next poll that sees it, nothing on a poll that
// finds no change.
TEST_F(AdminTest, EveryChangeIsToldWhereItTakesEffectAndNoOtherPoll) {
  int told = 0;
  Engine engine(store_, clock_, {.over_limit_cache_keys = 1024});
  PolicySpec spec;
  spec.name = "per-tenant";
  spec.identity = {"tenant"};
  spec.limits = {Bucket(1)};
  ASSERT_TRUE(engine.SetPolicies(*PolicySet::Create({spec}, {})).ok());
  Admin c(engine, *overrides_, clock_, {.on_change = [&] { ++told; }});
  ASSERT_TRUE(c.Sync().ok());
  const int at_start = told;
  ASSERT_TRUE(c.Sync().ok());
  EXPECT_EQ(told, at_start) << "a poll that finds no change";
  ASSERT_TRUE(c.ResetState(Acme(), "x").ok());
  EXPECT_EQ(told, at_start + 1) << "a reset here, at once";
  ASSERT_TRUE(a_.admin.SetOverride(Acme(), {Bucket(5)}, std::nullopt, "x").ok());
  EXPECT_EQ(told, at_start + 1) << "made elsewhere: not yet";
  ASSERT_TRUE(c.Sync().ok());
  EXPECT_GE(told, at_start + 2) << "at the poll that sees it";
}

TEST_F(AdminTest, BadInputIsRefusedAndChangesNothing) {
  struct Case {
    AdminTarget target;
    std::vector<Limit> limits;
    std::string_view reason;
    StatusCode code = StatusCode::kInvalidArgument;
  };
  const std::vector<Case> cases = {
      {{.policy = "nope", .params = {{"tenant", "acme"}}},
       {Bucket(5)},
       admin_reason::kUnknownPolicy,
       StatusCode::kNotFound},
      {{.policy = "per-tenant", .params = {}}, {Bucket(5)}, admin_reason::kMissingParameter},
      {{.policy = "per-tenant", .params = {{"tenant", "acme"}, {"plan", "pro"}}},
       {Bucket(5)},
       admin_reason::kUnknownParameter},
      {{.policy = "per-tenant", .params = {{"tenant", "a"}, {"tenant", "b"}}},
       {Bucket(5)},
       admin_reason::kDuplicateParameter},
      {{.policy = "per-tenant", .params = {{"tenant", "a\x01"}}},
       {Bucket(5)},
       admin_reason::kInvalidParameter},
      {Acme(), {}, admin_reason::kInvalidLimits},
  };
  for (const Case& c : cases) {
    auto set = a_.admin.SetOverride(c.target, c.limits, std::nullopt, "x");
    ASSERT_FALSE(set.ok());
    EXPECT_EQ(set.status().reason(), c.reason) << set.status().message();
    EXPECT_EQ(set.status().code(), c.code) << set.status().message();
  }
  const Status none = a_.admin.DeleteOverride(Acme(), "x").status();
  EXPECT_EQ(none.reason(), admin_reason::kNoOverride);
  EXPECT_EQ(none.code(), StatusCode::kNotFound);
  EXPECT_TRUE(a_.admin.ListOverrides("per-tenant")->empty());
  EXPECT_EQ(overrides_->Version().value(), 0u) << "nothing was written";
  EXPECT_EQ(metrics_.Series(MetricId::kAdminChanges, {"set_override"}).load(), 0u);

  // Bounded: a fourth identity is refused (max_overrides 3 here), a replacement is not.
  for (std::string t : {"t1", "t2", "t3"}) {
    ASSERT_TRUE(a_.admin
                    .SetOverride({.policy = "per-tenant", .params = {{"tenant", t}}}, {Bucket(5)},
                                 std::nullopt, "x")
                    .ok());
  }
  auto full = a_.admin.SetOverride(Acme(), {Bucket(5)}, std::nullopt, "x");
  ASSERT_FALSE(full.ok());
  EXPECT_EQ(full.status().reason(), admin_reason::kTooManyOverrides);
  EXPECT_EQ(full.status().code(), StatusCode::kResourceExhausted);
  auto again = a_.admin.SetOverride({.policy = "per-tenant", .params = {{"tenant", "t1"}}},
                                    {Bucket(6)}, std::nullopt, "x");
  ASSERT_TRUE(again.ok());
  EXPECT_FALSE(again->second) << "replaced";
  EXPECT_EQ(a_.admin.ListOverrides("per-tenant")->size(), 3u);
}

// An Envoy domain "edge" with one rule, 1 per minute per remote_address (stat key
// "edge.remote_address"), decided by an engine beside instance a's.
TEST_F(AdminTest, EnvoyRulesTakeRuntimeOverridesByTheirStatKey) {
  auto domains = testing::OneRuleDomain("edge", "remote_address", 1);
  ASSERT_TRUE(a_.engine.SetDomains(domains, {}).ok());
  const auto allowed = [&](std::string_view address) {
    DomainRequest r{.domain = "edge", .descriptors = {}, .hits_addend = 1};
    r.descriptors.push_back(
        {.entries = {{"remote_address", address}}, .hits = std::nullopt, .limit = std::nullopt});
    auto result = a_.engine.Check(r);
    EXPECT_TRUE(result.ok()) << result.status().ToString();
    return result.ok() && result->allowed();
  };
  const AdminTarget target{.policy = "edge.remote_address",
                           .params = {{"remote_address", "203.0.113.7"}}};
  ASSERT_TRUE(allowed("203.0.113.7"));
  ASSERT_FALSE(allowed("203.0.113.7"));
  auto state = a_.admin.GetState(target);
  ASSERT_TRUE(state.ok()) << state.status().message();
  EXPECT_EQ(state->kind, OverrideKind::kEnvoyRule);
  EXPECT_EQ(state->limits_from, "limits");
  EXPECT_EQ(state->limits[0].remaining, 0);

  auto two = a_.admin.SetOverride(target, {Bucket(5), Bucket(6)}, std::nullopt, "x");
  ASSERT_FALSE(two.ok());
  EXPECT_EQ(two.status().reason(), admin_reason::kInvalidLimits) << "a rule takes one limit";
  auto slots = a_.admin.SetOverride(
      target, {*Limit::Create(LimitSpec::Concurrency(1, seconds(30)))}, std::nullopt, "x");
  ASSERT_FALSE(slots.ok());
  EXPECT_EQ(slots.status().reason(), admin_reason::kInvalidLimits) << "Envoy cannot release a slot";
  auto weighted = a_.admin.SetOverride(target, {Bucket(3)}, std::nullopt, "x", 2);
  ASSERT_FALSE(weighted.ok());
  EXPECT_EQ(weighted.status().reason(), admin_reason::kInvalidWeight);
  EXPECT_EQ(weighted.status().message(), "weight: an Envoy rule has no share: it takes no weight");
  auto set = a_.admin.SetOverride(target, {Bucket(3)}, std::nullopt, "x");
  ASSERT_TRUE(set.ok()) << set.status().message();
  EXPECT_EQ(set->first.spec.kind, OverrideKind::kEnvoyRule);
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(allowed("203.0.113.7")) << i;
  EXPECT_FALSE(allowed("203.0.113.7"));
  EXPECT_FALSE(allowed("203.0.113.8") && allowed("203.0.113.8")) << "others keep the rule's 1";
  EXPECT_EQ(a_.admin.GetState(target)->limits_from, "runtime_override");
  EXPECT_EQ(a_.admin.ListOverrides("edge.remote_address")->size(), 1u);
  EXPECT_EQ(a_.admin.KindOf("edge.remote_address"), OverrideKind::kEnvoyRule);

  EXPECT_EQ(a_.admin.GetState({.policy = "edge.remote_address", .params = {{"other", "v"}}})
                .status()
                .reason(),
            admin_reason::kUnknownParameter);
  EXPECT_EQ(a_.admin.GetState({.policy = "edge.nothing", .params = {}}).status().reason(),
            admin_reason::kUnknownPolicy);
}

// An always_charge rule's override must count past its limit too: a sliding window is refused,
// a token bucket taken, and its hits charged into debt, a refused one included.
TEST_F(AdminTest, AnAlwaysChargedRuleTakesOnlyOverridesThatCountPastTheirLimit) {
  auto domains = testing::OneRuleDomain("edge", "user", 10, /*always_charge=*/true);
  ASSERT_TRUE(a_.engine.SetDomains(domains, {}).ok());
  const AdminTarget target{.policy = "edge.user", .params = {{"user", "u"}}};
  auto refused = a_.admin.SetOverride(
      target, {*Limit::Create(LimitSpec::Window(Algorithm::kSlidingWindowLog, 5, seconds(1)))},
      std::nullopt, "x");
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().reason(), admin_reason::kInvalidLimits);
  EXPECT_EQ(refused.status().message(),
            "limits[0]: an always_charge rule needs an algorithm that counts past its limit "
            "(token_bucket, gcra or fixed_window), not sliding_window_log");
  ASSERT_TRUE(a_.admin.SetOverride(target, {Bucket(3)}, std::nullopt, "x").ok());
  const auto report = [&](uint64_t hits) {
    DomainRequest r{.domain = "edge", .descriptors = {}, .hits_addend = 1};
    r.descriptors.push_back({.entries = {{"user", "u"}}, .hits = hits, .limit = std::nullopt});
    auto result = a_.engine.Check(r);
    EXPECT_TRUE(result.ok()) << result.status().ToString();
    return result.ok() && result->allowed();
  };
  EXPECT_FALSE(report(5)) << "5 of a burst of 3: refused, and charged";
  EXPECT_FALSE(report(0)) << "2 of debt: the next peek waits";
  clock_.Advance(seconds(40));  // 3 per minute: 2 units back
  EXPECT_TRUE(report(0));
}

TEST_F(AdminTest, AConcurrencyLimitsStateIsReadAndAResetLeavesItsHeldSlots) {
  PolicySpec spec;
  spec.name = "slots";
  spec.identity = {"tenant"};
  spec.limits = {*Limit::Create(LimitSpec::Concurrency(1, minutes(1))), Bucket(5)};
  ASSERT_TRUE(a_.engine.SetPolicies(*PolicySet::Create({spec}, {})).ok());
  const AdminTarget t{.policy = "slots", .params = {{"tenant", "acme"}}};
  auto held = a_.engine.Check({.descriptors = {{"tenant", "acme"}}, .cost = std::nullopt});
  ASSERT_TRUE(held.ok() && held->allowed());
  auto state = a_.admin.GetState(t);
  ASSERT_TRUE(state.ok()) << state.status().message();
  ASSERT_EQ(state->limits.size(), 2u);
  EXPECT_EQ(state->limits[0].remaining, 0) << "the one slot is held";
  EXPECT_EQ(state->limits[1].remaining, 4);
  auto reset = a_.admin.ResetState(t, "127.0.0.1");
  ASSERT_TRUE(reset.ok()) << reset.status().message();
  EXPECT_EQ(reset->limits[0].remaining, 0) << "a held slot stays held";
  EXPECT_EQ(reset->limits[1].remaining, 5) << "the rate limit is fresh";
  auto refused = a_.engine.Check({.descriptors = {{"tenant", "acme"}}, .cost = std::nullopt});
  ASSERT_TRUE(refused.ok());
  EXPECT_FALSE(refused->allowed()) << "no second request runs beside the first";
}

TEST(RuntimeOverrideRecord, ReadsBackWhatItWrote) {
  RuntimeOverride o{.kind = OverrideKind::kPolicy,
                    .policy = "per-tenant",
                    .identity = {{"tenant", "acme corp"}},
                    .identity_key = "9:acme corp",
                    .limits = {Bucket(5), *Limit::Create(LimitSpec::Window(Algorithm::kFixedWindow,
                                                                           10, seconds(1)))},
                    .expires_at = {},
                    .set_by = "admin\nforged line"};
  auto back = DecodeOverride(EncodeOverride(o), Micros(42));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->policy, o.policy);
  EXPECT_EQ(back->identity, o.identity);
  EXPECT_EQ(back->identity_key, o.identity_key);
  EXPECT_EQ(back->limits, o.limits);
  EXPECT_EQ(back->set_by, "admin?forged line") << "no control character survives";
  EXPECT_EQ(back->expires_at, Micros(42));
  EXPECT_FALSE(back->weight.has_value()) << "written without one, read without one";
  EXPECT_FALSE(DecodeOverride("something else", std::nullopt).ok());
  EXPECT_FALSE(DecodeOverride("caudal-override 1\nkind policy\npolicy p", std::nullopt).ok());

  // A policy with share: a weight and no limits.
  o.limits.clear();
  o.weight = kMaxShareWeight;
  back = DecodeOverride(EncodeOverride(o), std::nullopt);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->weight, kMaxShareWeight);
  EXPECT_TRUE(back->limits.empty());
  const std::string head = "caudal-override 1\nkind policy\npolicy p\nkey 1:a\nid a\ta";
  EXPECT_EQ(DecodeOverride(head + "\nweight 7", std::nullopt)->weight, 7);
  for (std::string_view bad : {"0", "4097", "x", "", "2 "}) {
    EXPECT_FALSE(DecodeOverride(Cat(head, "\nweight ", bad), std::nullopt).ok()) << bad;
  }
  EXPECT_FALSE(DecodeOverride(head, std::nullopt).ok()) << "neither limits nor a weight";
}

// A policy with share takes a weight per identity where others take limits: set on one instance,
// read back by another from the store, applied without changing the limits, and refused where
// it means nothing (the config file's rules: ValidateOverrideTerms).
TEST(AdminShares, AWeightIsKeptForEveryInstanceAndRefusedWhereItMeansNothing) {
  ManualClock clock;
  MemoryStore store(clock);
  auto overrides = MakeMemoryOverrideStore(clock);
  PolicySpec tokens;
  tokens.name = "tokens";
  tokens.identity = {"tenant"};
  tokens.limits = {Bucket(10)};
  tokens.share = ShareTerms{};
  PolicySpec plain;
  plain.name = "per-account";
  plain.identity = {"account"};
  plain.limits = {Bucket(1)};
  const auto both = *PolicySet::Create({tokens, plain}, {});
  // As the service runs them: a shared capacity is decided by the lease decorator.
  LeaseStore la(store, clock, {.lease_by_default = false, .leases = false});
  LeaseStore lb(store, clock, {.lease_by_default = false, .leases = false});
  Engine ea(la, clock, {});
  Engine eb(lb, clock, {});
  ASSERT_TRUE(ea.SetPolicies(both).ok());
  ASSERT_TRUE(eb.SetPolicies(both).ok());
  Admin a(ea, *overrides, clock, {});
  Admin b(eb, *overrides, clock, {});
  const AdminTarget acme{.policy = "tokens", .params = {{"tenant", "acme"}}};

  struct Case {
    AdminTarget target;
    std::vector<Limit> limits;
    std::optional<int64_t> weight;
    std::string_view reason;
    std::string_view message;
  };
  const std::vector<Case> cases = {
      {acme,
       {Bucket(5)},
       2,
       admin_reason::kInvalidLimits,
       "limits: a policy with share divides its own limits among its identities: an override "
       "gives a weight, not limits"},
      {acme,
       {},
       std::nullopt,
       admin_reason::kInvalidWeight,
       "weight: missing: an override of a policy with share gives a weight (1 to 4096)"},
      {acme,
       {},
       kMaxShareWeight + 1,
       admin_reason::kInvalidWeight,
       "weight: expected 1 to 4096 (got 4097)"},
      {{.policy = "per-account", .params = {{"account", "acme"}}},
       {Bucket(5)},
       1,
       admin_reason::kInvalidWeight,
       "weight: only a policy with share takes a weight"},
  };
  for (const Case& c : cases) {
    auto set = a.SetOverride(c.target, c.limits, std::nullopt, "x", c.weight);
    ASSERT_FALSE(set.ok()) << c.message;
    EXPECT_EQ(set.status().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(set.status().reason(), c.reason) << set.status().message();
    EXPECT_EQ(set.status().message(), c.message);
  }
  EXPECT_EQ(overrides->Version().value(), 0u) << "nothing was written";

  auto set = a.SetOverride(acme, {}, std::nullopt, "x", 4);
  ASSERT_TRUE(set.ok()) << set.status().message();
  EXPECT_TRUE(set->second) << "new";
  EXPECT_EQ(set->first.spec.weight, 4);
  ASSERT_TRUE(b.Sync().ok());
  auto listed = b.ListOverrides("tokens");
  ASSERT_TRUE(listed.ok());
  ASSERT_EQ(listed->size(), 1u);
  EXPECT_EQ((*listed)[0].spec.weight, 4) << "read back from the store by another instance";
  EXPECT_TRUE((*listed)[0].spec.limits.empty());
  ASSERT_EQ(eb.runtime_overrides()->size(), 1u);
  EXPECT_TRUE(eb.runtime_overrides()->not_applied().empty());

  // The weight leaves the identity the policy's limits, a capacity shared with the others: the
  // state is the capacity's, and says the limit is shared.
  auto state = b.GetState(acme);
  ASSERT_TRUE(state.ok()) << state.status().message();
  EXPECT_EQ(state->limits_from, "limits");
  ASSERT_EQ(state->limits.size(), 1u);
  EXPECT_EQ(state->limits[0].limit, Bucket(10));
  EXPECT_TRUE(state->limits[0].shared);
  // Alone, acme is allotted the whole refill, 10 a minute, and decided from its share: its first
  // grant, half a window (1 s) of it, is a sixth of a unit, so the request is refused, by the
  // share and not by a failure.
  auto r = eb.Check({.descriptors = {{"tenant", "acme"}}, .cost = std::nullopt});
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(r->allowed());
  EXPECT_FALSE(r->degraded);
  EXPECT_EQ(r->results[0].decisions[0].share, 10);

  // A reload that takes the share away leaves the weight held but not applied.
  tokens.share.reset();
  ASSERT_TRUE(eb.SetPolicies(*PolicySet::Create({tokens, plain}, {})).ok());
  ASSERT_EQ(eb.runtime_overrides()->not_applied().size(), 1u);
  EXPECT_EQ(eb.runtime_overrides()->not_applied()[0].reason,
            "weight: only a policy with share takes a weight");
}

}  // namespace
}  // namespace caudal
