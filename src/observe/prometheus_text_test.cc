#include "observe/prometheus_text.h"

#include <gtest/gtest.h>

#include <string>

namespace caudal {
namespace {

constexpr MetricDef kLabelled{MetricId::kConfigReloads,
                              "test_things_total",
                              MetricType::kCounter,
                              {"kind", "reason"},
                              "Things.\nBy kind \\ reason."};
constexpr MetricDef kPlain{
    MetricId::kOverLimitCacheHits, "test_level", MetricType::kGauge, {}, "A level."};
constexpr MetricDef kLatency{MetricId::kDecisionDuration,
                             "test_duration_seconds",
                             MetricType::kHistogram,
                             {"api"},
                             "Durations."};

TEST(PrometheusText, WritesAFamilyFromItsRowWithTheRowsLabelNames) {
  PrometheusText text;
  text.Family(kLabelled);
  text.Sample({"a", "b"}, 3);
  text.Sample(std::vector<std::string>{"c", "d"}, 18446744073709551615u);
  text.Family(kPlain);
  text.Sample({}, 0);
  EXPECT_EQ(std::move(text).Take(),
            "# HELP test_things_total Things.\\nBy kind \\\\ reason.\n"
            "# TYPE test_things_total counter\n"
            "test_things_total{kind=\"a\",reason=\"b\"} 3\n"
            "test_things_total{kind=\"c\",reason=\"d\"} 18446744073709551615\n"
            "# HELP test_level A level.\n"
            "# TYPE test_level gauge\n"
            "test_level 0\n");
}

TEST(PrometheusText, EscapesBackslashQuoteAndNewlineInLabelValues) {
  PrometheusText text;
  text.Family(kLabelled);
  text.Sample({"x\\y\"z\nw", "plain"}, 1);
  const std::string out = std::move(text).Take();
  EXPECT_NE(out.find("test_things_total{kind=\"x\\\\y\\\"z\\nw\",reason=\"plain\"} 1\n"),
            std::string::npos)
      << out;
}

TEST(PrometheusText, WritesAHistogramsBucketsInSecondsThenSumAndCount) {
  LatencyHistogram h;
  h.Observe(Micros(50));         // on the first bound: counted in it
  h.Observe(Micros(51));         // past it
  h.Observe(Micros(3'000'000));  // past the last: +Inf only
  h.Observe(Micros(-5));         // a clock step back counts as no time
  PrometheusText text;
  text.Family(kLatency);
  text.Histogram({"http"}, h.Read());
  const std::string out = std::move(text).Take();
  for (const char* line : {
           "# TYPE test_duration_seconds histogram\n",
           "test_duration_seconds_bucket{api=\"http\",le=\"0.000050\"} 2\n",
           "test_duration_seconds_bucket{api=\"http\",le=\"0.000100\"} 3\n",
           "test_duration_seconds_bucket{api=\"http\",le=\"1.000000\"} 3\n",
           "test_duration_seconds_bucket{api=\"http\",le=\"+Inf\"} 4\n",
           "test_duration_seconds_sum{api=\"http\"} 3.000101\n",
           "test_duration_seconds_count{api=\"http\"} 4\n",
       }) {
    EXPECT_NE(out.find(line), std::string::npos) << line << "\n" << out;
  }
  EXPECT_EQ(out.find("_bucket{api=\"http\",le=\"0.000250\"} 2"), std::string::npos) << out;
}

TEST(PrometheusText, AHistogramWithoutLabelsHasOnlyLeOnItsBuckets) {
  LatencyHistogram h;
  h.Observe(Micros(700));
  PrometheusText text;
  text.Family(MetricOf(MetricId::kStoreDuration));
  text.Histogram({}, h.Read());
  const std::string out = std::move(text).Take();
  EXPECT_NE(out.find("caudal_store_duration_seconds_bucket{le=\"0.001000\"} 1\n"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("caudal_store_duration_seconds_sum 0.000700\n"), std::string::npos) << out;
  EXPECT_NE(out.find("caudal_store_duration_seconds_count 1\n"), std::string::npos) << out;
}

}  // namespace
}  // namespace caudal
