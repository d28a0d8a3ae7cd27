// Charge (compact_state.h), the step behind an always-charged hit: counted whatever the verdict,
// a bucket's tokens into debt (up to MaxDebt), a fixed window's count past its limit until the
// window ends. A peek (cost 0) charges nothing and is refused exactly while the state is in debt
// or overdrawn; the verdict says whether the hit fitted; the bound on what is counted.
#include <gtest/gtest.h>

#include <random>

#include "algorithms/algorithm.h"
#include "algorithms/exact_math.h"
#include "support/algorithm_params.h"

namespace caudal {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using testing::AlgorithmParamName;
using testing::AlgorithmsWhere;
using testing::IsBucket;

using testing::kT0;

Limit Bucket(Algorithm a, int64_t capacity, int64_t count, Micros period) {
  return *Limit::Create(LimitSpec::Bucket(a, capacity, {.count = count, .period = period}));
}

TEST(Charge, OnlyTheAlgorithmsThatOverdrawCharge) {
  EXPECT_TRUE(SupportsCharge(Algorithm::kTokenBucket));
  EXPECT_TRUE(SupportsCharge(Algorithm::kGcra));
  EXPECT_TRUE(SupportsCharge(Algorithm::kFixedWindow));
  EXPECT_FALSE(SupportsCharge(Algorithm::kSlidingWindowLog));
  EXPECT_FALSE(SupportsCharge(Algorithm::kSlidingWindowCounter));
  EXPECT_FALSE(SupportsCharge(Algorithm::kConcurrency));
}

// Every algorithm that charges (SupportsCharge).
class ChargeOf : public ::testing::TestWithParam<Algorithm> {};

INSTANTIATE_TEST_SUITE_P(SupportsCharge, ChargeOf,
                         ::testing::ValuesIn(AlgorithmsWhere(SupportsCharge)), AlgorithmParamName);

// Every bucket that charges: its tokens go into debt.
class ChargeOfABucket : public ::testing::TestWithParam<Algorithm> {};

INSTANTIATE_TEST_SUITE_P(SupportsCharge, ChargeOfABucket,
                         ::testing::ValuesIn(AlgorithmsWhere([](Algorithm a) {
                           return SupportsCharge(a) && IsBucket(a);
                         })),
                         AlgorithmParamName);

// 10 per second, burst 10: 4 fit; 8 more do not (6 left) and are counted all the same, 2 into
// debt; the next peek waits exactly until the debt is paid, 200 ms later.
TEST_P(ChargeOfABucket, CountsARefusedHitIntoDebtAndThePeekWaitsUntilItIsPaid) {
  const Algorithm a = GetParam();
  const Limit l = Bucket(a, 10, 10, seconds(1));
  const Step fits = ChargeCompact(l, nullptr, kT0, 4);
  EXPECT_EQ(fits.decision.verdict, Verdict::kAllowed);
  EXPECT_EQ(fits.decision.remaining, 6);
  EXPECT_EQ(fits.decision.retry_after, Micros(0));
  const Step over = ChargeCompact(l, &fits.next, kT0, 8);
  EXPECT_EQ(over.decision.verdict, Verdict::kDenied) << "8 did not fit the 6 left";
  EXPECT_TRUE(over.changed) << "counted all the same";
  EXPECT_EQ(over.decision.remaining, 0);
  EXPECT_EQ(over.decision.overdrawn, 0) << "a bucket reports no overdraft";
  EXPECT_EQ(over.decision.reset_after, milliseconds(1200)) << "12 tokens to refill";
  EXPECT_EQ(over.decision.retry_after, seconds(1)) << "8 fit once 10 are back";
  const Micros paid = kT0 + milliseconds(200);
  const Step early = ChargeCompact(l, &over.next, paid - Micros(1), 0);
  EXPECT_EQ(early.decision.verdict, Verdict::kDenied) << "a peek in debt";
  EXPECT_EQ(early.decision.retry_after, Micros(1));
  EXPECT_FALSE(early.changed) << "a peek charges nothing";
  const Step peek = ChargeCompact(l, &over.next, paid, 0);
  EXPECT_EQ(peek.decision.verdict, Verdict::kAllowed) << "the debt is paid";
  EXPECT_EQ(peek.decision.remaining, 0);
  EXPECT_FALSE(peek.changed);
  // Decide's own peek still passes in debt (the peek contract of every algorithm).
  EXPECT_TRUE(DecideCompact(l, &over.next, kT0, 0).decision.allowed());
  // A hit of 1 at the paid time does not fit (0 left) and goes into debt again.
  const Step again = ChargeCompact(l, &over.next, paid, 1);
  EXPECT_EQ(again.decision.verdict, Verdict::kDenied);
  EXPECT_EQ(again.decision.retry_after, milliseconds(200)) << "1 of debt, then 1 to fit";
  EXPECT_FALSE(
      ChargeCompact(l, &again.next, paid + milliseconds(100) - Micros(1), 0).decision.allowed());
  EXPECT_TRUE(ChargeCompact(l, &again.next, paid + milliseconds(100), 0).decision.allowed());
}

// A charge that fits is a consume: the same decision and the same state as Decide.
TEST_P(ChargeOf, AChargeThatFitsIsExactlyAConsume) {
  const Algorithm a = GetParam();
  std::mt19937_64 rng(11);
  const Limit l = IsWindowAlgorithm(a) ? *Limit::Create(LimitSpec::Window(a, 20, milliseconds(500)))
                                       : Bucket(a, 20, 7, milliseconds(300));
  CompactState s;
  bool has = false;
  Micros now = kT0;
  int fitted = 0;
  for (int i = 0; i < 2000; ++i) {
    now += Micros(static_cast<int64_t>(rng() % 40'000));
    const int64_t cost = 1 + static_cast<int64_t>(rng() % 8);
    const Step d = DecideCompact(l, has ? &s : nullptr, now, cost);
    const Step c = ChargeCompact(l, has ? &s : nullptr, now, cost);
    if (d.decision.allowed()) {
      ++fitted;
      ASSERT_EQ(c.decision, d.decision) << i;
      ASSERT_EQ(c.next, d.next) << i;
      ASSERT_TRUE(c.changed);
      s = d.next;
      has = true;
    } else {
      ASSERT_EQ(c.decision.verdict, d.decision.verdict) << i;
      // Only refusals' retry_after differ (the charge counted its cost); keep the consume's
      // state so that the trace goes on deciding fits.
    }
  }
  EXPECT_GT(fitted, 300);  // both branches ran (2000 hits)
}

// Cost 0 charges nothing; it passes while the state is not in debt (an empty bucket, a window
// used exactly up, included) and is refused while it is.
TEST_P(ChargeOf, APeekChargesNothingAndIsRefusedExactlyWhileInDebt) {
  const Algorithm a = GetParam();
  const bool window = IsWindowAlgorithm(a);
  const Limit l =
      window ? *Limit::Create(LimitSpec::Window(a, 5, seconds(1))) : Bucket(a, 5, 5, seconds(1));
  const Step fresh = ChargeCompact(l, nullptr, kT0, 0);
  EXPECT_TRUE(fresh.decision.allowed());
  EXPECT_FALSE(fresh.changed);
  EXPECT_EQ(fresh.decision.remaining, 5);
  const Step empty = ChargeCompact(l, nullptr, kT0, 5);
  ASSERT_TRUE(empty.decision.allowed());
  const Step at_limit = ChargeCompact(l, &empty.next, kT0, 0);
  EXPECT_TRUE(at_limit.decision.allowed()) << "used up is not in debt";
  EXPECT_FALSE(at_limit.changed);
  EXPECT_EQ(at_limit.decision.remaining, 0);
  const Step over = ChargeCompact(l, &empty.next, kT0, 1);
  EXPECT_EQ(over.decision.verdict, Verdict::kDenied);
  const Step peek = ChargeCompact(l, &over.next, kT0, 0);
  EXPECT_EQ(peek.decision.verdict, Verdict::kDenied);
  EXPECT_FALSE(peek.changed);
  EXPECT_EQ(peek.next, over.next);
  // A window's excess lasts until it ends; a bucket's 1 of debt until 200 ms.
  const Micros paid = window ? kT0 + seconds(1) : kT0 + milliseconds(200);
  EXPECT_EQ(peek.decision.retry_after, paid - kT0);
  EXPECT_FALSE(ChargeCompact(l, &over.next, paid - Micros(1), 0).decision.allowed());
  EXPECT_TRUE(ChargeCompact(l, &over.next, paid, 0).decision.allowed());
}

// Above the capacity a hit never fits, and is counted all the same.
TEST_P(ChargeOfABucket, ACostAboveTheCapacityNeverFitsAndIsCounted) {
  const Algorithm a = GetParam();
  const Limit l = Bucket(a, 10, 10, seconds(1));
  const Step s = ChargeCompact(l, nullptr, kT0, 25);
  EXPECT_EQ(s.decision.verdict, Verdict::kNeverFits);
  EXPECT_EQ(s.decision.retry_after, Micros(0));
  EXPECT_TRUE(s.changed);
  EXPECT_EQ(s.decision.reset_after, milliseconds(2500)) << "15 of debt and 10 to refill";
  EXPECT_EQ(ChargeCompact(l, &s.next, kT0, 0).decision.retry_after, milliseconds(1500));
}

// At MaxDebt the excess is forgiven: the state holds MaxDebt units of debt and no more, a
// charge past it changes nothing and is refused, and the peek waits MaxDebt's refill time.
TEST_P(ChargeOfABucket, DebtStopsAtMaxDebtAndTheRestIsForgiven) {
  const Algorithm a = GetParam();
  const Limit l = Bucket(a, 2, 1, std::chrono::hours(1));  // MaxDebt: 25 years of hours
  const int64_t most = MaxDebt(l);
  ASSERT_EQ(most, 24 * 365 * 25);
  Step s = ChargeCompact(l, nullptr, kT0, 2 + most - 1);
  EXPECT_EQ(s.decision.verdict, Verdict::kNeverFits);
  EXPECT_EQ(ChargeCompact(l, &s.next, kT0, 0).decision.retry_after, std::chrono::hours(most - 1));
  s = ChargeCompact(l, &s.next, kT0, 2);  // one unit more reaches the cap, one is forgiven
  EXPECT_EQ(s.decision.verdict, Verdict::kDenied);
  EXPECT_TRUE(s.changed);
  EXPECT_EQ(s.decision.reset_after, std::chrono::hours(2 + most));
  const Step past = ChargeCompact(l, &s.next, kT0, 1);
  EXPECT_EQ(past.decision.verdict, Verdict::kDenied);
  EXPECT_FALSE(past.changed) << "nothing past the most debt";
  EXPECT_EQ(past.decision.retry_after, std::chrono::hours(most + 1));
  const Step peek = ChargeCompact(l, &s.next, kT0, 0);
  EXPECT_EQ(peek.decision.retry_after, std::chrono::hours(most));
  EXPECT_TRUE(ChargeCompact(l, &s.next, kT0 + std::chrono::hours(most), 0).decision.allowed());
}

// A fixed window saturates at its limit + 2^40 (MaxDebt), within the window.
TEST(Charge, AFixedWindowsExcessStopsAtMaxDebtUntilTheWindowEnds) {
  const Limit w = *Limit::Create(LimitSpec::Window(Algorithm::kFixedWindow, 3, seconds(1)));
  Step s = ChargeCompact(w, nullptr, kT0, kMaxCapacity);
  s = ChargeCompact(w, &s.next, kT0, kMaxCapacity);
  EXPECT_EQ(s.decision.overdrawn, kMaxCapacity);
  EXPECT_FALSE(ChargeCompact(w, &s.next, kT0, 1).changed);
  EXPECT_TRUE(ChargeCompact(w, &s.next, kT0 + seconds(1), 3).decision.allowed());
}

// The bound (docs/algorithms.md, Always-charged rules): a bucket starting full counts at most
// B + r·t + D over any t from the start, D being the debt left at its end; the hits that fitted
// alone, at most B + r·t.
TEST(Charge, ABucketCountsAtMostBurstPlusRateTimesTimePlusItsDebt) {
  std::mt19937_64 rng(5);
  for (int trace = 0; trace < 100; ++trace) {
    const int64_t cap = 1 + static_cast<int64_t>(rng() % 40);
    const int64_t n = 1 + static_cast<int64_t>(rng() % 9);
    const Micros period = milliseconds(100 + static_cast<int64_t>(rng() % 900));
    const Limit l = Bucket(Algorithm::kTokenBucket, cap, n, period);
    const int64_t p = l.refill_period_us();
    CompactState s;
    bool has = false;
    Micros now = kT0;
    exact::Int128 counted = 0, fitted = 0;
    for (int i = 0; i < 300; ++i) {
      now += Micros(static_cast<int64_t>(rng() % 200'000));
      const int64_t cost = static_cast<int64_t>(rng() % (2 * cap + 2));
      const Step c = ChargeCompact(l, has ? &s : nullptr, now, cost);
      counted += cost;
      if (c.decision.allowed()) fitted += cost;
      s = c.next;
      has = true;
      // With T = w[0] + w[1]/p: counted ≤ B − T + r·t, in units of 1/p (so exact).
      const exact::Int128 t = (now - kT0).count();
      const exact::Int128 level = static_cast<exact::Int128>(s.w[0]) * p + s.w[1];
      ASSERT_LE(counted * p, static_cast<exact::Int128>(cap) * p - level + t * n)
          << "trace " << trace << " step " << i;
      ASSERT_LE(fitted * p, static_cast<exact::Int128>(cap) * p + t * n)
          << "trace " << trace << " step " << i;
    }
  }
}

}  // namespace
}  // namespace caudal
