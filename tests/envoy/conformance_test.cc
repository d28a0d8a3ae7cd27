// Runs conformance/*.yaml: request -> expected response cases derived from envoyproxy/ratelimit's
// documented configuration examples, sent over gRPC to a real server. Time is a ManualClock that
// cases advance explicitly. File format: see conformance/README.md.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <filesystem>

#include "caudal/envoy/grpc_server.h"
#include "caudal/rate.h"
#include "envoy/rls_client.h"
#include "envoy/test_store.h"
#include "support/manual_clock.h"
#include "caudal/envoy/ratelimit_config_yaml.h"
#include "rls_stack.h"

namespace caudal::envoy {
namespace {

std::vector<std::string> CaseFiles() {
  std::vector<std::string> files;
  for (const auto& e : std::filesystem::directory_iterator(CAUDAL_CONFORMANCE_DIR)) {
    if (e.path().extension() == ".yaml") files.push_back(e.path().filename().string());
  }
  std::sort(files.begin(), files.end());
  return files;
}

RateLimitRequest ToRequest(const YAML::Node& n) {
  RateLimitRequest r;
  r.set_domain(n["domain"].as<std::string>(""));
  if (n["hits_addend"]) r.set_hits_addend(n["hits_addend"].as<uint32_t>());
  for (const auto& d : n["descriptors"]) {
    auto* desc = r.add_descriptors();
    for (const auto& e : d["entries"]) {
      const std::string kv = e.as<std::string>();
      const size_t eq = kv.find('=');
      auto* entry = desc->add_entries();
      entry->set_key(kv.substr(0, eq));
      entry->set_value(eq == std::string::npos ? "" : kv.substr(eq + 1));
    }
    if (d["hits_addend"]) desc->mutable_hits_addend()->set_value(d["hits_addend"].as<uint64_t>());
    if (d["is_negative_hits"]) desc->set_is_negative_hits(d["is_negative_hits"].as<bool>());
    if (d["limit"]) {
      desc->mutable_limit()->set_requests_per_unit(d["limit"]["requests_per_unit"].as<uint32_t>());
      ::envoy::type::v3::RateLimitUnit unit{};
      EXPECT_TRUE(::envoy::type::v3::RateLimitUnit_Parse(d["limit"]["unit"].as<std::string>(),
                                                         &unit));
      desc->mutable_limit()->set_unit(unit);
    }
  }
  return r;
}

void Check(const YAML::Node& expect, const grpc::Status& status, const RateLimitResponse& resp,
           bool repeated) {
  if (expect["error"]) {
    EXPECT_EQ(static_cast<int>(status.error_code()),
              expect["error"].as<std::string>() == "INVALID_ARGUMENT"
                  ? grpc::StatusCode::INVALID_ARGUMENT
                  : grpc::StatusCode::UNAVAILABLE);
    if (expect["message"]) {
      EXPECT_THAT(status.error_message(), ::testing::HasSubstr(expect["message"].as<std::string>()));
    }
    return;
  }
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(RateLimitResponse::Code_Name(resp.overall_code()), expect["overall"].as<std::string>());
  if (!expect["statuses"]) return;
  ASSERT_EQ(resp.statuses_size(), static_cast<int>(expect["statuses"].size()));
  for (int i = 0; i < resp.statuses_size(); ++i) {
    const YAML::Node want = expect["statuses"][i];
    const auto& got = resp.statuses(i);
    SCOPED_TRACE("status " + std::to_string(i));
    if (want["code"]) {
      EXPECT_EQ(RateLimitResponse::Code_Name(got.code()), want["code"].as<std::string>());
    }
    if (want["requests_per_unit"]) {
      EXPECT_EQ(got.current_limit().requests_per_unit(), want["requests_per_unit"].as<uint32_t>());
    }
    if (want["unit"]) {
      EXPECT_EQ(RateLimitResponse::RateLimit::Unit_Name(got.current_limit().unit()),
                want["unit"].as<std::string>());
    }
    if (want["name"]) {
      EXPECT_EQ(got.current_limit().name(), want["name"].as<std::string>());
    }
    if (want["no_limit"]) {
      EXPECT_EQ(!got.has_current_limit(), want["no_limit"].as<bool>());
    }
    if (want["remaining"]) {
      ASSERT_FALSE(repeated) << "'remaining' changes between repeats; give it on a single request";
      EXPECT_EQ(got.limit_remaining(), want["remaining"].as<uint32_t>());
    }
    if (want["reset_seconds"]) {
      EXPECT_EQ(got.duration_until_reset().seconds(), want["reset_seconds"].as<int64_t>());
    }
  }
}

class Conformance : public ::testing::TestWithParam<std::string> {};

TEST_P(Conformance, Cases) {
  const YAML::Node file =
      YAML::LoadFile(std::string(CAUDAL_CONFORMANCE_DIR) + "/" + GetParam());
  auto config = ParseRateLimitConfigText(file["config"].as<std::string>(), GetParam());
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  testing::RlsSetup setup;
  if (const YAML::Node o = file["options"]) {
    if (o["descriptor_mode"]) {
      auto mode = ParseDescriptorMode(o["descriptor_mode"].as<std::string>());
      ASSERT_TRUE(mode.ok()) << mode.status().ToString();
      setup.domains.mode = *mode;
    }
    if (o["headers"]) {
      auto headers = ParseHeaderMode(o["headers"].as<std::string>());
      ASSERT_TRUE(headers.ok()) << headers.status().ToString();
      setup.rls.headers = *headers;
    }
  }
  ManualClock clock(std::chrono::seconds(file["start"].as<int64_t>(1'699'920'000)));
  testing::CountingMemoryStore store(clock);
  testing::RlsStack stack(store, clock, std::make_shared<RateLimitConfig>(std::move(*config)), setup);
  ASSERT_TRUE(stack.status().ok());
  auto server = RlsGrpcServer::Start(stack.handler(), {.address = "127.0.0.1:0"});
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  testing::RlsClient client((*server)->port());
  ASSERT_GT(file["cases"].size(), 0u);
  for (const YAML::Node& c : file["cases"]) {
    SCOPED_TRACE(GetParam() + ": " + c["name"].as<std::string>());
    if (c["advance"]) {
      auto d = ParseDuration(c["advance"].as<std::string>());
      ASSERT_TRUE(d.ok()) << d.status().ToString();
      clock.Advance(*d);
    }
    const RateLimitRequest request = ToRequest(c["request"]);
    const int repeat = c["repeat"].as<int>(1);
    for (int i = 0; i < repeat; ++i) {
      SCOPED_TRACE("repeat " + std::to_string(i));
      RateLimitResponse resp;
      const grpc::Status status = client.Call(request, &resp);
      Check(c["expect"], status, resp, repeat > 1);
      if (HasFatalFailure()) return;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Reference, Conformance, ::testing::ValuesIn(CaseFiles()),
                         [](const ::testing::TestParamInfo<std::string>& file) {
                           std::string n = file.param.substr(0, file.param.size() - 5);
                           std::replace(n.begin(), n.end(), '-', '_');
                           return n;
                         });

}  // namespace
}  // namespace caudal::envoy
