#include "caudal/common/circuit_breaker.h"

#include <gtest/gtest.h>

namespace caudal {
namespace {

using std::chrono::milliseconds;
using Call = CircuitBreaker::Call;
using Failure = CircuitBreaker::Failure;
using Verdict = CircuitBreaker::Verdict;

constexpr BreakerRules kRules{
    .failures_to_open = 3, .failing_for = milliseconds(10), .open_for = milliseconds(100)};

void Fail(CircuitBreaker& b, int ms, Failure how = Failure::kSlow, std::string why = "timeout") {
  b.Failed(milliseconds(ms), Call::kOrdinary, how, std::move(why));
}

// Opens `b` at 10 ms (open until 110 ms).
void OpenAt10(CircuitBreaker& b) {
  for (int i = 0; i <= 10; i += 5) Fail(b, i);
  ASSERT_EQ(b.state(), BreakerState::kOpen);
}

TEST(CircuitBreaker, ARunOfSlowFailuresOpensItOnlyOnceItLasts) {
  CircuitBreaker b(kRules);
  Fail(b, 0);
  Fail(b, 1);
  Fail(b, 2);
  EXPECT_EQ(b.state(), BreakerState::kClosed) << "three timeouts within 2 ms: a stall";
  Fail(b, 10, Failure::kSlow, "connection lost");
  EXPECT_EQ(b.state(), BreakerState::kOpen);
  EXPECT_EQ(b.last_error(), "connection lost");
  EXPECT_EQ(b.opens(), 1u);
  EXPECT_TRUE(b.Refusing(milliseconds(109)));
  EXPECT_EQ(b.Admit(milliseconds(50)), Verdict::kRefuse);
}

TEST(CircuitBreaker, FailuresAnsweredAtOnceOpenItOnTheirCount) {
  CircuitBreaker b(kRules);
  Fail(b, 0, Failure::kAtOnce);
  Fail(b, 0, Failure::kAtOnce);
  EXPECT_EQ(b.state(), BreakerState::kClosed);
  Fail(b, 0, Failure::kAtOnce, "refused");
  EXPECT_EQ(b.state(), BreakerState::kOpen);
  EXPECT_EQ(b.last_error(), "refused");
}

TEST(CircuitBreaker, ASuccessEndsTheRun) {
  CircuitBreaker b(kRules);
  for (int i = 0; i < 100; ++i) {
    Fail(b, i * 20);
    Fail(b, i * 20 + 15, Failure::kAtOnce);
    EXPECT_FALSE(b.clean());
    b.Succeeded(Call::kOrdinary);
    EXPECT_TRUE(b.clean());
  }
  EXPECT_EQ(b.state(), BreakerState::kClosed);
  EXPECT_EQ(b.opens(), 0u);
}

TEST(CircuitBreaker, OneProbeAfterOpenForClosesOrReopensIt) {
  CircuitBreaker b(kRules);
  OpenAt10(b);
  EXPECT_EQ(b.Admit(milliseconds(109)), Verdict::kRefuse);
  EXPECT_EQ(b.Admit(milliseconds(110)), Verdict::kProbe);
  EXPECT_EQ(b.state(), BreakerState::kHalfOpen);
  EXPECT_TRUE(b.Refusing(milliseconds(111))) << "one probe at a time";
  EXPECT_EQ(b.Admit(milliseconds(111)), Verdict::kRefuse);
  b.Succeeded(Call::kOrdinary);  // a call from before, answering late: not the probe
  Fail(b, 115);                  // the same, failing late
  EXPECT_EQ(b.state(), BreakerState::kHalfOpen);
  b.Failed(milliseconds(120), Call::kProbe, Failure::kSlow, "still down");
  EXPECT_EQ(b.state(), BreakerState::kOpen) << "the probe failed: open for another open_for";
  EXPECT_EQ(b.last_error(), "still down");
  EXPECT_EQ(b.Admit(milliseconds(219)), Verdict::kRefuse);
  EXPECT_EQ(b.Admit(milliseconds(220)), Verdict::kProbe);
  b.Succeeded(Call::kProbe);
  EXPECT_EQ(b.state(), BreakerState::kClosed);
  EXPECT_FALSE(b.Refusing(milliseconds(221)));
  EXPECT_EQ(b.Admit(milliseconds(221)), Verdict::kPass);
  EXPECT_EQ(b.opens(), 1u) << "reopening after a failed probe is the same outage";
}

TEST(CircuitBreaker, LateAnswersWhileOpenChangeNothing) {
  CircuitBreaker b(kRules);
  OpenAt10(b);
  b.Succeeded(Call::kProbe);
  b.Succeeded(Call::kOrdinary);
  Fail(b, 50, Failure::kAtOnce, "late");
  EXPECT_EQ(b.state(), BreakerState::kOpen);
  EXPECT_EQ(b.last_error(), "timeout");
  EXPECT_EQ(b.Admit(milliseconds(109)), Verdict::kRefuse) << "not reopened later by a late one";
}

TEST(CircuitBreaker, AProbeThatNeverComesBackIsReplaced) {
  CircuitBreaker b(kRules);
  OpenAt10(b);
  EXPECT_EQ(b.Admit(milliseconds(110)), Verdict::kProbe);
  EXPECT_EQ(b.Admit(milliseconds(209)), Verdict::kRefuse);
  EXPECT_EQ(b.Admit(milliseconds(210)), Verdict::kProbe);
}

TEST(CircuitBreaker, StateNames) {
  EXPECT_EQ(BreakerStateName(BreakerState::kClosed), "closed");
  EXPECT_EQ(BreakerStateName(BreakerState::kOpen), "open");
  EXPECT_EQ(BreakerStateName(BreakerState::kHalfOpen), "half_open");
}

}  // namespace
}  // namespace caudal
