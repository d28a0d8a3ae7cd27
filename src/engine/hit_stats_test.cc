#include "engine/hit_stats.h"

#include <gtest/gtest.h>

namespace caudal::engine_internal {
namespace {

TEST(HitStats, NearLimitThresholdIsFourFifthsRoundedDown) {
  EXPECT_EQ(NearLimitThreshold(0), 0);
  EXPECT_EQ(NearLimitThreshold(2), 1);
  EXPECT_EQ(NearLimitThreshold(3), 2);
  EXPECT_EQ(NearLimitThreshold(5), 4);
  EXPECT_EQ(NearLimitThreshold(8), 6);
  EXPECT_EQ(NearLimitThreshold(15), 12);
  EXPECT_EQ(NearLimitThreshold(20), 16);
  // In float32, as the reference computes it, not exactly 4/5.
  EXPECT_EQ(NearLimitThreshold(1'000'000'007), 800'000'000);
  EXPECT_EQ(NearLimitThreshold(4'294'967'295), 3'435'973'888);
}

struct Case {
  int64_t limit, before, hits;
  bool shadow;
  HitSplit want;
};

// The counter values of envoyproxy/ratelimit's test/redis/fixed_cache_impl_test.go (what INCRBY
// returned, less the hits) and the statistics it asserts for them.
TEST(HitStats, SplitsHitsAsTheReferenceDoes) {
  const Case cases[] = {
      {10, 4, 1, false, {.within_limit = 1}},                    // 5 of 10
      {10, 10, 1, false, {.over_limit = 1}},                     // 11 of 10
      {10, 12, 1, false, {.over_limit = 1}},                     // 13 of 10
      {15, 10, 1, false, {.within_limit = 1}},                   // 11 of 15, under N = 12
      {15, 12, 1, false, {.within_limit = 1, .near_limit = 1}},  // 13 of 15
      {15, 15, 1, false, {.over_limit = 1}},                     // 16: near counted before
      {20, 2, 3, false, {.within_limit = 3}},                    // 5 of 20
      {8, 5, 2, false, {.within_limit = 2, .near_limit = 1}},    // 7 of 8, N = 6
      {20, 16, 3, false, {.within_limit = 3, .near_limit = 3}},  // 19 of 20
      {20, 19, 3, false, {.near_limit = 1, .over_limit = 2}},    // 22 of 20
      {20, 15, 7, false, {.near_limit = 4, .over_limit = 2}},    // 22 of 20, from below N
      {10, 27, 3, false, {.over_limit = 3}},                     // 30 of 10
      {15, 15, 1, true, {.over_limit = 1, .shadow_mode = 1}},    // a shadow rule
      {20, 19, 3, true, {.near_limit = 1, .over_limit = 2, .shadow_mode = 2}},
      {10, 12, 0, false, {}},  // a check (hits_addend 0) counts nothing
      {0, 0, 2, true, {.over_limit = 2, .shadow_mode = 2}},  // requests_per_unit 0
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(::testing::Message() << c.before << " + " << c.hits << " of " << c.limit);
    const HitSplit s = SplitHits(c.limit, c.before, c.hits, c.shadow);
    EXPECT_EQ(s.within_limit, c.want.within_limit);
    EXPECT_EQ(s.near_limit, c.want.near_limit);
    EXPECT_EQ(s.over_limit, c.want.over_limit);
    EXPECT_EQ(s.shadow_mode, c.want.shadow_mode);
  }
}

TEST(HitStats, SanitizesStatNamesAsTheReferenceDoes) {
  const std::pair<std::string, std::string> cases[] = {
      {"d.remote_address_10.0.0.1", "d.remote_address_10_0_0_1"},
      {"d.path_/a:b|c", "d.path_/a_b_c"},
      {"d.k_1234.5.6.7", "d.k_1234_5_6_7"},  // the match starts at the second digit
      {"d.version_1.2.3", "d.version_1.2.3"},
      {"d.k_1.2.3.4.5", "d.k_1_2_3_4.5"},
      {"d.k_a1.22.333.4444", "d.k_a1_22_333_4444"},
      {"d.k_1.2.3.", "d.k_1.2.3."},
      // Control characters, which the reference leaves raw, are one '_' each.
      {"d.k_a\rb\x1b[31m\x07\x7f", "d.k_a_b_[31m__"},
      {"d.k_l\xE2\x80\xA8s\xC2\x9B"
       "c\xC3\xA9",
       "d.k_l_s_c\xC3\xA9"},
  };
  for (auto [in, want] : cases) {
    std::string s = in;
    SanitizeStatName(s);
    EXPECT_EQ(s, want) << in;
  }
}

}  // namespace
}  // namespace caudal::engine_internal
