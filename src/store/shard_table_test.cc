#include "store/shard_table.h"

#include <gtest/gtest.h>

#include <random>
#include <vector>

namespace caudal {
namespace {

// Distinct non-zero compact (even) fingerprints.
std::vector<uint64_t> Fingerprints(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<uint64_t> out;
  while (out.size() < n) {
    const uint64_t fp = rng() & ~uint64_t{1};
    if (fp != 0) out.push_back(fp);
  }
  return out;
}

TEST(ShardTable, FindsWhatWasInsertedAcrossGrowth) {
  ShardTable t(10'000);
  const auto fps = Fingerprints(10'000, 1);
  for (size_t i = 0; i < fps.size(); ++i) {
    ASSERT_EQ(t.Find(fps[i]), nullptr);
    ASSERT_TRUE(t.MakeRoom(1, 0).ok);
    ShardTable::Slot* s = t.Insert(fps[i]);
    s->SetState({.w = {static_cast<int64_t>(i), -1, 7}});
    t.SetFreshAt(*s, kNeverFresh);
  }
  EXPECT_EQ(t.size(), fps.size());
  for (size_t i = 0; i < fps.size(); ++i) {
    const ShardTable::Slot* s = t.Find(fps[i]);
    ASSERT_NE(s, nullptr);
    EXPECT_EQ(s->State(), (CompactState{.w = {static_cast<int64_t>(i), -1, 7}}));
  }
  EXPECT_EQ(t.Find(2), nullptr);
  // Full of live entries: bounded at 10'000 at a load of at most 7/8; making room evicts a
  // sixteenth and stays within the bound.
  const size_t bytes = t.MemoryUsage();
  EXPECT_LE(bytes, 10'000 * sizeof(ShardTable::Slot) * 8 / 7 + 64);
  const ShardTable::Room room = t.MakeRoom(1, 0);
  EXPECT_TRUE(room.ok);
  EXPECT_EQ(room.evicted, 10'000u / kEvictionShare);
  EXPECT_EQ(t.size(), 10'000u - 10'000u / kEvictionShare);
  EXPECT_EQ(t.MemoryUsage(), bytes);
}

TEST(ShardTable, MakeRoomDropsOnlyFreshEntries) {
  ShardTable t(100);
  const auto fps = Fingerprints(100, 2);
  for (size_t i = 0; i < fps.size(); ++i) {
    ASSERT_TRUE(t.MakeRoom(1, 0).ok);
    t.SetFreshAt(*t.Insert(fps[i]), i % 2 == 0 ? 5 : 50);  // even ones turn fresh at tick 5
  }
  const ShardTable::Room reclaimed = t.MakeRoom(50, 5);
  EXPECT_TRUE(reclaimed.ok);
  EXPECT_EQ(reclaimed.evicted, 0u);  // fresh entries went first: nothing live was forgotten
  EXPECT_EQ(t.size(), 50u);
  for (size_t i = 0; i < fps.size(); ++i) EXPECT_EQ(t.Find(fps[i]) != nullptr, i % 2 == 1) << i;
}

TEST(ShardTable, FullOfLiveEntriesEvictsTheLeastConsumedThenTheSoonestFresh) {
  ShardTable t(64);
  const auto fps = Fingerprints(64, 3);
  for (size_t i = 0; i < fps.size(); ++i) {
    ASSERT_TRUE(t.MakeRoom(1, 0).ok);
    // Consumption 1 for a quarter of them, the others 100; fresh times spread out.
    t.Record(*t.Insert(fps[i]), 1000 - static_cast<FreshTick>(i), i % 4 == 0 ? 1 : 100);
  }
  // A sixteenth (4) go: of the 16 that consumed 1, the 4 that turn fresh soonest.
  const ShardTable::Room room = t.MakeRoom(1, 0);
  EXPECT_TRUE(room.ok);
  EXPECT_EQ(room.evicted, 4u);
  for (size_t i = 0; i < fps.size(); ++i) {
    const bool gone = i % 4 == 0 && i >= 48;  // the highest i turn fresh first
    EXPECT_EQ(t.Find(fps[i]) == nullptr, gone) << i;
  }
  // A request needing more than a sixteenth gets what it needs (60 + 20 − 64 = 16), least
  // consumed first again.
  const ShardTable::Room more = t.MakeRoom(20, 0);
  EXPECT_TRUE(more.ok);
  EXPECT_EQ(more.evicted, 16u);
  size_t heavy_left = 0;
  for (size_t i = 0; i < fps.size(); ++i) heavy_left += i % 4 != 0 && t.Find(fps[i]) != nullptr;
  EXPECT_EQ(heavy_left, 48u - 4u);  // the 12 light ones left went, then 4 heavy ones
}

TEST(ShardTable, EvictionNeverTakesTheRequestsOwnEntries) {
  ShardTable t(16);
  const auto fps = Fingerprints(16, 4);
  for (size_t i = 0; i < fps.size(); ++i) {
    ASSERT_TRUE(t.MakeRoom(1, 0).ok);
    t.Record(*t.Insert(fps[i]), 100, i < 2 ? 0 : 50);  // the first two rank lowest
  }
  const uint64_t keep[] = {fps[0], fps[1]};
  const ShardTable::Room room = t.MakeRoom(1, 0, keep);
  EXPECT_TRUE(room.ok);
  EXPECT_EQ(room.evicted, 1u);
  EXPECT_NE(t.Find(fps[0]), nullptr);
  EXPECT_NE(t.Find(fps[1]), nullptr);
  // More new entries than the shard holds besides the request's own: refused, nothing lost.
  const size_t before = t.size();
  EXPECT_FALSE(t.MakeRoom(15, 0, keep).ok);
  EXPECT_EQ(t.size(), before);
  EXPECT_TRUE(t.MakeRoom(14, 0, keep).ok);
  EXPECT_EQ(t.size(), 2u);
}

TEST(ShardTable, TheEvictionRankRidesInStateWordTwoUnseen) {
  ShardTable t(4);
  ASSERT_TRUE(t.MakeRoom(1, 0).ok);
  ShardTable::Slot* s = t.Insert(6);
  const CompactState state{.w = {-5, 7, (int64_t{1} << 53) - 1}};
  s->SetState(state);
  t.Record(*s, 10, 1'000'000);
  EXPECT_EQ(s->State(), state);
  EXPECT_EQ(s->Rank(), EvictionRank(1'000'000));
  s->SetState({.w = {1, 2, 3}});  // a write keeps the rank until the next Record
  EXPECT_EQ(s->Rank(), EvictionRank(1'000'000));
  EXPECT_EQ(s->State(), (CompactState{.w = {1, 2, 3}}));
}

TEST(EvictionRank, IsMonotonicAnUpperBoundWithinAQuarterAndFitsAByte) {
  // The smallest value each rank stands for, to check the order and the precision.
  std::vector<int64_t> first(256, -1);
  uint8_t previous = 0;
  for (int64_t c = 0; c < 100'000; ++c) {
    const uint8_t r = EvictionRank(c);
    EXPECT_GE(r, previous) << c;
    previous = r;
    if (first[r] < 0) first[r] = c;
  }
  for (int64_t c = 0; c < 8; ++c) EXPECT_EQ(EvictionRank(c), c);
  // Values sharing a rank are within 25% of each other...
  for (int64_t c = 8; c < 100'000; ++c) {
    EXPECT_LE(c, first[EvictionRank(c)] * 5 / 4 + 1) << c;
  }
  EXPECT_LT(EvictionRank(int64_t{1} << 40), 255);  // every capacity has its own rank
  EXPECT_LT(EvictionRank(int64_t{1} << 40), EvictionRank((int64_t{1} << 40) + (int64_t{1} << 39)));
  EXPECT_EQ(EvictionRank(-3), 0);
}

TEST(ShardTable, LogListsAreOwnedAndReused) {
  ShardTable t(2);
  ASSERT_TRUE(t.MakeRoom(2, 0).ok);
  ShardTable::Slot* a = t.Insert(3);  // odd: a sliding_window_log entry
  t.Log(*a).entries.push_back({.at_us = 1, .cost = 2});
  t.SetFreshAt(*a, 1);
  ShardTable::Slot* b = t.Insert(5);
  t.SetFreshAt(*b, 100);
  EXPECT_NE(a->LogIndex(), b->LogIndex());
  EXPECT_TRUE(t.Log(*b).entries.empty());
  ASSERT_TRUE(t.MakeRoom(1, 1).ok);  // reclaims `a` and its list
  EXPECT_EQ(t.Find(3), nullptr);
  ShardTable::Slot* c = t.Insert(7);
  EXPECT_TRUE(t.Log(*c).entries.empty());
  EXPECT_NE(c->LogIndex(), t.Find(5)->LogIndex());
}

}  // namespace
}  // namespace caudal
