// A flood of random new keys through a full MemoryStore, with every algorithm: known keys at
// their limit stay refused, and a key arriving mid-flood gets its whole limit and no more. The
// same scenario at 5 million keys and the default max_keys is tests/faults/memory_flood.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "caudal/store/memory_store.h"
#include "support/manual_clock.h"

namespace caudal {
namespace {

using std::chrono::hours;
using std::chrono::microseconds;

Limit HundredPerDay(Algorithm a) {
  if (IsWindowAlgorithm(a)) return *Limit::Create(LimitSpec::Window(a, 100, hours(24)));
  return *Limit::Create(LimitSpec::Bucket(a, 100, {100, hours(24)}));
}

// How many of `attempts` requests of cost 1 on `key` the store admits.
int64_t Admitted(Store& store, const std::string& key, const Limit& limit, int attempts) {
  int64_t admitted = 0;
  for (int i = 0; i < attempts; ++i) {
    const ConsumeEntry e{.key = key, .limit = &limit, .cost = 1};
    const Result<DecideResponse> r = store.Decide({.consumes = {&e, 1}});
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    admitted += r.ok() && r->allowed;
  }
  return admitted;
}

class MemoryStoreFlood : public ::testing::TestWithParam<Algorithm> {};

TEST_P(MemoryStoreFlood, KnownKeysKeepTheirLimitsAndNewKeysGetTheirsNoMore) {
  constexpr size_t kMaxKeys = 20'000;
  constexpr size_t kFlood = 100'000;  // five times the table
  constexpr size_t kCheckEvery = 2'000;
  ManualClock clock;
  MemoryStore store(clock, {.max_keys = kMaxKeys});
  const Limit limit = HundredPerDay(GetParam());
  std::vector<std::string> known;
  for (int k = 0; k < 50; ++k) {
    known.push_back("known/" + std::to_string(k));
    ASSERT_EQ(Admitted(store, known.back(), limit, 101), 100);
  }
  std::vector<std::string> late;  // keys that arrived during the flood and spent their limit
  std::mt19937_64 rng(42);
  for (size_t i = 1; i <= kFlood; ++i) {
    clock.Advance(microseconds(10));
    // Every flood key is new, so its one request is admitted: the table never refuses a key.
    ASSERT_EQ(Admitted(store, "flood/" + std::to_string(rng()), limit, 1), 1) << i;
    if (i % kCheckEvery != 0) continue;
    for (const std::string& k : known) ASSERT_EQ(Admitted(store, k, limit, 1), 0) << k << " " << i;
    late.push_back("late/" + std::to_string(i));
    ASSERT_EQ(Admitted(store, late.back(), limit, 105), 100) << late.back();
    for (const std::string& k : late) ASSERT_EQ(Admitted(store, k, limit, 1), 0) << k << " " << i;
  }
  EXPECT_LE(store.Size(), kMaxKeys);
  EXPECT_GE(store.evictions(), kFlood - kMaxKeys);
}

// Entries go by what forgetting them admits, not by how soon they turn fresh: a flood on a slow
// limit (each flood key fresh only after hours) does not push out a key at its fast limit (fresh
// in a minute), which would then admit its whole capacity again.
TEST(MemoryStoreFloodAcrossLimits, AFloodOnASlowLimitKeepsAKeyAtItsFastLimit) {
  ManualClock clock;
  MemoryStore store(clock, {.max_keys = 5'000});
  const Limit fast = *Limit::Create(
      LimitSpec::Bucket(Algorithm::kTokenBucket, 100, {100, std::chrono::minutes(1)}));
  const Limit slow =
      *Limit::Create(LimitSpec::Bucket(Algorithm::kTokenBucket, 10, {10, hours(24)}));
  ASSERT_EQ(Admitted(store, "busy", fast, 101), 100);
  std::mt19937_64 rng(7);
  for (int i = 0; i < 50'000; ++i) {
    clock.Advance(microseconds(10));
    ASSERT_EQ(Admitted(store, "flood/" + std::to_string(rng()), slow, 1), 1);
  }
  EXPECT_GT(store.evictions(), 40'000u);
  // Half a second later, half a token has come back: still refused.
  EXPECT_EQ(Admitted(store, "busy", fast, 1), 0);
}

INSTANTIATE_TEST_SUITE_P(EveryAlgorithm, MemoryStoreFlood,
                         ::testing::Values(Algorithm::kTokenBucket, Algorithm::kGcra,
                                           Algorithm::kFixedWindow,
                                           Algorithm::kSlidingWindowCounter,
                                           Algorithm::kSlidingWindowLog),
                         [](const auto& p) { return std::string(AlgorithmName(p.param)); });

}  // namespace
}  // namespace caudal
