// The RLS gRPC service against a real gRPC client on a loopback port.
#include <gmock/gmock.h>
#include <google/protobuf/stubs/logging.h>
#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <mutex>

#include "config/ratelimit_config_yaml.h"
#include "envoy/grpc_server.h"
#include "envoy/rls_client.h"
#include "rls_stack.h"
#include "support/fake_store.h"
#include "support/manual_clock.h"

namespace caudal::envoy {
namespace {

using caudal::testing::FakeStore;
using ::testing::HasSubstr;
constexpr auto kOk = RateLimitResponse::OK;
constexpr auto kOver = RateLimitResponse::OVER_LIMIT;

constexpr std::string_view kConfig = R"(
domain: messaging
descriptors:
  - key: message_type
    value: marketing
    descriptors:
      - key: to_number
        rate_limit: {unit: day, requests_per_unit: 5}
  - key: to_number
    rate_limit: {unit: day, requests_per_unit: 100}
  - key: path
    value: /api/*
    rate_limit: {unit: second, requests_per_unit: 2, algorithm: token_bucket, capacity: 4}
)";

RateLimitRequest Request(std::vector<std::pair<std::string, std::string>> entries,
                         std::string domain = "messaging") {
  RateLimitRequest r;
  r.set_domain(std::move(domain));
  auto* d = r.add_descriptors();
  for (auto& [k, v] : entries) {
    auto* e = d->add_entries();
    e->set_key(k);
    e->set_value(v);
  }
  return r;
}

class GrpcServiceTest : public ::testing::Test {
 protected:
  void StartWith(Store& store, testing::RlsSetup setup = {}, GrpcServerOptions grpc = {}) {
    auto config = ParseRateLimitConfigText(kConfig, "test.yaml");
    ASSERT_TRUE(config.ok()) << config.status().ToString();
    stack_ = std::make_unique<testing::RlsStack>(
        store, clock_, std::make_shared<RateLimitConfig>(std::move(*config)), setup);
    ASSERT_TRUE(stack_->status().ok());
    grpc.address = "127.0.0.1:0";
    grpc.clock = &SystemClock::Instance();
    auto server = RlsGrpcServer::Start(stack_->handler(), grpc);
    ASSERT_TRUE(server.ok()) << server.status().ToString();
    server_ = std::move(*server);
    client_ = std::make_unique<testing::RlsClient>(server_->port());
  }

  RateLimitResponse Ask(const RateLimitRequest& r) {
    RateLimitResponse resp;
    const grpc::Status s = client_->Call(r, &resp);
    EXPECT_TRUE(s.ok()) << s.error_message();
    return resp;
  }

  ManualClock clock_{std::chrono::seconds(1'699'920'000)};  // midnight UTC
  FakeStore store_{clock_};
  std::unique_ptr<testing::RlsStack> stack_;
  std::unique_ptr<RlsGrpcServer> server_;
  std::unique_ptr<testing::RlsClient> client_;
};

TEST_F(GrpcServiceTest, DecidesNestedDescriptorsAndWildcardsOverTheWire) {
  StartWith(store_);
  const auto marketing = Request({{"message_type", "marketing"}, {"to_number", "2061111111"}});
  for (int i = 0; i < 5; ++i) ASSERT_EQ(Ask(marketing).overall_code(), kOk) << i;
  auto r = Ask(marketing);
  EXPECT_EQ(r.overall_code(), kOver);
  EXPECT_EQ(r.statuses(0).current_limit().unit(), RateLimitResponse::RateLimit::DAY);
  EXPECT_EQ(r.statuses(0).duration_until_reset().seconds(), 24 * 3600);
  EXPECT_EQ(Ask(Request({{"to_number", "2061111111"}})).statuses(0).limit_remaining(), 99u);

  // Wildcard + token bucket: the whole bound (burst 4, then 2 per second).
  const auto api = Request({{"path", "/api/users"}});
  for (int i = 0; i < 4; ++i) ASSERT_EQ(Ask(api).overall_code(), kOk) << i;
  EXPECT_EQ(Ask(api).overall_code(), kOver);
  clock_.Advance(std::chrono::milliseconds(500));
  EXPECT_EQ(Ask(api).overall_code(), kOk);
  EXPECT_EQ(Ask(api).overall_code(), kOver);
  EXPECT_EQ(Ask(Request({{"path", "/other"}})).statuses(0).has_current_limit(), false);
}

TEST_F(GrpcServiceTest, BadRequestsGetInvalidArgumentWithTheMessage) {
  StartWith(store_);
  RateLimitResponse resp;
  grpc::Status s = client_->Call(Request({{"to_number", "1"}}, ""), &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  s = client_->Call(Request({{"to_number", std::string(100'000, 'x')}}), &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(), HasSubstr("exceeds 65536"));
  s = client_->Call(Request({{"to_number", std::string(2 << 20, 'x')}}), &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);    // gRPC's own bound
  EXPECT_EQ(Ask(Request({{"to_number", "1"}})).overall_code(), kOk);  // still serving
}

// protobuf's log lines, counted while a test runs (a library that logs per call floods the log).
std::atomic<int> protobuf_log_lines{0};
void CountLogLine(google::protobuf::LogLevel, const char*, int, const std::string&) {
  protobuf_log_lines.fetch_add(1);
}

TEST_F(GrpcServiceTest, TextThatIsNotUtf8IsInvalidArgumentNamingTheFieldAndLogsNothing) {
  StartWith(store_);
  protobuf_log_lines = 0;
  google::protobuf::LogHandler* previous = google::protobuf::SetLogHandler(&CountLogLine);
  RateLimitResponse resp;
  grpc::Status s = client_->Call(Request({{"to_number",
                                           "20\xFF"
                                           "6"}}),
                                 &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(s.error_message(), "descriptor 0: entry 0 (to_number) value is not valid UTF-8");
  s = client_->Call(Request({{"message_type", "marketing"}, {"to_\xC3", "1"}}), &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(s.error_message(), "descriptor 0: entry 1 key is not valid UTF-8");
  s = client_->Call(Request({{"to_number", "1"}}, "mess\xED\xA0\x80ging"), &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(s.error_message(), "domain is not valid UTF-8");
  // Nothing was counted, and valid UTF-8 beyond ASCII is served.
  EXPECT_EQ(Ask(Request({{"to_number", "caf\xC3\xA9"}})).statuses(0).limit_remaining(), 99u);
  EXPECT_EQ(Ask(Request({{"to_number", "caf\xC3\xA9"}})).statuses(0).limit_remaining(), 98u);
  google::protobuf::SetLogHandler(previous);
  EXPECT_EQ(protobuf_log_lines.load(), 0);
}

TEST_F(GrpcServiceTest, StoreDownWithDenyUnavailableIsAnUnavailableRpc) {
  FakeStore down(clock_);
  down.FailWith(Status::Unavailable("redis: connection refused"));
  StartWith(down, {.domains = {.on_failure = FailureMode::kDeny},
                   .rls = {.deny_as = DenyAs::kUnavailable}});
  RateLimitResponse resp;
  const grpc::Status s = client_->Call(Request({{"to_number", "1"}}), &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_THAT(s.error_message(), HasSubstr("connection refused"));
}

TEST_F(GrpcServiceTest, StoreDownWithAllowAnswersOkMarkedDegraded) {
  FakeStore down(clock_);
  down.FailWith(Status::DeadlineExceeded("redis: no answer within 50ms"));
  StartWith(down, {.domains = {.on_failure = FailureMode::kAllow}});
  const auto r = Ask(Request({{"to_number", "1"}}));
  EXPECT_EQ(r.overall_code(), kOk);
  ASSERT_EQ(r.response_headers_to_add_size(), 1);
  EXPECT_EQ(r.response_headers_to_add(0).key(), "Caudal-Degraded");
  EXPECT_EQ(r.response_headers_to_add(0).value(), "store_unavailable");
}

TEST_F(GrpcServiceTest, CallsBeyondTheConcurrencyBoundAreRefusedAtOnce) {
  FakeStore parking(clock_);
  parking.Hold();
  StartWith(parking, {.domains = {.on_failure = FailureMode::kDeny}}, {.max_concurrent_calls = 2});
  std::mutex mu;
  std::condition_variable cv;
  int finished = 0;
  std::vector<grpc::Status> statuses(2);
  std::vector<RateLimitResponse> responses(2);
  std::vector<std::unique_ptr<grpc::ClientContext>> contexts;
  const auto req = Request({{"to_number", "1"}});
  for (int i = 0; i < 2; ++i) {
    contexts.push_back(std::make_unique<grpc::ClientContext>());
    client_->stub().async()->ShouldRateLimit(contexts.back().get(), &req, &responses[i],
                                             [&, i](grpc::Status s) {
                                               std::lock_guard lock(mu);
                                               statuses[i] = std::move(s);
                                               ++finished;
                                               cv.notify_all();
                                             });
  }
  // Both calls reach the store and wait there.
  ASSERT_TRUE(parking.WaitForHeld(2));
  RateLimitResponse resp;
  const grpc::Status third = client_->Call(req, &resp);
  EXPECT_EQ(third.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_THAT(third.error_message(), HasSubstr("more than 2 calls in flight"));

  parking.ReleaseHeld(Status::Unavailable("released"));
  std::unique_lock lock(mu);
  ASSERT_TRUE(cv.wait_for(lock, std::chrono::seconds(10), [&] { return finished == 2; }));
  for (int i = 0; i < 2; ++i) {
    EXPECT_TRUE(statuses[i].ok());
    EXPECT_EQ(responses[i].overall_code(), kOver);  // deny failure mode
  }
}

}  // namespace
}  // namespace caudal::envoy
