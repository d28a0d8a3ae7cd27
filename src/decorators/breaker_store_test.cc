#include "decorators/breaker_store.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "common/cat.h"
#include "support/fake_store.h"
#include "support/manual_clock.h"

namespace caudal {
namespace {

using std::chrono::milliseconds;
using testing::FakeStore;

const Status kRefused = Status::Unavailable("connection refused");

class BreakerTest : public ::testing::Test {
 protected:
  BreakerTest()
      : inner_(clock_, "scripted"),
        log_([this](LogLevel, std::string_view m) { lines_.push_back(std::string(m)); }),
        breaker_(inner_, clock_,
                 {.failures_to_open = 3,
                  .failing_for = milliseconds(0),
                  .open_for = milliseconds(100),
                  .log = &log_,
                  .metrics = &metrics_}) {}

  Status Call() {
    const Limit limit =
        *Limit::Create(LimitSpec::Window(Algorithm::kFixedWindow, 1000, std::chrono::seconds(1)));
    const ConsumeEntry e{.key = "k", .limit = &limit, .cost = 1};
    return breaker_.Decide({.consumes = std::span(&e, 1)}).status();
  }

  ManualClock clock_;
  FakeStore inner_;
  std::vector<std::string> lines_;
  Logger log_;
  Metrics metrics_;
  BreakerStore breaker_;
};

TEST_F(BreakerTest, ConsecutiveFailuresOpenItAndThenCallsFailAtOnce) {
  inner_.FailWith(kRefused);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(Call().code(), StatusCode::kUnavailable);
  EXPECT_EQ(breaker_.state(), BreakerState::kOpen);
  EXPECT_EQ(inner_.calls(), 3u);
  const Status fast = Call();
  EXPECT_EQ(fast.code(), StatusCode::kUnavailable);
  EXPECT_NE(fast.message().find("circuit open"), std::string::npos) << fast.message();
  EXPECT_NE(fast.message().find("connection refused"), std::string::npos) << fast.message();
  EXPECT_EQ(inner_.calls(), 3u);  // the store was not asked
  EXPECT_NE(metrics_.RenderPrometheus().find("caudal_store_breaker_state 1\n"), std::string::npos);
  EXPECT_NE(metrics_.RenderPrometheus().find("caudal_store_degraded 1\n"), std::string::npos);
}

TEST_F(BreakerTest, OneProbeAfterOpenForClosesItWhenTheStoreAnswers) {
  inner_.FailWith(kRefused);
  for (int i = 0; i < 3; ++i) EXPECT_FALSE(Call().ok());
  clock_.Advance(milliseconds(99));
  EXPECT_EQ(Call().code(), StatusCode::kUnavailable);
  EXPECT_EQ(inner_.calls(), 3u);
  clock_.Advance(milliseconds(1));
  EXPECT_EQ(Call().code(), StatusCode::kUnavailable);  // the probe: still failing
  EXPECT_EQ(inner_.calls(), 4u);
  EXPECT_EQ(breaker_.state(), BreakerState::kOpen);
  inner_.Recover();
  clock_.Advance(milliseconds(100));
  EXPECT_TRUE(Call().ok());  // the next probe succeeds
  EXPECT_EQ(breaker_.state(), BreakerState::kClosed);
  EXPECT_TRUE(Call().ok());
  EXPECT_EQ(inner_.calls(), 6u);
  ASSERT_EQ(lines_.size(), 2u);  // one line each way, none for the failed probe
  EXPECT_NE(lines_[0].find("warning store \"scripted\" failed 3 times in a row"), std::string::npos)
      << lines_[0];
  EXPECT_NE(lines_[1].find("answers again"), std::string::npos) << lines_[1];
}

TEST_F(BreakerTest, InterleavedFailuresNeverOpenItNorLog) {
  for (int i = 0; i < 1000; ++i) {
    inner_.FailNext({Status::DeadlineExceeded("no answer in 5ms"),
                     Status::DeadlineExceeded("no answer in 5ms")});
    EXPECT_FALSE(Call().ok());
    EXPECT_FALSE(Call().ok());
    EXPECT_TRUE(Call().ok());
  }
  EXPECT_EQ(breaker_.state(), BreakerState::kClosed);
  EXPECT_TRUE(lines_.empty());
}

TEST_F(BreakerTest, BadRequestsAndFullTablesAreNotTheStoresHealth) {
  for (int i = 0; i < 10; ++i) {
    inner_.FailNext({Status::InvalidArgument("bad key"), Status::ResourceExhausted("full")});
    EXPECT_EQ(Call().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(Call().code(), StatusCode::kResourceExhausted);
  }
  EXPECT_EQ(breaker_.state(), BreakerState::kClosed);
}

TEST(BreakerFailingFor, AShortStallThatTimesOutManyCallsDoesNotOpenIt) {
  ManualClock clock;
  FakeStore inner(clock);
  inner.Hold();  // calls in flight together, as under load, until the test answers them
  std::vector<std::string> lines;
  Logger log([&lines](LogLevel, std::string_view m) { lines.push_back(std::string(m)); });
  BreakerStore breaker(inner, clock,
                       {.failures_to_open = 5, .failing_for = milliseconds(100), .log = &log});
  const Limit limit =
      *Limit::Create(LimitSpec::Window(Algorithm::kFixedWindow, 1000, std::chrono::seconds(1)));
  const ConsumeEntry e{.key = "k", .limit = &limit, .cost = 1};
  auto send = [&](int n) {
    for (int i = 0; i < n; ++i)
      breaker.DecideAsync({.consumes = std::span(&e, 1)}, [](Result<DecideResponse>) {});
  };
  const Status late = Status::Unavailable("redis did not answer within the 5ms deadline");

  // A 20 ms stall: 100 calls in flight time out together, 5 ms after they were sent, twice.
  send(100);
  clock.Advance(milliseconds(5));
  inner.ReleaseHeld(late);
  send(100);
  clock.Advance(milliseconds(15));
  inner.ReleaseHeld(late);
  EXPECT_EQ(breaker.state(), BreakerState::kClosed) << "a stall already over opened it";
  send(1);
  inner.ReleaseHeld();
  EXPECT_TRUE(lines.empty());

  // An outage: timeouts for 100 ms in a row open it.
  for (int ms = 0; ms < 100; ms += 5) {
    send(3);
    clock.Advance(milliseconds(5));
    inner.ReleaseHeld(late);
    EXPECT_EQ(breaker.state(), BreakerState::kClosed) << ms;
  }
  send(1);
  clock.Advance(milliseconds(5));
  inner.ReleaseHeld(late);
  EXPECT_EQ(breaker.state(), BreakerState::kOpen);
  ASSERT_EQ(lines.size(), 1u);
}

TEST(BreakerFailingFor, FailuresAnsweredAtOnceOpenItOnTheirCount) {
  ManualClock clock;
  FakeStore inner(clock);
  inner.Hold();  // each call answered by the test
  BreakerStore breaker(inner, clock, {.failures_to_open = 5, .failing_for = milliseconds(100)});
  const Limit limit =
      *Limit::Create(LimitSpec::Window(Algorithm::kFixedWindow, 1000, std::chrono::seconds(1)));
  const ConsumeEntry e{.key = "k", .limit = &limit, .cost = 1};
  for (int i = 0; i < 5; ++i) {
    breaker.DecideAsync({.consumes = std::span(&e, 1)}, [](Result<DecideResponse>) {});
    inner.ReleaseHeld(Status::Unavailable("no connection to redis: connection refused"));
  }
  EXPECT_EQ(breaker.state(), BreakerState::kOpen) << "a store that says it is down is down";
}

constexpr BreakerRules kRules{.failures_to_open = 5, .open_for = milliseconds(500)};

TEST(BreakerReporter, AFlappingNodeLogsOneOpeningPerIntervalAndItsClosingOnly) {
  ManualClock clock;
  std::vector<std::string> lines;
  Logger log([&lines](LogLevel, std::string_view m) { lines.push_back(std::string(m)); });
  Metrics metrics;
  BreakerReporter report(clock, &log, &metrics, std::chrono::seconds(10));
  using S = BreakerState;
  report.NodeMoved("redis-cluster", "10.0.0.1:7000", S::kClosed, S::kClosed, 0, "", kRules);
  EXPECT_TRUE(lines.empty()) << "a new node only starts its series";
  // Opens and closes every second for 25 s.
  for (int i = 1; i <= 25; ++i) {
    report.NodeMoved("redis-cluster", "10.0.0.1:7000", S::kClosed, S::kOpen, i, "lost", kRules);
    report.NodeMoved("redis-cluster", "10.0.0.1:7000", S::kOpen, S::kHalfOpen, i, "lost", kRules);
    report.NodeMoved("redis-cluster", "10.0.0.1:7000", S::kHalfOpen, S::kClosed, i, "lost", kRules);
    clock.Advance(std::chrono::seconds(1));
  }
  ASSERT_EQ(lines.size(), 6u) << "an opening and its closing at 0, 10 and 20 s";
  EXPECT_NE(lines[0].find("store \"redis-cluster\" node 10.0.0.1:7000 failed 5 times in a row "
                          "(lost): circuit open"),
            std::string::npos)
      << lines[0];
  EXPECT_NE(lines[1].find("node 10.0.0.1:7000 answers again: circuit closed"), std::string::npos)
      << lines[1];
  EXPECT_NE(lines[2].find("; 9 more openings not logged"), std::string::npos) << lines[2];
  const std::string text = metrics.RenderPrometheus();
  EXPECT_NE(text.find("caudal_store_node_breaker_state{node=\"10.0.0.1:7000\"} 0\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("caudal_store_node_breaker_opens_total{node=\"10.0.0.1:7000\"} 25\n"),
            std::string::npos);
}

TEST(BreakerReporter, NodeSeriesFollowTheTopologyAndFoldIntoTheStoreGauge) {
  ManualClock clock;
  Metrics metrics;
  BreakerReporter report(clock, nullptr, &metrics);
  using S = BreakerState;
  for (const char* node : {"a:1", "b:2", "c:3"}) {
    report.NodeMoved("redis-cluster", node, S::kClosed, S::kClosed, 0, "", kRules);
  }
  EXPECT_NE(metrics.RenderPrometheus().find("caudal_store_breaker_state 0\n"), std::string::npos);
  report.NodeMoved("redis-cluster", "b:2", S::kClosed, S::kOpen, 1, "lost", kRules);
  report.NodeMoved("redis-cluster", "c:3", S::kClosed, S::kOpen, 1, "lost", kRules);
  report.NodeMoved("redis-cluster", "c:3", S::kOpen, S::kHalfOpen, 1, "lost", kRules);
  std::string text = metrics.RenderPrometheus();
  EXPECT_NE(text.find("caudal_store_breaker_state 1\n"), std::string::npos) << "one is open";
  EXPECT_NE(text.find("caudal_store_degraded 1\n"), std::string::npos);
  EXPECT_NE(text.find("caudal_store_node_breaker_state{node=\"b:2\"} 1\n"), std::string::npos);
  EXPECT_NE(text.find("caudal_store_node_breaker_state{node=\"c:3\"} 2\n"), std::string::npos);
  report.NodeRemoved("b:2");
  text = metrics.RenderPrometheus();
  EXPECT_EQ(text.find("node=\"b:2\""), std::string::npos) << "a node that left has no series";
  EXPECT_NE(text.find("caudal_store_breaker_state 2\n"), std::string::npos);
  EXPECT_NE(text.find("caudal_store_node_breaker_state{node=\"a:1\"} 0\n"), std::string::npos);
  // Bounded: past kMaxNodeSeries, new nodes get no series.
  for (size_t i = 0; i < Metrics::kMaxNodeSeries + 10; ++i) {
    report.NodeMoved("redis-cluster", Cat("n", i), S::kClosed, S::kClosed, 0, "", kRules);
  }
  text = metrics.RenderPrometheus();
  size_t series = 0;
  for (size_t at = 0; (at = text.find("caudal_store_node_breaker_state{", at)) != std::string::npos;
       ++at) {
    ++series;
  }
  EXPECT_EQ(series, Metrics::kMaxNodeSeries);
}

}  // namespace
}  // namespace caudal
