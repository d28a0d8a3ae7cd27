// Dispatch over the compact algorithms by Limit::algorithm().
#pragma once

#include "caudal/algorithms/compact_state.h"
#include "caudal/limit.h"

namespace caudal {

// Decides with the algorithm `limit` names. Preconditions: the algorithm is not
// kSlidingWindowLog (see sliding_window_log.h); cost >= 0.
Step DecideCompact(const Limit& limit, const CompactState* state, Micros now, int64_t cost);

// Returns up to `units` to the limit (see compact_state.h). Same preconditions; units >= 0.
Step RefundCompact(const Limit& limit, const CompactState* state, Micros now, int64_t units);

}  // namespace caudal
