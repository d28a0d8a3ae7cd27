// ShouldRateLimit over gRPC on the Redis store, and the failure modes with Redis stopped.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <map>
#include <string>

#include "caudal/redis/redis_store.h"
#include "config/ratelimit_config_yaml.h"
#include "envoy/grpc_server.h"
#include "envoy/rls_client.h"
#include "rls_stack.h"
#include "support/manual_clock.h"
#include "support/redis_server.h"

namespace caudal::envoy {
namespace {

constexpr auto kOk = RateLimitResponse::OK;
constexpr auto kOver = RateLimitResponse::OVER_LIMIT;

constexpr std::string_view kConfig = R"(
domain: redis
descriptors:
  - key: bucket
    rate_limit: {unit: second, requests_per_unit: 2, algorithm: token_bucket, capacity: 4}
  - key: one
    rate_limit: {unit: minute, requests_per_unit: 1}
  - key: five
    rate_limit: {unit: minute, requests_per_unit: 5}
  - key: stream
    rate_limit: {unit: minute, requests_per_unit: 60, algorithm: token_bucket, capacity: 100,
                 always_charge: true, name: stream}
)";

RateLimitRequest Request(std::vector<std::string> values_by_key) {
  RateLimitRequest r;
  r.set_domain("redis");
  for (size_t i = 0; i + 1 < values_by_key.size(); i += 2) {
    auto* e = r.add_descriptors()->add_entries();
    e->set_key(values_by_key[i]);
    e->set_value(values_by_key[i + 1]);
  }
  return r;
}

// One RLS server on the shared RedisStore.
struct Service {
  Service(Store& store, const Clock& clock, testing::RlsSetup setup) {
    auto config = ParseRateLimitConfigText(kConfig, "redis.yaml");
    EXPECT_TRUE(config.ok()) << config.status().ToString();
    stack = std::make_unique<testing::RlsStack>(
        store, clock, std::make_shared<RateLimitConfig>(std::move(*config)), setup);
    EXPECT_TRUE(stack->status().ok());
    auto started = RlsGrpcServer::Start(
        stack->handler(), {.address = "127.0.0.1:0", .clock = &SystemClock::Instance()});
    EXPECT_TRUE(started.ok()) << started.status().ToString();
    server = std::move(*started);
    client = std::make_unique<testing::RlsClient>(server->port());
  }
  std::unique_ptr<testing::RlsStack> stack;
  std::unique_ptr<RlsGrpcServer> server;
  std::unique_ptr<testing::RlsClient> client;
};

class RedisRlsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto redis = caudal::testing::RedisServer::Start();
    ASSERT_TRUE(redis.ok()) << redis.status().ToString();
    redis_ = std::move(*redis);
    auto store = RedisStore::Open(SystemClock::Instance(),
                                  {.url = redis_->url(),
                                   .deadline = std::chrono::milliseconds(50),
                                   .connect_timeout = std::chrono::milliseconds(500),
                                   .decision_clock = &clock_});
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    store_ = std::move(*store);
  }

  RateLimitResponse Ask(Service& s, const RateLimitRequest& r) {
    RateLimitResponse resp;
    const grpc::Status status = s.client->Call(r, &resp);
    EXPECT_TRUE(status.ok()) << status.error_message();
    return resp;
  }

  ManualClock clock_{std::chrono::seconds(1'699'920'000)};
  std::unique_ptr<caudal::testing::RedisServer> redis_;
  std::unique_ptr<RedisStore> store_;
};

TEST_F(RedisRlsTest, DecidesTheTokenBucketBoundAndAllOrNothingInRedis) {
  Service s(*store_, clock_, {});
  const auto bucket = Request({"bucket", "a"});
  for (int i = 0; i < 4; ++i) ASSERT_EQ(Ask(s, bucket).overall_code(), kOk) << i;
  EXPECT_EQ(Ask(s, bucket).overall_code(), kOver);
  clock_.Advance(std::chrono::milliseconds(500));
  EXPECT_EQ(Ask(s, bucket).overall_code(), kOk);
  EXPECT_EQ(Ask(s, bucket).overall_code(), kOver);

  const auto both = Request({"one", "x", "five", "x"});
  EXPECT_EQ(Ask(s, both).overall_code(), kOk);
  const auto refused = Ask(s, both);
  EXPECT_EQ(refused.overall_code(), kOver);
  EXPECT_EQ(refused.statuses(1).limit_remaining(), 4u);  // not consumed in Redis either
  EXPECT_EQ(Ask(s, Request({"five", "x"})).statuses(0).limit_remaining(), 3u);

  // A second caudal instance on the same Redis sees the same counters.
  Service other(*store_, clock_, {});
  EXPECT_EQ(Ask(other, Request({"five", "x"})).statuses(0).limit_remaining(), 2u);

  // is_negative_hits gives hits back in Redis: the bucket, empty, holds 2 again.
  auto refund = bucket;
  refund.mutable_descriptors(0)->mutable_hits_addend()->set_value(2);
  refund.mutable_descriptors(0)->set_is_negative_hits(true);
  const auto back = Ask(other, refund);
  EXPECT_EQ(back.overall_code(), kOk);
  EXPECT_EQ(back.statuses(0).limit_remaining(), 2u);
  EXPECT_EQ(Ask(s, bucket).overall_code(), kOk);
  EXPECT_EQ(Ask(s, bucket).overall_code(), kOk);
  EXPECT_EQ(Ask(s, bucket).overall_code(), kOver);
}

// Envoy's apply_on_stream_done on two instances of one deployment, each with its own connection
// to one redis-server: A's check of hits_addend 0 passes, A's report of the stream's actual cost
// (130, more than the burst of 100) is refused and counted all the same, 30 into debt; B's next
// check is refused until the debt is paid at one unit a second, and says when (RateLimit's t,
// x-ratelimit-reset), exactly: 1 ms before, still refused.
TEST_F(RedisRlsTest, AStreamsReportChargedOnOneInstanceMakesTheOtherWaitUntilTheDebtIsPaid) {
  auto second = RedisStore::Open(
      SystemClock::Instance(),
      {.url = redis_->url(), .deadline = std::chrono::seconds(2), .decision_clock = &clock_});
  ASSERT_TRUE(second.ok()) << second.status().ToString();
  const testing::RlsSetup setup{.rls = {.headers = HeaderMode::kIetfAndXRateLimit}};
  Service a(*store_, clock_, setup);
  Service b(**second, clock_, setup);
  const auto headers = [](const RateLimitResponse& r) {
    std::map<std::string, std::string> out;
    for (const auto& h : r.response_headers_to_add()) out[h.key()] = h.value();
    return out;
  };
  auto check = Request({"stream", "client-7"});
  check.mutable_descriptors(0)->mutable_hits_addend()->set_value(0);
  auto report = check;
  report.mutable_descriptors(0)->mutable_hits_addend()->set_value(130);

  RateLimitResponse r = Ask(a, check);
  ASSERT_EQ(r.overall_code(), kOk);
  EXPECT_EQ(r.statuses(0).limit_remaining(), 100u);
  r = Ask(a, report);
  EXPECT_EQ(r.overall_code(), kOver) << "the report did not fit (Envoy ignores the answer)";
  EXPECT_EQ(r.statuses(0).duration_until_reset().seconds(), 130) << "counted: 130 to refill";

  r = Ask(b, check);
  EXPECT_EQ(r.overall_code(), kOver) << "another instance's next check waits";
  EXPECT_EQ(r.statuses(0).limit_remaining(), 0u);
  EXPECT_EQ(r.statuses(0).duration_until_reset().seconds(), 130);
  EXPECT_EQ(headers(r)["RateLimit"], "\"stream\";r=0;t=30") << "until the debt is paid";
  EXPECT_EQ(headers(r)["x-ratelimit-reset"], "30");
  clock_.Advance(std::chrono::milliseconds(29'999));
  r = Ask(b, check);
  EXPECT_EQ(r.overall_code(), kOver);
  EXPECT_EQ(headers(r)["x-ratelimit-reset"], "1");
  clock_.Advance(std::chrono::milliseconds(1));
  r = Ask(b, check);
  EXPECT_EQ(r.overall_code(), kOk) << "the debt is paid";
  EXPECT_EQ(r.statuses(0).limit_remaining(), 0u);
  EXPECT_EQ(r.statuses(0).duration_until_reset().seconds(), 100);

  // All-or-nothing: a report that another descriptor refuses is charged all the same.
  clock_.Advance(std::chrono::seconds(10));
  ASSERT_EQ(Ask(a, Request({"one", "x"})).overall_code(), kOk);  // used up
  auto both = Request({"stream", "client-7", "one", "x"});
  both.mutable_descriptors(0)->mutable_hits_addend()->set_value(4);
  r = Ask(b, both);
  EXPECT_EQ(r.overall_code(), kOver);
  EXPECT_EQ(r.statuses(0).code(), kOk) << "the 4 fitted the 10 refilled";
  EXPECT_EQ(r.statuses(1).code(), kOver);
  EXPECT_EQ(Ask(a, check).statuses(0).limit_remaining(), 6u);
}

TEST_F(RedisRlsTest, RedisStoppedAnswersByFailureModeWithinTheDeadline) {
  Service allow(*store_, clock_, {.domains = {.on_failure = FailureMode::kAllow}});
  Service deny(*store_, clock_, {.domains = {.on_failure = FailureMode::kDeny}});
  Service unavailable(
      *store_, clock_,
      {.domains = {.on_failure = FailureMode::kDeny}, .rls = {.deny_as = DenyAs::kUnavailable}});
  const auto req = Request({"five", "f"});
  ASSERT_EQ(Ask(allow, req).overall_code(), kOk);
  redis_->Stop();

  const auto start = std::chrono::steady_clock::now();
  auto r = Ask(allow, req);
  EXPECT_EQ(r.overall_code(), kOk);
  ASSERT_EQ(r.response_headers_to_add_size(), 1);
  EXPECT_EQ(r.response_headers_to_add(0).key(), "Caudal-Degraded");
  r = Ask(deny, req);
  EXPECT_EQ(r.overall_code(), kOver);
  EXPECT_EQ(r.statuses(0).code(), kOver);
  RateLimitResponse resp;
  const grpc::Status s = unavailable.client->Call(req, &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAVAILABLE);
  // Answers come from the store's deadline (50 ms) or its fail-fast, not the client's 10 s.
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(3));

  ASSERT_TRUE(redis_->Restart().ok());
  bool recovered = false;
  for (int i = 0; i < 200 && !recovered; ++i) {  // the store reconnects in the background
    // deny_unavailable: an OK status means the store decided again.
    recovered = unavailable.client->Call(Request({"five", "g"}), &resp).ok();
    if (!recovered) std::this_thread::sleep_for(std::chrono::milliseconds(25));
  }
  EXPECT_TRUE(recovered) << "decisions did not resume after Redis came back";
}

}  // namespace
}  // namespace caudal::envoy
