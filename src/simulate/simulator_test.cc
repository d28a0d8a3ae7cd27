#include "simulate/simulator.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>

#include "simulate/simulation_test_util.h"

namespace caudal::simulate {
namespace {

using std::chrono::minutes;
using std::chrono::seconds;
using ::testing::HasSubstr;

constexpr Rate kLimit{.count = 100, .period = minutes(1)};

Traffic BoundaryBurst() {
  return *Generate({.pattern = Pattern::kBoundaryBurst,
                    .limit = kLimit,
                    .rate = {200, minutes(1)},
                    .duration = minutes(10)});
}

TEST(Simulator, BoundaryBurstDoublesTheFixedWindowAndKeepsTheBucketsBounded) {
  const Traffic t = BoundaryBurst();
  const Simulation sim = Sim(t, {.limit = kLimit, .burst = 100});
  ASSERT_EQ(sim.runs.size(), kAllAlgorithms.size());
  const AlgorithmRun& fixed = RunOf(sim, Algorithm::kFixedWindow);
  EXPECT_EQ(fixed.max_in_window, 200);
  EXPECT_EQ(fixed.bound, 100);
  EXPECT_FALSE(fixed.within_bound());
  const AlgorithmRun& log = RunOf(sim, Algorithm::kSlidingWindowLog);
  EXPECT_EQ(log.max_in_window, 100);
  for (Algorithm a : {Algorithm::kTokenBucket, Algorithm::kGcra}) {
    const AlgorithmRun& b = RunOf(sim, a);
    EXPECT_EQ(b.bound, 200);
    EXPECT_LE(b.max_in_window, b.bound);
  }
  for (const AlgorithmRun& r : sim.runs) {
    EXPECT_EQ(r.offered, static_cast<int64_t>(t.requests.size()));
    EXPECT_EQ(r.admitted + r.rejected, r.offered);
  }
}

TEST(Simulator, TokenBucketAndGcraAgreeOnEveryPattern) {
  for (Pattern p : kAllPatterns) {
    const Traffic t = *Generate({.pattern = p,
                                 .limit = kLimit,
                                 .rate = {170, minutes(1)},
                                 .duration = minutes(7),
                                 .seed = 5});
    const Simulation sim = Sim(t, {.limit = kLimit, .burst = 30, .chart_points = 50});
    const AlgorithmRun& tb = RunOf(sim, Algorithm::kTokenBucket);
    const AlgorithmRun& gcra = RunOf(sim, Algorithm::kGcra);
    EXPECT_EQ(tb.admitted, gcra.admitted) << PatternName(p);
    EXPECT_EQ(tb.max_in_window, gcra.max_in_window) << PatternName(p);
    EXPECT_EQ(tb.series, gcra.series) << PatternName(p);
    EXPECT_EQ(tb.bound, 130);
    EXPECT_LE(tb.max_in_window, tb.bound) << PatternName(p);
    EXPECT_LE(RunOf(sim, Algorithm::kSlidingWindowLog).max_in_window, 100) << PatternName(p);
  }
}

TEST(Simulator, SeriesPeakIsTheMaxInWindow) {
  const Traffic t = *Generate({.pattern = Pattern::kPoisson,
                               .limit = kLimit,
                               .rate = {300, minutes(1)},
                               .duration = minutes(10),
                               .seed = 3});
  const Simulation sim = Sim(t, {.limit = kLimit, .burst = 100, .chart_points = 120});
  ASSERT_EQ(sim.series_times.size(), 120u);
  EXPECT_EQ(sim.series_times.back(), sim.end);
  EXPECT_TRUE(std::is_sorted(sim.series_times.begin(), sim.series_times.end()));
  for (const AlgorithmRun& r : sim.runs) {
    ASSERT_EQ(r.series.size(), 120u);
    EXPECT_EQ(*std::max_element(r.series.begin(), r.series.end()), r.max_in_window)
        << AlgorithmName(r.algorithm);
  }
}

TEST(Simulator, SeriesShowsTheFixedWindowJumpAtTheBoundary) {
  const Traffic t = BoundaryBurst();
  const Simulation sim = Sim(t, {.limit = kLimit, .burst = 100, .chart_points = 600});
  const AlgorithmRun& fixed = RunOf(sim, Algorithm::kFixedWindow);
  // Each point covers one second; the burst ends 0.6 s after the boundary at t = 60 s.
  size_t first_at_200 = 0;
  while (first_at_200 < fixed.series.size() && fixed.series[first_at_200] < 200) ++first_at_200;
  ASSERT_LT(first_at_200, fixed.series.size());
  EXPECT_GE(sim.series_times[first_at_200], seconds(60));
  EXPECT_LE(sim.series_times[first_at_200], seconds(62));
}

TEST(Simulator, KeysHaveTheirOwnState) {
  Traffic t;
  t.keys = {"a", "b"};
  for (int i = 0; i < 20; ++i)
    t.requests.push_back({.at_us = i, .key = static_cast<uint32_t>(i % 2)});
  t.end = Micros(19);
  const Simulation sim = Sim(t, {.limit = {10, seconds(1)}, .burst = 10});
  for (const AlgorithmRun& r : sim.runs) {
    EXPECT_EQ(r.admitted, 20) << AlgorithmName(r.algorithm);
    EXPECT_EQ(r.max_in_window, 10) << AlgorithmName(r.algorithm);
  }
}

TEST(Simulator, CostsCountInUnitsAndOversizedRequestsNeverPass) {
  Traffic t;
  t.keys = {"k"};
  t.requests = {{.at_us = 0, .key = 0, .cost = 4},
                {.at_us = 1, .key = 0, .cost = 11},
                {.at_us = 2, .key = 0, .cost = 0},
                {.at_us = 3, .key = 0, .cost = 6}};
  t.end = Micros(3);
  const Simulation sim = Sim(t, {.limit = {10, seconds(1)}, .burst = 10});
  for (const AlgorithmRun& r : sim.runs) {
    EXPECT_EQ(r.admitted, 3) << AlgorithmName(r.algorithm);  // 4, the peek, 6
    EXPECT_EQ(r.rejected, 1) << AlgorithmName(r.algorithm);
    EXPECT_EQ(r.max_in_window, 10) << AlgorithmName(r.algorithm);
  }
}

TEST(Simulator, SkipsTheLogAboveItsCap) {
  const Rate big{kMaxLogLimit + 1, seconds(1)};
  const Traffic t = *Generate({.pattern = Pattern::kSteady,
                               .limit = big,
                               .rate = {100, seconds(1)},
                               .duration = seconds(2)});
  const Simulation sim = Sim(t, {.limit = big, .burst = 5});
  EXPECT_EQ(sim.runs.size(), kAllAlgorithms.size() - 1);
  ASSERT_EQ(sim.skipped.size(), 1u);
  EXPECT_THAT(sim.skipped[0], HasSubstr("sliding_window_log: "));
  EXPECT_THAT(sim.skipped[0], HasSubstr("capped at 10000"));
}

// Regions replicating asynchronously, last writer wins (what replicating a store's keys does).

Traffic Steady400() {  // one request every 150 ms, so each of 2 regions writes every 300 ms
  return *Generate({.pattern = Pattern::kSteady,
                    .limit = kLimit,
                    .rate = {400, minutes(1)},
                    .duration = minutes(10)});
}

TEST(Simulator, RegionsThatSeeEveryWriteAtOnceAreOneStore) {
  const Traffic t = *Generate({.pattern = Pattern::kPoisson,
                               .limit = kLimit,
                               .rate = {300, minutes(1)},
                               .duration = minutes(5),
                               .seed = 3});
  const Simulation one = Sim(t, {.limit = kLimit, .burst = 100});
  for (int64_t regions : {2, 3}) {
    const Simulation many =
        Sim(t, {.limit = kLimit, .burst = 100, .regions = regions, .replication_lag = Micros(0)});
    ASSERT_EQ(many.runs.size(), one.runs.size());
    for (size_t i = 0; i < one.runs.size(); ++i) {
      EXPECT_EQ(many.runs[i].admitted, one.runs[i].admitted) << regions;
      EXPECT_EQ(many.runs[i].max_in_window, one.runs[i].max_in_window) << regions;
    }
  }
}

// Each region admits what one store alone would, from the traffic it gets: twice as much in all.
TEST(Simulator, RegionsThatNeverReplicateEachAdmitTheWholeLimit) {
  const Traffic t = Steady400();
  const Simulation one = Sim(t, {.limit = kLimit, .burst = 100});
  const Simulation two =
      Sim(t, {.limit = kLimit, .burst = 100, .regions = 2, .replication_lag = {}});
  for (size_t i = 0; i < one.runs.size(); ++i) {
    EXPECT_TRUE(one.runs[i].within_bound());
    EXPECT_EQ(two.runs[i].max_in_window, 2 * one.runs[i].max_in_window)
        << AlgorithmName(two.runs[i].algorithm);
    EXPECT_FALSE(two.runs[i].within_bound());
  }
}

// Last writer wins drops a replicated write whenever the target region wrote after it was sent:
// once the lag exceeds the time between the regions' writes of a key, replication protects
// nothing, and the regions admit as if they never replicated.
TEST(Simulator, LastWriterWinsProtectsNothingOnceTheLagExceedsTheGapBetweenWrites) {
  const Traffic t = Steady400();
  const Simulation never =
      Sim(t, {.limit = kLimit, .burst = 100, .regions = 2, .replication_lag = {}});
  const Simulation short_lag =
      Sim(t, {.limit = kLimit, .burst = 100, .regions = 2, .replication_lag = Micros(140'000)});
  const Simulation long_lag =
      Sim(t, {.limit = kLimit, .burst = 100, .regions = 2, .replication_lag = Micros(160'000)});
  for (size_t i = 0; i < never.runs.size(); ++i) {
    EXPECT_TRUE(short_lag.runs[i].within_bound()) << AlgorithmName(short_lag.runs[i].algorithm);
    EXPECT_EQ(long_lag.runs[i].max_in_window, never.runs[i].max_in_window);
    EXPECT_EQ(long_lag.runs[i].admitted, never.runs[i].admitted);
  }
}

TEST(Simulator, RefusesInvalidRegions) {
  const Traffic t = Steady400();
  EXPECT_THAT(Simulate(t, {.limit = kLimit, .burst = 1, .regions = 0}).status().message(),
              HasSubstr("regions: expected 1 to 64"));
  EXPECT_FALSE(Simulate(t, {.limit = kLimit, .burst = 1, .regions = kMaxRegions + 1}).ok());
  EXPECT_FALSE(
      Simulate(t, {.limit = kLimit, .burst = 1, .regions = 2, .replication_lag = Micros(-1)}).ok());
}

TEST(Simulator, RefusesInvalidLimits) {
  EXPECT_THAT(ValidateLimit({100, Micros(1500)}).message(), HasSubstr("whole number of milli"));
  EXPECT_THAT(ValidateBurst(0, kLimit).message(), HasSubstr("capacity must be between 1"));
  Traffic t;
  t.keys = {"k"};
  t.requests = {{.at_us = 0}};
  EXPECT_FALSE(Simulate(t, {.limit = kLimit, .burst = 0}).ok());
  EXPECT_FALSE(
      Simulate(t, {.limit = kLimit, .burst = 1, .chart_points = kMaxChartPoints + 1}).ok());
}

}  // namespace
}  // namespace caudal::simulate
