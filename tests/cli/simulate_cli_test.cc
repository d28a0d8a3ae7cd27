// `caudal` and `caudal simulate` as a user runs them.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <boost/json.hpp>
#include <map>

#include "caudal/algorithms/limit.h"
#include "cli/run_caudal.h"

namespace caudal::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

constexpr int kUsage = 2;

// `caudal simulate <args> --format json`, parsed into algorithm -> object.
std::map<std::string, boost::json::object> SimulateJson(std::vector<std::string> args) {
  args.insert(args.begin(), "simulate");
  args.insert(args.end(), {"--format", "json"});
  const Outcome o = RunCaudal(args);
  EXPECT_EQ(o.exit_code, 0) << o.err;
  std::map<std::string, boost::json::object> by_algorithm;
  boost::system::error_code ec;
  const boost::json::value v = boost::json::parse(o.out, ec);
  EXPECT_FALSE(ec) << o.out;
  if (ec || !v.is_array()) return by_algorithm;
  for (const auto& item : v.as_array()) {
    const auto& obj = item.as_object();
    by_algorithm[std::string(obj.at("algorithm").as_string())] = obj;
  }
  return by_algorithm;
}

int64_t Field(const boost::json::object& o, const char* name) { return o.at(name).as_int64(); }

TEST(Caudal, NoCommandPrintsUsageAndExits2) {
  const Outcome o = RunCaudal({});
  EXPECT_EQ(o.exit_code, kUsage);
  EXPECT_THAT(o.err, HasSubstr("caudal: missing command"));
  EXPECT_THAT(o.err, HasSubstr("Usage: caudal <command>"));
  EXPECT_THAT(o.err, HasSubstr("simulate"));
}

TEST(Caudal, UnknownCommandPrintsUsageAndExits2) {
  const Outcome o = RunCaudal({"frobnicate", "--limit", "1/1s"});
  EXPECT_EQ(o.exit_code, kUsage);
  EXPECT_THAT(o.err, HasSubstr("unknown command \"frobnicate\""));
  EXPECT_THAT(o.err, HasSubstr("Usage: caudal <command>"));
}

TEST(Caudal, HelpListsTheCommands) {
  const Outcome o = RunCaudal({"--help"});
  EXPECT_EQ(o.exit_code, 0);
  EXPECT_THAT(o.out, HasSubstr("simulate"));
  const Outcome sub = RunCaudal({"simulate", "--help"});
  EXPECT_EQ(sub.exit_code, 0);
  EXPECT_THAT(sub.out, HasSubstr("--limit"));
  EXPECT_THAT(sub.out, HasSubstr("--pattern"));
  EXPECT_THAT(sub.out, HasSubstr("--trace"));
}

TEST(Caudal, VersionAsAFlagOrAWord) {
  for (const char* arg : {"--version", "version"}) {
    const Outcome o = RunCaudal({arg});
    EXPECT_EQ(o.exit_code, 0) << arg;
    EXPECT_THAT(o.out, StartsWith("caudal ")) << arg;
    EXPECT_EQ(o.err, "") << arg;
  }
}

struct BadFlags {
  std::vector<std::string> args;
  std::string message;
};

TEST(Simulate, BadFlagsNameTheFlagAndExit2) {
  const std::vector<BadFlags> cases = {
      {{"--pattern", "steady"}, "--limit"},
      {{"--limit", "abc", "--pattern", "steady"}, "--limit: rate \"abc\""},
      {{"--limit", "100/1500us", "--pattern", "steady"}, "--limit: window must be a whole number"},
      {{"--limit", "100/1m", "--burst", "0", "--pattern", "steady"}, "--burst: capacity must be"},
      {{"--limit", "100/1m", "--burst", "many", "--pattern", "steady"}, "--burst"},
      {{"--limit", "100/1m", "--pattern", "zigzag"}, "--pattern: unknown pattern \"zigzag\""},
      {{"--limit", "100/1m", "--pattern", "steady", "--rate", "fast"}, "--rate: rate \"fast\""},
      {{"--limit", "100/1m", "--pattern", "steady", "--duration", "10"},
       "--duration: duration \"10\""},
      {{"--limit", "100/1m", "--pattern", "steady", "--format", "xml"}, "--format: \"xml\""},
      {{"--limit", "100/1m"}, "one of --pattern or --trace is required"},
      {{"--limit", "100/1m", "--trace", "t.csv", "--pattern", "steady"}, "--trace"},
      {{"--limit", "100/1m", "--trace", "t.csv", "--rate", "5/1s"}, "--rate"},
      {{"--limit", "100/1m", "--pattern", "steady", "--frobnicate"}, "--frobnicate"},
      {{"--limit", "100/1m", "--pattern", "boundary-burst", "--duration", "30s"},
       "--duration: boundary-burst needs a duration of at least the limit's window (1m)"},
      {{"--limit", "100/1m", "--pattern", "steady", "--duration", "0s"},
       "--duration: the duration must be positive"},
      {{"--limit", "100/1m", "--pattern", "steady", "--rate", "100000/1s", "--duration", "2m"},
       "at most 10000000"},
      {{"--limit", "100/1m", "--pattern", "steady", "--regions", "0"},
       "--regions: expected 1 to 64 (got 0)"},
      {{"--limit", "100/1m", "--pattern", "steady", "--regions", "2", "--replication-lag", "soon"},
       "--replication-lag: duration \"soon\""},
  };
  for (const BadFlags& c : cases) {
    std::vector<std::string> args = {"simulate"};
    args.insert(args.end(), c.args.begin(), c.args.end());
    const Outcome o = RunCaudal(args);
    EXPECT_EQ(o.exit_code, kUsage) << ::testing::PrintToString(c.args) << "\n" << o.err;
    EXPECT_THAT(o.err, HasSubstr(c.message)) << ::testing::PrintToString(c.args);
    EXPECT_THAT(o.err, StartsWith("caudal simulate: ")) << ::testing::PrintToString(c.args);
    EXPECT_EQ(o.out, "") << ::testing::PrintToString(c.args);
  }
}

TEST(Simulate, MalformedCsvNamesTheFileAndLine) {
  const std::string path = TempPath("bad.csv");
  WriteFile(path, "timestamp_ms,key,cost\n1000,a,1\n1001,a,one\n");
  const Outcome o = RunCaudal({"simulate", "--limit", "10/1s", "--trace", path});
  EXPECT_EQ(o.exit_code, kUsage);
  EXPECT_THAT(o.err, HasSubstr(path + ":3: cost \"one\""));
}

TEST(Simulate, MissingTraceFileExits2) {
  const Outcome o = RunCaudal({"simulate", "--limit", "10/1s", "--trace", "/nonexistent.csv"});
  EXPECT_EQ(o.exit_code, kUsage);
  EXPECT_THAT(o.err, HasSubstr("/nonexistent.csv: cannot open"));
}

TEST(Simulate, BoundaryBurstShowsTheFixedWindowFlawAndTheBucketBound) {
  constexpr int64_t kLimit = 100;
  auto runs = SimulateJson({"--limit", "100/1m", "--burst", "100", "--pattern", "boundary-burst"});
  ASSERT_EQ(runs.size(), kAllAlgorithms.size());
  EXPECT_GE(Field(runs["fixed_window"], "max_in_window"), 19 * kLimit / 10);
  EXPECT_EQ(Field(runs["fixed_window"], "bound"), kLimit);
  EXPECT_LE(Field(runs["sliding_window_log"], "max_in_window"), kLimit);
  for (const char* bucket : {"token_bucket", "gcra"}) {
    EXPECT_EQ(Field(runs[bucket], "bound"), 100 + kLimit) << bucket;
    EXPECT_LE(Field(runs[bucket], "max_in_window"), Field(runs[bucket], "bound")) << bucket;
  }
  for (const auto& [name, r] : runs) {
    EXPECT_EQ(Field(r, "admitted") + Field(r, "rejected"), Field(r, "offered")) << name;
    EXPECT_EQ(r.at("within_bound").as_bool(), Field(r, "max_in_window") <= Field(r, "bound"))
        << name;
  }
}

TEST(Simulate, TraceWithKeysAndCosts) {
  const std::string path = TempPath("trace.csv");
  std::string csv = "timestamp_ms,key,cost\n";
  for (int i = 0; i < 400; ++i) {
    csv += std::to_string(1'700'000'000'000 + i * 37) + "," + (i % 3 ? "alice" : "bob") + "," +
           std::to_string(1 + i % 4) + "\n";
  }
  WriteFile(path, csv);
  auto runs = SimulateJson({"--limit", "20/1s", "--burst", "10", "--trace", path});
  ASSERT_EQ(runs.size(), kAllAlgorithms.size());
  for (const auto& [name, r] : runs) EXPECT_EQ(Field(r, "offered"), 400) << name;
  EXPECT_LE(Field(runs["token_bucket"], "max_in_window"), 30);
  EXPECT_LE(Field(runs["sliding_window_log"], "max_in_window"), 20);
  EXPECT_EQ(Field(runs["token_bucket"], "admitted"), Field(runs["gcra"], "admitted"));

  const std::string svg = TempPath("trace.svg");
  const Outcome o = RunCaudal({"simulate", "--limit", "20/1s", "--trace", path, "--svg", svg});
  ASSERT_EQ(o.exit_code, 0) << o.err;
  EXPECT_THAT(o.out, HasSubstr("400 requests over 14.8 s (2 keys)"));
  EXPECT_THAT(ReadFile(svg), HasSubstr("admitted in the trailing 1s (units of cost)"));
}

TEST(Simulate, SeedMakesPoissonReproducible) {
  const std::vector<std::string> base = {"--limit", "50/10s", "--pattern",  "poisson",
                                         "--rate",  "9/1s",   "--duration", "5m"};
  auto with_seed = [&](const char* seed) {
    std::vector<std::string> args = {"simulate"};
    args.insert(args.end(), base.begin(), base.end());
    args.insert(args.end(), {"--seed", seed, "--format", "json"});
    return RunCaudal(args).out;
  };
  EXPECT_EQ(with_seed("7"), with_seed("7"));
  EXPECT_NE(with_seed("7"), with_seed("8"));
}

TEST(Simulate, RegionsShowWhatAsynchronousReplicationAdmits) {
  const std::vector<std::string> base = {
      "simulate",   "--limit", "100/1m",   "--pattern", "steady",    "--rate", "400/1m",
      "--duration", "5m",      "--format", "json",      "--regions", "2",      "--replication-lag"};
  const auto fixed_window_max = [&](const std::string& lag) {
    std::vector<std::string> args = base;
    args.push_back(lag);
    const Outcome o = RunCaudal(args);
    EXPECT_EQ(o.exit_code, 0) << o.err;
    boost::system::error_code ec;
    const boost::json::value v = boost::json::parse(o.out, ec);
    EXPECT_FALSE(ec) << o.out;
    return ec ? int64_t{-1} : v.as_array().at(0).as_object().at("max_in_window").as_int64();
  };
  EXPECT_EQ(fixed_window_max("0s"), 100);
  EXPECT_EQ(fixed_window_max("100ms"), 100);
  EXPECT_EQ(fixed_window_max("1s"), 200);
  EXPECT_EQ(fixed_window_max("never"), 200);

  const Outcome table = RunCaudal({"simulate", "--limit", "100/1m", "--pattern", "steady",
                                   "--regions", "2", "--replication-lag", "1s"});
  ASSERT_EQ(table.exit_code, 0) << table.err;
  EXPECT_THAT(table.out, HasSubstr("regions: 2, requests to each in turn; a region's writes "
                                   "reach the others 1s later (last writer wins)"));
  EXPECT_THAT(table.out, HasSubstr("OVER 2.00x"));
}

TEST(Simulate, RegionsCompareReplicationWithLeasesInTheTableTheJsonAndTheChart) {
  const std::string svg = TempPath("regions.svg");
  const std::vector<std::string> base = {
      "simulate", "--limit",    "1200/1s",     "--pattern", "poisson", "--rate",
      "2000/1s",  "--duration", "10s",         "--regions", "3",       "--replication-lag",
      "40ms",     "--leases",   "--partition", "3s+2s"};
  std::vector<std::string> table_args = base;
  table_args.insert(table_args.end(), {"--svg", svg});
  const Outcome table = RunCaudal(table_args);
  ASSERT_EQ(table.exit_code, 0) << table.err;
  EXPECT_THAT(table.out, HasSubstr("partition: region 0 cut off at 3s+2s"));
  EXPECT_THAT(table.out, HasSubstr("leases: one store, each region 40ms from it"));
  const std::string chart = ReadFile(svg);
  EXPECT_THAT(chart, HasSubstr("class=\"series leases\""));
  EXPECT_THAT(chart, HasSubstr("token_bucket, leases"));

  std::vector<std::string> json_args = base;
  json_args.insert(json_args.end(), {"--format", "json"});
  const Outcome json = RunCaudal(json_args);
  ASSERT_EQ(json.exit_code, 0) << json.err;
  boost::system::error_code ec;
  const boost::json::value v = boost::json::parse(json.out, ec);
  ASSERT_FALSE(ec) << json.out;
  for (const boost::json::value& run : v.as_array()) {
    const boost::json::object& o = run.as_object();
    ASSERT_TRUE(o.contains("max_in_window")) << "the replication fields stay";
    const boost::json::object& leases = o.at("leases").as_object();
    EXPECT_GT(leases.at("failed").as_int64(), 0) << "region 0 cut off: the failure mode";
    if (o.at("algorithm").as_string() == "token_bucket") {
      EXPECT_TRUE(leases.at("within_bound").as_bool());
      EXPECT_GT(o.at("admitted").as_int64(), leases.at("admitted").as_int64());
    }
  }

  std::vector<std::string> no_lag = {"simulate", "--limit",   "10/1s", "--pattern",
                                     "steady",   "--regions", "2",     "--replication-lag",
                                     "never",    "--leases"};
  const Outcome refused = RunCaudal(no_lag);
  EXPECT_EQ(refused.exit_code, 2);
  EXPECT_THAT(refused.err, HasSubstr("leases: need a finite replication lag"));
  const Outcome bad =
      RunCaudal({"simulate", "--limit", "10/1s", "--pattern", "steady", "--partition", "3s"});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_THAT(bad.err, HasSubstr("--partition: expected AT+DURATION"));
}

TEST(Simulate, TableAndSvg) {
  const std::string svg = TempPath("chart.svg");
  const Outcome o = RunCaudal({"simulate", "--limit", "100/1m", "--pattern", "boundary-burst",
                               "--duration", "3m", "--svg", svg});
  ASSERT_EQ(o.exit_code, 0) << o.err;
  EXPECT_THAT(o.out, HasSubstr("algorithm"));
  EXPECT_THAT(o.out, HasSubstr("max in 1m"));
  EXPECT_THAT(o.out, HasSubstr("fixed_window"));
  EXPECT_THAT(o.out, HasSubstr("chart: " + svg));
  const std::string chart = ReadFile(svg);
  EXPECT_THAT(chart, StartsWith("<?xml"));
  EXPECT_THAT(chart, HasSubstr("</svg>"));
  size_t lines = 0;
  for (size_t p = chart.find("<polyline"); p != std::string::npos;
       p = chart.find("<polyline", p + 1)) {
    ++lines;
  }
  EXPECT_EQ(lines, kAllAlgorithms.size());
}

TEST(Simulate, UnwritableSvgIsAFailure) {
  const Outcome o = RunCaudal({"simulate", "--limit", "100/1m", "--pattern", "steady", "--svg",
                               "/nonexistent/dir/chart.svg"});
  EXPECT_EQ(o.exit_code, 1);
  EXPECT_THAT(o.err, HasSubstr("--svg: cannot write /nonexistent/dir/chart.svg"));
}

TEST(Simulate, ShareDividesOneBucketAmongTenantsInTheTableTheJsonAndTheChart) {
  const std::string svg = TempPath("shares.svg");
  const std::vector<std::string> args = {
      "simulate",       "--limit",  "1000/1s",     "--share",  "--tenant",
      "flood=10000/1s", "--tenant", "calm=150/1s", "--tenant", "late=10000/1s@4s*3",
      "--share-window", "1s",       "--duration",  "8s"};
  std::vector<std::string> table = args;
  table.insert(table.end(), {"--svg", svg});
  const Outcome o = RunCaudal(table);
  ASSERT_EQ(o.exit_code, 0) << o.err;
  EXPECT_THAT(o.out, HasSubstr("max-min/s"));
  EXPECT_THAT(o.out, HasSubstr("late"));
  EXPECT_THAT(o.out, HasSubstr("chart: " + svg));
  EXPECT_THAT(ReadFile(svg), HasSubstr("</svg>"));
  std::vector<std::string> json = args;
  json.insert(json.end(), {"--format", "json"});
  const Outcome j = RunCaudal(json);
  ASSERT_EQ(j.exit_code, 0) << j.err;
  const boost::json::object run = boost::json::parse(j.out).as_object();
  EXPECT_LE(Field(run, "admitted"), Field(run, "bound"));
  const auto& tenants = run.at("tenants").as_array();
  ASSERT_EQ(tenants.size(), 3u);
  // calm keeps its 150 (under a weight's part, 1,000/5); late, three times flood's weight, 3/4
  // of the rest.
  EXPECT_EQ(Field(tenants[1].as_object(), "refused"), 0);
  EXPECT_EQ(Field(tenants[1].as_object(), "expected"), 150);
  EXPECT_EQ(Field(tenants[2].as_object(), "expected"), 637);
  EXPECT_EQ(tenants[2].as_object().at("series").as_array().size(), 8u);
  // Offered a second, over time: late from 4 s on, 10,000 a second.
  const auto& offered = tenants[2].as_object().at("offered_series").as_array();
  ASSERT_EQ(offered.size(), 8u);
  EXPECT_EQ(offered[3].as_int64(), 0);
  EXPECT_EQ(offered[5].as_int64(), 10'000);
  EXPECT_EQ(Field(tenants[2].as_object(), "weight"), 3);
}

TEST(Simulate, ShareRefusesWhatItCannotRun) {
  const Outcome no_tenant = RunCaudal({"simulate", "--limit", "10/1s", "--share"});
  EXPECT_EQ(no_tenant.exit_code, kUsage);
  EXPECT_THAT(no_tenant.err, HasSubstr("--share: needs a --tenant"));
  const Outcome alone = RunCaudal({"simulate", "--limit", "10/1s", "--tenant", "a=1/1s"});
  EXPECT_EQ(alone.exit_code, kUsage);
  EXPECT_THAT(alone.err, HasSubstr("--tenant: goes with --share"));
  const Outcome mixed = RunCaudal(
      {"simulate", "--limit", "10/1s", "--share", "--tenant", "a=1/1s", "--pattern", "steady"});
  EXPECT_EQ(mixed.exit_code, kUsage);
  EXPECT_THAT(mixed.err, HasSubstr("--share: goes with"));
  const Outcome bad = RunCaudal({"simulate", "--limit", "10/1s", "--share", "--tenant", "a"});
  EXPECT_EQ(bad.exit_code, kUsage);
  EXPECT_THAT(bad.err, HasSubstr("--tenant: expected NAME=RATE"));
}

// gateway's four limits in minute-long fixed windows (requests in one-second ones); billing
// counts usd_micros, which gateway does not.
constexpr std::string_view kGatewayConfig = R"(policies:
  - name: gateway
    identity: [api_key]
    limits:
      - {algorithm: fixed_window, limit: 3, window: 1s}
      - {algorithm: fixed_window, limit: 1000, window: 1m, dimension: input_tokens}
      - {algorithm: fixed_window, limit: 500, window: 1m, dimension: output_tokens}
      - {algorithm: fixed_window, limit: 1200, window: 1m, dimension: [input_tokens, output_tokens]}
  - name: billing
    identity: [api_key]
    limits:
      - {algorithm: fixed_window, limit: 15, window: 1m, dimension: usd_micros}
)";

// As src/simulate/dimension_run_test.cc works it out, with usd_micros beside.
constexpr std::string_view kUsageTrace =
    "timestamp_ms,key,requests,input_tokens,output_tokens,usd_micros\n"
    "60000,a,1,400,100,5\n"
    "60100,a,1,500,300,5\n"
    "60200,a,1,500,,5\n"
    "60300,a,1,200,0,5\n"
    "60400,a,1,,50,5\n"
    "60500,a,1,0,0,5\n"
    "60600,b,1,900,200,1\n"
    "61000,a,1,100,0,5\n"
    "60800,b,1,200,,\n";

TEST(Simulate, ConfigReplaysCostsPerDimensionThroughAPolicy) {
  const std::string config = TempPath("gateway.yaml");
  const std::string trace = TempPath("usage.csv");
  const std::string svg = TempPath("usage.svg");
  WriteFile(config, std::string(kGatewayConfig));
  WriteFile(trace, std::string(kUsageTrace));

  const Outcome json = RunCaudal({"simulate", "--config", config, "--policy", "gateway", "--trace",
                                  trace, "--format", "json"});
  ASSERT_EQ(json.exit_code, 0) << json.err;
  const boost::json::object run = boost::json::parse(json.out).as_object();
  EXPECT_EQ(Field(run, "requests"), 9);
  EXPECT_EQ(Field(run, "admitted"), 5);
  EXPECT_EQ(Field(run, "refused"), 4);
  const auto& dims = run.at("dimensions").as_array();
  ASSERT_EQ(dims.size(), 4u);
  EXPECT_EQ(Field(dims[1].as_object(), "offered"), 2'800);
  EXPECT_EQ(Field(dims[1].as_object(), "admitted"), 1'900);
  EXPECT_EQ(Field(dims[2].as_object(), "admitted"), 350);
  // usd_micros: billing's, not gateway's: offered and reported, never refused for.
  EXPECT_FALSE(dims[3].as_object().at("counted").as_bool());
  EXPECT_EQ(Field(dims[3].as_object(), "offered"), 36);
  EXPECT_EQ(Field(dims[3].as_object(), "admitted"), 21);
  const auto& limits = run.at("limits").as_array();
  ASSERT_EQ(limits.size(), 4u);
  const int64_t refusals[] = {1, 2, 0, 2};
  const int64_t peaks[] = {3, 1'000, 200, 1'150};
  for (size_t k = 0; k < 4; ++k) {
    const boost::json::object& l = limits[k].as_object();
    EXPECT_EQ(l.at("policy").as_string(), "gateway");
    EXPECT_EQ(l.at("field").as_string(), "limits[" + std::to_string(k) + "]");
    EXPECT_EQ(Field(l, "refusals"), refusals[k]) << k;
    EXPECT_EQ(Field(l, "peak_used"), peaks[k]) << k;
  }

  const Outcome table = RunCaudal({"simulate", "--config", config, "--trace", trace, "--svg", svg});
  ASSERT_EQ(table.exit_code, 0) << table.err;
  EXPECT_THAT(table.out, HasSubstr("9 requests over 1.0 s (2 keys); costs in requests, "
                                   "input_tokens, output_tokens, usd_micros"));
  EXPECT_THAT(table.out, HasSubstr("policies: gateway (identity api_key); billing (identity "
                                   "api_key); each identity field set to the key"));
  // Both policies, all-or-nothing: billing's 15 µ$ a minute refuses a's last request too
  // (5 + 5 + 5 + 5 > 15), and gateway charges nothing for it.
  EXPECT_THAT(table.out, HasSubstr("admitted 4 of 9 requests; 5 refused over a limit."));
  EXPECT_THAT(table.out, HasSubstr("100.0% (15/15)"));
  EXPECT_THAT(table.out, HasSubstr("90.0% (900/1000)"));
  EXPECT_THAT(table.out, HasSubstr("chart: " + svg));
  EXPECT_THAT(ReadFile(svg), HasSubstr("billing limits[0] (usd_micros)"));
}

TEST(Simulate, ConfigRefusesWhatItCannotReplay) {
  const std::string config = TempPath("gateway.yaml");
  WriteFile(config, std::string(kGatewayConfig));
  const std::string trace = TempPath("usage.csv");
  WriteFile(trace, std::string(kUsageTrace));
  const auto run = [&](const std::string& csv, std::vector<std::string> extra = {}) {
    const std::string path = TempPath("bad.csv");
    WriteFile(path, csv);
    std::vector<std::string> args = {"simulate", "--config", config, "--trace", path};
    args.insert(args.end(), extra.begin(), extra.end());
    return RunCaudal(args);
  };
  const std::vector<std::pair<Outcome, std::string>> cases = {
      {run("timestamp_ms,key,requests,colour\n1,a,1,2\n"),
       "bad.csv:1: column \"colour\": no limit counts this dimension (the configured ones: "
       "input_tokens, output_tokens, requests, usd_micros)"},
      {run("timestamp,key,requests\n1,a,1\n"),
       "bad.csv:1: expected a header timestamp_ms,key,<dimension>..."},
      {run("timestamp_ms,key,input_tokens\n1,a,-3\n"), "bad.csv:2: input_tokens \"-3\""},
      {run("timestamp_ms,key,input_tokens\n1,a,2.5\n"), "bad.csv:2: input_tokens \"2.5\""},
      {run("timestamp_ms,key,input_tokens\n1,a,1099511627777\n"), "bad.csv:2: input_tokens"},
      {run("timestamp_ms,key,requests\n1,a,1\n", {"--policy", "nope"}),
       "--policy: " + config + " has no policy \"nope\" (its policies: gateway, billing)"},
      {run("timestamp_ms,key,requests\n1,a,1\n", {"--limit", "10/1s"}),
       "--config: goes with --trace, --policy, --format and --svg only"},
      {RunCaudal({"simulate", "--config", config}), "--config: needs --trace"},
      {RunCaudal({"simulate", "--config", TempPath("missing.yaml"), "--trace", trace}),
       "missing.yaml"},
      {RunCaudal({"simulate", "--policy", "gateway", "--limit", "1/1s", "--pattern", "steady"}),
       "--policy: goes with --config"},
  };
  for (const auto& [o, message] : cases) {
    EXPECT_EQ(o.exit_code, kUsage) << message << "\n" << o.err;
    EXPECT_THAT(o.err, StartsWith("caudal simulate: ")) << message;
    EXPECT_THAT(o.err, HasSubstr(message));
    EXPECT_EQ(o.out, "") << message;
  }
  // Rows are replayed in time order: a trace out of order is no error.
  const Outcome sorted = run("timestamp_ms,key,requests\n5,a,1\n1,a,1\n");
  EXPECT_EQ(sorted.exit_code, 0) << sorted.err;
}

}  // namespace
}  // namespace caudal::testing
