#include "caudal/engine/policy.h"

#include <gtest/gtest.h>

#include <functional>

#include "support/test_limits.h"

namespace caudal {
namespace {

using std::chrono::minutes;
using std::chrono::seconds;

using testing::Bucket;

PolicySpec Good() {
  PolicySpec s;
  s.name = "per-key";
  s.identity = {"api_key"};
  s.limits = {Bucket(10, {10, minutes(1)})};
  return s;
}

TEST(ValidatePolicy, NamesTheFieldAtFault) {
  struct Case {
    std::function<void(PolicySpec&)> edit;
    std::string field;
  };
  const std::vector<Case> cases = {
      {[](PolicySpec& s) { s.name = ""; }, "name"},
      {[](PolicySpec& s) { s.name = "has space"; }, "name"},
      {[](PolicySpec& s) { s.identity.clear(); }, "identity"},
      {[](PolicySpec& s) {
         s.identity = {"a", "a"};
       },
       "identity[1]"},
      {[](PolicySpec& s) {
         s.identity = {"ok", "no/slash"};
       },
       "identity[1]"},
      {[](PolicySpec& s) { s.ip_prefix.v4 = 33; }, "ip_prefix.v4"},
      {[](PolicySpec& s) { s.ip_prefix.v6 = -1; }, "ip_prefix.v6"},
      {[](PolicySpec& s) { s.limits.clear(); }, "limits"},
      {[](PolicySpec& s) { s.cost = 0; }, "cost"},
      {[](PolicySpec& s) { s.cost = 11; }, "cost"},
      {[](PolicySpec& s) { s.overrides = {{.match = {}, .limits = s.limits}}; },
       "overrides[0].match"},
      {[](PolicySpec& s) {
         s.overrides = {{.match = {{"plan", "pro"}}, .limits = {}}};
       },
       "overrides[0].limits"},
      {[](PolicySpec& s) {
         s.overrides = {{.match = {{"plan", "pro"}, {"plan", "max"}}, .limits = s.limits}};
       },
       "overrides[0].match.plan"},
      {[](PolicySpec& s) {
         s.overrides = {{.match = {{"pl/an", "pro"}}, .limits = s.limits}};
       },
       "overrides[0].match"},
      {[](PolicySpec& s) {
         s.overrides = {{.match = {{"plan", "a\x01"}}, .limits = s.limits}};
       },
       "overrides[0].match.plan"},
      {[](PolicySpec& s) {
         s.overrides = {{.match = {{"ip", "not-an-address"}}, .limits = s.limits}};
       },
       "overrides[0].match.ip"},
      {[](PolicySpec& s) {
         s.cost = 3;
         s.overrides = {
             {.match = {{"plan", "pro"}}, .limits = {s.limits[0], Bucket(2, {2, minutes(1)})}}};
       },
       "overrides[0].limits[1]"},
  };
  for (const Case& c : cases) {
    PolicySpec s = Good();
    c.edit(s);
    auto e = ValidatePolicy(s, {});
    ASSERT_TRUE(e.has_value()) << c.field;
    EXPECT_EQ(e->field, c.field) << e->status.message();
  }
  EXPECT_FALSE(ValidatePolicy(Good(), {}).has_value());
}

PolicySpec SharedPolicy() {
  PolicySpec s = Good();
  s.share = ShareTerms{};
  s.overrides = {{.match = {{"api_key", "k1"}}, .limits = {}, .weight = 4}};
  return s;
}

Limit Window(Algorithm a) { return *Limit::Create(LimitSpec::Window(a, 10, seconds(1))); }

TEST(ValidatePolicy, AShareTakesDivisibleRatesAndItsTiersAWeightInsteadOfLimits) {
  EXPECT_FALSE(ValidatePolicy(SharedPolicy(), {}).has_value());
  PolicySpec fixed = SharedPolicy();
  fixed.limits = {Window(Algorithm::kFixedWindow), Bucket(10, {10, minutes(1)})};
  EXPECT_FALSE(ValidatePolicy(fixed, {}).has_value());

  struct Case {
    std::function<void(PolicySpec&)> edit;
    std::string field;
    std::string message;
  };
  const std::vector<Case> cases = {
      {[](PolicySpec& s) { s.limits = {Window(Algorithm::kSlidingWindowLog)}; }, "limits[0]",
       "share divides a rate among identities and cannot divide a sliding_window_log limit"},
      {[](PolicySpec& s) { s.limits.push_back(Window(Algorithm::kSlidingWindowCounter)); },
       "limits[1]", "cannot divide a sliding_window_counter limit"},
      {[](PolicySpec& s) { s.limits = {*Limit::Create(LimitSpec::Concurrency(5, seconds(1)))}; },
       "limits[0]", "cannot divide a concurrency limit"},
      {[](PolicySpec& s) { s.share->window = std::chrono::milliseconds(99); }, "share.window",
       "expected between 100ms and 1h"},
      {[](PolicySpec& s) { s.share->window = std::chrono::hours(1) + Micros(1); }, "share.window",
       "expected between 100ms and 1h"},
      {[](PolicySpec& s) { s.overrides[0].limits = s.limits; }, "overrides[0].limits",
       "a policy with share divides its own limits among its identities"},
      {[](PolicySpec& s) { s.overrides[0].weight.reset(); }, "overrides[0].weight",
       "missing: an override of a policy with share gives a weight (1 to 4096)"},
      {[](PolicySpec& s) { s.overrides[0].weight = 0; }, "overrides[0].weight",
       "expected 1 to 4096 (got 0)"},
      {[](PolicySpec& s) { s.overrides[0].weight = kMaxShareWeight + 1; }, "overrides[0].weight",
       "expected 1 to 4096 (got 4097)"},
      {[](PolicySpec& s) {
         s.share.reset();
         s.overrides[0].limits = s.limits;
         s.overrides[0].weight = 1;
       },
       "overrides[0].weight", "only a policy with share takes a weight"},
  };
  for (const Case& c : cases) {
    PolicySpec s = SharedPolicy();
    c.edit(s);
    auto e = ValidatePolicy(s, {});
    ASSERT_TRUE(e.has_value()) << c.field;
    EXPECT_EQ(e->field, c.field) << e->status.message();
    EXPECT_NE(e->status.message().find(c.message), std::string::npos) << e->status.message();
  }
}

TEST(PolicySet, CarriesTheShareAndGivesAWeightedTierThePolicysOwnLimitsAndKeys) {
  PolicySpec s = SharedPolicy();
  s.name = "shared";
  s.share->fairness = Fairness::kProportional;
  s.overrides.push_back({.match = {{"api_key", "k2"}}, .limits = {}, .weight = 1});
  auto set = PolicySet::Create({s, Good()}, {});
  ASSERT_TRUE(set.ok()) << set.status().ToString();
  const auto& p = (*set)->policies()[0];
  ASSERT_TRUE(p.share().has_value());
  EXPECT_EQ(*p.share(), (ShareTerms{.fairness = Fairness::kProportional, .window = seconds(2)}));
  ASSERT_EQ(p.tiers.size(), 2u);
  EXPECT_EQ(p.tiers[0].weight, 4);
  EXPECT_EQ(p.tiers[1].weight, 1);
  for (const auto& t : p.tiers) {
    EXPECT_EQ(t.set.limits, p.spec.limits);
    EXPECT_EQ(t.set.key_prefixes, p.key_prefixes) << "the identities share the policy's state";
  }
  EXPECT_FALSE((*set)->policies()[1].share().has_value());

  auto refused = PolicySet::Create({Good(),
                                    [] {
                                      PolicySpec w = SharedPolicy();
                                      w.name = "w";
                                      w.overrides[0].weight = 0;
                                      return w;
                                    }()},
                                   {});
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("policies[1].overrides[0].weight: expected 1 to"),
            std::string::npos)
      << refused.status().message();
}

// A limit set counting more than one dimension keys its compact limits as members of one group per
// identity; one counting a single dimension keeps a key per limit (as before dimensions existed),
// and so does a capacity shared among identities.
TEST(MakeLimitSet, GroupsTheCompactLimitsOfASetCountingSeveralDimensions) {
  const auto limit = [](Algorithm a, std::vector<std::string> dimension) {
    LimitSpec spec = a == Algorithm::kFixedWindow
                         ? LimitSpec::Window(a, 100, std::chrono::minutes(1))
                         : (a == Algorithm::kConcurrency
                                ? LimitSpec::Concurrency(5, seconds(30))
                                : LimitSpec::Bucket(a, 100, {100, std::chrono::minutes(1)}));
    spec.dimension = std::move(dimension);
    return *Limit::Create(spec);
  };
  const LimitSet gateway = MakeLimitSet(
      "gw",
      {limit(Algorithm::kTokenBucket, {}), limit(Algorithm::kTokenBucket, {"input_tokens"}),
       limit(Algorithm::kFixedWindow, {"input_tokens", "output_tokens"}),
       limit(Algorithm::kConcurrency, {})},
      1);
  ASSERT_EQ(gateway.key_prefixes.size(), 4u);
  EXPECT_EQ(gateway.key_prefixes[0], "#0:tb100,1/600000#caudal:gw:");
  EXPECT_EQ(gateway.key_prefixes[1], "#1:tb100,1/600000,input_tokens#caudal:gw:");
  EXPECT_EQ(gateway.key_prefixes[2], "#2:fw100,1/600000,input_tokens+output_tokens#caudal:gw:");
  EXPECT_EQ(gateway.key_prefixes[3].rfind("caudal:gw:3:cc", 0), 0u)
      << "a concurrency limit's holds are no compact state: " << gateway.key_prefixes[3];
  const LimitSet requests = MakeLimitSet(
      "api", {limit(Algorithm::kTokenBucket, {}), limit(Algorithm::kFixedWindow, {})}, 1);
  EXPECT_EQ(requests.key_prefixes[0], "caudal:api:0:tb100,1/600000:");
  EXPECT_EQ(requests.key_prefixes[1], "caudal:api:1:fw100,1/600000:");
  const LimitSet tokens = MakeLimitSet(
      "t", {limit(Algorithm::kGcra, {"input_tokens"}), limit(Algorithm::kConcurrency, {})}, 1);
  EXPECT_EQ(tokens.key_prefixes[0].rfind("caudal:t:0:", 0), 0u) << "one dimension: keys apart";
  const LimitSet shared = MakeLimitSet(
      "s", {limit(Algorithm::kTokenBucket, {}), limit(Algorithm::kTokenBucket, {"input_tokens"})},
      1, /*may_group=*/false);
  EXPECT_EQ(shared.key_prefixes[1], "caudal:s:1:tb100,1/600000,input_tokens:");
}

TEST(Fairness, ParsesItsNames) {
  EXPECT_EQ(*ParseFairness("max_min"), Fairness::kMaxMin);
  EXPECT_EQ(*ParseFairness("proportional"), Fairness::kProportional);
  EXPECT_EQ(FairnessName(Fairness::kProportional), "proportional");
  auto bad = ParseFairness("fair");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(), "expected max_min or proportional (got \"fair\")");
}

TEST(LocalLimit, DividesCapacityAndRateExactly) {
  const Limit l = *LocalLimit(Bucket(100, {100, minutes(1)}), 4);
  EXPECT_EQ(l.capacity(), 25);
  EXPECT_EQ(l.rate(), (Rate{25, minutes(1)}));
  const Limit odd = *LocalLimit(Bucket(100, {10, seconds(1)}), 3);
  EXPECT_EQ(odd.capacity(), 33);
  EXPECT_EQ(odd.rate(), (Rate{10, seconds(3)}));  // 10/3 per second, exactly
  const Limit w =
      *LocalLimit(*Limit::Create(LimitSpec::Window(Algorithm::kFixedWindow, 600, minutes(1))), 7);
  EXPECT_EQ(w.capacity(), 85);
  EXPECT_EQ(w.window(), minutes(1));
  EXPECT_EQ(LocalLimit(Bucket(2, {2, seconds(1)}), 5)->capacity(), 1);  // never below one
}

TEST(LocalLimit, RefusesADivisionTheAlgorithmsCannotHold) {
  // 1 per 365 d spread over 2 instances would be 1 per 730 d, past the longest period.
  const Limit l = Bucket(1, {1, std::chrono::hours(24 * 365)});
  EXPECT_FALSE(LocalLimit(l, 2).ok());
  PolicySpec s = Good();
  s.limits = {l};
  s.on_failure = FailureMode::kLocal;
  auto e = ValidatePolicy(s, {.on_failure = FailureMode::kDeny, .instances = 2});
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->field, "limits[0]");
}

TEST(PolicySet, RefusesRepeatedNamesAndKeysLimitsApart) {
  auto dup = PolicySet::Create({Good(), Good()}, {});
  ASSERT_FALSE(dup.ok());
  EXPECT_NE(dup.status().message().find("policies[1].name"), std::string::npos);
  PolicySpec two = Good();
  two.limits.push_back(Bucket(1000, {1000, std::chrono::hours(24)}));
  auto set = PolicySet::Create({two}, {.on_failure = FailureMode::kAllow, .instances = 1});
  ASSERT_TRUE(set.ok());
  const auto& p = (*set)->policies()[0];
  EXPECT_EQ(p.on_failure, FailureMode::kAllow);
  ASSERT_EQ(p.key_prefixes.size(), 2u);
  EXPECT_NE(p.key_prefixes[0], p.key_prefixes[1]);
}

TEST(FailureMode, ParsesItsNames) {
  EXPECT_EQ(*ParseFailureMode("local"), FailureMode::kLocal);
  EXPECT_FALSE(ParseFailureMode("open").ok());
}

}  // namespace
}  // namespace caudal
