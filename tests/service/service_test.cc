// Service in-process: started from a Config on a manual clock, decided over HTTP and gRPC on
// ephemeral ports, reloaded (live and restart-only fields, refusals) and stopped.
#include "service/service.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <fstream>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "envoy/rls_client.h"
#include "service/http_probe.h"
#include "support/fake_store.h"
#include "support/manual_clock.h"

namespace caudal {
namespace {

using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using RateLimitRequest = ::envoy::service::ratelimit::v3::RateLimitRequest;
using RateLimitResponse = ::envoy::service::ratelimit::v3::RateLimitResponse;

using testing::Listening;
using testing::Post;

int Check(uint16_t port, std::string_view api_key) {
  return Post(port, "/v1/check",
              "{\"descriptors\": {\"api_key\": \"" + std::string(api_key) + "\"}}")
      .first;
}

RateLimitRequest RlsRequest(std::string_view path) {
  RateLimitRequest r;
  r.set_domain("edge");
  auto* e = r.add_descriptors()->add_entries();
  e->set_key("path");
  e->set_value(std::string(path));
  return r;
}

class ServiceTest : public ::testing::Test {
 protected:
  ServiceTest() {
    envoy_file_ = ::testing::TempDir() + "service_test_rls.yaml";
    std::ofstream(envoy_file_) << "domain: edge\n"
                                  "descriptors:\n"
                                  "  - key: path\n"
                                  "    rate_limit: {unit: minute, requests_per_unit: 1}\n";
  }

  // A config serving one policy of `capacity` per API key (refilled by `capacity` a minute)
  // and the Envoy file, on ephemeral ports.
  Config MakeConfig(int capacity = 1, std::string_view http = "127.0.0.1:0",
                    std::string_view server_extra = "", std::string_view extra = "") const {
    const std::string cap = std::to_string(capacity);
    const std::string yaml = "server:\n  http: " + std::string(http) + "\n  grpc: 127.0.0.1:0\n" +
                             std::string(server_extra) + "envoy_config: " + envoy_file_ +
                             "\npolicies:\n"
                             "  - name: per-key\n"
                             "    identity: [api_key]\n"
                             "    limits:\n"
                             "      - {algorithm: token_bucket, capacity: " +
                             cap + ", refill: " + cap + "/1m}\n" + std::string(extra);
    auto config = ParseConfig(yaml, "service_test.yaml");
    EXPECT_TRUE(config.ok()) << config.status().ToString();
    return std::move(config).value();
  }

  std::unique_ptr<Service> StartService(Config config) {
    auto service = Service::Start(
        std::move(config), {.clock = clock_, .log_sink = [this](LogLevel, std::string_view l) {
                              std::lock_guard lock(mu_);
                              lines_.emplace_back(l);
                            }});
    EXPECT_TRUE(service.ok()) << service.status().ToString();
    return service.ok() ? std::move(*service) : nullptr;
  }

  std::vector<std::string> Lines() {
    std::lock_guard lock(mu_);
    return lines_;
  }

  ManualClock clock_;
  std::string envoy_file_;
  std::mutex mu_;
  std::vector<std::string> lines_;  // guarded by mu_
};

TEST_F(ServiceTest, DecidesOverHttpAndGrpcOnTheInjectedClock) {
  auto service = StartService(MakeConfig(2));
  ASSERT_NE(service, nullptr);
  ASSERT_TRUE(service->grpc_port().has_value());
  EXPECT_NE(service->http_port(), 0);
  EXPECT_EQ(Check(service->http_port(), "k1"), 200);
  EXPECT_EQ(Check(service->http_port(), "k1"), 200);
  EXPECT_EQ(Check(service->http_port(), "k1"), 429);
  EXPECT_EQ(Check(service->http_port(), "k2"), 200);  // another identity, its own bucket

  envoy::testing::RlsClient rls(*service->grpc_port());
  RateLimitResponse response;
  ASSERT_TRUE(rls.Call(RlsRequest("/a"), &response).ok());
  EXPECT_EQ(response.overall_code(), RateLimitResponse::OK);
  ASSERT_TRUE(rls.Call(RlsRequest("/a"), &response).ok());
  EXPECT_EQ(response.overall_code(), RateLimitResponse::OVER_LIMIT);

  // Time is the manual clock's: half a minute refills one token of k1's two.
  clock_.Advance(std::chrono::seconds(30));
  EXPECT_EQ(Check(service->http_port(), "k1"), 200);
  EXPECT_EQ(Check(service->http_port(), "k1"), 429);
}

TEST_F(ServiceTest, ReloadAppliesLiveFieldsAtOnce) {
  auto service = StartService(MakeConfig());
  ASSERT_NE(service, nullptr);
  EXPECT_EQ(Check(service->http_port(), "k"), 200);
  EXPECT_EQ(Check(service->http_port(), "k"), 429);

  ReloadResult r = service->Reload(MakeConfig(3, "127.0.0.1:0", "", "logging: {level: warning}\n"));
  ASSERT_TRUE(r.ok()) << r.status.ToString();
  EXPECT_THAT(r.applied, Contains("policies"));
  EXPECT_THAT(r.applied, Contains("envoy_config"));
  EXPECT_THAT(r.restart_only, IsEmpty());
  EXPECT_EQ(service->config().logging.level, LogLevel::kWarning);
  // The new policy has fresh state under the same key: a capacity of 3.
  EXPECT_EQ(Check(service->http_port(), "k"), 200);
  EXPECT_EQ(Check(service->http_port(), "k"), 200);
  EXPECT_EQ(Check(service->http_port(), "k"), 200);
  EXPECT_EQ(Check(service->http_port(), "k"), 429);
  EXPECT_THAT(service->metrics().RenderPrometheus(),
              HasSubstr("caudal_config_reloads_total{result=\"success\"} 1"));
}

TEST_F(ServiceTest, ReloadReportsRestartOnlyFieldsAndKeepsTheirRunningValues) {
  auto service = StartService(MakeConfig());
  ASSERT_NE(service, nullptr);
  const uint16_t port = service->http_port();
  Config next = MakeConfig(1, "127.0.0.1:1", "  threads: 3\n",
                           "store: {timeout: 20ms}\nenvoy: {headers: none}\n");
  ReloadResult r = service->Reload(std::move(next));
  ASSERT_TRUE(r.ok()) << r.status.ToString();
  EXPECT_THAT(r.restart_only,
              ElementsAre("store.timeout", "server.http", "server.threads", "envoy.headers"));
  // Still on the port it started on, with the running values in force.
  EXPECT_EQ(service->http_port(), port);
  EXPECT_EQ(service->config().server.http, "127.0.0.1:0");
  EXPECT_EQ(service->config().store.timeout, std::chrono::milliseconds(10));
  EXPECT_EQ(Check(port, "k"), 200);
  EXPECT_THAT(Lines(), Contains(HasSubstr("store.timeout, server.http, server.threads, "
                                          "envoy.headers take effect on restart only")));
}

TEST_F(ServiceTest, RefusedReloadChangesNothing) {
  auto service = StartService(MakeConfig());
  ASSERT_NE(service, nullptr);
  EXPECT_EQ(Check(service->http_port(), "k"), 200);

  // A file that did not load.
  ReloadResult r = service->Reload(Status::InvalidArgument("service_test.yaml:3:1: bad"));
  EXPECT_FALSE(r.ok());
  // A config whose Envoy file does not parse: refused whole, policies included.
  Config next = MakeConfig(5);
  std::ofstream(envoy_file_) << "domain: [not a string\n";
  r = service->Reload(std::move(next));
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status.message(), HasSubstr("envoy_config: "));
  EXPECT_THAT(r.applied, IsEmpty());

  EXPECT_EQ(Check(service->http_port(), "k"), 429);  // still the capacity of 1, its state kept
  envoy::testing::RlsClient rls(*service->grpc_port());
  RateLimitResponse response;
  ASSERT_TRUE(rls.Call(RlsRequest("/b"), &response).ok());
  EXPECT_EQ(response.overall_code(), RateLimitResponse::OK);  // the old domains still serve
  EXPECT_THAT(service->metrics().RenderPrometheus(),
              HasSubstr("caudal_config_reloads_total{result=\"failure\"} 2"));
  EXPECT_THAT(Lines(), Contains(HasSubstr("reload refused, the previous 1 policies keep serving")));
}

TEST_F(ServiceTest, StartRefusesWhatItCannotServe) {
  auto first = StartService(MakeConfig());
  ASSERT_NE(first, nullptr);
  // The HTTP port is taken.
  Config taken = MakeConfig();
  taken.server.http = "127.0.0.1:" + std::to_string(first->http_port());
  auto second = Service::Start(std::move(taken), {.clock = clock_});
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), StatusCode::kUnavailable);
  // gRPC without Envoy files to serve is a mistake in the config.
  Config unpaired = MakeConfig();
  unpaired.envoy.config.clear();
  auto third = Service::Start(std::move(unpaired), {.clock = clock_});
  ASSERT_FALSE(third.ok());
  EXPECT_EQ(third.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(third.status().message(), HasSubstr("needs envoy_config"));
  EXPECT_EQ(Service::Check(MakeConfig()), Status::Ok());
}

TEST_F(ServiceTest, StopIsIdempotentAndClosesTheListeners) {
  auto service = StartService(MakeConfig());
  ASSERT_NE(service, nullptr);
  const uint16_t port = service->http_port();
  EXPECT_TRUE(Listening(port));
  service->Stop();
  service->Stop();
  EXPECT_FALSE(Listening(port)) << "the listener is still open after Stop";
}

TEST_F(ServiceTest, StopAnswersTheRequestsInFlight) {
  testing::FakeStore* fake = nullptr;
  auto started = Service::Start(MakeConfig(5),
                                {.clock = clock_, .wrap_store = [&](std::unique_ptr<Store> inner) {
                                   auto f = std::make_unique<testing::FakeStore>(std::move(inner));
                                   fake = f.get();
                                   return std::unique_ptr<Store>(std::move(f));
                                 }});
  ASSERT_TRUE(started.ok()) << started.status().ToString();
  std::unique_ptr<Service> service = std::move(*started);
  ASSERT_NE(fake, nullptr);
  const uint16_t port = service->http_port();
  fake->Hold();
  std::atomic<int> answers[2] = {0, 0};
  std::thread clients[2];
  for (int i = 0; i < 2; ++i) clients[i] = std::thread([&, i] { answers[i] = Check(port, "k"); });
  ASSERT_TRUE(fake->WaitForHeld(2));
  std::thread stopper([&] { service->Stop(); });
  // Stop closes the listener first, then waits for what is in flight.
  for (int i = 0; i < 10'000 && Listening(port); ++i) std::this_thread::yield();
  EXPECT_FALSE(Listening(port));
  EXPECT_EQ(answers[0] + answers[1], 0);  // nothing answered yet: the store holds both
  fake->ReleaseHeld();
  for (std::thread& c : clients) c.join();
  stopper.join();
  EXPECT_EQ(answers[0], 200);
  EXPECT_EQ(answers[1], 200);
}

}  // namespace
}  // namespace caudal
