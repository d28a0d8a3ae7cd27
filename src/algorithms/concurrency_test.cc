#include "algorithms/concurrency.h"

#include <gtest/gtest.h>

#include <random>
#include <vector>

namespace caudal {
namespace {

using concurrency::Holds;
using std::chrono::hours;
using std::chrono::milliseconds;
using std::chrono::seconds;

constexpr Micros kSlotsT0 = seconds(1'700'000'000) + Micros(123);

Limit Slots(int64_t limit, Micros hold) {
  return *Limit::Create(LimitSpec::Concurrency(limit, hold));
}

Decision TakeIfAllowed(const Limit& l, Holds& h, Micros now, int64_t id) {
  const Decision d = concurrency::Evaluate(l, h, now, 1);
  if (d.allowed()) concurrency::Take(l, h, now, id);
  return d;
}

TEST(Concurrency, AdmitsUpToTheLimitThenWaitsForTheEarliestHold) {
  const Limit l = Slots(2, seconds(10));
  Holds h;
  const Decision first = TakeIfAllowed(l, h, kSlotsT0, 1);
  ASSERT_TRUE(first.allowed());
  EXPECT_EQ(first.remaining, 1);
  EXPECT_EQ(first.reset_after, seconds(10));
  const Decision second = TakeIfAllowed(l, h, kSlotsT0 + seconds(3), 2);
  ASSERT_TRUE(second.allowed());
  EXPECT_EQ(second.remaining, 0);
  EXPECT_EQ(second.reset_after, seconds(10));  // until the second hold expires
  const Decision full = TakeIfAllowed(l, h, kSlotsT0 + seconds(4), 3);
  EXPECT_EQ(full.verdict, Verdict::kDenied);
  EXPECT_EQ(full.retry_after, seconds(6));  // the first hold expires at t0 + 10 s
  EXPECT_EQ(full.reset_after, seconds(9));
  EXPECT_FALSE(TakeIfAllowed(l, h, kSlotsT0 + seconds(10) - Micros(1), 3).allowed());
  EXPECT_TRUE(TakeIfAllowed(l, h, kSlotsT0 + seconds(10), 3).allowed()) << "a hold frees itself";
}

TEST(Concurrency, TakesOneSlotWhateverTheCostAndCostZeroPeeks) {
  const Limit l = Slots(3, seconds(1));
  Holds h;
  ASSERT_TRUE(concurrency::Evaluate(l, h, kSlotsT0, 500).allowed());
  concurrency::Take(l, h, kSlotsT0, 1);
  const Decision peek = concurrency::Evaluate(l, h, kSlotsT0, 0);
  EXPECT_TRUE(peek.allowed());
  EXPECT_EQ(peek.remaining, 2);
  EXPECT_EQ(h.entries.size(), 1u);
  concurrency::Take(l, h, kSlotsT0, 2);
  concurrency::Take(l, h, kSlotsT0, 3);
  EXPECT_TRUE(concurrency::Evaluate(l, h, kSlotsT0, 0).allowed()) << "a peek is never refused";
  EXPECT_EQ(concurrency::Evaluate(l, h, kSlotsT0, 0).remaining, 0);
}

TEST(Concurrency, ReleaseFreesOnlyALiveHoldOnce) {
  const Limit l = Slots(1, seconds(5));
  Holds h;
  ASSERT_TRUE(TakeIfAllowed(l, h, kSlotsT0, 42).allowed());
  bool released = true;
  Decision d = concurrency::Release(l, h, kSlotsT0 + seconds(1), 41, &released);
  EXPECT_FALSE(released) << "another id";
  EXPECT_EQ(d.remaining, 0);
  d = concurrency::Release(l, h, kSlotsT0 + seconds(1), 42, &released);
  EXPECT_TRUE(released);
  EXPECT_EQ(d.remaining, 1);
  EXPECT_EQ(d.reset_after, Micros(0));
  concurrency::Release(l, h, kSlotsT0 + seconds(1), 42, &released);
  EXPECT_FALSE(released) << "already freed";
  ASSERT_TRUE(TakeIfAllowed(l, h, kSlotsT0 + seconds(2), 43).allowed());
  concurrency::Release(l, h, kSlotsT0 + seconds(7), 43, &released);
  EXPECT_FALSE(released) << "expired: it had freed itself";
  EXPECT_TRUE(h.entries.empty());
}

TEST(Concurrency, LimitBoundsItsFields) {
  EXPECT_TRUE(Limit::Create(LimitSpec::Concurrency(kMaxConcurrencyLimit, kMaxHold)).ok());
  EXPECT_FALSE(Limit::Create(LimitSpec::Concurrency(kMaxConcurrencyLimit + 1, seconds(1))).ok());
  EXPECT_FALSE(Limit::Create(LimitSpec::Concurrency(0, seconds(1))).ok());
  EXPECT_FALSE(Limit::Create(LimitSpec::Concurrency(5, kMaxHold + milliseconds(1))).ok());
  EXPECT_FALSE(Limit::Create(LimitSpec::Concurrency(5, Micros(1500))).ok()) << "whole ms";
  EXPECT_FALSE(Limit::Create(LimitSpec::Concurrency(5, Micros(0))).ok());
  EXPECT_FALSE(Limit::Create(LimitSpec::Bucket(Algorithm::kConcurrency, 5, {6, hours(1)})).ok());
  EXPECT_EQ(Slots(5, seconds(30)).ToString(), "concurrency limit=5 hold=30s");
}

// Random takes, releases and peeks, with time moving forward: the live holds never exceed the
// limit, and every verdict matches a count of the holds taken, not released and not expired.
TEST(Concurrency, NeverMoreThanTheLimitLive) {
  const Limit l = Slots(4, milliseconds(50));
  Holds h;
  std::mt19937_64 rng(7);
  struct Taken {
    int64_t id;
    int64_t expires;
    bool released = false;
  };
  std::vector<Taken> model;
  Micros now = kSlotsT0;
  int64_t next_id = 1;
  for (int i = 0; i < 100'000; ++i) {
    now += Micros(rng() % 5'000);
    int64_t live = 0;
    for (const Taken& t : model) live += !t.released && t.expires > now.count();
    ASSERT_LE(live, l.capacity());
    if (rng() % 3 == 0 && !model.empty()) {
      Taken& t = model[rng() % model.size()];
      bool released = false;
      const Decision d = concurrency::Release(l, h, now, t.id, &released);
      ASSERT_EQ(released, !t.released && t.expires > now.count());
      t.released = true;
      ASSERT_EQ(d.remaining, l.capacity() - live + (released ? 1 : 0));
    } else {
      const Decision d = TakeIfAllowed(l, h, now, next_id);
      ASSERT_EQ(d.allowed(), live < l.capacity());
      if (d.allowed()) model.push_back({.id = next_id, .expires = (now + l.window()).count()});
      ++next_id;
    }
    std::erase_if(model, [&](const Taken& t) { return t.expires <= now.count(); });
  }
}

}  // namespace
}  // namespace caudal
