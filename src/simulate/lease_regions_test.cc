// Regions with leases from one store beside regions replicating (SimulationOptions::leases), on
// the same traffic, latency and partition.
#include "simulate/lease_regions.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>

#include "simulate/report.h"
#include "simulate/simulation_test_util.h"
#include "simulate/simulator.h"

namespace caudal::simulate {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using ::testing::HasSubstr;

constexpr Rate kRegionLimit{.count = 1'200, .period = seconds(1)};

Traffic Poisson(int64_t per_second, Micros duration = seconds(20)) {
  return *Generate({.pattern = Pattern::kPoisson,
                    .limit = kRegionLimit,
                    .rate = {per_second, seconds(1)},
                    .duration = duration,
                    .seed = 7});
}

SimulationOptions ThreeRegions(Micros one_way) {
  return {.limit = kRegionLimit,
          .burst = 1'200,
          .regions = 3,
          .replication_lag = one_way,
          .leases = true};
}

// 2,000 a second: each region's share (1,200 · 0.3 / 3 = 120 units) covers three round trips of
// its demand, as docs/scaling.md says it should (at 3,000 a second it does not, and 6% of the
// decisions wait a round trip).
TEST(LeaseRegions, LeasesHoldTheBoundWhereReplicationDoesNot) {
  const Simulation sim = Sim(Poisson(2'000), ThreeRegions(milliseconds(40)));
  for (const Algorithm a : {Algorithm::kTokenBucket, Algorithm::kGcra}) {
    const AlgorithmRun& run = RunOf(sim, a);
    ASSERT_TRUE(run.leases) << AlgorithmName(a);
    // Replication: each region admits as if alone, past what one bucket allows over the run.
    EXPECT_GT(run.admitted, 1'200 + 1'200 * 20);
    EXPECT_LE(run.leases->admitted, 1'200 + 1'200 * 21) << "B + r·(T + ttl)";
    EXPECT_TRUE(run.leases_within_bound()) << run.leases->max_in_window << " " << run.lease_bound;
    EXPECT_EQ(run.lease_bound, 1'200 + 1'200 + 1'200) << "B + r·(W + ttl)";
    // What one store admits of 20 s above the rate: B + r·T, nearly all of it.
    EXPECT_GE(run.leases->admitted * 100, (1'200 + 1'200 * 20) * 95) << run.leases->admitted;
    EXPECT_GE(run.leases->local * 100, run.leases->offered * 99) << "decided in the region";
    EXPECT_EQ(run.leases->p99, Micros(0));
  }
  // Not leased: every decision waits the round trip, and is exact.
  const AlgorithmRun& log = RunOf(sim, Algorithm::kSlidingWindowLog);
  ASSERT_TRUE(log.leases);
  EXPECT_FALSE(log.within_bound());
  EXPECT_EQ(log.leases->max_in_window, 1'200);
  EXPECT_EQ(log.leases->local, 0);
  EXPECT_EQ(log.leases->p99, milliseconds(80));
}

TEST(LeaseRegions, UnderTheLimitLeasesAdmitEverythingLocally) {
  const Simulation sim = Sim(Poisson(900), ThreeRegions(milliseconds(40)));
  const AlgorithmRun& run = RunOf(sim, Algorithm::kTokenBucket);
  ASSERT_TRUE(run.leases);
  EXPECT_EQ(run.leases->admitted, run.leases->offered);
  EXPECT_EQ(run.leases->failed, 0);
  EXPECT_GE(run.leases->local * 100, run.leases->offered * 99);
}

TEST(LeaseRegions, ACutOffRegionSpendsItsLeasesThenTheFailureModeAndTheBoundHolds) {
  SimulationOptions o = ThreeRegions(milliseconds(40));
  o.partitions = {{.region = 0, .from = Micros(seconds(5)), .until = Micros(seconds(10))}};
  const Traffic t = Poisson(2'000);
  const Simulation cut = Sim(t, o);
  const AlgorithmRun& run = RunOf(cut, Algorithm::kTokenBucket);
  ASSERT_TRUE(run.leases);
  EXPECT_TRUE(run.leases_within_bound());
  // Region 0 gets a third of 5 s at 2,000 a second; all but what its leases held fail, and but
  // what it refuses itself while taking shares, until its renewal is three round trips late (at
  // most ttl/2 and three round trips, 740 ms, of its 667 a second).
  EXPECT_GT(run.leases->failed, 3'333 - 120 - 667 * 740 / 1'000 - 100);
  EXPECT_LE(run.leases->failed, 3'333 + 100);
  // Replication cut off: region 0 decides alone meanwhile, the others without its writes.
  const Simulation whole = Sim(t, ThreeRegions(milliseconds(40)));
  EXPECT_GT(RunOf(whole, Algorithm::kTokenBucket).leases->admitted, run.leases->admitted - 1);
}

TEST(LeaseRegions, APartitionDelaysReplicationUntilTheHeal) {
  // Two regions, a request every 150 ms between them, 100 ms lag: within the bound; with
  // region 0 cut off for a minute, each decides alone and the pair admits past it.
  const Traffic t = *Generate({.pattern = Pattern::kSteady,
                               .limit = {100, std::chrono::minutes(1)},
                               .rate = {400, std::chrono::minutes(1)},
                               .duration = std::chrono::minutes(5)});
  SimulationOptions o{.limit = {100, std::chrono::minutes(1)},
                      .burst = 100,
                      .regions = 2,
                      .replication_lag = milliseconds(100)};
  EXPECT_TRUE(RunOf(Sim(t, o), Algorithm::kFixedWindow).within_bound());
  o.partitions = {{.region = 0,
                   .from = Micros(std::chrono::minutes(2)),
                   .until = Micros(std::chrono::minutes(3))}};
  EXPECT_FALSE(RunOf(Sim(t, o), Algorithm::kFixedWindow).within_bound());
}

TEST(LeaseRegions, TheReportShowsBothModels) {
  const Simulation sim = Sim(Poisson(2'000, seconds(5)), ThreeRegions(milliseconds(40)));
  const std::string table = RenderTable(sim);
  EXPECT_THAT(table, HasSubstr("leases: one store, each region 40ms from it"));
  EXPECT_THAT(table, HasSubstr("B + r·(W + ttl)"));
  const std::string json = RenderJson(sim);
  EXPECT_THAT(json, HasSubstr("\"within_bound\": false, \"leases\": {\"admitted\": "));
  EXPECT_THAT(json, HasSubstr("\"p99_us\": 80000"));
}

TEST(LeaseRegions, RefusesLeasesWithoutAWayToTheStoreAndPartitionsOfNoRegion) {
  const Traffic t = Poisson(100, seconds(1));
  SimulationOptions o = ThreeRegions(milliseconds(40));
  o.replication_lag = std::nullopt;
  EXPECT_THAT(Simulate(t, o).status().message(), HasSubstr("leases: need a finite"));
  o = ThreeRegions(milliseconds(40));
  o.lease_ttl = Nanos(0);
  EXPECT_FALSE(Simulate(t, o).ok());
  o = ThreeRegions(milliseconds(40));
  o.partitions = {{.region = 3, .from = Micros(0), .until = Micros(1)}};
  EXPECT_THAT(Simulate(t, o).status().message(), HasSubstr("partition: no region 3"));
  o.partitions = {{.region = 0, .from = Micros(2), .until = Micros(1)}};
  EXPECT_FALSE(Simulate(t, o).ok());
}

}  // namespace
}  // namespace caudal::simulate
