// Dimensions through the engine: each limit consumes its own dimension's cost (or the sum of
// several), all-or-nothing across every limit of every policy; a dimension a request does not
// name costs 0; bad costs are refused and charge nothing; a reservation settles per dimension,
// each giving back or overdrawing on its own.
#include <gtest/gtest.h>

#include "caudal/engine/engine.h"
#include "support/fake_store.h"
#include "support/manual_clock.h"

namespace caudal {
namespace {

using std::chrono::hours;
using std::chrono::minutes;
using std::chrono::seconds;
using testing::FakeStore;

Limit DimensionBucket(int64_t capacity, Rate refill, std::vector<std::string> dimension = {}) {
  LimitSpec spec = LimitSpec::Bucket(Algorithm::kTokenBucket, capacity, refill);
  spec.dimension = std::move(dimension);
  auto l = Limit::Create(spec);
  EXPECT_TRUE(l.ok()) << l.status().ToString();
  return *l;
}

Limit Window(int64_t limit, Micros window, std::vector<std::string> dimension = {}) {
  LimitSpec spec = LimitSpec::Window(Algorithm::kFixedWindow, limit, window);
  spec.dimension = std::move(dimension);
  return *Limit::Create(spec);
}

// Per API key: 60 requests a minute, 100,000 input and 50,000 output tokens a minute, $20 a day
// (micro-dollars), 10 million tokens a month (input and output together, a fixed window of 30
// days here).
PolicySpec Gateway() {
  PolicySpec s;
  s.name = "gateway";
  s.identity = {"api_key"};
  s.limits = {DimensionBucket(60, {60, minutes(1)}),
              DimensionBucket(100'000, {100'000, minutes(1)}, {"input_tokens"}),
              DimensionBucket(50'000, {50'000, minutes(1)}, {"output_tokens"}),
              Window(20'000'000, hours(24), {"usd_micros"}),
              Window(10'000'000, hours(24 * 30), {"input_tokens", "output_tokens"})};
  return s;
}

class DimensionTest : public ::testing::Test {
 protected:
  DimensionTest() : store_(clock_), engine_(store_, clock_, {}), other_(store_, clock_, {}) {}

  void Install(std::vector<PolicySpec> specs) {
    auto set = PolicySet::Create(std::move(specs), {});
    ASSERT_TRUE(set.ok()) << set.status().ToString();
    ASSERT_TRUE(engine_.SetPolicies(*set).ok());
    ASSERT_TRUE(other_.SetPolicies(*set).ok());
  }

  Result<CheckResult> Check(Costs costs, bool refund = false) {
    return engine_.Check({.descriptors = {{"api_key", "k"}},
                          .cost = std::nullopt,
                          .costs = costs,
                          .refund = refund});
  }

  // What each limit of the policy has left, by a check costing nothing in any dimension.
  std::vector<int64_t> Remaining() {
    auto r = engine_.Check({.descriptors = {{"api_key", "k"}},
                            .cost = std::nullopt,
                            .costs = Costs{{.dimension = "requests", .units = 0}}});
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    std::vector<int64_t> out;
    if (!r.ok()) return out;
    for (const Decision& d : r->results[0].decisions) out.push_back(d.remaining);
    return out;
  }

  ManualClock clock_;
  FakeStore store_;
  Engine engine_;
  Engine other_;  // another instance on the same store
};

TEST_F(DimensionTest, EachLimitConsumesItsOwnDimensionAndASumCountsBoth) {
  Install({Gateway()});
  auto r =
      Check({{"requests", 1}, {"input_tokens", 812}, {"output_tokens", 300}, {"usd_micros", 2400}});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_TRUE(r->allowed());
  const PolicyResult& p = r->results[0];
  EXPECT_EQ(p.cost, 1);
  EXPECT_EQ(p.costs, (std::vector<int64_t>{1, 812, 300, 2400, 1112}));
  EXPECT_EQ(Remaining(), (std::vector<int64_t>{59, 100'000 - 812, 50'000 - 300, 20'000'000 - 2400,
                                               10'000'000 - 1112}));
}

TEST_F(DimensionTest, ADimensionNotNamedCostsNothingAndCostIsTheRequestsDimension) {
  Install({Gateway()});
  ASSERT_TRUE(Check({{"input_tokens", 10}})->allowed());  // no requests: 0 of them
  EXPECT_EQ(Remaining(), (std::vector<int64_t>{60, 99'990, 50'000, 20'000'000, 9'999'990}));
  auto r = engine_.Check({.descriptors = {{"api_key", "k"}}, .cost = 2});
  ASSERT_TRUE(r.ok() && r->allowed());
  EXPECT_EQ(Remaining(), (std::vector<int64_t>{58, 99'990, 50'000, 20'000'000, 9'999'990}));
  // Neither cost nor costs: the policy's default cost, in requests only.
  ASSERT_TRUE(engine_.Check({.descriptors = {{"api_key", "k"}}, .cost = std::nullopt})->allowed());
  EXPECT_EQ(Remaining()[0], 57);
}

TEST_F(DimensionTest, ARefusalInOneDimensionChargesNothingInAny) {
  Install({Gateway()});
  ASSERT_TRUE(Check({{"requests", 1}, {"output_tokens", 49'990}})->allowed());
  const std::vector<int64_t> before = Remaining();
  auto r = Check({{"requests", 1}, {"input_tokens", 500}, {"output_tokens", 11}});
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(r->allowed());
  const PolicyResult& p = r->results[0];
  EXPECT_TRUE(p.decisions[0].allowed());
  EXPECT_TRUE(p.decisions[1].allowed());
  EXPECT_FALSE(p.decisions[2].allowed());  // output tokens: 10 left, 11 asked
  EXPECT_GT(r->retry_after, Micros(0));
  EXPECT_EQ(Remaining(), before);
  // A cost of 0 in the refusing dimension passes: that dimension is not asked for anything.
  EXPECT_TRUE(Check({{"requests", 1}, {"input_tokens", 500}})->allowed());
}

TEST_F(DimensionTest, AllOrNothingAcrossPoliciesOfDifferentDimensions) {
  PolicySpec tenant;
  tenant.name = "tenant-money";
  tenant.identity = {"tenant"};
  tenant.limits = {Window(1000, hours(24), {"usd_micros"})};
  Install({Gateway(), tenant});
  auto r = engine_.Check({.descriptors = {{"api_key", "k"}, {"tenant", "t"}},
                          .cost = std::nullopt,
                          .costs = Costs{{"requests", 1}, {"usd_micros", 1001 - 1}}});
  ASSERT_TRUE(r.ok() && r->allowed());
  auto refused = engine_.Check({.descriptors = {{"api_key", "k"}, {"tenant", "t"}},
                                .cost = std::nullopt,
                                .costs = Costs{{"requests", 1}, {"usd_micros", 2}}});
  ASSERT_TRUE(refused.ok());
  EXPECT_FALSE(refused->allowed());
  ASSERT_EQ(refused->Refused().size(), 1u);
  EXPECT_EQ(refused->Refused()[0]->name, "tenant-money");
  EXPECT_EQ(Remaining()[0], 59);  // the gateway's request was not charged either
}

TEST_F(DimensionTest, ARefundGivesEachDimensionBackItsOwn) {
  Install({Gateway()});
  ASSERT_TRUE(Check({{"requests", 1}, {"input_tokens", 900}, {"usd_micros", 50}})->allowed());
  ASSERT_TRUE(Check({{"input_tokens", 400}, {"usd_micros", 50}}, /*refund=*/true)->allowed());
  EXPECT_EQ(Remaining(), (std::vector<int64_t>{59, 99'500, 50'000, 20'000'000, 10'000'000 - 500}));
}

TEST_F(DimensionTest, BadCostsAreRefusedNamingTheFieldAndChargeNothing) {
  Install({Gateway()});
  const std::vector<int64_t> before = Remaining();
  struct Case {
    CheckRequest request;
    std::string message;
  };
  const Descriptors k = {{"api_key", "k"}};
  std::vector<Case> cases = {
      {{.descriptors = k, .cost = 1, .costs = Costs{{"input_tokens", 1}}}, "cost and costs"},
      {{.descriptors = k, .cost = std::nullopt, .costs = Costs{}}, "costs: expected 1 to 16"},
      {{.descriptors = k, .cost = std::nullopt, .costs = Costs{{"images", 1}}},
       "costs.images: no limit counts"},
      {{.descriptors = k, .cost = std::nullopt, .costs = Costs{{"input_tokens", -1}}},
       "costs.input_tokens: expected"},
      {{.descriptors = k, .cost = std::nullopt, .costs = Costs{{"input_tokens", kMaxCost + 1}}},
       "costs.input_tokens"},
      {{.descriptors = k,
        .cost = std::nullopt,
        .costs = Costs{{"input_tokens", 1}, {"input_tokens", 2}}},
       "given twice"},
      // Above a capacity: it could never pass (output tokens hold 50,000).
      {{.descriptors = k, .cost = std::nullopt, .costs = Costs{{"output_tokens", 50'001}}},
       "could never pass"},
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    auto r = engine_.Check(cases[i].request);
    ASSERT_FALSE(r.ok()) << i;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << i;
    EXPECT_EQ(r.status().reason(), engine_reason::kInvalidCost) << i;
    EXPECT_NE(r.status().message().find(cases[i].message), std::string::npos)
        << i << ": " << r.status().message();
  }
  EXPECT_EQ(Remaining(), before);
}

TEST_F(DimensionTest, AReservationSettlesEachDimensionOnItsOwn) {
  Install({Gateway()});
  // The usual flow: reserve a request, the prompt's counted tokens and max_tokens of output.
  auto r = engine_.Check({.descriptors = {{"api_key", "k"}},
                          .cost = std::nullopt,
                          .costs = Costs{{"requests", 1},
                                         {"input_tokens", 812},
                                         {"output_tokens", 4000},
                                         {"usd_micros", 9000}},
                          .reserve = seconds(60)});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_TRUE(r->allowed());
  ASSERT_FALSE(r->reservation.empty());
  EXPECT_EQ(Remaining(), (std::vector<int64_t>{59, 99'188, 46'000, 19'991'000, 9'995'188}));
  // The model used fewer output tokens, and the price came out higher than estimated: output
  // gives 3,700 back, money overdraws by 600, requests and input stay as reserved.
  auto s = other_.Settle(
      r->reservation,
      Costs{{"requests", 1}, {"input_tokens", 812}, {"output_tokens", 300}, {"usd_micros", 9600}});
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->outcome, Reservation::kSettled);
  ASSERT_EQ(s->limits.size(), 5u);
  EXPECT_EQ(s->limits[3].decision.overrun, 600);
  EXPECT_EQ(Remaining(), (std::vector<int64_t>{59, 99'188, 49'700, 19'990'400, 9'998'888}));
  // The same settle again repeats; another cost in any dimension conflicts, changing nothing.
  auto again = engine_.Settle(
      r->reservation,
      Costs{{"requests", 1}, {"input_tokens", 812}, {"output_tokens", 300}, {"usd_micros", 9600}});
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->outcome, Reservation::kRepeated);
  auto other = engine_.Settle(
      r->reservation,
      Costs{{"requests", 1}, {"input_tokens", 812}, {"output_tokens", 301}, {"usd_micros", 9600}});
  ASSERT_TRUE(other.ok());
  EXPECT_EQ(other->outcome, Reservation::kConflict);
  EXPECT_EQ(Remaining(), (std::vector<int64_t>{59, 99'188, 49'700, 19'990'400, 9'998'888}));
  // Unknown dimensions in a settle are refused before anything is asked.
  auto bad = engine_.Settle(r->reservation, Costs{{"images", 1}});
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().reason(), engine_reason::kInvalidCost);
}

TEST_F(DimensionTest, DebtFromAnOverrunDelaysTheNextRequestUntilItIsPaidExactly) {
  PolicySpec s;
  s.name = "out";
  s.identity = {"api_key"};
  s.limits = {DimensionBucket(1000, {1000, minutes(1)}, {"output_tokens"})};
  Install({s});
  auto r = engine_.Check({.descriptors = {{"api_key", "k"}},
                          .cost = std::nullopt,
                          .costs = Costs{{"output_tokens", 1000}},
                          .reserve = seconds(60)});
  ASSERT_TRUE(r.ok() && r->allowed());
  // 1,300 used where 1,000 were reserved: 300 of debt, paid back at 1,000 a minute (18 s).
  auto settled = engine_.Settle(r->reservation, Costs{{"output_tokens", 1300}});
  ASSERT_TRUE(settled.ok() && settled->outcome == Reservation::kSettled);
  auto next = engine_.Check({.descriptors = {{"api_key", "k"}},
                             .cost = std::nullopt,
                             .costs = Costs{{"output_tokens", 1}}});
  ASSERT_TRUE(next.ok());
  EXPECT_FALSE(next->allowed());
  // 301 tokens to accrue at 1 per 60 ms: 18.06 s.
  EXPECT_EQ(next->retry_after, std::chrono::milliseconds(18'060));
  clock_.Advance(std::chrono::milliseconds(18'059));
  EXPECT_FALSE(engine_
                   .Check({.descriptors = {{"api_key", "k"}},
                           .cost = std::nullopt,
                           .costs = Costs{{"output_tokens", 1}}})
                   ->allowed());
  clock_.Advance(std::chrono::milliseconds(1));
  EXPECT_TRUE(engine_
                  .Check({.descriptors = {{"api_key", "k"}},
                          .cost = std::nullopt,
                          .costs = Costs{{"output_tokens", 1}}})
                  ->allowed());
}

TEST_F(DimensionTest, TheSetKnowsEveryDimensionItsLimitsAndTiersCount) {
  PolicySpec p = Gateway();
  p.overrides.push_back(
      {.match = {{"plan", "pro"}}, .limits = {DimensionBucket(10, {10, seconds(1)}, {"images"})}});
  auto set = PolicySet::Create({p}, {});
  ASSERT_TRUE(set.ok()) << set.status().ToString();
  EXPECT_EQ(std::vector<std::string>((*set)->dimensions().begin(), (*set)->dimensions().end()),
            (std::vector<std::string>{"images", "input_tokens", "output_tokens", "requests",
                                      "usd_micros"}));
}

TEST_F(DimensionTest, ThePolicysDefaultCostBindsOnlyTheLimitsThatCountRequests) {
  PolicySpec p;
  p.name = "p";
  p.identity = {"api_key"};
  p.cost = 5;
  p.limits = {DimensionBucket(10, {10, seconds(1)}),
              DimensionBucket(3, {3, seconds(1)}, {"images"})};
  EXPECT_TRUE(PolicySet::Create({p}, {}).ok());  // 3 images < 5: not the default cost's concern
  p.limits[1] = DimensionBucket(3, {3, seconds(1)}, {"images", "requests"});
  EXPECT_FALSE(PolicySet::Create({p}, {}).ok());
}

}  // namespace
}  // namespace caudal
