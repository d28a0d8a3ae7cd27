#include "caudal/store/memory_store.h"

#include <gtest/gtest.h>

#include <array>
#include <atomic>
#include <barrier>
#include <string>
#include <thread>
#include <vector>

#include "algorithms/sliding_window_log.h"
#include "support/grouping_store.h"
#include "support/manual_clock.h"
#include "support/store_conformance.h"

namespace caudal {
namespace {

using std::chrono::hours;
using std::chrono::seconds;

INSTANTIATE_TEST_SUITE_P(
    Memory, StoreConformanceTest,
    ::testing::Values(
        StoreConformanceParam{
            .name = "default",
            .make = [](ManualClock& c) { return std::make_unique<MemoryStore>(c); }},
        StoreConformanceParam{.name = "one_shard",
                              .make =
                                  [](ManualClock& c) {
                                    return std::make_unique<MemoryStore>(
                                        c, MemoryStoreOptions{.max_keys = 1000});
                                  }},
        // Grouped keys (testing::GroupKeys): the memory store keeps each apart.
        StoreConformanceParam{.name = "grouped",
                              .make =
                                  [](ManualClock& c) {
                                    return testing::GroupKeys(std::make_unique<MemoryStore>(c));
                                  }}),
    StoreConformanceParamName);

Limit Bucket(int64_t capacity, Rate refill) {
  return *Limit::Create(LimitSpec::Bucket(Algorithm::kTokenBucket, capacity, refill));
}
Limit Window(Algorithm a, int64_t limit, Micros w) {
  return *Limit::Create(LimitSpec::Window(a, limit, w));
}

Result<DecideResponse> DecideOne(Store& store, std::string_view key, const Limit& limit,
                                 int64_t cost) {
  const ConsumeEntry e{.key = key, .limit = &limit, .cost = cost};
  return store.Decide({.consumes = {&e, 1}});
}

// prefix + number (spelled out: GCC 12 warns falsely on "literal" + std::to_string(..)).
std::string Name(std::string_view prefix, size_t i) {
  std::string s(prefix);
  s += std::to_string(i);
  return s;
}

class MemoryStoreTest : public ::testing::Test {
 protected:
  ManualClock clock_;
};

TEST_F(MemoryStoreTest, FullOfLiveEntriesEvictsTheLeastConsumedKey) {
  MemoryStore store(clock_, {.max_keys = 4});
  const Limit limit = Bucket(10, {10, hours(1)});
  ASSERT_EQ(DecideOne(store, "k0", limit, 10)->decisions[0].remaining, 0);  // at its limit
  for (int i = 1; i < 4; ++i) ASSERT_TRUE(DecideOne(store, Name("k", i), limit, 1).ok());
  EXPECT_EQ(store.Size(), 4u);
  EXPECT_EQ(store.evictions(), 0u);

  // A new key gets in, with its whole limit; one key that had spent 1 is forgotten for it.
  const Result<DecideResponse> fresh = DecideOne(store, "new", limit, 1);
  ASSERT_TRUE(fresh.ok()) << fresh.status().ToString();
  EXPECT_EQ(fresh->decisions[0].remaining, 9);
  EXPECT_EQ(store.evictions(), 1u);
  EXPECT_EQ(store.Size(), 4u);
  int forgotten = 0;
  for (int i = 1; i < 4; ++i)
    forgotten += DecideOne(store, Name("k", i), limit, 0)->decisions[0].remaining == 10;
  EXPECT_EQ(forgotten, 1);
  // The key at its limit kept its state.
  EXPECT_EQ(DecideOne(store, "k0", limit, 1)->decisions[0].verdict, Verdict::kDenied);
  // A request refused anyway needs no slot and evicts nothing, and consumes nothing either.
  const ConsumeEntry mixed[] = {{.key = "k0", .limit = &limit, .cost = 1},
                                {.key = "new2", .limit = &limit, .cost = 1}};
  EXPECT_FALSE(store.Decide({.consumes = mixed})->allowed);
  EXPECT_EQ(store.evictions(), 1u);
  EXPECT_EQ(DecideOne(store, "new2", limit, 0)->decisions[0].remaining, 10);
  EXPECT_EQ(DecideOne(store, "new", limit, 0)->decisions[0].remaining, 9);
}

TEST_F(MemoryStoreTest, ReclaimsFreshEntriesBeforeEvictingLiveOnes) {
  MemoryStore store(clock_, {.max_keys = 4});
  const Limit quick = Window(Algorithm::kFixedWindow, 5, seconds(1));
  const Limit slow = Window(Algorithm::kSlidingWindowLog, 5, hours(1));
  ASSERT_TRUE(DecideOne(store, "quick0", quick, 1).ok());
  ASSERT_TRUE(DecideOne(store, "quick1", quick, 1).ok());
  ASSERT_TRUE(DecideOne(store, "slow0", slow, 3).ok());
  ASSERT_TRUE(DecideOne(store, "slow1", slow, 3).ok());
  // Full of live entries: one that had consumed 1 goes, not a log that had consumed 3.
  ASSERT_TRUE(DecideOne(store, "quick2", quick, 1).ok());
  EXPECT_EQ(store.evictions(), 1u);
  EXPECT_EQ(DecideOne(store, "slow0", slow, 0)->decisions[0].remaining, 2);

  clock_.Advance(seconds(3));  // the quick windows reset (freshness is tracked in whole seconds)
  EXPECT_TRUE(DecideOne(store, "new0", quick, 1).ok());
  EXPECT_TRUE(DecideOne(store, "new1", quick, 1).ok());
  EXPECT_EQ(store.Size(), 4u);
  EXPECT_EQ(store.evictions(), 1u);  // the fresh ones made room: nothing live was forgotten
  // The live logs kept their state.
  EXPECT_EQ(DecideOne(store, "slow0", slow, 0)->decisions[0].remaining, 2);
  EXPECT_EQ(DecideOne(store, "slow1", slow, 2)->decisions[0].remaining, 0);
}

TEST_F(MemoryStoreTest, ReclaimingLogsReleasesTheirMemory) {
  MemoryStore store(clock_, {.max_keys = 64});
  const Limit log = Window(Algorithm::kSlidingWindowLog, 1000, seconds(1));
  const size_t empty = store.MemoryUsage();
  for (int k = 0; k < 64; ++k) {
    for (int i = 0; i < 100; ++i) {
      clock_.Advance(std::chrono::microseconds(1));  // distinct times: one list entry each
      ASSERT_TRUE(DecideOne(store, Name("log", k), log, 1)->allowed);
    }
  }
  const size_t full = store.MemoryUsage();
  EXPECT_GT(full, empty + 64 * 100 * sizeof(sliding_window_log::Entry));
  clock_.Advance(seconds(3));
  const Limit other = Bucket(10, {1, seconds(1)});
  ASSERT_TRUE(DecideOne(store, "other", other, 1).ok());  // the table is full: reclaims all 64
  EXPECT_EQ(store.Size(), 1u);
  EXPECT_LT(store.MemoryUsage(), empty + 64 * 100 * sizeof(sliding_window_log::Entry) / 4);
}

TEST_F(MemoryStoreTest, BytesPerKeyStayCompact) {
  constexpr size_t kKeys = 200'000;
  // The bound is split evenly across the shards, so leave the few percent that uneven
  // shards need (see memory_store.h).
  MemoryStore store(clock_, {.max_keys = kKeys + kKeys / 10});
  const Limit limit = Bucket(100, {10, seconds(1)});
  for (size_t i = 0; i < kKeys; ++i) {
    ASSERT_TRUE(DecideOne(store, Name("tenant-7/user-", i), limit, 1).ok()) << i;
  }
  EXPECT_EQ(store.Size(), kKeys);
  const double bytes_per_key = static_cast<double>(store.MemoryUsage()) / kKeys;
  // A slot is 36 bytes (fingerprint, state, fresh time) at a load of at most 7/8.
  EXPECT_GE(bytes_per_key, 36.0);
  EXPECT_LE(bytes_per_key, 48.0);
}

TEST_F(MemoryStoreTest, OutOfRangeOptionsAreClamped) {
  MemoryStore none(clock_, {.max_keys = 0, .shards = 0});  // at least one key, one shard
  const Limit limit = Bucket(2, {1, hours(1)});
  EXPECT_TRUE(DecideOne(none, "a", limit, 1).ok());
  EXPECT_TRUE(DecideOne(none, "b", limit, 1).ok());  // "a" is forgotten for it
  EXPECT_EQ(none.Size(), 1u);
  EXPECT_EQ(none.evictions(), 1u);
  // A request needing more new keys than the table holds is refused, and consumes nothing.
  const ConsumeEntry two[] = {{.key = "c", .limit = &limit, .cost = 1},
                              {.key = "d", .limit = &limit, .cost = 1}};
  const Result<DecideResponse> refused = none.Decide({.consumes = two});
  EXPECT_EQ(refused.status().code(), StatusCode::kResourceExhausted);
  EXPECT_NE(refused.status().message().find("max_keys"), std::string::npos);
  EXPECT_EQ(DecideOne(none, "b", limit, 0)->decisions[0].remaining, 1);
  MemoryStore many(clock_, {.max_keys = 100, .shards = size_t{1} << 40});
  for (int i = 0; i < 100; ++i) ASSERT_TRUE(DecideOne(many, Name("k", i), limit, 1).ok()) << i;
  EXPECT_EQ(many.Size(), 100u);  // small tables use one shard: the bound is exact
  EXPECT_TRUE(DecideOne(many, "one-more", limit, 1).ok());
  EXPECT_EQ(many.evictions(), 7u);  // a sixteenth of 100, rounded up
  EXPECT_EQ(many.Size(), 94u);
}

// Keys come and go while time moves: each round brings 3000 new keys, more than the table could
// hold over two rounds, so it must keep reclaiming the previous round's (now fresh) entries,
// while both threads insert at once. It never refuses, never exceeds its bound, and every
// key stays exact.
TEST_F(MemoryStoreTest, ChurnUnderConcurrencyStaysBoundedAndExact) {
  constexpr size_t kMaxKeys = 4096;
  constexpr int kRounds = 20;
  MemoryStore store(clock_, {.max_keys = kMaxKeys, .shards = 4});
  const Limit limit = Window(Algorithm::kFixedWindow, 2, seconds(1));
  std::atomic<int> exhausted{0};
  std::atomic<int> wrong{0};
  std::atomic<size_t> largest{0};
  // Between rounds, time moves past every window of the round.
  std::barrier round_done(2, [&]() noexcept {
    largest = std::max(largest.load(), store.Size());
    clock_.Advance(std::chrono::milliseconds(1500));
  });
  std::vector<std::thread> threads;
  for (int t = 0; t < 2; ++t) {
    threads.emplace_back([&, t] {
      for (int round = 0; round < kRounds; ++round) {
        for (int k = 0; k < 1500; ++k) {
          const std::string key = Name("r", round) + Name("/t", t) + Name("/", k);
          const Result<DecideResponse> r = DecideOne(store, key, limit, 1);
          if (!r.ok()) {
            exhausted.fetch_add(1);
          } else if (r->decisions[0].remaining != 1) {
            wrong.fetch_add(1);  // a new key's first request leaves exactly one
          }
        }
        round_done.arrive_and_wait();
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_EQ(exhausted.load(), 0);
  EXPECT_LE(largest.load(), kMaxKeys);
  EXPECT_GE(largest.load(), 3000u);
}

TEST_F(MemoryStoreTest, AKeyUsedWithAnotherAlgorithmGetsItsOwnState) {
  MemoryStore store(clock_);
  const Limit bucket = Bucket(3, {1, seconds(1)});
  const Limit window = Window(Algorithm::kFixedWindow, 5, seconds(1));
  EXPECT_EQ(DecideOne(store, "same", bucket, 3)->decisions[0].remaining, 0);
  EXPECT_EQ(DecideOne(store, "same", window, 1)->decisions[0].remaining, 4);
  EXPECT_EQ(store.Size(), 2u);
}

// Two threads per core, each with its own keys plus keys shared by all: every own key admits
// exactly its capacity, the shared logs exactly their limit, and the table holds every key once.
TEST_F(MemoryStoreTest, ConcurrentUseKeepsEveryKeyExact) {
  constexpr int kThreads = 4;
  constexpr int kKeysPerThread = 2000;
  MemoryStore store(clock_, {.max_keys = 9000, .shards = 8});
  const Limit own = Bucket(3, {1, hours(1)});
  const Limit shared = Window(Algorithm::kSlidingWindowLog, 50, hours(1));
  std::atomic<int64_t> own_admitted{0};
  std::atomic<int64_t> shared_admitted{0};
  std::atomic<int> errors{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int round = 0; round < 4; ++round) {
        for (int k = 0; k < kKeysPerThread; ++k) {
          const std::string mine = Name("t", t) + Name("/", k);
          const std::string common = Name("shared/", k % 4);
          const ConsumeEntry alone{.key = mine, .limit = &own, .cost = 1};
          const ConsumeEntry paired[] = {{.key = common, .limit = &shared, .cost = 1},
                                         {.key = mine, .limit = &own, .cost = 0}};
          const Result<DecideResponse> a = store.Decide({.consumes = {&alone, 1}});
          const Result<DecideResponse> b = store.Decide({.consumes = paired});
          if (!a.ok() || !b.ok()) {
            errors.fetch_add(1);
            continue;
          }
          own_admitted.fetch_add(a->allowed);
          shared_admitted.fetch_add(b->allowed);
        }
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(errors.load(), 0);
  EXPECT_EQ(own_admitted.load(), kThreads * kKeysPerThread * 3);  // 4 rounds, 3 tokens each
  EXPECT_EQ(shared_admitted.load(), 4 * 50);                      // four shared logs of 50
  EXPECT_EQ(store.Size(), size_t{kThreads * kKeysPerThread + 4});
}

// The shard lock under heavy contention: eight threads on one key of one shard (more threads
// than cores, so waiters spin, then sleep and are woken), through Decide and DecideEach, while
// another thread adds keys so that the shard rebuilds as it grows (a long hold). A lost update
// would admit more than the capacity; a lost wake-up would hang the test.
TEST_F(MemoryStoreTest, ThreadsContendingForOneKeyAdmitExactlyItsCapacity) {
  constexpr int kThreads = 8;
  constexpr int kRequestsPerThread = 4000;
  constexpr int64_t kCapacity = 20'000;
  MemoryStore store(clock_, {.max_keys = 50'000, .shards = 1});
  const Limit hot = Bucket(kCapacity, {1, hours(1)});
  const Limit other = Bucket(1, {1, hours(1)});
  std::atomic<int64_t> admitted{0};
  std::atomic<int> errors{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      const ConsumeEntry e{.key = "hot", .limit = &hot, .cost = 1};
      const std::array<ConsumeEntry, 4> batch{e, e, e, e};
      std::array<Decision, 4> decisions;
      for (int i = 0; i < kRequestsPerThread; i += 5) {
        const Result<DecideResponse> r = store.Decide({.consumes = {&e, 1}});
        if (!r.ok() || !store.DecideEach(batch, decisions).ok()) {
          errors.fetch_add(1);
          continue;
        }
        int64_t n = r->allowed;
        for (const Decision& d : decisions) n += d.allowed();
        admitted.fetch_add(n);
      }
    });
  }
  threads.emplace_back([&] {
    for (int k = 0; k < 40'000; ++k) {
      if (!DecideOne(store, Name("new/", k), other, 1).ok()) errors.fetch_add(1);
    }
  });
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(errors.load(), 0);
  EXPECT_EQ(admitted.load(), kCapacity) << "each token admitted once, none twice";
  EXPECT_EQ(DecideOne(store, "hot", hot, 0)->decisions[0].remaining, 0);
  EXPECT_EQ(store.Size(), size_t{40'001});
}

// A shard keeps as many keys' share tables as it holds keys: a new one past them is refused,
// with nothing taken, until the tables' consumers expire; a batch counts each of its new keys.
TEST_F(MemoryStoreTest, ShareTablesAreBoundedByMaxKeys) {
  MemoryStore store(clock_, {.max_keys = 3});
  const Limit limit = Bucket(100, {100, std::chrono::seconds(1)});
  auto share = [&](std::string_view key) {
    const ShareEntry e{.key = key, .limit = &limit, .consumer = "c", .demand = 10};
    return store.Share({&e, 1});
  };
  ASSERT_TRUE(share("a").ok());
  ASSERT_TRUE(share("b").ok());
  const ShareEntry two[] = {{.key = "c", .limit = &limit, .consumer = "c", .demand = 10},
                            {.key = "d", .limit = &limit, .consumer = "c", .demand = 10}};
  const Result<ShareResponse> both = store.Share(two);
  EXPECT_EQ(both.status().code(), StatusCode::kResourceExhausted) << "two new tables, one room";
  EXPECT_EQ(DecideOne(store, "c", limit, 0)->decisions[0].remaining, 100) << "nothing taken";
  ASSERT_TRUE(share("c").ok());
  EXPECT_EQ(share("d").status().code(), StatusCode::kResourceExhausted);
  EXPECT_TRUE(share("a").ok()) << "a key that has its table";
  clock_.Advance(std::chrono::seconds(2) + std::chrono::microseconds(1));  // every consumer expired
  EXPECT_TRUE(share("d").ok());
}

}  // namespace
}  // namespace caudal
