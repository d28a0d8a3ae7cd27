// The shared suites on a primary with a replica under 3 sentinels (CTest runs the binary as one
// test, one setup): the Store conformance suite and the Lua ≡ C++ equivalence replay through
// RedisSentinelStore deciding at a ManualClock's time, no double spend across 3 processes, and
// the checks that keep decisions off replicas and say what is wrong with a URL.
#include <gtest/gtest.h>

#include <boost/asio/post.hpp>
#include <future>
#include <iostream>

#include "caudal/redis/redis_store.h"
#include "common/cat.h"
#include "redis/connection.h"
#include "redis/double_spend.h"
#include "redis/equivalence_replay.h"
#include "redis/store_support.h"
#include "store/batch.h"
#include "support/manual_clock.h"
#include "support/redis_sentinel.h"
#include "support/store_conformance.h"

namespace caudal {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using testing::RedisSentinels;

std::unique_ptr<RedisSentinels>& SetupSlot() {
  static std::unique_ptr<RedisSentinels> setup;
  return setup;
}

RedisSentinels* Sentinels() {
  std::unique_ptr<RedisSentinels>& slot = SetupSlot();
  if (!slot) {
    Result<std::unique_ptr<RedisSentinels>> s = RedisSentinels::Start();
    if (!s.ok()) ADD_FAILURE() << s.status().ToString();
    if (s.ok()) slot = std::move(*s);
  }
  return slot.get();
}

class SentinelEnvironment : public ::testing::Environment {
 public:
  void TearDown() override { SetupSlot().reset(); }
};
const auto* const kEnvironment = ::testing::AddGlobalTestEnvironment(new SentinelEnvironment);

std::string Url() {
  return Sentinels() != nullptr ? Sentinels()->url() : "redis-sentinel://unavailable:1/mymaster";
}

std::unique_ptr<RedisSentinelStore> Open(const Clock* clock) {
  Result<std::unique_ptr<RedisSentinelStore>> store = RedisSentinelStore::Open(
      SystemClock::Instance(),
      {.url = Url(), .deadline = std::chrono::seconds(5), .decision_clock = clock});
  EXPECT_TRUE(store.ok()) << store.status().ToString();
  return store.ok() ? std::move(*store) : nullptr;
}

INSTANTIATE_TEST_SUITE_P(RedisSentinel, StoreConformanceTest,
                         ::testing::Values(StoreConformanceParam{
                             .name = "redis_sentinel",
                             .make = [](ManualClock& c) { return Open(&c); }}),
                         StoreConformanceParamName);

class SentinelEquivalence : public ::testing::Test {
 protected:
  void SetUp() override {
    store_ = Open(&clock_);
    ASSERT_NE(store_, nullptr);
  }

  void Replay(uint64_t seed, const std::function<Algorithm(equivalence::Tracer&)>& pick) {
    equivalence::Replay(
        seed, pick, equivalence::kDecisionsPerAlgorithm / 2,
        [this](const std::vector<std::vector<EntryRef>>& requests, int64_t now) {
          clock_.Set(std::chrono::microseconds(now));
          std::vector<DecideResponse> out;
          for (const std::vector<EntryRef>& r : requests) {
            Result<DecideResponse> got = DecideBatch(*store_, r);
            EXPECT_TRUE(got.ok()) << got.status().ToString();
            out.push_back(got.ok() ? *got : DecideResponse{});
          }
          return out;
        },
        Cat("sentinel:", seed, ':'));
  }

  ManualClock clock_;
  std::unique_ptr<RedisSentinelStore> store_;
};

TEST_F(SentinelEquivalence, FixedWindow) {
  Replay(21, [](equivalence::Tracer&) { return Algorithm::kFixedWindow; });
}
TEST_F(SentinelEquivalence, SlidingWindowLog) {
  Replay(22, [](equivalence::Tracer&) { return Algorithm::kSlidingWindowLog; });
}
TEST_F(SentinelEquivalence, SlidingWindowCounter) {
  Replay(23, [](equivalence::Tracer&) { return Algorithm::kSlidingWindowCounter; });
}
TEST_F(SentinelEquivalence, TokenBucket) {
  Replay(24, [](equivalence::Tracer&) { return Algorithm::kTokenBucket; });
}
TEST_F(SentinelEquivalence, Gcra) {
  Replay(25, [](equivalence::Tracer&) { return Algorithm::kGcra; });
}
TEST_F(SentinelEquivalence, RequestsMixingAlgorithms) {
  Replay(26, [](equivalence::Tracer& t) {
    return kAllAlgorithms[static_cast<size_t>(t.Uniform(0, std::ssize(kAllAlgorithms) - 1))];
  });
}

TEST(SentinelDoubleSpend, ThreeProcessesNeverAdmitMoreThanTheLimits) {
  const std::string url = Url();
  const double_spend::Limits limits;
  const auto start = double_spend::SteadyClock::now();
  const double_spend::Tally total = double_spend::RunProcesses(3, [&](double_spend::Tally& tally) {
    auto store =
        RedisSentinelStore::Open(SystemClock::Instance(), {.url = url, .deadline = seconds(2)});
    if (!store.ok()) {
      tally.errors = 1'000'000;
      return;
    }
    double_spend::Hammer(tally, limits, 8, milliseconds(1500),
                         [&](int, const std::string& name, const Limit& limit) -> Result<Decision> {
                           const std::string key = Cat("ds:", name);
                           const ConsumeEntry e{.key = key, .limit = &limit, .cost = 1};
                           Result<DecideResponse> r = (*store)->Decide({.consumes = {&e, 1}});
                           if (!r.ok()) return r.status();
                           return r->decisions[0];
                         });
  });
  const auto elapsed = double_spend::SteadyClock::now() - start;
  EXPECT_EQ(total.errors, 0);
  for (const std::string& v : double_spend::Violations(total, limits, elapsed)) ADD_FAILURE() << v;
  EXPECT_EQ(total.admitted.at("sliding_window_log"), limits.log.capacity());
  EXPECT_GE(total.admitted.at("token_bucket"), 20);
  for (const auto& [name, n] : total.admitted)
    std::cout << "sentinel: " << name << " " << n << "\n";
}

// A connection that must reach a primary refuses a replica (what the store's connections to the
// primary check, since a sentinel's answer may be stale).
TEST(SentinelStore, NeverDecidesOnAReplica) {
  RedisSentinels* setup = Sentinels();
  ASSERT_NE(setup, nullptr);
  redis::IoRunner runner;
  runner.Start();
  const redis::RedisUrl replica{.host = "127.0.0.1", .port = setup->server(1).port()};
  auto started = std::make_shared<std::promise<Status>>();
  std::shared_ptr<redis::Connection> conn;
  boost::asio::post(runner.io, [&, started] {
    conn = std::make_shared<redis::Connection>(runner.io, replica, nullptr, SystemClock::Instance(),
                                               redis::ConnectionSetup{.require_primary = true});
    conn->Start(
        seconds(5), [started](Status st) { started->set_value(st); }, [](Status) {});
  });
  const Status st = started->get_future().get();
  runner.Stop([&] { conn->Close(Status::Unavailable("done")); });
  EXPECT_EQ(st.code(), StatusCode::kUnavailable);
  EXPECT_NE(st.message().find("is not a primary (ROLE says \"slave\")"), std::string::npos)
      << st.message();
}

TEST(SentinelStore, FindsThePrimaryPastADeadSentinelAndSaysWhatIsWrong) {
  RedisSentinels* setup = Sentinels();
  ASSERT_NE(setup, nullptr);
  const std::string sentinels = Url().substr(0, Url().rfind('/'));
  // A first sentinel that is not there: the next one answers.
  const std::string with_dead =
      Cat("redis-sentinel://127.0.0.1:1,", sentinels.substr(17), "/mymaster");
  Result<std::unique_ptr<RedisSentinelStore>> store = RedisSentinelStore::Open(
      SystemClock::Instance(), {.url = with_dead, .connect_timeout = milliseconds(500)});
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  EXPECT_EQ((*store)->Name(), "redis-sentinel");
  EXPECT_TRUE((*store)->Ping().ok());
  const Limit l = Window(Algorithm::kFixedWindow, 2, seconds(60));
  EXPECT_EQ(DecideOne(**store, "found", l, 1).remaining, 1);
  // A name no sentinel knows: a configuration mistake, no retry fixes it.
  Result<std::unique_ptr<RedisSentinelStore>> unknown =
      RedisSentinelStore::Open(SystemClock::Instance(), {.url = Cat(sentinels, "/nosuchmaster")});
  EXPECT_EQ(unknown.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(unknown.status().message().find("knows no master named \"nosuchmaster\""),
            std::string::npos)
      << unknown.status().message();
  // No sentinel at all.
  Result<std::unique_ptr<RedisSentinelStore>> nobody = RedisSentinelStore::Open(
      SystemClock::Instance(),
      {.url = "redis-sentinel://127.0.0.1:1/mymaster", .connect_timeout = milliseconds(500)});
  EXPECT_EQ(nobody.status().code(), StatusCode::kUnavailable);
}

}  // namespace
}  // namespace caudal
