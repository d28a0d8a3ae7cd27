#include "engine/over_limit_cache.h"

#include <gtest/gtest.h>

#include <random>

#include "caudal/engine/engine.h"
#include "common/cat.h"
#include "support/fake_store.h"
#include "support/manual_clock.h"

namespace caudal {
namespace {

using engine_internal::OverLimitCache;
using std::chrono::milliseconds;
using std::chrono::seconds;
using testing::FakeStore;

Decision Refusal(Micros retry) {
  return {.verdict = Verdict::kDenied,
          .limit = 10,
          .remaining = 0,
          .reset_after = retry,
          .retry_after = retry};
}

TEST(OverLimitCache, RefusesTheSameOrHigherCostUntilTheStoreWould) {
  OverLimitCache cache(1024);
  cache.Remember("k", 3, Nanos(1'000), Refusal(Micros(500)));    // sent at 1 µs: until 501 µs
  EXPECT_FALSE(cache.Lookup("k", 2, Nanos(2'000)).has_value());  // a smaller cost may fit
  auto d = cache.Lookup("k", 3, Nanos(2'000));
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->retry_after, Micros(499));  // what is left of the store's
  EXPECT_TRUE(cache.Lookup("k", 7, Nanos(500'999)).has_value());
  EXPECT_FALSE(cache.Lookup("k", 7, Nanos(501'000)).has_value());  // the store would admit now
  EXPECT_FALSE(cache.Lookup("other", 9, Nanos(2'000)).has_value());
  EXPECT_EQ(cache.hits(), 2u);
}

TEST(OverLimitCache, NeverFitsAndForgottenKeysGoToTheStore) {
  OverLimitCache cache(1024);
  Decision never = Refusal(Micros(0));
  never.verdict = Verdict::kNeverFits;
  cache.Remember("n", 1, Nanos(0), never);
  EXPECT_FALSE(cache.Lookup("n", 1, Nanos(1)).has_value());
  cache.Remember("k", 1, Nanos(0), Refusal(Micros(1'000'000)));
  cache.Forget("k");
  EXPECT_FALSE(cache.Lookup("k", 1, Nanos(1)).has_value());
}

TEST(OverLimitCache, StaysWithinItsBound) {
  OverLimitCache cache(64);
  for (int i = 0; i < 10'000; ++i) {
    cache.Remember(Cat("k", i), 1, Nanos(0), Refusal(Micros(1'000'000)));
  }
  int remembered = 0;
  for (int i = 0; i < 10'000; ++i) {
    remembered += cache.Lookup(Cat("k", i), 1, Nanos(1)).has_value() ? 1 : 0;
  }
  EXPECT_LE(remembered, 64);
  EXPECT_GT(remembered, 0);
}

Limit Make(LimitSpec spec) { return *Limit::Create(spec); }

PolicySpec Policy(std::string name, std::vector<std::string> identity, Limit limit) {
  PolicySpec p;
  p.name = std::move(name);
  p.identity = std::move(identity);
  p.limits = {limit};
  return p;
}

// The same random traffic through an engine with the cache and one without, each on its own
// store: every answer must be the same (a cached refusal is one the store would have given,
// and the cache never admits), and the cached engine must call its store less.
TEST(OverLimitCacheEquivalence, RandomTrafficDecidesExactlyAsWithoutIt) {
  for (DescriptorMode mode : {DescriptorMode::kAllOrNothing, DescriptorMode::kConsumeEach}) {
    for (uint32_t seed = 1; seed <= 8; ++seed) {
      SCOPED_TRACE(Cat("seed ", seed));
      ManualClock clock;
      FakeStore with_store(clock), without_store(clock);
      Engine with(with_store, clock, {.over_limit_cache_keys = 4096});
      Engine without(without_store, clock, {});
      auto set = *PolicySet::Create(
          {Policy("bucket", {"k"},
                  Make(LimitSpec::Bucket(Algorithm::kTokenBucket, 6, {5, seconds(1)}))),
           Policy("gcra", {"k", "t"},
                  Make(LimitSpec::Bucket(Algorithm::kGcra, 4, {3, seconds(1)}))),
           Policy("window", {"t"}, Make(LimitSpec::Window(Algorithm::kFixedWindow, 9, seconds(2)))),
           Policy("log", {"k"},
                  Make(LimitSpec::Window(Algorithm::kSlidingWindowLog, 8, seconds(3)))),
           Policy("counter", {"t"},
                  Make(LimitSpec::Window(Algorithm::kSlidingWindowCounter, 7, seconds(1))))},
          {.mode = mode});
      ASSERT_TRUE(with.SetPolicies(set).ok());
      ASSERT_TRUE(without.SetPolicies(set).ok());
      std::mt19937 rng(seed);
      int refused = 0;
      for (int i = 0; i < 5'000; ++i) {
        CheckRequest req;
        req.descriptors = {{"k", Cat("k", rng() % 3)}};
        if (rng() % 2 == 0) req.descriptors.push_back({"t", Cat("t", rng() % 2)});
        req.cost = 1 + static_cast<int64_t>(rng() % 4);
        req.refund = rng() % 20 == 0;
        const auto a = with.Check(req);
        const auto b = without.Check(req);
        ASSERT_TRUE(a.ok() && b.ok());
        ASSERT_EQ(a->outcome, b->outcome) << "request " << i;
        refused += a->outcome == Outcome::kDenied ? 1 : 0;
        if (a->allowed()) {
          ASSERT_EQ(a->results.size(), b->results.size());
          for (size_t p = 0; p < a->results.size(); ++p) {
            ASSERT_EQ(a->results[p].decisions, b->results[p].decisions) << "request " << i;
          }
        }
        clock.Advance(milliseconds(rng() % 120));
      }
      EXPECT_GT(refused, 1'000);
      EXPECT_LT(with_store.calls(), without_store.calls());
    }
  }
}

// One key flooding at 10× its limit. Every admitted request must reach the store (it consumes);
// a refused one reaches it only when the store's last refusal has run out.
uint64_t FloodStoreCalls(Limit limit, uint64_t* requests, uint64_t* admitted) {
  ManualClock clock(seconds(1'700'000'040));  // on a minute boundary
  FakeStore store(clock);
  Engine engine(store, clock, {.over_limit_cache_keys = 1024});
  EXPECT_TRUE(engine.SetPolicies(*PolicySet::Create({Policy("p", {"k"}, limit)}, {})).ok());
  // 100 per second allowed, 1,000 per second offered, for 60 s.
  *requests = 60'000;
  *admitted = 0;
  for (uint64_t i = 0; i < *requests; ++i) {
    CheckRequest req;
    req.descriptors = {{"k", "abuser"}};
    auto r = engine.Check(std::move(req));
    *admitted += r->allowed() ? 1 : 0;
    clock.Advance(milliseconds(1));
  }
  return store.calls();
}

TEST(OverLimitCacheEquivalence, AFloodCostsTheStoreLittleMoreThanWhatItAdmits) {
  uint64_t requests = 0, admitted = 0;
  // A window: once its limit is spent, every refusal until it ends comes from the cache.
  uint64_t calls = FloodStoreCalls(
      Make(LimitSpec::Window(Algorithm::kFixedWindow, 6'000, std::chrono::minutes(1))), &requests,
      &admitted);
  EXPECT_EQ(admitted, 6'000u);
  EXPECT_LE(calls - admitted, 2u);  // refused requests: 54,000 of them, one or two store calls
  // A bucket refilling one unit every 10 ms: at most one refusal reaches the store per unit
  // refilled, so refusals cost about as many store calls as admissions do (each admitted request
  // must reach the store, since it consumes).
  calls = FloodStoreCalls(Make(LimitSpec::Bucket(Algorithm::kTokenBucket, 100, {100, seconds(1)})),
                          &requests, &admitted);
  EXPECT_NEAR(static_cast<double>(admitted), 100 + 6'000, 2);
  EXPECT_LE(calls - admitted, 6'000u);
  EXPECT_LE(calls, 2 * admitted);
}

}  // namespace
}  // namespace caudal
