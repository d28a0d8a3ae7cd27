#include "algorithms/gcra.h"

#include <gtest/gtest.h>

#include "algorithms/token_bucket.h"

namespace caudal {
namespace {

using std::chrono::milliseconds;
using std::chrono::minutes;
using std::chrono::seconds;

constexpr Micros kGcraT0 = seconds(1'700'000'000);

Limit Gcra(int64_t capacity, Rate refill) {
  return *Limit::Create(LimitSpec::Bucket(Algorithm::kGcra, capacity, refill));
}

TEST(Gcra, HoldsTheBucketAsOneTheoreticalArrivalTime) {
  const Limit l = Gcra(100, {100, minutes(1)});  // emission interval 600 ms, tolerance 60 s
  const Step first = gcra::Decide(l, nullptr, kGcraT0, 1);
  EXPECT_TRUE(first.decision.allowed());
  EXPECT_EQ(first.next.w, (std::array<int64_t, 3>{(kGcraT0 + milliseconds(600)).count(), 0, 0}));
  EXPECT_EQ(first.decision.remaining, 99);
  EXPECT_EQ(first.decision.reset_after, milliseconds(600));
  const Step burst = gcra::Decide(l, &first.next, kGcraT0, 99);
  EXPECT_TRUE(burst.decision.allowed());
  EXPECT_EQ(burst.next.w[0], (kGcraT0 + minutes(1)).count());  // TAT − now = τ: the bucket is empty
  EXPECT_EQ(burst.decision.remaining, 0);
  const Step denied = gcra::Decide(l, &burst.next, kGcraT0 + milliseconds(100), 1);
  EXPECT_EQ(denied.decision.verdict, Verdict::kDenied);
  EXPECT_EQ(denied.decision.retry_after, milliseconds(500));  // the debt, less the 100 ms waited
  EXPECT_EQ(denied.next, burst.next);
}

TEST(Gcra, KeepsTheEmissionIntervalsFractionExactly) {
  const Limit l = Gcra(3, {7, seconds(1)});  // e = 142857 + 1/7 µs
  const Step one = gcra::Decide(l, nullptr, kGcraT0, 1);
  EXPECT_EQ(one.next.w, (std::array<int64_t, 3>{(kGcraT0 + Micros(142'857)).count(), 1, 0}));
  const Step three = gcra::Decide(l, &one.next, kGcraT0, 2);
  // 3/7 s = 428571 + 3/7 µs
  EXPECT_EQ(three.next.w, (std::array<int64_t, 3>{(kGcraT0 + Micros(428'571)).count(), 3, 0}));
  EXPECT_EQ(three.decision.reset_after, Micros(428'572));
  const Step denied = gcra::Decide(l, &three.next, kGcraT0, 1);
  EXPECT_EQ(denied.decision.retry_after, Micros(142'858));  // ceil(1/7 s)
}

TEST(Gcra, TimeGoingBackwardsJudgesAtTheEarlierTimeAndNeverAdmitsMore) {
  const Limit l = Gcra(10, {10, seconds(1)});
  const Limit tb = *Limit::Create(LimitSpec::Bucket(Algorithm::kTokenBucket, 10, {10, seconds(1)}));
  const Step g = gcra::Decide(l, nullptr, kGcraT0, 5);  // TAT = t0 + 500 ms
  const Step t = token_bucket::Decide(tb, nullptr, kGcraT0, 5);
  const Micros back = kGcraT0 - milliseconds(300);
  // GCRA sees the debt from 300 ms earlier: 800 ms of the 1 s tolerance, so 2 tokens.
  const Step g_back = gcra::Decide(l, &g.next, back, 3);
  EXPECT_EQ(g_back.decision.verdict, Verdict::kDenied);
  EXPECT_EQ(g_back.decision.remaining, 2);
  EXPECT_EQ(g_back.decision.retry_after, milliseconds(100));
  EXPECT_TRUE(token_bucket::Decide(tb, &t.next, back, 3).decision.allowed());  // 5 at Δt = 0
  const Step g_two = gcra::Decide(l, &g.next, back, 2);
  EXPECT_TRUE(g_two.decision.allowed());
  EXPECT_EQ(g_two.next.w[0], (kGcraT0 + milliseconds(700)).count());

  // Far enough back that the debt exceeds the whole tolerance: a peek still passes, with 0 left.
  const Step peek = gcra::Decide(l, &g.next, kGcraT0 - seconds(5), 0);
  EXPECT_EQ(peek.decision.verdict, Verdict::kAllowed);
  EXPECT_EQ(peek.decision.remaining, 0);
  EXPECT_FALSE(peek.changed);
  const Step one = gcra::Decide(l, &g.next, kGcraT0 - seconds(5), 1);
  EXPECT_EQ(one.decision.verdict, Verdict::kDenied);
  EXPECT_EQ(one.decision.retry_after, seconds(5) - milliseconds(400));
}

TEST(Gcra, AgreesWithTheTokenBucketOnAHandTrace) {
  const Limit g = Gcra(4, {3, seconds(2)});
  const Limit t = *Limit::Create(LimitSpec::Bucket(Algorithm::kTokenBucket, 4, {3, seconds(2)}));
  CompactState gs = gcra::Decide(g, nullptr, kGcraT0, 0).next;
  CompactState ts = token_bucket::Decide(t, nullptr, kGcraT0, 0).next;
  const std::pair<int64_t, int64_t> trace[] = {
      {0, 4},         {1, 1},         {666'666, 1},   {666'667, 1},   {666'667, 0},  {1'000'000, 2},
      {5'000'000, 4}, {5'000'001, 1}, {9'000'000, 3}, {9'000'000, 2}, {9'333'333, 1}};
  for (const auto& [at, cost] : trace) {
    const Step gd = gcra::Decide(g, &gs, kGcraT0 + Micros(at), cost);
    const Step td = token_bucket::Decide(t, &ts, kGcraT0 + Micros(at), cost);
    EXPECT_EQ(gd.decision, td.decision) << "at " << at << " cost " << cost;
    EXPECT_EQ(gd.changed, td.changed);
    if (gd.changed) gs = gd.next;
    if (td.changed) ts = td.next;
  }
}

}  // namespace
}  // namespace caudal
