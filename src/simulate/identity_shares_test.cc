// The identity shares model (`caudal simulate --share`): what it admits per tenant against the
// max-min and weighted parts it should, within the capacity's bound, and the tenants it refuses.
#include "simulate/identity_shares.h"

#include <gtest/gtest.h>

namespace caudal::simulate {
namespace {

using std::chrono::seconds;

IdentitySharesOptions Options(int64_t instances = 1) {
  return {.limit = *Limit::Create(
              LimitSpec::Bucket(Algorithm::kTokenBucket, 1'000, {1'000, seconds(1)})),
          .window = seconds(1),
          .instances = instances,
          .duration = seconds(10)};
}

ShareTenant Tenant(std::string_view text) { return *ParseShareTenant(text); }

TEST(IdentityShares, ACalmTenantKeepsWhatItAsksAndTheFloodHasTheRest) {
  for (int64_t instances : {1, 3}) {
    const Result<SharesRun> run =
        RunIdentityShares({Tenant("flood=10000/1s"), Tenant("calm=250/1s")}, Options(instances));
    ASSERT_TRUE(run.ok()) << run.status().ToString();
    const TenantRun& flood = run->tenants[0];
    const TenantRun& calm = run->tenants[1];
    EXPECT_EQ(calm.refused, 0) << instances;
    EXPECT_EQ(calm.admitted, 2'500) << instances;
    EXPECT_LE(run->admitted, run->bound);
    EXPECT_EQ(run->bound, 1'000 + 1'000 * 11);
    // The flood's part in the second half: what calm leaves (it asks a tenth more, and a unit
    // per instance), within 5%.
    const double flood_per_s = static_cast<double>(flood.admitted_late) / 5.0;
    EXPECT_NEAR(flood_per_s, 1'000.0 - 277.0, 50.0) << instances;
    EXPECT_GT(flood.share, calm.share);
    // What max-min says each should have, by the offered rates: calm its 250, flood the rest.
    EXPECT_EQ(calm.expected, 250);
    EXPECT_EQ(flood.expected, 750);
    // A point a second, adding up to what was admitted.
    ASSERT_EQ(calm.series.size(), 10u);
    int64_t sum = 0;
    for (const int64_t v : calm.series) sum += v;
    EXPECT_EQ(sum, calm.admitted);
    EXPECT_EQ(calm.series[9], 250);
    EXPECT_EQ(flood.offered_series[9], 10'000);
  }
}

TEST(IdentityShares, WeightsDivideAFloodedCapacityInProportion) {
  const Result<SharesRun> run =
      RunIdentityShares({Tenant("gold=5000/1s*3"), Tenant("basic=5000/1s")}, Options());
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  EXPECT_EQ(run->tenants[0].weight, 3);
  EXPECT_NEAR(static_cast<double>(run->tenants[0].admitted_late) / 5.0, 750.0, 40.0);
  EXPECT_NEAR(static_cast<double>(run->tenants[1].admitted_late) / 5.0, 250.0, 20.0);
  EXPECT_EQ(run->tenants[0].expected, 750);
  EXPECT_EQ(run->tenants[1].expected, 250);
  const std::string svg = RenderSharesSvg(*run, "gold & basic");
  EXPECT_NE(svg.find("<svg"), std::string::npos);
  EXPECT_NE(svg.find("gold &amp; basic"), std::string::npos) << "the title, escaped";
  EXPECT_EQ(svg.find("gold & basic"), std::string::npos);
  EXPECT_NE(svg.find(">basic</text>"), std::string::npos) << "a tenant in the legend";
}

TEST(IdentityShares, ALateTenantTakesItsHalf) {
  const Result<SharesRun> run =
      RunIdentityShares({Tenant("early=5000/1s"), Tenant("late=5000/1s@5s")}, Options());
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  // The second half starts when late does: within two windows both have half.
  EXPECT_GE(run->tenants[1].admitted_late, 500 * 3);
  EXPECT_LE(run->admitted, run->bound);
}

TEST(IdentityShares, BadTenantsAreRefusedWithTheFlagNamed) {
  EXPECT_FALSE(ParseShareTenant("no-rate").ok());
  EXPECT_FALSE(ParseShareTenant("=10/1s").ok());
  EXPECT_FALSE(ParseShareTenant("a=10/1s*x").ok());
  EXPECT_FALSE(ParseShareTenant("a=10/1s@soon").ok());
  const Result<ShareTenant> t = ParseShareTenant("late=10000/1s@5s*2");
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->name, "late");
  EXPECT_EQ(t->rate.count, 10'000);
  EXPECT_EQ(t->from, seconds(5));
  EXPECT_EQ(t->weight, 2);
  const Result<SharesRun> twice =
      RunIdentityShares({Tenant("a=1/1s"), Tenant("a=2/1s")}, Options());
  ASSERT_FALSE(twice.ok());
  EXPECT_NE(twice.status().message().find("--tenant"), std::string::npos);
  const Result<SharesRun> heavy = RunIdentityShares({Tenant("a=1/1s*5000")}, Options());
  EXPECT_FALSE(heavy.ok());
  const Result<SharesRun> late = RunIdentityShares({Tenant("a=1/1s@20s")}, Options());
  EXPECT_FALSE(late.ok());
}

}  // namespace
}  // namespace caudal::simulate
