#include "simulate/window_tracker.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>

namespace caudal::simulate {
namespace {

struct Event {
  int64_t at_us;
  uint32_t key;
  int64_t cost;
};

// The definition, directly: the cost of `key`'s events in (t − w, t], maximised over every t at
// which an event happens (the only places a maximum can be).
int64_t BruteInWindow(const std::vector<Event>& ev, size_t upto, uint32_t key, int64_t t,
                      int64_t w) {
  int64_t sum = 0;
  for (size_t j = 0; j < upto; ++j) {
    if (ev[j].key == key && ev[j].at_us > t - w && ev[j].at_us <= t) sum += ev[j].cost;
  }
  return sum;
}

TEST(WindowTracker, MatchesBruteForceOnRandomTraces) {
  for (uint64_t seed = 1; seed <= 40; ++seed) {
    std::mt19937_64 rng(seed);
    const int64_t w = 1 + static_cast<int64_t>(rng() % 50);
    const uint32_t keys = 1 + static_cast<uint32_t>(rng() % 4);
    std::vector<Event> ev;
    int64_t t = 0;
    for (int i = 0; i < 300; ++i) {
      t += static_cast<int64_t>(rng() % 10);  // ties included
      ev.push_back({t, static_cast<uint32_t>(rng() % keys), static_cast<int64_t>(rng() % 4)});
    }
    WindowTracker tracker(Micros(w), keys);
    int64_t brute_max = 0;
    for (size_t i = 0; i < ev.size(); ++i) {
      const int64_t got = tracker.Admit(ev[i].key, Micros(ev[i].at_us), ev[i].cost);
      const int64_t want = BruteInWindow(ev, i + 1, ev[i].key, ev[i].at_us, w);
      ASSERT_EQ(got, want) << "seed " << seed << " event " << i;
      brute_max = std::max(brute_max, want);
    }
    EXPECT_EQ(tracker.max_in_window(), brute_max) << "seed " << seed;
  }
}

TEST(WindowTracker, CurrentMaxMatchesBruteForceBetweenEvents) {
  std::mt19937_64 rng(99);
  const int64_t w = 20;
  const uint32_t keys = 5;
  std::vector<Event> ev;
  WindowTracker tracker(Micros(w), keys);
  int64_t t = 0;
  for (int i = 0; i < 500; ++i) {
    t += static_cast<int64_t>(rng() % 8);
    ev.push_back({t, static_cast<uint32_t>(rng() % keys), 1 + static_cast<int64_t>(rng() % 3)});
    tracker.Admit(ev.back().key, Micros(t), ev.back().cost);
    if (i % 7 == 0) {
      const int64_t probe = t + static_cast<int64_t>(rng() % 30);  // may empty some windows
      tracker.AdvanceTo(Micros(probe));
      int64_t want = 0;
      for (uint32_t k = 0; k < keys; ++k) {
        want = std::max(want, BruteInWindow(ev, ev.size(), k, probe, w));
      }
      ASSERT_EQ(tracker.CurrentMax(), want) << "at " << probe;
      t = probe;
    }
  }
}

TEST(WindowTracker, AWindowIsHalfOpen) {
  WindowTracker tracker(Micros(10), 1);
  EXPECT_EQ(tracker.Admit(0, Micros(0), 5), 5);
  EXPECT_EQ(tracker.Admit(0, Micros(9), 5), 10);   // (−1, 9] holds both
  EXPECT_EQ(tracker.Admit(0, Micros(10), 5), 10);  // (0, 10] has dropped the one at 0
  EXPECT_EQ(tracker.max_in_window(), 10);
  tracker.AdvanceTo(Micros(20));
  EXPECT_EQ(tracker.CurrentMax(), 0);
}

TEST(WindowTracker, KeysAreIndependent) {
  WindowTracker tracker(Micros(100), 2);
  for (int i = 0; i < 10; ++i) tracker.Admit(i % 2, Micros(i), 1);
  EXPECT_EQ(tracker.max_in_window(), 5);
  EXPECT_EQ(tracker.CurrentMax(), 5);
}

}  // namespace
}  // namespace caudal::simulate
