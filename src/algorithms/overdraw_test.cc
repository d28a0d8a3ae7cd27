// Overdraw (compact_state.h), the step that charges a reservation's excess into debt: a bucket's
// tokens go below 0 and every request waits until it has refilled past the debt, GCRA deciding
// exactly as token_bucket does on the same trace (Charge included); a fixed window's count passes
// its limit until the window ends; debt stops at MaxDebt.
#include <gtest/gtest.h>

#include <random>

#include "algorithms/algorithm.h"
#include "support/algorithm_params.h"

namespace caudal {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using testing::AlgorithmParamName;
using testing::AlgorithmsWhere;
using testing::IsBucket;

using testing::kT0;

Limit Bucket(Algorithm a, int64_t capacity, int64_t per_second) {
  return *Limit::Create(
      LimitSpec::Bucket(a, capacity, {.count = per_second, .period = seconds(1)}));
}

// Every bucket that settles reservations (SupportsReserve).
class OverdrawOfABucket : public ::testing::TestWithParam<Algorithm> {};

INSTANTIATE_TEST_SUITE_P(SupportsReserve, OverdrawOfABucket,
                         ::testing::ValuesIn(AlgorithmsWhere([](Algorithm a) {
                           return SupportsReserve(a) && IsBucket(a);
                         })),
                         AlgorithmParamName);

TEST_P(OverdrawOfABucket, InDebtRefusesUntilItHasRefilledPastTheDebt) {
  const Algorithm a = GetParam();
  const Limit l = Bucket(a, 10, 10);  // 10 per second, burst 10
  Step s = DecideCompact(l, nullptr, kT0, 10);
  ASSERT_TRUE(s.decision.allowed());
  const Step o = OverdrawCompact(l, &s.next, kT0, 5);  // 5 tokens of debt
  ASSERT_TRUE(o.decision.allowed());
  EXPECT_TRUE(o.changed);
  EXPECT_EQ(o.decision.remaining, 0);
  EXPECT_EQ(o.decision.reset_after, milliseconds(1500)) << "15 tokens to refill";
  const Step refused = DecideCompact(l, &o.next, kT0 + milliseconds(500), 1);
  EXPECT_EQ(refused.decision.verdict, Verdict::kDenied);
  EXPECT_EQ(refused.decision.retry_after, milliseconds(100)) << "debt paid at 500 ms, 1 at 600";
  EXPECT_FALSE(
      DecideCompact(l, &o.next, kT0 + milliseconds(600) - Micros(1), 1).decision.allowed());
  EXPECT_TRUE(DecideCompact(l, &o.next, kT0 + milliseconds(600), 1).decision.allowed());
  // A refund from debt gives back what it names.
  const Step back = RefundCompact(l, &o.next, kT0, 7);
  EXPECT_EQ(back.decision.remaining, 2);
}

TEST(Overdraw, GcraDecidesAsTheTokenBucketWithDebt) {
  std::mt19937_64 rng(25);
  for (int trace = 0; trace < 200; ++trace) {
    const int64_t cap = 1 + static_cast<int64_t>(rng() % 50);
    const int64_t rate = 1 + static_cast<int64_t>(rng() % 20);
    const Limit tb = Bucket(Algorithm::kTokenBucket, cap, rate);
    const Limit gc = Bucket(Algorithm::kGcra, cap, rate);
    CompactState st, sg;
    bool ht = false, hg = false;
    Micros now = kT0;
    for (int i = 0; i < 100; ++i) {
      now += Micros(static_cast<int64_t>(rng() % 300'000));
      const int64_t cost = static_cast<int64_t>(rng() % (cap + 1));
      const int op = static_cast<int>(rng() % 4);
      const auto step = [&](const Limit& l, const CompactState* s) {
        return op == 0   ? DecideCompact(l, s, now, cost)
               : op == 1 ? OverdrawCompact(l, s, now, cost * 3)
               : op == 2 ? ChargeCompact(l, s, now, cost)
                         : RefundCompact(l, s, now, cost);
      };
      const Step a = step(tb, ht ? &st : nullptr);
      const Step b = step(gc, hg ? &sg : nullptr);
      ASSERT_EQ(a.decision.verdict, b.decision.verdict)
          << "trace " << trace << " step " << i << " op " << op << " cost " << cost << " cap "
          << cap << " rate " << rate << " tb " << st.w[0] << "," << st.w[1] << " g "
          << sg.w[0] - now.count() << "," << sg.w[1];
      ASSERT_EQ(a.decision.remaining, b.decision.remaining) << "trace " << trace << " step " << i;
      ASSERT_EQ(a.decision.retry_after, b.decision.retry_after) << "trace " << trace;
      ASSERT_EQ(a.decision.reset_after, b.decision.reset_after) << "trace " << trace;
      if (a.changed) st = a.next, ht = true;
      if (b.changed) sg = b.next, hg = true;
    }
  }
}

TEST_P(OverdrawOfABucket, DebtStopsAtMaxDebt) {
  const Algorithm a = GetParam();
  // 1 per hour: 25 years of refill is 219,000 units.
  const Limit l =
      *Limit::Create(LimitSpec::Bucket(a, 2, {.count = 1, .period = std::chrono::hours(1)}));
  EXPECT_EQ(MaxDebt(l), 24 * 365 * 25);
  Step s = OverdrawCompact(l, nullptr, kT0, kMaxCapacity);
  s = OverdrawCompact(l, &s.next, kT0, kMaxCapacity);
  EXPECT_EQ(s.decision.reset_after, std::chrono::hours(2 + 24 * 365 * 25));
  EXPECT_FALSE(OverdrawCompact(l, &s.next, kT0, 1).changed) << "nothing past the most debt";
  EXPECT_EQ(MaxDebt(Bucket(a, 10, 1'000'000)), kMaxCapacity);
}

TEST(Overdraw, AFixedWindowHoldsItsExcessUntilTheWindowEnds) {
  const Limit l = *Limit::Create(LimitSpec::Window(Algorithm::kFixedWindow, 10, seconds(1)));
  const Micros start = kT0;  // a multiple of the window
  Step s = DecideCompact(l, nullptr, start, 8);
  s = OverdrawCompact(l, &s.next, start + milliseconds(10), 5);
  EXPECT_TRUE(s.decision.allowed());
  EXPECT_EQ(s.decision.remaining, 0);
  EXPECT_EQ(s.decision.overdrawn, 3);
  EXPECT_FALSE(DecideCompact(l, &s.next, start + milliseconds(999), 0).decision.remaining > 0);
  EXPECT_FALSE(DecideCompact(l, &s.next, start + milliseconds(999), 1).decision.allowed());
  EXPECT_TRUE(DecideCompact(l, &s.next, start + seconds(1), 10).decision.allowed())
      << "the next window starts empty";
}

TEST(Overdraw, OnlyTheBucketsAndTheFixedWindowSettle) {
  EXPECT_TRUE(SupportsReserve(Algorithm::kTokenBucket));
  EXPECT_TRUE(SupportsReserve(Algorithm::kGcra));
  EXPECT_TRUE(SupportsReserve(Algorithm::kFixedWindow));
  EXPECT_FALSE(SupportsReserve(Algorithm::kSlidingWindowLog));
  EXPECT_FALSE(SupportsReserve(Algorithm::kSlidingWindowCounter));
  EXPECT_FALSE(SupportsReserve(Algorithm::kConcurrency));
}

}  // namespace
}  // namespace caudal
