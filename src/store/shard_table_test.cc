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
    ASSERT_TRUE(t.MakeRoom(1, 0));
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
  // Full: bounded at 10'000 at a load of at most 7/8.
  EXPECT_FALSE(t.MakeRoom(1, 0));
  EXPECT_LE(t.MemoryUsage(), 10'000 * sizeof(ShardTable::Slot) * 8 / 7 + 64);
}

TEST(ShardTable, MakeRoomDropsOnlyFreshEntries) {
  ShardTable t(100);
  const auto fps = Fingerprints(100, 2);
  for (size_t i = 0; i < fps.size(); ++i) {
    ASSERT_TRUE(t.MakeRoom(1, 0));
    t.SetFreshAt(*t.Insert(fps[i]), i % 2 == 0 ? 5 : 50);  // even ones turn fresh at tick 5
  }
  EXPECT_FALSE(t.MakeRoom(1, 4));  // nothing fresh yet
  EXPECT_TRUE(t.MakeRoom(50, 5));
  EXPECT_EQ(t.size(), 50u);
  for (size_t i = 0; i < fps.size(); ++i) EXPECT_EQ(t.Find(fps[i]) != nullptr, i % 2 == 1) << i;
  EXPECT_FALSE(t.MakeRoom(51, 10));
}

TEST(ShardTable, LogListsAreOwnedAndReused) {
  ShardTable t(2);
  ASSERT_TRUE(t.MakeRoom(2, 0));
  ShardTable::Slot* a = t.Insert(3);  // odd: a sliding_window_log entry
  t.Log(*a).entries.push_back({.at_us = 1, .cost = 2});
  t.SetFreshAt(*a, 1);
  ShardTable::Slot* b = t.Insert(5);
  t.SetFreshAt(*b, 100);
  EXPECT_NE(a->LogIndex(), b->LogIndex());
  EXPECT_TRUE(t.Log(*b).entries.empty());
  ASSERT_TRUE(t.MakeRoom(1, 1));  // reclaims `a` and its list
  EXPECT_EQ(t.Find(3), nullptr);
  ShardTable::Slot* c = t.Insert(7);
  EXPECT_TRUE(t.Log(*c).entries.empty());
  EXPECT_NE(c->LogIndex(), t.Find(5)->LogIndex());
}

}  // namespace
}  // namespace caudal
