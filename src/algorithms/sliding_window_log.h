// Sliding window log: exact. Never more than `limit` admitted in any window of length W, because
// it remembers when each admitted unit arrived. Memory grows with the limit (one entry per
// admitted request, merged when timestamps coincide), so limits above kMaxLogLimit are refused.
//
// Unlike the compact algorithms the state is a list; deciding is split into Evaluate (reads the
// log and decides, changing nothing) and Commit (records the admitted cost and drops what no
// later decision can count), so a store can decide several limits first and commit all or none,
// and a refused request or a peek writes nothing.
#pragma once

#include <cstdint>
#include <vector>

#include "caudal/algorithms/limit.h"

namespace caudal::sliding_window_log {

struct Entry {
  int64_t at_us = 0;  // arrival time
  int64_t cost = 0;   // units admitted at that time
  friend bool operator==(const Entry&, const Entry&) = default;
};

struct LogState {
  // Ascending at_us. After a Commit every entry lies within one window of the newest one,
  // (newest − W, newest], so there are at most `limit` of them.
  std::vector<Entry> entries;
  friend bool operator==(const LogState&, const LogState&) = default;
};

// Decides a request of `cost` on the units admitted in the window (eff − W, eff], where
// eff = max(now, newest entry): time going backwards is judged at the newest entry's time. Once
// the newest entry has left the window nothing counts: the log decides as a fresh one.
// Preconditions: cost >= 0.
Decision Evaluate(const Limit& limit, const LogState& state, Micros now, int64_t cost);

// Records an admitted request at eff and drops the entries at or before eff − W; call only
// after Evaluate allowed it at the same `now`.
void Commit(const Limit& limit, LogState& state, Micros now, int64_t cost);

// Gives back up to `units` of the units counted in the window, newest first (the refund undoes
// the latest admissions), and empties the log when nothing in it counts any more. Returns the
// decision of a peek after the refund (kAllowed). Preconditions: units >= 0.
Decision Refund(const Limit& limit, LogState& state, Micros now, int64_t units);

}  // namespace caudal::sliding_window_log
