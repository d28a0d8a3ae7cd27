#include "algorithms/sliding_window_counter.h"

#include <gtest/gtest.h>

namespace caudal {
namespace {

using std::chrono::milliseconds;
using std::chrono::minutes;
using std::chrono::seconds;

constexpr Micros kCounterStart =
    minutes(28'333'334);  // a window boundary for any whole-minute window

Limit Counter(int64_t limit, Micros w) {
  return *Limit::Create(LimitSpec::Window(Algorithm::kSlidingWindowCounter, limit, w));
}

TEST(SlidingWindowCounter, WeighsThePreviousWindowByItsShareOfTheTrueWindow) {
  const Limit l = Counter(100, minutes(1));
  const Step prev = sliding_window_counter::Decide(l, nullptr, kCounterStart - seconds(30), 100);
  const Micros now = kCounterStart + seconds(30);
  // ceil(100 · (60 s − 1 µs − 30 s) / 60 s) = 50 still counted from the previous window.
  const Step half = sliding_window_counter::Decide(l, &prev.next, now, 0);
  EXPECT_EQ(half.decision.remaining, 50);
  const Step taken = sliding_window_counter::Decide(l, &prev.next, now, 50);
  ASSERT_TRUE(taken.decision.allowed());
  EXPECT_EQ(taken.next.w, (std::array<int64_t, 3>{kCounterStart.count(), 50, 100}));
  EXPECT_EQ(taken.decision.reset_after, seconds(90));  // both counted windows over
  const Step denied = sliding_window_counter::Decide(l, &taken.next, now, 1);
  EXPECT_EQ(denied.decision.verdict, Verdict::kDenied);
  // The weight drops to 49 once 100·(60 s − 1 µs − e) <= 49·60 s, i.e. at e = 30.6 s − 1 µs.
  EXPECT_EQ(denied.decision.retry_after, milliseconds(600) - Micros(1));
  const Micros at = now + denied.decision.retry_after;
  EXPECT_TRUE(sliding_window_counter::Decide(l, &taken.next, at, 1).decision.allowed());
  EXPECT_FALSE(
      sliding_window_counter::Decide(l, &taken.next, at - Micros(1), 1).decision.allowed());
}

// Regression: the estimate used to round the previous window's share down, so "1 per second"
// admitted a request in a window's last µs and another 2 µs later.
TEST(SlidingWindowCounter, NeverAdmitsTwiceTheLimitInATrueWindow) {
  const Limit one = Counter(1, seconds(1));
  const Step last_us = sliding_window_counter::Decide(one, nullptr, kCounterStart - Micros(1), 1);
  ASSERT_TRUE(last_us.decision.allowed());
  for (Micros later : {Micros(1), Micros(2), seconds(1) - Micros(2)}) {
    EXPECT_FALSE(sliding_window_counter::Decide(one, &last_us.next, kCounterStart + later, 1)
                     .decision.allowed())
        << later.count();
  }
  EXPECT_TRUE(
      sliding_window_counter::Decide(one, &last_us.next, kCounterStart + seconds(1) - Micros(1), 1)
          .decision.allowed());

  // The documented worst case, 2·limit − 1 in the true window (kCounterStart − 2 µs, kCounterStart
  // + W − 2 µs].
  const Limit l = Counter(100, minutes(1));
  const Step burst = sliding_window_counter::Decide(l, nullptr, kCounterStart - Micros(1), 100);
  const Micros t = kCounterStart + minutes(1) - Micros(2);
  EXPECT_EQ(sliding_window_counter::Decide(l, &burst.next, t, 0).decision.remaining, 99);
}

TEST(SlidingWindowCounter, RetryAfterCrossesIntoTheNextWindowWhenTheCurrentOneIsFull) {
  const Limit l = Counter(10, seconds(1));
  const Step full =
      sliding_window_counter::Decide(l, nullptr, kCounterStart + milliseconds(100), 10);
  const Step denied =
      sliding_window_counter::Decide(l, &full.next, kCounterStart + milliseconds(100), 5);
  EXPECT_EQ(denied.decision.verdict, Verdict::kDenied);
  // Next window: ceil(10·(1 s − 1 µs − e)/1 s) <= 5 from e = 0.5 s − 1 µs.
  EXPECT_EQ(denied.decision.retry_after, seconds(1) + milliseconds(400) - Micros(1));
  const Micros at = kCounterStart + seconds(1) + milliseconds(500) - Micros(1);
  EXPECT_TRUE(sliding_window_counter::Decide(l, &full.next, at, 5).decision.allowed());
  EXPECT_FALSE(sliding_window_counter::Decide(l, &full.next, at - Micros(1), 5).decision.allowed());
  // Two windows later nothing of it is left.
  const Step fresh = sliding_window_counter::Decide(l, &full.next, kCounterStart + seconds(2), 10);
  EXPECT_TRUE(fresh.decision.allowed());
  EXPECT_EQ(fresh.next.w, (std::array<int64_t, 3>{(kCounterStart + seconds(2)).count(), 10, 0}));
}

TEST(SlidingWindowCounter, TimeGoingBackwardsIsJudgedInTheStoredWindow) {
  const Limit l = Counter(100, minutes(1));
  const Step prev = sliding_window_counter::Decide(l, nullptr, kCounterStart, 100);
  const Micros w1 = kCounterStart + minutes(1);
  const Step cur = sliding_window_counter::Decide(l, &prev.next, w1 + seconds(30), 50);
  ASSERT_TRUE(cur.decision.allowed());
  // Earlier in the same window: more of the previous window counts (84), so nothing fits.
  const Step back = sliding_window_counter::Decide(l, &cur.next, w1 + seconds(10), 1);
  EXPECT_EQ(back.decision.verdict, Verdict::kDenied);
  EXPECT_EQ(back.decision.retry_after, seconds(20) + milliseconds(600) - Micros(1));
  const Step peek = sliding_window_counter::Decide(l, &cur.next, w1 + seconds(10), 0);
  EXPECT_EQ(peek.decision.verdict, Verdict::kAllowed);  // a peek passes, reporting 0 left
  EXPECT_EQ(peek.decision.remaining, 0);
  // Back into the previous window: judged at the stored window's start.
  const Step older = sliding_window_counter::Decide(l, &cur.next, kCounterStart + seconds(30), 1);
  EXPECT_EQ(older.decision.verdict, Verdict::kDenied);
  EXPECT_EQ(older.decision.retry_after, seconds(60) + milliseconds(600) - Micros(1));
  EXPECT_EQ(older.next, cur.next);
}

}  // namespace
}  // namespace caudal
