#include "algorithms/token_bucket.h"

#include <gtest/gtest.h>

#include "algorithms/exact_math.h"

namespace caudal {
namespace {

using std::chrono::minutes;
using std::chrono::seconds;

constexpr Micros kBucketT0 = seconds(1'700'000'000);

Limit Bucket(int64_t capacity, Rate refill) {
  return *Limit::Create(LimitSpec::Bucket(Algorithm::kTokenBucket, capacity, refill));
}

TEST(TokenBucket, FreshBucketIsFullAndAdmitsTheBurst) {
  const Limit l = Bucket(100, {100, minutes(1)});
  CompactState s;
  const CompactState* st = nullptr;
  for (int i = 0; i < 100; ++i) {
    const Step step = token_bucket::Decide(l, st, kBucketT0, 1);
    ASSERT_TRUE(step.decision.allowed()) << i;
    EXPECT_EQ(step.decision.remaining, 99 - i);
    s = step.next;
    st = &s;
  }
  const Step denied = token_bucket::Decide(l, st, kBucketT0, 1);
  EXPECT_EQ(denied.decision.verdict, Verdict::kDenied);
  EXPECT_FALSE(denied.changed);
  EXPECT_EQ(denied.decision.retry_after, Micros(600'000));  // one token per 0.6 s
  EXPECT_EQ(denied.decision.reset_after, minutes(1));       // 100 tokens to full
}

TEST(TokenBucket, RefillFractionsAreNeverLost) {
  // 7 per second: one token every 142857.142857… µs.
  const Limit l = Bucket(1, {7, seconds(1)});
  const Step first = token_bucket::Decide(l, nullptr, kBucketT0, 1);
  const Step early = token_bucket::Decide(l, &first.next, kBucketT0 + Micros(142'857), 1);
  EXPECT_EQ(early.decision.verdict, Verdict::kDenied);
  EXPECT_EQ(early.decision.retry_after, Micros(1));
  EXPECT_EQ(early.next.w[1], 999'999);  // 0.999999 tokens, held exactly as 999999/1000000
  const Step on_time = token_bucket::Decide(l, &early.next, kBucketT0 + Micros(142'858), 1);
  EXPECT_TRUE(on_time.decision.allowed());
  // Cut 7 s into odd steps: exactly floor(7·t / 1 s) tokens by t (the bucket never fills, so
  // nothing is clipped at the capacity).
  const Limit big = Bucket(100, {7, seconds(1)});
  CompactState s = token_bucket::Decide(big, nullptr, kBucketT0, 100).next;
  int64_t admitted = 0;
  int64_t last = 0;
  for (int64_t t = 1; t <= 7'000'000; t += 997) {
    const Step step = token_bucket::Decide(big, &s, kBucketT0 + Micros(t), 1);
    admitted += step.decision.allowed() ? 1 : 0;
    s = step.next;
    last = t;
  }
  EXPECT_EQ(admitted, 7 * last / 1'000'000);
}

TEST(TokenBucket, TimeGoingBackwardsCountsAsNoTimeAtAll) {
  const Limit l = Bucket(10, {10, seconds(1)});
  const Step spent = token_bucket::Decide(l, nullptr, kBucketT0, 10);
  const Micros t1 = kBucketT0 + std::chrono::milliseconds(500);
  const Step half = token_bucket::Decide(l, &spent.next, t1, 3);  // 5 refilled, 2 left
  ASSERT_TRUE(half.decision.allowed());
  EXPECT_EQ(half.decision.remaining, 2);

  const Micros back = kBucketT0 + std::chrono::milliseconds(200);
  const Step denied = token_bucket::Decide(l, &half.next, back, 3);
  EXPECT_EQ(denied.decision.verdict, Verdict::kDenied);
  EXPECT_EQ(denied.decision.remaining, 2);  // no refill, and nothing taken back either
  EXPECT_EQ(denied.decision.retry_after, std::chrono::milliseconds(400));  // 300 back + 100
  EXPECT_EQ(denied.decision.reset_after, std::chrono::milliseconds(1'100));
  EXPECT_EQ(denied.next, half.next);
  const Step allowed = token_bucket::Decide(l, &half.next, back, 2);
  EXPECT_TRUE(allowed.decision.allowed());
  EXPECT_EQ(allowed.next.w[2], t1.count());  // the last update stays where it was
}

TEST(TokenBucket, RefillStopsAtTheCapacity) {
  const Limit l = Bucket(5, {1, seconds(1)});
  const Step spent = token_bucket::Decide(l, nullptr, kBucketT0, 5);
  const Step later = token_bucket::Decide(l, &spent.next, kBucketT0 + minutes(10) + Micros(3), 0);
  EXPECT_EQ(later.decision.remaining, 5);
  EXPECT_EQ(later.next.w,
            (std::array<int64_t, 3>{5, 0, (kBucketT0 + minutes(10) + Micros(3)).count()}));
  EXPECT_EQ(later.decision.reset_after, Micros(0));
}

TEST(TokenBucket, RefillsTwoToTheFortyTokensPerYearExactly) {
  const Micros year = std::chrono::hours(24 * 365);
  const Limit l = Bucket(kMaxCapacity, {kMaxCapacity, year});
  const Step spent = token_bucket::Decide(l, nullptr, kBucketT0, kMaxCapacity);
  EXPECT_EQ(spent.decision.reset_after, year);
  const Micros t = Micros(12'345'678'901'234);  // about 143 days
  const Step later = token_bucket::Decide(l, &spent.next, kBucketT0 + t, 0);
  const exact::Int128 expected =
      static_cast<exact::Int128>(kMaxCapacity) * t.count() / year.count();
  EXPECT_EQ(later.decision.remaining, static_cast<int64_t>(expected));
}

}  // namespace
}  // namespace caudal
