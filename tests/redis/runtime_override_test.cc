// Runtime overrides on a real redis-server (decisions and override records both in Redis): an
// Envoy rule given a concurrency limit, through the admin API or by a record an earlier version
// let through, takes no slot, so that Redis holds no hold id no caller was answered, and the
// rule's own limit keeps deciding.
#include <gtest/gtest.h>

#include "admin/admin.h"
#include "caudal/engine/engine.h"
#include "caudal/engine/ratelimit_config.h"
#include "config/store_registry.h"
#include "redis/redis_test_util.h"
#include "support/one_rule_domain.h"
#include "support/redis_server.h"

namespace caudal {
namespace {

// Domain "edge", one rule: 1 per minute per user (stat key "edge.user").
std::shared_ptr<const envoy::RateLimitConfig> Domains() {
  return testing::OneRuleDomain("edge", "user", 1);
}

TEST(RedisRuntimeOverrides, AnEnvoyRuleGivenAConcurrencyLimitTakesNoSlotInRedis) {
  auto server = StartServer();
  ASSERT_NE(server, nullptr);
  auto store = MustOpen({.url = server->url()});
  ASSERT_NE(store, nullptr);
  StoreConfig config;
  config.url = server->url();
  auto overrides = OpenOverrideStore(config, SystemClock::Instance());
  ASSERT_TRUE(overrides.ok()) << overrides.status().ToString();
  Engine engine(*store, SystemClock::Instance(), {});
  ASSERT_TRUE(engine.SetDomains(Domains(), {}).ok());
  Admin admin(engine, **overrides, SystemClock::Instance(), {});
  const Limit slots = *Limit::Create(LimitSpec::Concurrency(1, std::chrono::minutes(10)));

  const AdminTarget target{.policy = "edge.user", .params = {{"user", "u"}}};
  auto set = admin.SetOverride(target, {slots}, std::nullopt, "x");
  ASSERT_FALSE(set.ok());
  EXPECT_EQ(set.status().reason(), admin_reason::kInvalidLimits) << set.status().message();

  const RuntimeOverride o{.kind = OverrideKind::kEnvoyRule,
                          .policy = "edge.user",
                          .identity = {{"user", "u"}},
                          .identity_key = "4:user1:u",
                          .limits = {slots},
                          .expires_at = {},
                          .set_by = "an earlier version"};
  ASSERT_TRUE((*overrides)->Put(OverrideId(o), EncodeOverride(o), std::nullopt, 10).ok());
  ASSERT_TRUE(admin.Sync().ok());
  EXPECT_EQ(engine.runtime_overrides()->not_applied().size(), 1u);

  const auto hit = [&] {
    DomainRequest r{.domain = "edge", .descriptors = {}, .hits_addend = 1};
    r.descriptors.push_back(
        {.entries = {{"user", "u"}}, .hits = std::nullopt, .limit = std::nullopt});
    auto result = engine.Check(r);
    EXPECT_TRUE(result.ok()) << result.status().ToString();
    return result.ok() ? *result : CheckResult{};
  };
  const CheckResult first = hit();
  EXPECT_TRUE(first.allowed());
  EXPECT_TRUE(first.hold.empty());
  EXPECT_FALSE(hit().allowed()) << "the rule's 1 per minute, in Redis";

  auto keys = server->Keys();
  ASSERT_TRUE(keys.ok()) << keys.status().ToString();
  size_t rule_keys = 0;
  for (const std::string& k : *keys) {
    if (k.starts_with("caudal:{overrides}:")) continue;  // the records themselves
    EXPECT_EQ(k.find("concurrency"), std::string::npos) << "a slot nobody can release: " << k;
    rule_keys += k.find("fixed_window") != std::string::npos ? 1 : 0;
  }
  EXPECT_EQ(rule_keys, 1u) << "the rule's own counter";
}

// A policy with share: the weight an admin gives an identity on one instance is kept in Redis
// and read back by another instance, whose own OverrideStore has its own connections.
TEST(RedisRuntimeOverrides, AWeightIsKeptInRedisForEveryInstance) {
  auto server = StartServer();
  ASSERT_NE(server, nullptr);
  auto store = MustOpen({.url = server->url()});
  ASSERT_NE(store, nullptr);
  StoreConfig config;
  config.url = server->url();
  auto overrides_a = OpenOverrideStore(config, SystemClock::Instance());
  auto overrides_b = OpenOverrideStore(config, SystemClock::Instance());
  ASSERT_TRUE(overrides_a.ok()) << overrides_a.status().ToString();
  ASSERT_TRUE(overrides_b.ok()) << overrides_b.status().ToString();
  PolicySpec tokens;
  tokens.name = "tokens";
  tokens.identity = {"tenant"};
  tokens.limits = {*Limit::Create(
      LimitSpec::Bucket(Algorithm::kTokenBucket, 100, {100, std::chrono::minutes(1)}))};
  tokens.share = ShareTerms{.fairness = Fairness::kProportional, .window = std::chrono::seconds(5)};
  const auto policies = *PolicySet::Create({tokens}, {});
  Engine ea(*store, SystemClock::Instance(), {});
  Engine eb(*store, SystemClock::Instance(), {});
  ASSERT_TRUE(ea.SetPolicies(policies).ok());
  ASSERT_TRUE(eb.SetPolicies(policies).ok());
  Admin a(ea, **overrides_a, SystemClock::Instance(), {});
  Admin b(eb, **overrides_b, SystemClock::Instance(), {});

  const AdminTarget acme{.policy = "tokens", .params = {{"tenant", "acme"}}};
  auto set = a.SetOverride(acme, {}, std::chrono::hours(1), "x", 12);
  ASSERT_TRUE(set.ok()) << set.status().ToString();
  ASSERT_TRUE(b.Sync().ok());
  auto listed = b.ListOverrides("tokens");
  ASSERT_TRUE(listed.ok()) << listed.status().ToString();
  ASSERT_EQ(listed->size(), 1u);
  EXPECT_EQ((*listed)[0].spec.weight, 12);
  EXPECT_TRUE((*listed)[0].spec.limits.empty());
  EXPECT_TRUE((*listed)[0].spec.expires_at.has_value()) << "its end kept beside it";
  ASSERT_EQ(eb.runtime_overrides()->size(), 1u);
  EXPECT_EQ(eb.runtime_overrides()->entries()[0].spec.weight, 12);

  // Replaced with another weight: one record, the new weight.
  auto again = b.SetOverride(acme, {}, std::nullopt, "y", 3);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_FALSE(again->second) << "replaced";
  ASSERT_TRUE(a.Sync().ok());
  ASSERT_EQ(a.ListOverrides("tokens")->size(), 1u);
  EXPECT_EQ(a.ListOverrides("tokens")->at(0).spec.weight, 3);
}

}  // namespace
}  // namespace caudal
