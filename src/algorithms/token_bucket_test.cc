#include "caudal/algorithms/token_bucket.h"

#include <gtest/gtest.h>

namespace caudal {
namespace {

using std::chrono::minutes;
using std::chrono::seconds;

constexpr Micros kT0 = seconds(1'700'000'000);

Limit Bucket(int64_t capacity, Rate refill) {
  return *Limit::Create(LimitSpec::Bucket(Algorithm::kTokenBucket, capacity, refill));
}

TEST(TokenBucket, FreshBucketIsFullAndAdmitsTheBurst) {
  const Limit l = Bucket(100, {100, minutes(1)});
  CompactState s;
  const CompactState* st = nullptr;
  for (int i = 0; i < 100; ++i) {
    const Step step = token_bucket::Decide(l, st, kT0, 1);
    ASSERT_TRUE(step.decision.allowed()) << i;
    EXPECT_EQ(step.decision.remaining, 99 - i);
    s = step.next;
    st = &s;
  }
  const Step denied = token_bucket::Decide(l, st, kT0, 1);
  EXPECT_EQ(denied.decision.verdict, Verdict::kDenied);
  EXPECT_FALSE(denied.consumed);
  EXPECT_EQ(denied.decision.retry_after, Micros(600'000));   // one token per 0.6 s
  EXPECT_EQ(denied.decision.reset_after, minutes(1));         // 100 tokens to full
}

TEST(TokenBucket, HundredPerMinuteHasNoDriftOverAMillionPeriods) {
  const Limit l = Bucket(100, {100, minutes(1)});
  CompactState s = token_bucket::Decide(l, nullptr, kT0, 100).next;  // empty the bucket
  Micros now = kT0;
  int64_t admitted = 0;
  for (int k = 0; k < 1'000'000; ++k) {
    now += minutes(1);
    const Step step = token_bucket::Decide(l, &s, now, 100);
    admitted += step.decision.allowed() ? 100 : 0;
    s = step.next;
  }
  EXPECT_EQ(admitted, int64_t{100} * 1'000'000);
}

}  // namespace
}  // namespace caudal
