// The status page's chart of one limit: the simulator's SVG, bounded in work.
#include "simulate/limit_chart.h"

#include <gtest/gtest.h>

#include <string>

namespace caudal::simulate {
namespace {

size_t Count(const std::string& s, std::string_view what) {
  size_t n = 0;
  for (size_t at = s.find(what); at != std::string::npos; at = s.find(what, at + 1)) ++n;
  return n;
}

TEST(RenderLimitChart, DrawsEveryAlgorithmForTheLimitsRateAndBurst) {
  const Limit l = *Limit::Create(
      LimitSpec::Bucket(Algorithm::kGcra, 20, {.count = 10, .period = std::chrono::seconds(1)}));
  const ChartLimit c = ChartLimitOf(l);
  EXPECT_EQ(c.rate.count, 10);
  EXPECT_EQ(c.burst, 20);
  const Result<std::string> svg = RenderLimitChart(l, "per-key");
  ASSERT_TRUE(svg.ok()) << svg.status().message();
  EXPECT_TRUE(svg->starts_with("<?xml")) << svg->substr(0, 80);
  EXPECT_NE(svg->find("per-key: boundary-burst at 20/1s, limit 10/1s, burst 20"),
            std::string::npos);
  EXPECT_EQ(Count(*svg, "class=\"series\""), 5u);  // every algorithm, the limit's own included
  EXPECT_NE(svg->find("data-algorithm=\"gcra\""), std::string::npos);
  // The buckets' bound B + r·W = 20 + 10.
  EXPECT_NE(svg->find("B + r·W = 30"), std::string::npos);
}

TEST(RenderLimitChart, WindowLimitsUseTheirLimitAsBurst) {
  const Limit l =
      *Limit::Create(LimitSpec::Window(Algorithm::kFixedWindow, 100, std::chrono::minutes(1)));
  EXPECT_EQ(ChartLimitOf(l).burst, 100);
  const Result<std::string> svg = RenderLimitChart(l, "w");
  ASSERT_TRUE(svg.ok()) << svg.status().message();
  EXPECT_NE(svg->find("limit 100 (windows)"), std::string::npos);
}

TEST(RenderLimitChart, RefusesLimitsTooLargeToSimulateCheaply) {
  const Limit big = *Limit::Create(
      LimitSpec::Window(Algorithm::kFixedWindow, kMaxChartRequests, std::chrono::hours(1)));
  const Result<std::string> svg = RenderLimitChart(big, "big");
  ASSERT_FALSE(svg.ok());
  EXPECT_EQ(svg.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(svg.status().message().find("caudal simulate --limit 200000/1h --burst 200000 "
                                        "--pattern boundary-burst --svg chart.svg"),
            std::string::npos)
      << svg.status().message();
  // One window of a limit that three would not fit in is still drawn.
  const Limit mid = *Limit::Create(
      LimitSpec::Window(Algorithm::kFixedWindow, kMaxChartRequests / 5, std::chrono::hours(1)));
  EXPECT_TRUE(RenderLimitChart(mid, "mid").ok());
}

}  // namespace
}  // namespace caudal::simulate
