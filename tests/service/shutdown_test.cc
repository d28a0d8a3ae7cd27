// Graceful shutdown in-process: Service::Stop with requests in flight over HTTP and gRPC, held
// at a FakeStore so that each step is seen before the next: readiness off, listeners closed,
// every request in flight answered, and the deadline (server.shutdown_timeout) kept. And a
// service on a real redis-server ended with a call still held there: the store answers it as
// it ends, through the parts above it, which must still be there (AddressSanitizer sees it).
#include <gmock/gmock.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "common/cat.h"
#include "envoy/rls_client.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "service/http_probe.h"
#include "service/service.h"
#include "support/delay_proxy.h"
#include "support/fake_store.h"
#include "support/manual_clock.h"
#include "support/redis_server.h"

namespace caudal {
namespace {

using ::grpc::health::v1::Health;
using ::grpc::health::v1::HealthCheckRequest;
using ::grpc::health::v1::HealthCheckResponse;
using ::testing::Contains;
using ::testing::HasSubstr;
using RateLimitRequest = ::envoy::service::ratelimit::v3::RateLimitRequest;
using RateLimitResponse = ::envoy::service::ratelimit::v3::RateLimitResponse;
using testing::KeepAlive;
using testing::Listening;
using testing::Post;

constexpr std::string_view kCheck = R"({"descriptors": {"api_key": "k"}})";

class ShutdownTest : public ::testing::Test {
 protected:
  ShutdownTest() {
    envoy_file_ = ::testing::TempDir() + "shutdown_test_rls.yaml";
    std::ofstream(envoy_file_) << "domain: edge\n"
                                  "descriptors:\n"
                                  "  - key: path\n"
                                  "    rate_limit: {unit: minute, requests_per_unit: 100}\n";
  }

  // HTTP and gRPC on ephemeral ports, the store wrapped in fake_.
  void Start(std::string_view shutdown_timeout) {
    const std::string yaml =
        "server:\n  http: 127.0.0.1:0\n  grpc: 127.0.0.1:0\n"
        "  shutdown_timeout: " +
        std::string(shutdown_timeout) + "\nenvoy_config: " + envoy_file_ +
        "\npolicies:\n"
        "  - name: per-key\n"
        "    identity: [api_key]\n"
        "    limits:\n"
        "      - {algorithm: token_bucket, capacity: 100, refill: 100/1m}\n";
    auto config = ParseConfig(yaml, "shutdown_test.yaml");
    ASSERT_TRUE(config.ok()) << config.status().ToString();
    auto started = Service::Start(
        std::move(*config), {.clock = clock_,
                             .wrap_store =
                                 [this](std::unique_ptr<Store> inner) {
                                   auto f = std::make_unique<testing::FakeStore>(std::move(inner));
                                   fake_ = f.get();
                                   return std::unique_ptr<Store>(std::move(f));
                                 },
                             .log_sink =
                                 [this](LogLevel, std::string_view l) {
                                   std::lock_guard lock(mu_);
                                   lines_.emplace_back(l);
                                 }});
    ASSERT_TRUE(started.ok()) << started.status().ToString();
    service_ = std::move(*started);
    port_ = service_->http_port();
    grpc_port_ = *service_->grpc_port();
  }

  std::vector<std::string> Lines() {
    std::lock_guard lock(mu_);
    return lines_;
  }

  // Once the store's first probe has answered (before Hold(), so that no probe is held).
  static void AwaitReady(KeepAlive& probe) {
    for (int i = 0; i < 1000 && probe.Get("/readyz").status != 200; ++i) std::this_thread::yield();
    ASSERT_EQ(probe.Get("/readyz").status, 200);
  }

  static void AwaitClosed(uint16_t port) {
    for (int i = 0; i < 100'000 && Listening(port); ++i) std::this_thread::yield();
  }

  static RateLimitRequest RlsRequest() {
    RateLimitRequest r;
    r.set_domain("edge");
    auto* e = r.add_descriptors()->add_entries();
    e->set_key("path");
    e->set_value("/a");
    return r;
  }

  ManualClock clock_;
  std::string envoy_file_;
  testing::FakeStore* fake_ = nullptr;
  std::unique_ptr<Service> service_;
  uint16_t port_ = 0;
  uint16_t grpc_port_ = 0;
  std::mutex mu_;
  std::vector<std::string> lines_;  // guarded by mu_
};

TEST_F(ShutdownTest, ReadinessTurnsOffThenEveryRequestInFlightIsAnswered) {
  Start("10s");
  // Ready, on a connection kept open across the stop.
  KeepAlive probe(port_);
  AwaitReady(probe);
  auto channel = grpc::CreateChannel("127.0.0.1:" + std::to_string(grpc_port_),
                                     grpc::InsecureChannelCredentials());
  auto health = Health::NewStub(channel);
  grpc::ClientContext watch_context;
  watch_context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
  auto watch = health->Watch(&watch_context, HealthCheckRequest());
  HealthCheckResponse status;
  ASSERT_TRUE(watch->Read(&status));
  EXPECT_EQ(status.status(), HealthCheckResponse::SERVING);

  fake_->Hold();
  constexpr int kEach = 3;
  std::atomic<int> http_ok{0};
  std::atomic<int> rls_ok{0};
  std::vector<std::thread> clients;
  for (int i = 0; i < kEach; ++i) {
    clients.emplace_back([&] { http_ok += Post(port_, "/v1/check", kCheck).first == 200; });
    clients.emplace_back([&] {
      envoy::testing::RlsClient rls(grpc_port_);
      RateLimitResponse response;
      rls_ok += rls.Call(RlsRequest(), &response).ok() &&
                response.overall_code() == RateLimitResponse::OK;
    });
  }
  ASSERT_TRUE(fake_->WaitForHeld(2 * kEach));

  std::thread stopper([&] { service_->Stop(); });
  // gRPC health says NOT_SERVING to its watchers, and the HTTP listener closes, while every
  // request is still at the store.
  ASSERT_TRUE(watch->Read(&status));
  EXPECT_EQ(status.status(), HealthCheckResponse::NOT_SERVING);
  AwaitClosed(port_);
  EXPECT_FALSE(Listening(port_));
  EXPECT_EQ(Post(port_, "/v1/check", kCheck).first, 0) << "a new connection was served";
  // A connection already open still gets answers, not ready, and is told to close.
  testing::HttpReply readyz = probe.Get("/readyz");
  EXPECT_EQ(readyz.status, 503);
  EXPECT_THAT(readyz.body, HasSubstr("shutting down"));
  EXPECT_THAT(readyz.head, HasSubstr("Connection: close"));
  EXPECT_EQ(http_ok + rls_ok, 0) << "answered before the store did";

  fake_->ReleaseHeld();
  for (std::thread& c : clients) c.join();
  stopper.join();
  EXPECT_EQ(http_ok, kEach);
  EXPECT_EQ(rls_ok, kEach);
  EXPECT_THAT(Lines(), Contains(HasSubstr("answering what is in flight for up to 10s")));
  EXPECT_THAT(Lines(), Contains("info stopped"));
}

TEST_F(ShutdownTest, StopKeepsItsDeadlineWhenTheStoreDoesNotAnswer) {
  Start("2s");
  {
    KeepAlive probe(port_);
    AwaitReady(probe);
  }
  fake_->Hold();
  std::atomic<int> answer{-1};
  std::thread client([&] { answer = Post(port_, "/v1/check", kCheck).first; });
  std::atomic<int> rls_code{-1};
  std::thread rls_client([&] {
    envoy::testing::RlsClient rls(grpc_port_);
    RateLimitResponse response;
    rls_code = rls.Call(RlsRequest(), &response).error_code();
  });
  ASSERT_TRUE(fake_->WaitForHeld(2));
  std::atomic<bool> stopped{false};
  std::thread stopper([&] {
    service_->Stop();
    stopped = true;
  });
  AwaitClosed(port_);
  // Short of the deadline Stop still waits for the store.
  clock_.Advance(std::chrono::milliseconds(1900));
  EXPECT_FALSE(stopped);
  clock_.Advance(std::chrono::milliseconds(100));
  stopper.join();
  // Unanswered: still waiting (epoll closes the connection when the server goes), or closed
  // without a response (io_uring closes it as its loop stops).
  EXPECT_LE(answer, 0) << "the request was answered although its store never did";
  rls_client.join();
  EXPECT_EQ(rls_code, grpc::StatusCode::UNAVAILABLE);
  // The decision lands after the deadline: too late, its connection is closed unanswered.
  fake_->ReleaseHeld();
  service_.reset();
  client.join();
  EXPECT_EQ(answer, 0);
}

TEST_F(ShutdownTest, ShutdownTimeoutIsLiveOnReload) {
  Start("10s");
  Config next = service_->config();
  next.server.shutdown_timeout = std::chrono::seconds(3);
  ReloadResult r = service_->Reload(std::move(next));
  ASSERT_TRUE(r.ok()) << r.status.ToString();
  EXPECT_THAT(r.applied, Contains("server.shutdown_timeout"));
  EXPECT_TRUE(r.restart_only.empty());
  service_->Stop();
  EXPECT_THAT(Lines(), Contains(HasSubstr("answering what is in flight for up to 3s")));
}

// A Redis that stops answering (the link to it held) with a decision in flight, past
// shutdown_timeout: the service ends with the call still held in the Redis store, which fails it
// as it closes; that answer runs through the circuit breaker and the engine above the store.
TEST(ShutdownOnRedis, ACallStillHeldWhenTheServiceEndsIsAnsweredThroughPartsStillThere) {
  auto redis = testing::RedisServer::Start();
  ASSERT_TRUE(redis.ok()) << redis.status().ToString();
  auto proxy = testing::DelayProxy::Start({.target_port = (*redis)->port()});
  ASSERT_TRUE(proxy.ok()) << proxy.status().ToString();
  auto config = ParseConfig(Cat("store: {url: '", (*proxy)->url(),
                                "', timeout: 10s}\n"
                                "server: {http: '127.0.0.1:0', shutdown_timeout: 50ms}\n"
                                "policies:\n"
                                "  - name: per-key\n"
                                "    identity: [api_key]\n"
                                "    limits: [{algorithm: token_bucket, capacity: 100, "
                                "refill: 100/1m}]\n"),
                            "shutdown_test.yaml");
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  auto started = Service::Start(
      std::move(*config),
      {.clock = SystemClock::Instance(), .log_sink = [](LogLevel, std::string_view) {}});
  ASSERT_TRUE(started.ok()) << started.status().ToString();
  std::unique_ptr<Service> service = std::move(*started);
  const uint16_t port = service->http_port();
  int first = 0;
  for (int i = 0; i < 200 && first != 200; ++i) first = Post(port, "/v1/check", kCheck).first;
  ASSERT_EQ(first, 200) << "decided on Redis before the link is held";
  (*proxy)->Hold();
  const uint64_t sent_before = (*proxy)->Counts().to_target_bytes;
  std::thread client([port] { Post(port, "/v1/check", kCheck); });
  // The decision's script call (far longer than a readiness PING) is in the held link.
  for (int i = 0; i < 10'000 && (*proxy)->Counts().to_target_bytes < sent_before + 100; ++i) {
    std::this_thread::yield();
  }
  ASSERT_GE((*proxy)->Counts().to_target_bytes, sent_before + 100);
  service->Stop();
  service.reset();
  client.join();
  EXPECT_EQ(*(*redis)->Command({"PING"}), "PONG");
}

}  // namespace
}  // namespace caudal
