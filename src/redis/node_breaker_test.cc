#include "redis/node_breaker.h"

#include <gtest/gtest.h>

namespace caudal::redis {
namespace {

using std::chrono::milliseconds;
using State = NodeBreaker::State;
using Verdict = NodeBreaker::Verdict;

constexpr NodeBreakerOptions kOptions{
    .failures_to_open = 3, .failing_for = milliseconds(10), .open_for = milliseconds(100)};

TEST(NodeBreaker, OpensOnARunOfFailuresThatLasts) {
  NodeBreaker b(kOptions);
  b.Failed(milliseconds(0), "lost");
  b.Failed(milliseconds(1), "lost");
  b.Failed(milliseconds(2), "lost");
  EXPECT_EQ(b.state(), State::kClosed) << "three failures within 2 ms: a stall, not an outage";
  b.Failed(milliseconds(10), "connection lost");
  EXPECT_EQ(b.state(), State::kOpen);
  EXPECT_EQ(b.last_error(), "connection lost");
  EXPECT_EQ(b.opens(), 1u);
  EXPECT_TRUE(b.Refusing(milliseconds(109)));
  EXPECT_EQ(b.Admit(milliseconds(50)), Verdict::kRefuse);
}

TEST(NodeBreaker, ASuccessEndsTheRun) {
  NodeBreaker b(kOptions);
  for (int i = 0; i < 100; ++i) {
    b.Failed(milliseconds(i * 20), "timeout");
    b.Failed(milliseconds(i * 20 + 15), "timeout");
    b.Succeeded(false);
  }
  EXPECT_EQ(b.state(), State::kClosed);
  EXPECT_EQ(b.opens(), 0u);
}

TEST(NodeBreaker, OneProbeAfterOpenForClosesOrReopensIt) {
  NodeBreaker b(kOptions);
  for (int i = 0; i <= 10; i += 5) b.Failed(milliseconds(i), "lost");
  ASSERT_EQ(b.state(), State::kOpen);  // open until 110 ms
  EXPECT_EQ(b.Admit(milliseconds(109)), Verdict::kRefuse);
  EXPECT_EQ(b.Admit(milliseconds(110)), Verdict::kProbe);
  EXPECT_EQ(b.state(), State::kHalfOpen);
  EXPECT_TRUE(b.Refusing(milliseconds(111))) << "one probe at a time";
  b.Succeeded(false);  // a call from before, answering late: not the probe
  EXPECT_EQ(b.state(), State::kHalfOpen);
  b.Failed(milliseconds(120), "still down");  // the probe failed: open for another open_for
  EXPECT_EQ(b.state(), State::kOpen);
  EXPECT_EQ(b.Admit(milliseconds(219)), Verdict::kRefuse);
  EXPECT_EQ(b.Admit(milliseconds(220)), Verdict::kProbe);
  b.Succeeded(true);
  EXPECT_EQ(b.state(), State::kClosed);
  EXPECT_FALSE(b.Refusing(milliseconds(221)));
  EXPECT_EQ(b.Admit(milliseconds(221)), Verdict::kPass);
  EXPECT_EQ(b.opens(), 1u) << "reopening after a failed probe is the same outage";
}

TEST(NodeBreaker, AProbeThatNeverComesBackIsReplaced) {
  NodeBreaker b(kOptions);
  for (int i = 0; i <= 10; i += 5) b.Failed(milliseconds(i), "lost");
  EXPECT_EQ(b.Admit(milliseconds(110)), Verdict::kProbe);
  EXPECT_EQ(b.Admit(milliseconds(209)), Verdict::kRefuse);
  EXPECT_EQ(b.Admit(milliseconds(210)), Verdict::kProbe);
}

}  // namespace
}  // namespace caudal::redis
