// `caudal validate` and `caudal check` as a user runs them: exit codes (0 allowed or valid,
// 1 refused, 2 usage or config error, 3 store unavailable), the messages, and the JSON printed.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <boost/json.hpp>
#include <string>
#include <vector>

#include "cli/run_caudal.h"
#include "support/redis_server.h"

namespace caudal::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;

constexpr int kAllowed = 0;
constexpr int kRefused = 1;
constexpr int kUsage = 2;
constexpr int kUnavailable = 3;

constexpr const char* kConfig = R"(store: {url: "memory://"}
policies:
  - name: per-key
    identity: [api_key]
    limits:
      - {algorithm: token_bucket, capacity: 1, refill: 1/1h}
      - {algorithm: fixed_window, limit: 100, window: 1d}
  - name: per-tenant
    identity: [tenant]
    cost: 2
    limits: [{algorithm: sliding_window_log, limit: 5, window: 1m}]
)";

std::string Config(const std::string& text = kConfig) {
  const std::string path = TempPath("caudal.yaml");
  WriteFile(path, text);
  return path;
}

boost::json::object Json(const std::string& text) {
  boost::system::error_code ec;
  const boost::json::value v = boost::json::parse(text, ec);
  EXPECT_FALSE(ec) << text;
  if (ec || !v.is_object()) return {};
  return v.as_object();
}

Outcome Check(const std::string& config, std::vector<std::string> args) {
  args.insert(args.begin(), {"check", "--config", config});
  return RunCaudal(args);
}

TEST(Validate, AcceptsAGoodFileAndNamesItsPolicies) {
  const std::string path = Config();
  const Outcome o = RunCaudal({"validate", "--config", path});
  EXPECT_EQ(o.exit_code, 0) << o.err;
  EXPECT_THAT(o.out, HasSubstr("valid (2 policies: per-key, per-tenant; store memory://"));
}

TEST(Validate, NamesFileLineColumnAndFieldOfAnError) {
  const std::string path = Config(R"(policies:
  - name: p
    identity: [api_key]
    limits:
      - {algorithm: token_bucket, capacity: -3, refill: 1/1s}
)");
  const Outcome o = RunCaudal({"validate", "--config", path});
  EXPECT_EQ(o.exit_code, kUsage);
  EXPECT_THAT(o.err, StartsWith("caudal validate: " + path + ":5:45: "));
  EXPECT_THAT(o.err, HasSubstr("policies[0].limits[0].capacity: expected an integer from 1"));
  EXPECT_THAT(o.err, HasSubstr("(got \"-3\")"));
  EXPECT_TRUE(o.out.empty()) << o.out;
}

TEST(Validate, AMissingFileIsAUsageError) {
  const Outcome o = RunCaudal({"validate", "--config", TempPath("absent.yaml")});
  EXPECT_EQ(o.exit_code, kUsage);
  EXPECT_THAT(o.err, HasSubstr("cannot read the file"));
}

TEST(Validate, ReadsTheEnvoyFilesTheConfigNames) {
  const std::string rules = TempPath("rules.yaml");
  WriteFile(rules, "domain: [not closed\n");
  const std::string path = Config("server: {grpc: 127.0.0.1:0}\nenvoy_config: " + rules + "\n");
  const Outcome o = RunCaudal({"validate", "--config", path});
  EXPECT_EQ(o.exit_code, kUsage);
  EXPECT_THAT(o.err, HasSubstr("envoy_config: "));
  WriteFile(rules, "domain: edge\ndescriptors:\n  - key: path\n");
  EXPECT_EQ(RunCaudal({"validate", "--config", path}).exit_code, 0);
}

TEST(Validate, AgainstARunningConfigNamesWhatNeedsARestart) {
  const std::string running = TempPath("running.yaml");
  WriteFile(running, kConfig);
  const std::string next =
      Config(std::string("server: {http: 127.0.0.1:9999}\n") + kConfig);  // and the policies
  const Outcome o = RunCaudal({"validate", "--config", next, "--against", running});
  EXPECT_EQ(o.exit_code, 0) << o.err;
  EXPECT_THAT(o.out, HasSubstr("valid (2 policies"));
  EXPECT_THAT(o.out, HasSubstr("restart needed for server.http\n"));
  EXPECT_THAT(o.out, Not(HasSubstr("restart needed for store")));
  const Outcome same = RunCaudal({"validate", "--config", running, "--against", running});
  EXPECT_THAT(same.out, Not(HasSubstr("restart needed")));
}

TEST(Check, PrintsTheDecisionOfEveryApplicablePolicy) {
  const std::string path = Config();
  const Outcome o = Check(path, {"--descriptor", "api_key=k1", "--descriptor", "tenant=t1"});
  ASSERT_EQ(o.exit_code, kAllowed) << o.err;
  const boost::json::object j = Json(o.out);
  EXPECT_EQ(j.at("allowed"), true);
  const auto& policies = j.at("policies").as_array();
  ASSERT_EQ(policies.size(), 2u);
  EXPECT_EQ(policies[0].at("name"), "per-key");
  EXPECT_EQ(policies[0].at("remaining"), 0);  // capacity 1, cost 1: the tightest limit
  EXPECT_EQ(policies[1].at("name"), "per-tenant");
  EXPECT_EQ(policies[1].at("cost"), 2);  // the policy's default cost
  EXPECT_EQ(policies[1].at("remaining"), 3);
  EXPECT_TRUE(j.at("refused_by").as_array().empty());
}

TEST(Check, BadArgumentsAreUsageErrorsWithTheReason) {
  const std::string path = Config();
  struct Case {
    std::vector<std::string> args;
    const char* message;
  };
  for (const Case& c : std::vector<Case>{
           {{"--descriptor", "api_key"}, "--descriptor api_key: expected KEY=VALUE"},
           {{"--descriptor", "=v"}, "expected KEY=VALUE"},
           {{"--descriptor", "api_key=k", "--cost", "0"}, "cost"},
           {{"--descriptor", "api_key=k", "--cost", "2"}, "cost"},  // above capacity 1
           {{"--descriptor", "api_key=k", "--store", "nosuch://x"}, "nosuch://x"},
           {{}, "--descriptor"},
       }) {
    const Outcome o = Check(path, c.args);
    EXPECT_EQ(o.exit_code, kUsage) << c.message << "\n" << o.out << o.err;
    EXPECT_THAT(o.err, HasSubstr(c.message));
  }
  const Outcome broken = Check(Config("policies: ["), {"--descriptor", "api_key=k"});
  EXPECT_EQ(broken.exit_code, kUsage);
  EXPECT_THAT(broken.err, HasSubstr("not valid YAML"));
}

// State survives between two runs only in a shared store: Redis refuses the second request.
TEST(Check, RefusesWithExit1OnceASharedBucketIsEmpty) {
  auto redis = RedisServer::Start();
  ASSERT_TRUE(redis.ok()) << redis.status().ToString();
  const std::string path = Config();
  const std::vector<std::string> args = {"--store", (*redis)->url(), "--descriptor", "api_key=k1"};
  const Outcome first = Check(path, args);
  ASSERT_EQ(first.exit_code, kAllowed) << first.err;
  const Outcome second = Check(path, args);
  ASSERT_EQ(second.exit_code, kRefused) << second.err;
  const boost::json::object j = Json(second.out);
  EXPECT_EQ(j.at("allowed"), false);
  EXPECT_EQ(j.at("refused_by").as_array().at(0), "per-key");
  const auto& p = j.at("policies").as_array().at(0);
  EXPECT_EQ(p.at("remaining"), 0);
  // One token an hour: the next one is due in just under an hour, never sooner.
  EXPECT_GT(p.at("retry_after_ms").as_int64(), 3'590'000);
  EXPECT_LE(p.at("retry_after_ms").as_int64(), 3'600'000);
}

TEST(Check, ADeadStoreIsExit3WithAJsonError) {
  auto redis = RedisServer::Start();
  ASSERT_TRUE(redis.ok()) << redis.status().ToString();
  const std::string url = (*redis)->url();
  (*redis)->Stop();
  const Outcome o = Check(Config(), {"--store", url, "--descriptor", "api_key=k1"});
  EXPECT_EQ(o.exit_code, kUnavailable) << o.err;
  const boost::json::object j = Json(o.out);
  const auto& error = j.at("error").as_object();
  EXPECT_EQ(error.at("code"), "store_unavailable");
  EXPECT_THAT(std::string(error.at("message").as_string()), HasSubstr("Connection refused"));
  EXPECT_THAT(o.err, HasSubstr("caudal check: store unavailable"));
}

}  // namespace
}  // namespace caudal::testing
