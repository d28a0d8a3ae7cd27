// A limit's dimension as configs write it: `dimension: input_tokens`, or a list whose costs it
// sums (policies[].limits[], docs/configuration.md), and its errors.
#include <gtest/gtest.h>

#include <string>

#include "caudal/config/config.h"
#include "common/cat.h"

namespace caudal {
namespace {

Result<Config> DimensionLimits(std::string_view limits) {
  return ParseConfig(
      Cat("policies:\n  - name: p\n    identity: [key]\n    limits: [", limits, "]\n"), "t.yaml");
}

TEST(DimensionConfig, ReadsOneDimensionOrASumAndKnowsThemAll) {
  auto c = DimensionLimits(
      "{algorithm: token_bucket, capacity: 60, refill: 60/1m},"
      "{algorithm: token_bucket, capacity: 100000, refill: 100000/1m, dimension: input_tokens},"
      "{algorithm: fixed_window, limit: 10000000, window: 1 month, calendar: {time_zone: "
      "Europe/Madrid}, dimension: [output_tokens, input_tokens]}");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  const auto& limits = c->policies->policies()[0].spec.limits;
  EXPECT_TRUE(limits[0].counts_requests());
  EXPECT_EQ(limits[1].DimensionText(), "input_tokens");
  EXPECT_EQ(limits[2].DimensionText(), "input_tokens+output_tokens");
  EXPECT_TRUE(limits[2].calendar().has_value());
  const auto dims = c->policies->dimensions();
  EXPECT_EQ(std::vector<std::string>(dims.begin(), dims.end()),
            (std::vector<std::string>{"input_tokens", "output_tokens", "requests"}));
}

TEST(DimensionConfig, RefusesWhatCannotBeADimensionNamingTheLine) {
  const std::pair<std::string_view, std::string_view> cases[] = {
      {"{algorithm: token_bucket, capacity: 5, refill: 5/1s, dimension: Input-Tokens}",
       "not a dimension name"},
      {"{algorithm: token_bucket, capacity: 5, refill: 5/1s, dimension: []}", "expected 1 to 8"},
      {"{algorithm: token_bucket, capacity: 5, refill: 5/1s, dimension: [a, a]}", "named twice"},
      {"{algorithm: token_bucket, capacity: 5, refill: 5/1s, dimension: {a: 1}}", "dimension"},
      {"{algorithm: concurrency, limit: 5, hold: 30s, dimension: input_tokens}", "dimension"},
  };
  for (const auto& [limit, says] : cases) {
    auto c = DimensionLimits(limit);
    ASSERT_FALSE(c.ok()) << limit;
    EXPECT_NE(c.status().message().find(says), std::string::npos) << c.status().message();
    EXPECT_NE(c.status().message().find("t.yaml:"), std::string::npos) << c.status().message();
  }
}

}  // namespace
}  // namespace caudal
