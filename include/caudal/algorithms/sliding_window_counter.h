// Sliding window counter: the two-counter approximation of a sliding window. With the current
// aligned window's count `cur`, the previous one's `prev` and the elapsed fraction f of the
// current window, the estimate is floor(prev·(1 − f)) + cur; allow iff estimate + cost ≤ limit.
// Integer arithmetic throughout (the floor is exact, not a double).
//
// Error bound: it assumes the previous window's requests were spread evenly. Under steady or
// random traffic the count in any true sliding window stays within a few percent of `limit`;
// adversarially (the whole previous window spent at its very end) a true window of length W can
// hold up to just under 2·limit. `caudal simulate` measures both.
//
// State words: w[0] = start of the current window (µs), w[1] = cur, w[2] = prev.
#pragma once

#include "caudal/algorithms/compact_state.h"
#include "caudal/limit.h"

namespace caudal::sliding_window_counter {

// Preconditions: cost >= 0.
Step Decide(const Limit& limit, const CompactState* state, Micros now, int64_t cost);

}  // namespace caudal::sliding_window_counter
