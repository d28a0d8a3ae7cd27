#include "algorithms/fixed_window.h"

#include <gtest/gtest.h>

namespace caudal {
namespace {

using std::chrono::minutes;
using std::chrono::seconds;

constexpr Micros kStart = minutes(28'333'334);  // a window boundary for any whole-minute window

Limit Window(int64_t limit, Micros w) {
  return *Limit::Create(LimitSpec::Window(Algorithm::kFixedWindow, limit, w));
}

TEST(FixedWindow, AdmitsTheLimitPerAlignedWindowThenWaitsForTheNextOne) {
  const Limit l = Window(100, minutes(1));
  const Micros now = kStart + seconds(10);
  CompactState s = fixed_window::Decide(l, nullptr, now, 1).next;
  EXPECT_EQ(s.w[0], kStart.count());  // counted in the aligned window, not from the first request
  for (int i = 1; i < 100; ++i) {
    const Step step = fixed_window::Decide(l, &s, now, 1);
    ASSERT_TRUE(step.decision.allowed()) << i;
    EXPECT_EQ(step.decision.remaining, 99 - i);
    EXPECT_EQ(step.decision.reset_after, seconds(50));
    s = step.next;
  }
  const Step denied = fixed_window::Decide(l, &s, now, 1);
  EXPECT_EQ(denied.decision.verdict, Verdict::kDenied);
  EXPECT_FALSE(denied.changed);
  EXPECT_EQ(denied.decision.retry_after, seconds(50));
  EXPECT_FALSE(fixed_window::Decide(l, &s, kStart + minutes(1) - Micros(1), 1).decision.allowed());
  const Step next = fixed_window::Decide(l, &s, kStart + minutes(1), 100);
  EXPECT_TRUE(next.decision.allowed());
  EXPECT_EQ(next.next.w[0], (kStart + minutes(1)).count());
}

// A charge counts whatever the verdict; what it counts beyond the limit is reported, exactly,
// beside a remaining of 0, and a refund takes from the overdraft first.
TEST(FixedWindow, AChargeReportsItsOverdraft) {
  const Limit l = Window(10, minutes(1));
  const Micros now = kStart + seconds(1);
  Step step = fixed_window::Charge(l, nullptr, now, 8);
  EXPECT_TRUE(step.decision.allowed());
  EXPECT_EQ(step.decision.remaining, 2);
  EXPECT_EQ(step.decision.overdrawn, 0);
  step = fixed_window::Charge(l, &step.next, now, 5);
  EXPECT_EQ(step.decision.verdict, Verdict::kDenied);
  EXPECT_EQ(step.decision.remaining, 0);
  EXPECT_EQ(step.decision.overdrawn, 3);
  EXPECT_EQ(step.next.w[1], 13);
  const Step peek = fixed_window::Decide(l, &step.next, now, 0);
  EXPECT_EQ(peek.decision.overdrawn, 3) << "a peek reports the overdraft too";
  const Step denied = fixed_window::Decide(l, &step.next, now, 1);
  EXPECT_EQ(denied.decision.verdict, Verdict::kDenied);
  EXPECT_EQ(denied.decision.overdrawn, 3);
  step = fixed_window::Refund(l, &step.next, now, 2);
  EXPECT_EQ(step.decision.remaining, 0);
  EXPECT_EQ(step.decision.overdrawn, 1);
  step = fixed_window::Refund(l, &step.next, now, 4);
  EXPECT_EQ(step.decision.remaining, 3);
  EXPECT_EQ(step.decision.overdrawn, 0);
}

TEST(FixedWindow, TheSeedsBoundaryBurstPassesTwiceTheLimit) {
  const Limit l = Window(100, minutes(1));
  const Step before = fixed_window::Decide(l, nullptr, kStart - Micros(1), 100);
  const Step after = fixed_window::Decide(l, &before.next, kStart, 100);
  EXPECT_TRUE(before.decision.allowed());
  EXPECT_TRUE(after.decision.allowed());  // 200 within 2 µs: the flaw this algorithm documents
}

TEST(FixedWindow, TimeGoingBackIntoAnEarlierWindowIsJudgedInTheStoredOne) {
  const Limit l = Window(10, minutes(1));
  const Step filled = fixed_window::Decide(l, nullptr, kStart + minutes(1) + seconds(5), 10);
  const Step back = fixed_window::Decide(l, &filled.next, kStart + seconds(30), 1);
  EXPECT_EQ(back.decision.verdict, Verdict::kDenied);
  EXPECT_EQ(back.decision.retry_after, seconds(90));  // until the stored window ends
  EXPECT_EQ(back.next, filled.next);

  const Step partly = fixed_window::Decide(l, nullptr, kStart + minutes(1), 4);
  const Step back_ok = fixed_window::Decide(l, &partly.next, kStart + seconds(59), 6);
  EXPECT_TRUE(back_ok.decision.allowed());
  EXPECT_EQ(back_ok.next.w[0], (kStart + minutes(1)).count());
  EXPECT_EQ(back_ok.next.w[1], 10);
  EXPECT_EQ(back_ok.decision.reset_after, seconds(61));
}

TEST(FixedWindow, AStateFromAnOlderWindowIsForgotten) {
  const Limit l = Window(10, seconds(1));
  const Step old = fixed_window::Decide(l, nullptr, kStart, 10);
  const Step now = fixed_window::Decide(l, &old.next, kStart + seconds(3) + Micros(7), 3);
  EXPECT_TRUE(now.decision.allowed());
  EXPECT_EQ(now.decision.remaining, 7);
  EXPECT_EQ(now.next.w[0], (kStart + seconds(3)).count());
}

}  // namespace
}  // namespace caudal
