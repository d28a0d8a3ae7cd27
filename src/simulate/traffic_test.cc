#include "simulate/traffic.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>

namespace caudal::simulate {
namespace {

using std::chrono::minutes;
using std::chrono::seconds;
using ::testing::HasSubstr;

constexpr Rate kTrafficLimit{.count = 100, .period = minutes(1)};

Traffic Make(Pattern p, Rate rate, Micros duration, uint64_t seed = 1) {
  auto t = Generate(
      {.pattern = p, .limit = kTrafficLimit, .rate = rate, .duration = duration, .seed = seed});
  EXPECT_TRUE(t.ok()) << t.status().ToString();
  return t.ok() ? std::move(*t) : Traffic{};
}

std::vector<int64_t> Times(const Traffic& t) {
  std::vector<int64_t> out;
  for (const Request& r : t.requests) out.push_back(r.at_us);
  return out;
}

TEST(Traffic, PatternNamesRoundTrip) {
  for (Pattern p : kAllPatterns) {
    auto parsed = ParsePattern(PatternName(p));
    ASSERT_TRUE(parsed.ok());
    EXPECT_EQ(*parsed, p);
  }
  auto bad = ParsePattern("bursty");
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("\"bursty\""));
  EXPECT_THAT(bad.status().message(), HasSubstr("boundary-burst"));
}

TEST(Traffic, SteadyIsEvenlySpacedWithExactRationalTimes) {
  const Traffic t = Make(Pattern::kSteady, {3, seconds(1)}, seconds(2));
  EXPECT_EQ(Times(t), (std::vector<int64_t>{0, 333'333, 666'666, 1'000'000, 1'333'333, 1'666'666}));
  EXPECT_EQ(t.keys, std::vector<std::string>{"client"});
  EXPECT_EQ(t.start, Micros(0));
  EXPECT_EQ(t.end, seconds(2));
}

TEST(Traffic, SteadyCountIsRateTimesDuration) {
  const Traffic t = Make(Pattern::kSteady, {200, minutes(1)}, minutes(10));
  EXPECT_EQ(t.requests.size(), 2000u);
  EXPECT_LT(t.requests.back().at_us, Micros(minutes(10)).count());
}

TEST(Traffic, PoissonIsReproducibleForASeedAndDiffersAcrossSeeds) {
  const Traffic a = Make(Pattern::kPoisson, {200, minutes(1)}, minutes(10), 42);
  const Traffic b = Make(Pattern::kPoisson, {200, minutes(1)}, minutes(10), 42);
  const Traffic c = Make(Pattern::kPoisson, {200, minutes(1)}, minutes(10), 43);
  EXPECT_EQ(Times(a), Times(b));
  EXPECT_NE(Times(a), Times(c));
}

TEST(Traffic, PoissonHasTheRequestedMeanRateAndSortedTimes) {
  // 100,000 expected arrivals: the count's standard deviation is ~316, so ±2% is > 6 sigma.
  const Traffic t = Make(Pattern::kPoisson, {1000, seconds(1)}, seconds(100), 7);
  EXPECT_NEAR(static_cast<double>(t.requests.size()), 100'000.0, 2'000.0);
  EXPECT_TRUE(std::is_sorted(t.requests.begin(), t.requests.end(),
                             [](const Request& x, const Request& y) { return x.at_us < y.at_us; }));
  EXPECT_GE(t.requests.front().at_us, 0);
  EXPECT_LT(t.requests.back().at_us, Micros(seconds(100)).count());
}

TEST(Traffic, BoundaryBurstStraddlesTheFirstWindowBoundary) {
  const Traffic t = Make(Pattern::kBoundaryBurst, {60, minutes(1)}, minutes(3));
  const int64_t w = Micros(minutes(1)).count();
  const int64_t spread = w / 100;
  EXPECT_EQ(t.start, Micros(w / 2));
  EXPECT_EQ(t.end, Micros(w / 2 + Micros(minutes(3)).count()));
  const auto times = Times(t);
  const auto before = std::count_if(times.begin(), times.end(),
                                    [&](int64_t x) { return x >= w - spread && x < w; });
  const auto after = std::count_if(times.begin(), times.end(),
                                   [&](int64_t x) { return x >= w && x < w + spread; });
  EXPECT_EQ(before, kTrafficLimit.count);
  EXPECT_EQ(after, kTrafficLimit.count);
  // Then steady at 60/1m, one a second, from w + spread to the end.
  const auto steady = static_cast<int64_t>(times.size()) - before - after;
  EXPECT_EQ(steady, (t.end.count() - (w + spread) + 999'999) / 1'000'000);
  EXPECT_TRUE(std::is_sorted(times.begin(), times.end()));
  EXPECT_EQ(*std::min_element(times.begin(), times.end()), w - spread);
}

TEST(Traffic, BoundaryBurstNeedsAtLeastOneWindow) {
  auto t = Generate({.pattern = Pattern::kBoundaryBurst,
                     .limit = kTrafficLimit,
                     .rate = {200, minutes(1)},
                     .duration = seconds(30)});
  ASSERT_FALSE(t.ok());
  EXPECT_THAT(t.status().message(), HasSubstr("at least the limit's window (1m)"));
}

TEST(Traffic, OnOffIsSilentInTheSecondHalfOfEveryWindow) {
  const Traffic t = Make(Pattern::kOnOff, {600, minutes(1)}, minutes(5));
  const int64_t w = Micros(minutes(1)).count();
  ASSERT_EQ(t.requests.size(), 5u * 300u);
  for (const Request& r : t.requests) EXPECT_LT(r.at_us % w, w / 2) << r.at_us;
}

TEST(Traffic, RefusesMoreThanTheBound) {
  auto t = Generate({.pattern = Pattern::kSteady,
                     .limit = kTrafficLimit,
                     .rate = {kMaxRequests + 1, seconds(1)},
                     .duration = seconds(1)});
  ASSERT_FALSE(t.ok());
  EXPECT_THAT(t.status().message(), HasSubstr("10000001 requests; at most 10000000"));
  auto p = Generate({.pattern = Pattern::kPoisson,
                     .limit = kTrafficLimit,
                     .rate = {1'000'000, seconds(1)},
                     .duration = seconds(11)});
  ASSERT_FALSE(p.ok());
  auto huge = Generate({.pattern = Pattern::kBoundaryBurst,
                        .limit = {int64_t{1} << 40, minutes(1)},
                        .rate = {1, minutes(1)},
                        .duration = minutes(1)});
  ASSERT_FALSE(huge.ok());
  EXPECT_THAT(huge.status().message(), HasSubstr("at most 10000000"));
}

TEST(Traffic, RefusesDurationsThatWouldLoopForever) {
  auto t = Generate({.pattern = Pattern::kOnOff,
                     .limit = {1, std::chrono::milliseconds(1)},
                     .rate = {1, std::chrono::hours(24 * 365)},
                     .duration = std::chrono::hours(24 * 365 * 50)});
  ASSERT_FALSE(t.ok());
  EXPECT_THAT(t.status().message(), HasSubstr("on-off would run more than 10000000 windows"));
  auto long_run = Generate({.pattern = Pattern::kSteady,
                            .limit = kTrafficLimit,
                            .rate = {1, seconds(1)},
                            .duration = kMaxDuration + Micros(1)});
  ASSERT_FALSE(long_run.ok());
  EXPECT_THAT(long_run.status().message(), HasSubstr("duration must be at most 100y"));
}

TEST(Traffic, RefusesNonPositiveDuration) {
  auto t = Generate({.pattern = Pattern::kSteady,
                     .limit = kTrafficLimit,
                     .rate = {1, seconds(1)},
                     .duration = Micros(0)});
  ASSERT_FALSE(t.ok());
  EXPECT_THAT(t.status().message(), HasSubstr("duration must be positive"));
}

}  // namespace
}  // namespace caudal::simulate
