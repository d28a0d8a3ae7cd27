#include "algorithms/sliding_window_log.h"

#include <gtest/gtest.h>

namespace caudal {
namespace {

using sliding_window_log::Commit;
using sliding_window_log::Entry;
using sliding_window_log::Evaluate;
using sliding_window_log::LogState;
using sliding_window_log::Refund;
using std::chrono::milliseconds;
using std::chrono::seconds;

constexpr Micros kLogT0 = seconds(1'700'000'000) + Micros(123);  // windows here are not aligned

Limit Log(int64_t limit, Micros w) {
  return *Limit::Create(LimitSpec::Window(Algorithm::kSlidingWindowLog, limit, w));
}

Decision DecideAndCommit(const Limit& l, LogState& s, Micros now, int64_t cost) {
  const Decision d = Evaluate(l, s, now, cost);
  if (d.allowed()) Commit(l, s, now, cost);
  return d;
}

TEST(SlidingWindowLog, CountsExactlyTheLastWindow) {
  const Limit l = Log(3, seconds(1));
  LogState s;
  for (Micros at : {Micros(0), Micros(milliseconds(100)), Micros(milliseconds(200))}) {
    ASSERT_TRUE(DecideAndCommit(l, s, kLogT0 + at, 1).allowed());
  }
  const Decision full = DecideAndCommit(l, s, kLogT0 + seconds(1) - Micros(1), 1);
  EXPECT_EQ(full.verdict, Verdict::kDenied);
  EXPECT_EQ(full.retry_after, Micros(1));  // the request at t0 leaves the window (now − 1 s, now]
  EXPECT_EQ(full.reset_after, milliseconds(200) + Micros(1));
  const Decision next = DecideAndCommit(l, s, kLogT0 + seconds(1), 1);
  EXPECT_TRUE(next.allowed());
  EXPECT_EQ(next.remaining, 0);
  // The commit dropped the entry a window older than the newest one.
  EXPECT_EQ(Evaluate(l, s, kLogT0 + seconds(1), 0).remaining, 0);
  EXPECT_EQ(s.entries.size(), 3u);
  EXPECT_EQ(s.entries.front().at_us, (kLogT0 + milliseconds(100)).count());
}

// Regression: Evaluate used to drop every entry that had left (now − W, now], even while newer
// ones were still in the window; when the clock then stepped back, the dropped units no longer
// counted and the log admitted more than its limit within one window of recorded time.
TEST(SlidingWindowLog, ARequestAtALaterTimeDoesNotMakeTheLogForgetWhenTheClockStepsBack) {
  const Limit l = Log(3, seconds(1));
  LogState s;
  ASSERT_TRUE(DecideAndCommit(l, s, kLogT0, 1).allowed());
  ASSERT_TRUE(DecideAndCommit(l, s, kLogT0 + milliseconds(500), 2).allowed());
  EXPECT_EQ(DecideAndCommit(l, s, kLogT0 + milliseconds(1'200), 0).remaining, 1);  // t0 has left
  const Decision back = DecideAndCommit(l, s, kLogT0 + milliseconds(600), 1);
  EXPECT_EQ(back.verdict, Verdict::kDenied);  // judged at t0 + 600 ms, where the log is full
  EXPECT_EQ(back.retry_after, milliseconds(400));
  EXPECT_EQ(back.remaining, 0);
}

TEST(SlidingWindowLog, OnceEveryEntryHasLeftTheWindowTheLogDecidesAsAFreshOne) {
  const Limit l = Log(3, seconds(1));
  LogState s;
  ASSERT_TRUE(DecideAndCommit(l, s, kLogT0, 3).allowed());
  const Decision later = DecideAndCommit(l, s, kLogT0 + seconds(1), 0);
  EXPECT_EQ(later.remaining, 3);
  EXPECT_EQ(later.reset_after, Micros(0));
  EXPECT_EQ(s.entries.size(), 1u) << "a peek writes nothing";
  // The clock steps back: the entry is inside the window again, and counts.
  EXPECT_EQ(DecideAndCommit(l, s, kLogT0 + milliseconds(100), 3).verdict, Verdict::kDenied);
  // The next commit drops what no later decision can count.
  ASSERT_TRUE(DecideAndCommit(l, s, kLogT0 + milliseconds(1'150), 3).allowed());
  EXPECT_EQ(Evaluate(l, s, kLogT0 + milliseconds(1'150), 0).remaining, 0);
  EXPECT_EQ(s.entries,
            (std::vector<Entry>{{.at_us = (kLogT0 + milliseconds(1'150)).count(), .cost = 3}}));
}

TEST(SlidingWindowLog, ARefundTakesBackTheNewestUnitsFirst) {
  const Limit l = Log(5, seconds(1));
  LogState s;
  ASSERT_TRUE(DecideAndCommit(l, s, kLogT0, 2).allowed());
  ASSERT_TRUE(DecideAndCommit(l, s, kLogT0 + milliseconds(300), 3).allowed());
  const Decision back = Refund(l, s, kLogT0 + milliseconds(400), 4);
  EXPECT_EQ(back.verdict, Verdict::kAllowed);
  EXPECT_EQ(back.remaining, 4);
  EXPECT_EQ(back.reset_after, milliseconds(600));  // only the entry at t0 is left
  EXPECT_EQ(s.entries, (std::vector<Entry>{{.at_us = kLogT0.count(), .cost = 1}}));
  // The unit left at t0 leaves the window at t0 + 1 s: from then the log is fresh.
  EXPECT_EQ(DecideAndCommit(l, s, kLogT0 + seconds(1) - Micros(1), 5).verdict, Verdict::kDenied);
  EXPECT_TRUE(DecideAndCommit(l, s, kLogT0 + seconds(1), 5).allowed());
}

TEST(SlidingWindowLog, ARefundOfUnitsThatNoLongerCountEmptiesTheLog) {
  const Limit l = Log(5, seconds(1));
  LogState s;
  ASSERT_TRUE(DecideAndCommit(l, s, kLogT0, 2).allowed());
  const Decision back = Refund(l, s, kLogT0 + seconds(2), 1);
  EXPECT_EQ(back.remaining, 5);
  EXPECT_EQ(back.reset_after, Micros(0));
  EXPECT_TRUE(s.entries.empty()) << "nothing in the window: the log is fresh and can go";
}

TEST(SlidingWindowLog, MergesArrivalsAtTheSameMicrosecond) {
  const Limit l = Log(kMaxLogLimit, seconds(1));
  LogState s;
  for (int i = 0; i < 1'000; ++i) ASSERT_TRUE(DecideAndCommit(l, s, kLogT0, 3).allowed());
  EXPECT_EQ(s.entries, (std::vector<Entry>{{.at_us = kLogT0.count(), .cost = 3'000}}));
}

TEST(SlidingWindowLog, MemoryStaysBelowTheLimitHoweverTheRequestsArrive) {
  const Limit l = Log(1'000, seconds(1));
  LogState s;
  size_t most = 0;
  for (int64_t i = 0; i < 4'000; ++i) {
    (void)DecideAndCommit(l, s, kLogT0 + Micros(i * 997), 1 + i % 2);
    most = std::max(most, s.entries.size());
  }
  EXPECT_LE(most, 1'000u);
  EXPECT_GT(most, 500u);
}

TEST(SlidingWindowLog, TimeGoingBackwardsIsJudgedAndRecordedAtTheNewestEntry) {
  const Limit l = Log(3, seconds(1));
  LogState s;
  ASSERT_TRUE(DecideAndCommit(l, s, kLogT0, 1).allowed());
  ASSERT_TRUE(DecideAndCommit(l, s, kLogT0 + milliseconds(900), 1).allowed());
  const Decision back = DecideAndCommit(l, s, kLogT0 + milliseconds(500), 1);
  EXPECT_TRUE(back.allowed());
  EXPECT_EQ(back.reset_after, milliseconds(1'400));  // newest + 1 s, from the caller's now
  // Recorded at the newest time, so the log stays in order.
  EXPECT_EQ(s.entries,
            (std::vector<Entry>{{.at_us = kLogT0.count(), .cost = 1},
                                {.at_us = (kLogT0 + milliseconds(900)).count(), .cost = 2}}));
  // At t0 + 1.2 s the entry at t0 would have left; judged at t0 + 900 ms it has not.
  const Decision full = DecideAndCommit(l, s, kLogT0 + milliseconds(200), 1);
  EXPECT_EQ(full.verdict, Verdict::kDenied);
  EXPECT_EQ(full.retry_after, milliseconds(800));  // t0 + 1 s
}

TEST(SlidingWindowLog, APeekOrARefusalRecordsNothing) {
  const Limit l = Log(2, seconds(1));
  LogState s;
  ASSERT_TRUE(DecideAndCommit(l, s, kLogT0, 2).allowed());
  EXPECT_TRUE(DecideAndCommit(l, s, kLogT0 + Micros(5), 0).allowed());
  EXPECT_EQ(DecideAndCommit(l, s, kLogT0 + Micros(6), 3).verdict, Verdict::kNeverFits);
  EXPECT_FALSE(DecideAndCommit(l, s, kLogT0 + Micros(7), 1).allowed());
  EXPECT_EQ(s.entries, (std::vector<Entry>{{.at_us = kLogT0.count(), .cost = 2}}));
  Commit(l, s, kLogT0 + Micros(8), 0);
  EXPECT_EQ(s.entries.size(), 1u);
}

}  // namespace
}  // namespace caudal
