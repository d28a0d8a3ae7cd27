// `caudal serve` failing to start, as a user runs it: the exit code (2 for a bad flag or file, 1
// when the service cannot start) and what it writes, as text or, in JSON mode, one object a line.
#include <arpa/inet.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <boost/json.hpp>
#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

#include "cli/run_caudal.h"

namespace caudal::testing {
namespace {

using ::testing::HasSubstr;

constexpr int kFailure = 1;
constexpr int kUsage = 2;

std::string Config(const std::string& text) {
  const std::string path = TempPath("caudal.yaml");
  WriteFile(path, text);
  return path;
}

constexpr const char* kPolicies = R"(policies:
  - name: per-key
    identity: [api_key]
    limits: [{algorithm: fixed_window, limit: 2, window: 1m}]
)";

// Every line of `err` is one JSON object; returns them.
std::vector<boost::json::object> JsonLines(const std::string& err) {
  std::vector<boost::json::object> lines;
  std::istringstream in(err);
  for (std::string line; std::getline(in, line);) {
    boost::system::error_code ec;
    boost::json::value v = boost::json::parse(line, ec);
    EXPECT_FALSE(ec) << "not JSON: " << line;
    if (!ec && v.is_object()) lines.push_back(v.as_object());
  }
  return lines;
}

TEST(ServeFailure, ABadFileIsAUsageErrorAsText) {
  const Outcome o = RunCaudal({"serve", "--config", Config("policies: [{name: x}]\n")});
  EXPECT_EQ(o.exit_code, kUsage);
  EXPECT_THAT(o.err, HasSubstr("caudal serve: "));
  EXPECT_THAT(o.err, HasSubstr("Run 'caudal serve --help' for usage."));
  EXPECT_EQ(o.out, "");
}

TEST(ServeFailure, ABadFileIsOneJsonErrorLineWithTheFlag) {
  const Outcome o =
      RunCaudal({"serve", "--config", Config("policies: [{name: x}]\n"), "--log-format", "json"});
  EXPECT_EQ(o.exit_code, kUsage);
  const auto lines = JsonLines(o.err);
  ASSERT_EQ(lines.size(), 1u) << o.err;
  EXPECT_EQ(lines[0].at("level"), "error");
  EXPECT_EQ(lines[0].at("exit_code"), kUsage);
  EXPECT_THAT(std::string(lines[0].at("msg").as_string()), HasSubstr("caudal serve: "));
  EXPECT_TRUE(lines[0].contains("time"));
  EXPECT_EQ(o.out, "");
}

TEST(ServeFailure, AListenerThatCannotStartIsOneJsonLineWhenTheFileSaysJson) {
  // A port already taken: the file is valid, the service fails to start.
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  ASSERT_EQ(::listen(fd, 1), 0);
  socklen_t len = sizeof addr;
  ASSERT_EQ(::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  const std::string http = "127.0.0.1:" + std::to_string(ntohs(addr.sin_port));

  const std::string config =
      Config("logging: {format: json}\nserver: {http: '" + http + "'}\n" + std::string(kPolicies));
  const Outcome json = RunCaudal({"serve", "--config", config});
  EXPECT_EQ(json.exit_code, kFailure);
  const auto lines = JsonLines(json.err);
  ASSERT_FALSE(lines.empty()) << json.err;
  EXPECT_EQ(lines.back().at("level"), "error");
  EXPECT_EQ(lines.back().at("exit_code"), kFailure);
  EXPECT_THAT(std::string(lines.back().at("msg").as_string()), HasSubstr(http));

  // The flag wins over the file: as text, the plain message.
  const Outcome text = RunCaudal({"serve", "--config", config, "--log-format", "text"});
  EXPECT_EQ(text.exit_code, kFailure);
  EXPECT_THAT(text.err, HasSubstr("caudal serve: "));
  EXPECT_NE(text.err.front(), '{') << text.err;
  ::close(fd);
}

// Sets an environment variable for the commands a test runs, and unsets it after.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const std::string& value) : name_(name) {
    ::setenv(name, value.c_str(), 1);
  }
  ~ScopedEnv() { ::unsetenv(name_); }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  const char* name_;
};

// A container image runs `caudal` with the arguments it is given: flags alone are serve's.
TEST(ServeFailure, FlagsWithoutACommandAreServes) {
  const std::string bad = Config("policies: [{name: x}]\n");
  const Outcome o = RunCaudal({"--config", bad, "--log-format", "json"});
  EXPECT_EQ(o.exit_code, kUsage);
  const auto lines = JsonLines(o.err);
  ASSERT_EQ(lines.size(), 1u) << o.err;
  EXPECT_THAT(std::string(lines[0].at("msg").as_string()), HasSubstr("caudal serve: " + bad));
  const Outcome unknown = RunCaudal({"--no-such-flag", "--config", bad});
  EXPECT_EQ(unknown.exit_code, kUsage);
  EXPECT_THAT(unknown.err, HasSubstr("caudal serve: "));
  EXPECT_THAT(unknown.err, HasSubstr("--no-such-flag"));
}

TEST(ServeFailure, TheConfigAndLogFormatFromTheEnvironmentTheFlagsWin) {
  const std::string bad = Config("policies: [{name: x}]\n");
  const ScopedEnv config("CAUDAL_CONFIG", bad);
  const ScopedEnv format("CAUDAL_LOG_FORMAT", "json");
  const Outcome o = RunCaudal({"serve"});
  EXPECT_EQ(o.exit_code, kUsage);
  const auto lines = JsonLines(o.err);
  ASSERT_EQ(lines.size(), 1u) << o.err;
  EXPECT_THAT(std::string(lines[0].at("msg").as_string()), HasSubstr("caudal serve: " + bad));

  const std::string other = Config("policies: [{name: y}]\n");
  const Outcome flags = RunCaudal({"serve", "--config", other, "--log-format", "text"});
  EXPECT_EQ(flags.exit_code, kUsage);
  EXPECT_THAT(flags.err, HasSubstr("caudal serve: " + other));
  EXPECT_THAT(flags.err, HasSubstr("Run 'caudal serve --help' for usage."));
}

TEST(ServeFailure, ValidateReadsTheConfigFromTheEnvironment) {
  const std::string good = Config(std::string("store: {url: 'memory://'}\n") + kPolicies);
  const ScopedEnv config("CAUDAL_CONFIG", good);
  const Outcome o = RunCaudal({"validate"});
  EXPECT_EQ(o.exit_code, 0) << o.err;
  EXPECT_THAT(o.out, HasSubstr(good + ": valid (1 policies: per-key;"));
  const Outcome bad = RunCaudal({"validate", "--config", Config("policies: [{name: x}]\n")});
  EXPECT_EQ(bad.exit_code, kUsage);
  EXPECT_THAT(bad.err, HasSubstr("caudal validate: "));
}

}  // namespace
}  // namespace caudal::testing
