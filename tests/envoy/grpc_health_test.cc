// grpc.health.v1.Health on the RLS server, against a real gRPC client on a loopback port.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <string>

#include "config/ratelimit_config_yaml.h"
#include "envoy/grpc_server.h"
#include "envoy/rls_stack.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "support/fake_store.h"
#include "support/manual_clock.h"

namespace caudal::envoy {
namespace {

using ::grpc::health::v1::Health;
using ::grpc::health::v1::HealthCheckRequest;
using ::grpc::health::v1::HealthCheckResponse;
constexpr auto kServing = HealthCheckResponse::SERVING;
constexpr auto kNotServing = HealthCheckResponse::NOT_SERVING;
constexpr const char* kRls = "envoy.service.ratelimit.v3.RateLimitService";

std::chrono::system_clock::time_point Deadline() {
  return std::chrono::system_clock::now() + std::chrono::seconds(10);
}

HealthCheckRequest For(std::string service) {
  HealthCheckRequest r;
  r.set_service(std::move(service));
  return r;
}

// One Watch stream, read synchronously; every read is bounded by the context's deadline.
class WatchStream {
 public:
  WatchStream(Health::Stub& stub, const std::string& service) {
    context_.set_deadline(Deadline());
    reader_ = stub.Watch(&context_, For(service));
  }
  // The next status sent, or UNKNOWN once the stream ended.
  HealthCheckResponse::ServingStatus Next() {
    HealthCheckResponse r;
    return reader_->Read(&r) ? r.status() : HealthCheckResponse::UNKNOWN;
  }
  grpc::Status Finish() { return reader_->Finish(); }

 private:
  grpc::ClientContext context_;
  std::unique_ptr<grpc::ClientReader<HealthCheckResponse>> reader_;
};

class GrpcHealthTest : public ::testing::Test {
 protected:
  void Start(GrpcServerOptions options = {}) {
    auto config = ParseRateLimitConfigText("domain: d\n", "test.yaml");
    ASSERT_TRUE(config.ok()) << config.status().ToString();
    stack_ = std::make_unique<testing::RlsStack>(
        store_, clock_, std::make_shared<RateLimitConfig>(std::move(*config)));
    ASSERT_TRUE(stack_->status().ok());
    options.address = "127.0.0.1:0";
    options.clock = &SystemClock::Instance();
    options.ready = [this] { return ready_.load(); };
    auto server = RlsGrpcServer::Start(stack_->handler(), options);
    ASSERT_TRUE(server.ok()) << server.status().ToString();
    server_ = std::move(*server);
    stub_ = Health::NewStub(grpc::CreateChannel("127.0.0.1:" + std::to_string(server_->port()),
                                                grpc::InsecureChannelCredentials()));
  }

  grpc::Status Check(const std::string& service, HealthCheckResponse* out) {
    grpc::ClientContext context;
    context.set_deadline(Deadline());
    return stub_->Check(&context, For(service), out);
  }

  HealthCheckResponse::ServingStatus CheckStatus(const std::string& service) {
    HealthCheckResponse r;
    const grpc::Status s = Check(service, &r);
    EXPECT_TRUE(s.ok()) << s.error_message();
    return r.status();
  }

  std::atomic<bool> ready_{true};
  ManualClock clock_{std::chrono::seconds(1'699'920'000)};
  caudal::testing::FakeStore store_{clock_};
  std::unique_ptr<testing::RlsStack> stack_;
  std::unique_ptr<RlsGrpcServer> server_;
  std::unique_ptr<Health::Stub> stub_;
};

TEST_F(GrpcHealthTest, CheckFollowsReadinessForTheServerAndTheRateLimitService) {
  Start();
  EXPECT_EQ(CheckStatus(""), kServing);
  EXPECT_EQ(CheckStatus(kRls), kServing);
  ready_ = false;  // Check reads readiness on every call
  EXPECT_EQ(CheckStatus(""), kNotServing);
  EXPECT_EQ(CheckStatus(kRls), kNotServing);
  ready_ = true;
  EXPECT_EQ(CheckStatus(""), kServing);

  HealthCheckResponse r;
  const grpc::Status unknown = Check("grpc.reflection.v1.ServerReflection", &r);
  EXPECT_EQ(unknown.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(unknown.error_message(), "unknown service 'grpc.reflection.v1.ServerReflection'");
  EXPECT_EQ(Check("bad\xFF", &r).error_code(), grpc::StatusCode::NOT_FOUND);
}

TEST_F(GrpcHealthTest, ListNamesBothServices) {
  Start();
  ready_ = false;
  grpc::ClientContext context;
  context.set_deadline(Deadline());
  ::grpc::health::v1::HealthListResponse r;
  ASSERT_TRUE(stub_->List(&context, {}, &r).ok());
  ASSERT_EQ(r.statuses_size(), 2);
  EXPECT_EQ(r.statuses().at("").status(), kNotServing);
  EXPECT_EQ(r.statuses().at(kRls).status(), kNotServing);
}

TEST_F(GrpcHealthTest, WatchSendsTheStatusThenEachChangeWhenNotified) {
  // A poll interval far beyond the test: only NotifyReadinessChanged can explain a prompt change.
  Start({.health_poll_interval = std::chrono::hours(1)});
  WatchStream watch(*stub_, kRls);
  EXPECT_EQ(watch.Next(), kServing);
  ready_ = false;
  server_->NotifyReadinessChanged();
  EXPECT_EQ(watch.Next(), kNotServing);
  ready_ = true;
  server_->NotifyReadinessChanged();
  EXPECT_EQ(watch.Next(), kServing);
  // On shutdown the stream is told NOT_SERVING and ends cleanly (clients then retry elsewhere).
  server_->Shutdown();
  EXPECT_EQ(watch.Next(), kNotServing);
  EXPECT_EQ(watch.Next(), HealthCheckResponse::UNKNOWN);
  EXPECT_TRUE(watch.Finish().ok());
}

TEST_F(GrpcHealthTest, WatchSeesAChangeByPollingWithoutNotice) {
  Start({.health_poll_interval = std::chrono::milliseconds(5)});
  WatchStream watch(*stub_, "");
  EXPECT_EQ(watch.Next(), kServing);
  ready_ = false;
  EXPECT_EQ(watch.Next(), kNotServing);
  ready_ = true;
  EXPECT_EQ(watch.Next(), kServing);
}

TEST_F(GrpcHealthTest, WatchOnAnUnknownServiceSaysSoAndStaysOpen) {
  Start({.health_poll_interval = std::chrono::milliseconds(5)});
  WatchStream watch(*stub_, "other.Service");
  EXPECT_EQ(watch.Next(), HealthCheckResponse::SERVICE_UNKNOWN);
  ready_ = false;  // changes nothing for a service the server does not know
  server_->NotifyReadinessChanged();
  server_->Shutdown();
  EXPECT_EQ(watch.Next(), HealthCheckResponse::UNKNOWN);  // ended without another message
  EXPECT_TRUE(watch.Finish().ok());
}

TEST_F(GrpcHealthTest, WatchStreamsAreBoundedAndShutdownDoesNotWaitForThem) {
  Start({.health_poll_interval = std::chrono::hours(1), .max_health_watchers = 2});
  WatchStream a(*stub_, "");
  WatchStream b(*stub_, kRls);
  EXPECT_EQ(a.Next(), kServing);
  EXPECT_EQ(b.Next(), kServing);
  WatchStream refused(*stub_, "");
  EXPECT_EQ(refused.Next(), HealthCheckResponse::UNKNOWN);
  const grpc::Status s = refused.Finish();
  EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_EQ(s.error_message(), "more than 2 health watches open");
  // Open streams would hold the server until its 5 s shutdown deadline; they are ended first.
  const auto start = std::chrono::steady_clock::now();
  server_->Shutdown();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(4));
  EXPECT_EQ(a.Next(), kNotServing);
  EXPECT_TRUE(a.Finish().ok());
  EXPECT_EQ(b.Next(), kNotServing);
  EXPECT_TRUE(b.Finish().ok());
}

TEST_F(GrpcHealthTest, AClientThatGoesAwayFreesItsStream) {
  Start({.health_poll_interval = std::chrono::hours(1), .max_health_watchers = 1});
  for (int i = 0; i < 5; ++i) {
    // The server frees a cancelled stream a moment after the client sees it end, so a new one
    // may be refused at first; it must find the place free soon after.
    bool served = false;
    for (int attempt = 0; attempt < 1000 && !served; ++attempt) {
      grpc::ClientContext context;
      context.set_deadline(Deadline());
      auto reader = stub_->Watch(&context, For(""));
      HealthCheckResponse r;
      if (!reader->Read(&r)) {
        EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
        continue;
      }
      served = true;
      EXPECT_EQ(r.status(), kServing);
      context.TryCancel();
      EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::CANCELLED);
    }
    ASSERT_TRUE(served) << "stream " << i << " never found a free place";
  }
}

}  // namespace
}  // namespace caudal::envoy
