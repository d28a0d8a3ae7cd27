#include "caudal/engine/policy.h"

#include <gtest/gtest.h>

namespace caudal {
namespace {

using std::chrono::minutes;
using std::chrono::seconds;

Limit Bucket(int64_t capacity, Rate refill) {
  return *Limit::Create(LimitSpec::Bucket(Algorithm::kTokenBucket, capacity, refill));
}

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
