// A config's policies over a trace of costs per dimension (`caudal simulate --config`): every
// limit decides all-or-nothing, a refused request is charged nowhere, and the totals are exact.
#include "simulate/dimension_run.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <boost/json.hpp>
#include <numeric>
#include <sstream>

#include "simulate/dimension_report.h"

namespace caudal::simulate {
namespace {

using std::chrono::minutes;
using std::chrono::seconds;
using ::testing::ContainsRegex;
using ::testing::HasSubstr;
using ::testing::StartsWith;

Limit Window(int64_t limit, Micros window, std::vector<std::string> dimension = {}) {
  LimitSpec spec = LimitSpec::Window(Algorithm::kFixedWindow, limit, window);
  spec.dimension = std::move(dimension);
  const Result<Limit> l = Limit::Create(spec);
  EXPECT_TRUE(l.ok()) << l.status().ToString();
  return *l;
}

PolicySpec Policy(std::string name, std::string identity, std::vector<Limit> limits) {
  PolicySpec spec;
  spec.name = std::move(name);
  spec.identity = {std::move(identity)};
  spec.limits = std::move(limits);
  return spec;
}

std::shared_ptr<const PolicySet> Policies(std::vector<PolicySpec> specs) {
  auto set = PolicySet::Create(std::move(specs), {});
  EXPECT_TRUE(set.ok()) << set.status().ToString();
  return set.ok() ? *set : nullptr;
}

CostTrace Trace(const std::string& csv) {
  std::istringstream in(csv);
  Result<CostTrace> t = ParseCostTraceCsv(in, "t.csv");
  EXPECT_TRUE(t.ok()) << t.status().ToString();
  return t.ok() ? std::move(*t) : CostTrace{};
}

std::vector<std::string> Names(std::span<const std::string> names) {
  return {names.begin(), names.end()};
}

int64_t Sum(const std::vector<int64_t>& v) { return std::accumulate(v.begin(), v.end(), 0LL); }

// Three limits of one dimension each and one of two summed, in one minute-long fixed window
// (from 60 s), the request limit in one-second windows.
std::shared_ptr<const PolicySet> Gateway() {
  return Policies({Policy("gateway", "api_key",
                          {Window(3, seconds(1)), Window(1'000, minutes(1), {"input_tokens"}),
                           Window(500, minutes(1), {"output_tokens"}),
                           Window(1'200, minutes(1), {"input_tokens", "output_tokens"})})});
}

// Row by row (key a unless said), [0] requests ≤ 3/s, [1] input ≤ 1000, [2] output ≤ 500,
// [3] input + output ≤ 1200:
//   60000  400,100   admitted                    a: in 400, out 100, sum 500, 1 request
//   60100  500,300   refused by [3] (1300)       charged nowhere
//   60200  500,-     admitted                    a: in 900, sum 1000, 2 requests
//   60300  200,0     refused by [1] (1100)
//   60400  -,50      admitted                    a: out 150, sum 1050, 3 requests
//   60500  0,0       refused by [0] (4th in 1 s)
//   60600  b 900,200 admitted                    b: in 900, out 200, sum 1100
//   60800  b 200,-   refused by [1] and [3]      (written last: rows replay in time order)
//   61000  100,0     admitted: a new second      a: in 1000, sum 1150
// Had the refused row at 60100 been charged anywhere, the row at 60200 would exceed [1] or [3].
constexpr std::string_view kGatewayTrace =
    "timestamp_ms,key,requests,input_tokens,output_tokens\n"
    "60000,a,1,400,100\n"
    "60100,a,1,500,300\n"
    "60200,a,1,500,\n"
    "60300,a,1,200,0\n"
    "60400,a,1,,50\n"
    "60500,a,1,0,0\n"
    "60600,b,1,900,200\n"
    "61000,a,1,100,0\n"
    "60800,b,1,200,\n";

TEST(DimensionRun, OneRefusingDimensionChargesNothingInTheOthersAndTheTotalsAreExact) {
  const auto set = Gateway();
  const CostTrace trace = Trace(std::string(kGatewayTrace));
  const Result<DimensionRun> run =
      RunDimensions(trace, {.policies = set, .accepted = Names(set->dimensions())});
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  EXPECT_EQ(run->requests, 9);
  EXPECT_EQ(run->admitted, 5);
  EXPECT_EQ(run->refused, 4);
  EXPECT_EQ(run->too_large, 0);

  ASSERT_EQ(run->dimensions.size(), 3u);
  const DimensionTally& requests = run->dimensions[0];
  const DimensionTally& input = run->dimensions[1];
  const DimensionTally& output = run->dimensions[2];
  EXPECT_EQ(requests.dimension, "requests");
  EXPECT_EQ(requests.offered, 9);
  EXPECT_EQ(requests.admitted, 5);
  EXPECT_EQ(input.requests, 8);
  EXPECT_EQ(input.offered, 2'800);
  EXPECT_EQ(input.admitted, 1'900);
  EXPECT_EQ(output.requests, 7);
  EXPECT_EQ(output.offered, 650);
  EXPECT_EQ(output.admitted, 350);
  for (const DimensionTally& d : run->dimensions) {
    EXPECT_TRUE(d.counted) << d.dimension;
    EXPECT_EQ(Sum(d.admitted_series), d.admitted) << d.dimension;
  }

  ASSERT_EQ(run->limits.size(), 4u);
  struct Want {
    const char* field;
    int64_t offered, admitted, refusals, peak;
  };
  const Want want[] = {{"limits[0]", 9, 5, 1, 3},
                       {"limits[1]", 2'800, 1'900, 2, 1'000},
                       {"limits[2]", 650, 350, 0, 200},
                       {"limits[3]", 3'450, 2'250, 2, 1'150}};
  for (size_t k = 0; k < 4; ++k) {
    const LimitTally& t = run->limits[k];
    EXPECT_EQ(t.policy, "gateway");
    EXPECT_EQ(t.field, want[k].field);
    EXPECT_EQ(t.limit, &set->policies()[0].spec.limits[k]);
    EXPECT_EQ(t.requests, 9) << k;
    EXPECT_EQ(t.offered, want[k].offered) << k;
    EXPECT_EQ(t.admitted, want[k].admitted) << k;
    EXPECT_EQ(t.refusals, want[k].refusals) << k;
    EXPECT_EQ(t.peak_used, want[k].peak) << k;
    EXPECT_EQ(*std::max_element(t.peak_series.begin(), t.peak_series.end()), want[k].peak) << k;
  }
  // 1 s of trace in 600 points: 2 ms steps, the last row in the last.
  EXPECT_EQ(run->start, seconds(60));
  EXPECT_EQ(run->step, std::chrono::milliseconds(2));
  EXPECT_EQ(input.admitted_series.size(), 501u);
  EXPECT_EQ(input.admitted_series[500], 100);
  EXPECT_EQ(run->limits[3].peak_series[500], 1'150);
}

TEST(DimensionRun, TheReportsSayTheSame) {
  const auto set = Gateway();
  const Result<DimensionRun> run = RunDimensions(
      Trace(std::string(kGatewayTrace)), {.policies = set, .accepted = Names(set->dimensions())});
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  const std::string table = RenderDimensionTable(*run);
  EXPECT_THAT(table, ContainsRegex("input_tokens +2800 +1900 +900"));
  EXPECT_THAT(table, HasSubstr("100.0% (1000/1000)"));
  EXPECT_THAT(table, HasSubstr("input_tokens+output_tokens"));
  EXPECT_THAT(table, HasSubstr("admitted 5 of 9 requests; 4 refused over a limit."));

  const boost::json::object json = boost::json::parse(RenderDimensionJson(*run)).as_object();
  EXPECT_EQ(json.at("admitted").as_int64(), 5);
  EXPECT_EQ(json.at("step_ms").as_int64(), 2);
  const auto& limits = json.at("limits").as_array();
  ASSERT_EQ(limits.size(), 4u);
  const boost::json::object& sum = limits[3].as_object();
  EXPECT_EQ(sum.at("dimension").as_string(), "input_tokens+output_tokens");
  EXPECT_EQ(sum.at("capacity").as_int64(), 1'200);
  EXPECT_EQ(sum.at("refusals").as_int64(), 2);
  EXPECT_EQ(sum.at("peak_used").as_int64(), 1'150);
  EXPECT_EQ(sum.at("peak_series").as_array().size(), 501u);
  const auto& dims = json.at("dimensions").as_array();
  EXPECT_EQ(dims[2].as_object().at("admitted").as_int64(), 350);

  const std::string svg = RenderDimensionSvg(*run, "t.csv through gateway");
  EXPECT_THAT(svg, StartsWith("<?xml"));
  size_t lines = 0;
  for (size_t p = svg.find("<polyline"); p != std::string::npos; p = svg.find("<polyline", p + 1)) {
    ++lines;
  }
  EXPECT_EQ(lines, 4u);
  EXPECT_THAT(svg, HasSubstr("gateway limits[3] (input_tokens+output_tokens)"));
}

// One limit of input tokens; usd_micros is counted by another policy of the config only.
TEST(DimensionRun, ColumnsOtherPoliciesCountAreNotSentAndACostBeyondTheCapacityIsTooLarge) {
  const auto set =
      Policies({Policy("tokens", "user", {Window(100, minutes(1), {"input_tokens"})})});
  const CostTrace trace = Trace(
      "timestamp_ms,key,input_tokens,usd_micros\n"
      "60000,k,150,5\n"  // too large: 150 > 100, whatever the state
      "60001,k,,7\n"     // costs the policy nothing
      "60002,k,60,1\n"   // admitted
      "60003,k,60,\n");  // refused: 120 > 100
  const Result<DimensionRun> run = RunDimensions(
      trace, {.policies = set, .accepted = {"input_tokens", "requests", "usd_micros"}});
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  EXPECT_EQ(run->requests, 4);
  EXPECT_EQ(run->admitted, 2);
  EXPECT_EQ(run->refused, 1);
  EXPECT_EQ(run->too_large, 1);
  EXPECT_THAT(run->too_large_error, StartsWith("t.csv:2: costs (input_tokens): 150 exceeds"));
  EXPECT_TRUE(run->dimensions[0].counted);
  EXPECT_FALSE(run->dimensions[1].counted);
  EXPECT_EQ(run->dimensions[0].offered, 270);
  EXPECT_EQ(run->dimensions[0].admitted, 60);
  EXPECT_EQ(run->dimensions[1].offered, 13);
  EXPECT_EQ(run->dimensions[1].admitted, 8);
  ASSERT_EQ(run->limits.size(), 1u);
  EXPECT_EQ(run->limits[0].requests, 3);
  EXPECT_EQ(run->limits[0].offered, 120);
  EXPECT_EQ(run->limits[0].admitted, 60);
  EXPECT_EQ(run->limits[0].refusals, 1);
  EXPECT_EQ(run->limits[0].peak_used, 60);
  EXPECT_THAT(RenderDimensionTable(*run), HasSubstr("1 too large for a limit"));
}

TEST(DimensionRun, AColumnNoLimitOfTheConfigCountsIsRefusedByName) {
  const auto set = Gateway();
  const Result<DimensionRun> run =
      RunDimensions(Trace("# usage\ntimestamp_ms,key,input_tokens,colour\n1,a,1,2\n"),
                    {.policies = set, .accepted = Names(set->dimensions())});
  ASSERT_FALSE(run.ok());
  EXPECT_EQ(run.status().message(),
            "t.csv:2: column \"colour\": no limit counts this dimension (the configured ones: "
            "input_tokens, output_tokens, requests)");
}

TEST(DimensionRun, ARowTheEngineRefusesNamesItsLine) {
  const auto set = Policies({Policy("by_ip", "ip", {Window(10, seconds(1))})});
  const Result<DimensionRun> run =
      RunDimensions(Trace("timestamp_ms,key,requests\n1,10.0.0.1,1\n2,not-an-address,1\n"),
                    {.policies = set, .accepted = Names(set->dimensions())});
  ASSERT_FALSE(run.ok());
  EXPECT_THAT(run.status().message(), StartsWith("t.csv:3: "));
  EXPECT_FALSE(
      RunDimensions(Trace("timestamp_ms,key,requests\n1,a,1\n"), {.policies = nullptr}).ok());
}

}  // namespace
}  // namespace caudal::simulate
