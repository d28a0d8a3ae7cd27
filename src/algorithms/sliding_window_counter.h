// Sliding window counter: the two-counter approximation of a sliding window. With the current
// aligned window's count `cur`, the previous one's `prev` and e = now − start of the current window
// (0 <= e < W, in µs), the previous window still has W − 1 − e of its microseconds inside the true
// window (now − W, now]; assuming its requests were spread evenly, the estimate is
//   ceil(prev·(W − 1 − e) / W) + cur,   allow iff estimate + cost <= limit.
// Integer arithmetic throughout (the ceiling is exact, not a double).
//
// Error bound: any true window of length W holds at most 2·limit − 1 admitted units, and an
// adversary reaches that (the previous window's whole limit in its last µs, the current one's in
// its second-to-last). Rounding the estimate down instead would allow exactly 2·limit.
// Once traffic is steady, random arrivals overshoot `limit` by a few percent at most. The estimate
// is worst right after a key starts or a burst: a window whose whole limit went in at its end
// counts as spread evenly, so the next true window can again approach 2·limit. properties_test
// measures all three.
// A client that keeps asking gets exactly `limit` per window: the previous window's weight
// reaches 0 at e = W − 1.
//
// Time going backwards is judged in the stored window, at e = 0 when before its start.
// reset_after: the end of the window after the one holding the last admitted unit.
//
// State words: w[0] = start of the current window (µs), w[1] = cur, w[2] = prev. Both counts
// at 0 (everything refunded) is a fresh state.
#pragma once

#include "algorithms/compact_state.h"
#include "caudal/algorithms/limit.h"

namespace caudal::sliding_window_counter {

// Preconditions: cost >= 0.
Step Decide(const Limit& limit, const CompactState* state, Micros now, int64_t cost);

// Takes the units back from the current window first, then from the previous one. Preconditions: as
// Decide; units >= 0.
Step Refund(const Limit& limit, const CompactState* state, Micros now, int64_t units);

}  // namespace caudal::sliding_window_counter
