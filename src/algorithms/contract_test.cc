// The contract every algorithm shares (see decision.h and compact_state.h), run against each:
// peeks, costs that never fit, exact retry_after and reset_after, drift, extreme parameters.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "support/algorithm_params.h"
#ifdef CAUDAL_REPLAY_THROUGH_LUA  // the same suite, every decision made by the Redis script
#include "redis/lua_replayer.h"
#else
#include "algorithms/replayer.h"
#endif

namespace caudal {
namespace {

using std::chrono::hours;
using std::chrono::milliseconds;
using std::chrono::minutes;
using std::chrono::seconds;
using testing::AlgorithmParamName;
#ifdef CAUDAL_REPLAY_THROUGH_LUA
using Replayer = redis::testing::LuaReplayer;
#else
using testing::Replayer;
#endif

using testing::kT0;
constexpr Micros kYear = hours(24 * 365);
#ifdef CAUDAL_REPLAY_THROUGH_LUA
constexpr int64_t kDriftDivisor = 100;  // a round trip per decision: the long runs, shortened
#else
constexpr int64_t kDriftDivisor = 1;
#endif

// "count per period" as the algorithm's own kind of limit: a window of `period` holding `count`,
// or a bucket of burst `count` refilled at count/period.
Limit Make(Algorithm a, int64_t count, Micros period) {
  const LimitSpec spec = IsWindowAlgorithm(a) ? LimitSpec::Window(a, count, period)
                                              : LimitSpec::Bucket(a, count, {count, period});
  auto l = Limit::Create(spec);
  EXPECT_TRUE(l.ok()) << l.status().ToString();
  return *l;
}

class Contract : public ::testing::TestWithParam<Algorithm> {};

INSTANTIATE_TEST_SUITE_P(AllAlgorithms, Contract, ::testing::ValuesIn(kAllAlgorithms),
                         AlgorithmParamName);

TEST_P(Contract, APeekReportsAndConsumesNothing) {
  Replayer r(Make(GetParam(), 10, seconds(1)));
  const Decision fresh = r.Decide(kT0, 0);
  EXPECT_EQ(fresh.verdict, Verdict::kAllowed);
  EXPECT_EQ(fresh.remaining, 10);
  EXPECT_EQ(fresh.reset_after, Micros(0));
  EXPECT_FALSE(r.compact().has_value());
  EXPECT_TRUE(r.log().entries.empty());

  ASSERT_TRUE(r.Decide(kT0, 10).allowed());
  const Decision empty = r.Decide(kT0, 0);
  EXPECT_EQ(empty.verdict, Verdict::kAllowed);  // 0 fits even when nothing is left
  EXPECT_EQ(empty.remaining, 0);
  EXPECT_EQ(empty.retry_after, Micros(0));
  EXPECT_GT(empty.reset_after, Micros(0));
  EXPECT_EQ(r.Decide(kT0, 1).verdict, Verdict::kDenied);  // the peek left the state as it was
}

TEST_P(Contract, ACostAboveCapacityNeverFitsAndConsumesNothing) {
  Replayer r(Make(GetParam(), 10, seconds(1)));
  for (int64_t cost : {int64_t{11}, kMaxCapacity}) {  // the largest cost a store accepts
    const Decision d = r.Decide(kT0, cost);
    EXPECT_EQ(d.verdict, Verdict::kNeverFits) << cost;
    EXPECT_EQ(d.retry_after, Micros(0));
    EXPECT_EQ(d.remaining, 10);
  }
  EXPECT_FALSE(r.compact().has_value());
  ASSERT_TRUE(r.Decide(kT0, 4).allowed());
  const Decision d = r.Decide(kT0, 11);
  EXPECT_EQ(d.verdict, Verdict::kNeverFits);
  EXPECT_EQ(d.remaining, 6);
  EXPECT_EQ(r.Decide(kT0, 6).remaining, 0);  // the refused cost took nothing
}

TEST_P(Contract, YearsOfIdlenessLeaveAFreshState) {
  for (int64_t count : {int64_t{1}, int64_t{1000}, kMaxCapacity}) {
    const Micros period = IsWindowAlgorithm(GetParam()) ? kYear : hours(24);
    if (HasLogState(GetParam()) && count > kMaxLogLimit) continue;
    Replayer r(Make(GetParam(), count, period));
    ASSERT_TRUE(r.Decide(kT0, count).allowed());
    for (Micros later : {kYear * 3, kYear * 100}) {
      EXPECT_EQ(r.Peek(kT0 + later, count), r.DecideFresh(kT0 + later, count))
          << count << " after " << later.count() << "us";
    }
  }
}

TEST_P(Contract, HandlesTheExtremesOfTheDocumentedRange) {
  const Algorithm a = GetParam();
  const int64_t big = HasLogState(a) ? kMaxLogLimit : kMaxCapacity;
  for (Micros period : {Micros(milliseconds(1)), Micros(hours(1)), kYear}) {
    Replayer r(Make(a, big, period));
    const Decision first = r.Decide(kT0, big - 1);
    ASSERT_TRUE(first.allowed()) << period.count();
    EXPECT_EQ(first.remaining, 1);
    EXPECT_LE(first.reset_after, period * 2);
    EXPECT_TRUE(r.Decide(kT0, 1).allowed());
    const Decision denied = r.Decide(kT0, big);
    ASSERT_EQ(denied.verdict, Verdict::kDenied);
    EXPECT_GT(denied.retry_after, Micros(0));
    EXPECT_LE(denied.retry_after, period * 2);
    EXPECT_TRUE(r.Peek(kT0 + denied.retry_after, big).allowed());
    EXPECT_FALSE(r.Peek(kT0 + denied.retry_after - Micros(1), big).allowed());
  }
}

// A client that asks for `cost` and, when refused, asks again exactly retry_after later. Between
// t0 + P and t0 + (k+1)·P it gets exactly count·k: no drift, even after a million periods.
void ExpectNoDrift(Algorithm a, int64_t count, Micros period, int64_t cost, int64_t periods) {
  periods = std::max<int64_t>(periods / kDriftDivisor, 2);
  Replayer r(Make(a, count, period));
  Micros now = kT0;
  int64_t admitted_by_first_period = -1;
  int64_t admitted = 0;
  for (int64_t k = 1; k <= periods;) {
    const Decision d = r.Decide(now, cost);
    if (d.allowed()) {
      admitted += cost;
      continue;
    }
    ASSERT_EQ(d.verdict, Verdict::kDenied);
    ASSERT_GT(d.retry_after, Micros(0));
    const Micros next = now + d.retry_after;
    // Crossing t0 + k·P: everything admitted so far happened at or before it.
    while (k <= periods && next > kT0 + period * k) {
      if (k == 1) admitted_by_first_period = admitted;
      if (k > 1 && admitted - admitted_by_first_period != count * (k - 1)) {
        FAIL() << AlgorithmName(a) << " " << count << "/" << period.count()
               << "us: " << admitted - admitted_by_first_period << " admitted in " << k - 1
               << " periods, expected " << count * (k - 1);
      }
      ++k;
    }
    now = next;
  }
}

TEST_P(Contract, HundredPerMinuteHasNoDriftOverAMillionPeriods) {
  ExpectNoDrift(GetParam(), 100, minutes(1), 100, 1'000'000);
}

TEST_P(Contract, UnitRequestsHaveNoDriftAtAwkwardRates) {
  ExpectNoDrift(GetParam(), 100, minutes(1), 1, 2'000);
  ExpectNoDrift(GetParam(), 7, seconds(1), 1, 20'000);       // 1/7 s is no whole µs
  ExpectNoDrift(GetParam(), 3, milliseconds(1), 1, 50'000);  // three per millisecond
}

TEST_P(Contract, ARefundOnAFreshStateHasNothingToGiveBackAndWritesNothing) {
  Replayer r(Make(GetParam(), 10, seconds(1)));
  const Decision d = r.Refund(kT0, 5);
  EXPECT_EQ(d.verdict, Verdict::kAllowed);
  EXPECT_EQ(d.remaining, 10);
  EXPECT_EQ(d.reset_after, Micros(0));
  EXPECT_FALSE(r.compact().has_value());
  EXPECT_TRUE(r.log().entries.empty());
}

TEST_P(Contract, ARefundGivesUnitsBackButNeverPastAFreshState) {
  Replayer r(Make(GetParam(), 10, seconds(1)));
  ASSERT_TRUE(r.Decide(kT0, 7).allowed());
  const Decision some = r.Refund(kT0 + Micros(1), 3);
  EXPECT_EQ(some.verdict, Verdict::kAllowed);
  EXPECT_EQ(some.retry_after, Micros(0));
  EXPECT_EQ(some.remaining, 6);
  EXPECT_GT(some.reset_after, Micros(0));
  EXPECT_TRUE(r.Decide(kT0 + Micros(2), 6).allowed());
  EXPECT_FALSE(r.Decide(kT0 + Micros(3), 1).allowed()) << "the refund gave back exactly 3";

  const Decision all = r.Refund(kT0 + Micros(4), kMaxCapacity);  // far more than was consumed
  EXPECT_EQ(all.remaining, 10);
  EXPECT_EQ(all.reset_after, Micros(0));
  EXPECT_TRUE(r.Decide(kT0 + Micros(5), 10).allowed());
  EXPECT_FALSE(r.Decide(kT0 + Micros(6), 1).allowed()) << "never more than the capacity";
}

// Refunding a request's cost right after admitting it leaves every later decision as if the
// request had never come, on random states reached by random traffic.
TEST_P(Contract, RefundingWhatWasJustConsumedUndoesTheRequest) {
  std::mt19937_64 rng(7'000 + static_cast<int>(GetParam()));
  int64_t undone = 0;
  for (int trace = 0; trace < 40; ++trace) {
    const int64_t count = 1 + static_cast<int64_t>(rng() % 50);
    const Micros period = milliseconds(1 + static_cast<int64_t>(rng() % 5'000));
    Replayer r(Make(GetParam(), count, period));
    Micros now = kT0 + Micros(static_cast<int64_t>(rng() % 10'000'000));
    for (int i = 0; i < 300; ++i) {
      now +=
          Micros(static_cast<int64_t>(rng() % static_cast<uint64_t>(period.count() / count + 1)));
      const int64_t cost = 1 + static_cast<int64_t>(rng() % static_cast<uint64_t>(count));
      const Replayer before = r;
      if (!r.Decide(now, cost).allowed()) continue;
      if (rng() % 2 == 0) continue;  // keep some, so that states fill up
      (void)r.Refund(now, cost);
      ++undone;
      for (Micros later : {Micros(0), Micros(1), period / 3, period, period * 2}) {
        for (int64_t probe : {int64_t{0}, int64_t{1}, cost, count}) {
          ASSERT_EQ(r.Peek(now + later, probe), before.Peek(now + later, probe))
              << "trace " << trace << " step " << i << " +" << later.count() << "us cost " << probe;
        }
      }
    }
  }
  EXPECT_GT(undone, 1'000);
}

// On random traces (random costs, inter-arrival times, a few backward steps): retrying exactly
// retry_after later passes and one µs earlier does not; reset_after later, the state decides as
// a fresh one does.
// What a decision reports as used (limit - remaining + overdrawn) is exact: an admitted cost c
// takes exactly c from what a peek at the same instant saw, a refused one takes nothing, and
// only a charge overdraws. envoyproxy/ratelimit's hit statistics (near_limit, over_limit) are
// computed from it.
TEST_P(Contract, TheUsageADecisionReportsIsExact) {
  std::mt19937_64 rng(20'251'130 + static_cast<int>(GetParam()));
  for (int trace = 0; trace < 20; ++trace) {
    const int64_t count = 1 + static_cast<int64_t>(rng() % 30);
    const Micros period = milliseconds(1 + static_cast<int64_t>(rng() % 2'000));
    Replayer r(Make(GetParam(), count, period));
    Micros now = kT0;
    for (int i = 0; i < 200; ++i) {
      now +=
          Micros(static_cast<int64_t>(rng() % static_cast<uint64_t>(period.count() / count + 2)));
      const int64_t cost = static_cast<int64_t>(rng() % static_cast<uint64_t>(count + 2));
      const Decision before = r.Peek(now, 0);
      const Decision d = r.Decide(now, cost);
      ASSERT_EQ(before.overdrawn, 0);
      ASSERT_EQ(d.overdrawn, 0) << "only a charge overdraws";
      const int64_t taken = d.allowed() ? cost : 0;
      ASSERT_EQ(d.remaining, before.remaining - taken)
          << "trace " << trace << " step " << i << " cost " << cost;
      ASSERT_EQ(d.allowed(), cost <= before.remaining)
          << "trace " << trace << " step " << i << ": the verdict is the usage's";
    }
  }
}

TEST_P(Contract, RetryAfterAndResetAfterAreExactOnRandomTraces) {
  std::mt19937_64 rng(20'240'601 + static_cast<int>(GetParam()));
  int64_t denials = 0;
  for (int trace = 0; trace < 40; ++trace) {
    const int64_t count = 1 + static_cast<int64_t>(rng() % 50);
    const Micros period = milliseconds(1 + static_cast<int64_t>(rng() % 5'000));
    Replayer r(Make(GetParam(), count, period));
    Micros now = kT0 + Micros(static_cast<int64_t>(rng() % 10'000'000));
    for (int i = 0; i < 1'000; ++i) {
      const int64_t gap_kind = static_cast<int64_t>(rng() % 10);
      const int64_t span = period.count() / count + 1;
      if (gap_kind < 6) {
        now += Micros(static_cast<int64_t>(rng() % static_cast<uint64_t>(span * 2)));
      } else if (gap_kind < 9) {
        now += Micros(static_cast<int64_t>(rng() % 3));
      } else {
        now -= Micros(static_cast<int64_t>(rng() % static_cast<uint64_t>(span)));  // backwards
      }
      const int64_t cost = static_cast<int64_t>(rng() % static_cast<uint64_t>(count + 1));
      if (rng() % 10 == 0) {  // now and then a refund, which must keep every promise too
        const Decision back = r.Refund(now, cost);
        ASSERT_EQ(back.verdict, Verdict::kAllowed);
        ASSERT_EQ(back.retry_after, Micros(0));
        ASSERT_LE(back.remaining, count);
        EXPECT_EQ(r.Peek(now + back.reset_after, cost), r.DecideFresh(now + back.reset_after, cost))
            << "trace " << trace << " refund at step " << i;
        continue;
      }
      const Decision d = r.Decide(now, cost);
      ASSERT_GE(d.remaining, 0);
      ASSERT_LE(d.remaining, count);
      ASSERT_GE(d.reset_after, Micros(0));
      EXPECT_EQ(r.Peek(now + d.reset_after, cost), r.DecideFresh(now + d.reset_after, cost))
          << "trace " << trace << " step " << i;
      if (d.verdict != Verdict::kDenied) {
        ASSERT_EQ(d.retry_after, Micros(0));
        continue;
      }
      ++denials;
      ASSERT_GT(d.retry_after, Micros(0));
      EXPECT_TRUE(r.Peek(now + d.retry_after, cost).allowed())
          << "trace " << trace << " step " << i;
      EXPECT_FALSE(r.Peek(now + d.retry_after - Micros(1), cost).allowed())
          << "trace " << trace << " step " << i;
    }
  }
  EXPECT_GT(denials, 1'000);  // the traces did exercise refusals
}

}  // namespace
}  // namespace caudal
