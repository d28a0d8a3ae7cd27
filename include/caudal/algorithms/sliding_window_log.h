// Sliding window log: exact. Never more than `limit` admitted in any window of length W, because
// it remembers when each admitted unit arrived. Memory grows with the limit (one entry per
// admitted request, merged when timestamps coincide), so limits above kMaxLogLimit are refused.
//
// Unlike the compact algorithms the state is a list; deciding is split into Evaluate (prunes
// expired entries in place, which changes no decision, and decides) and Commit (records the
// admitted cost), so a store can decide several limits first and commit all or none.
#pragma once

#include <cstdint>
#include <vector>

#include "caudal/decision.h"
#include "caudal/limit.h"

namespace caudal::sliding_window_log {

struct Entry {
  int64_t at_us = 0;  // arrival time
  int64_t cost = 0;   // units admitted at that time
  friend bool operator==(const Entry&, const Entry&) = default;
};

struct LogState {
  // Ascending at_us. After Evaluate every entry lies within one window of the newest one,
  // (newest − W, newest], so there are at most `limit` of them (`limit` + 1 after a Commit).
  std::vector<Entry> entries;
  friend bool operator==(const LogState&, const LogState&) = default;
};

// Decides a request of `cost` on the units admitted in the window (eff − W, eff], where
// eff = max(now, newest entry): time going backwards is judged at the newest entry's time.
// Drops the entries no later decision can count (at or before newest − W), and all of them
// once the newest has left the window: then the log is fresh, as if a store had dropped it, and
// a clock stepping back is judged as for a fresh key. Preconditions: cost >= 0.
Decision Evaluate(const Limit& limit, LogState& state, Micros now, int64_t cost);

// Records an admitted request; call only after Evaluate allowed it at the same `now`.
void Commit(LogState& state, Micros now, int64_t cost);

}  // namespace caudal::sliding_window_log
