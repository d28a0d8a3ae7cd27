// Concurrency: at most `limit` requests in flight at once. An admitted request takes one slot
// (whatever its cost: a concurrency limit counts requests, not units) under a hold id, and its
// release gives the slot back; a slot not released frees itself `hold` after it was taken, so a
// holder that crashed holds nothing for longer than that. Cost 0 is a peek.
//
// The state is the live holds, each an id and the time it expires. Deciding is split as the
// sliding window log's is (Evaluate reads, Take records), so a store can decide several limits
// first and take all or none. The holds travel in the same list type as the log's entries,
// each entry one hold: `at_us` is its expiry, `cost` its id (any value the store chooses,
// unique per hold; the memory store keeps a fingerprint of the request's hold id).
//
// A hold is live at `now` iff it expires after `now`: taken at t with hold h, its slot is free
// from t + h on, exactly. Guarantee: a store that decides a key's holds atomically never has
// more than `limit` live at once; a refused request waits retry_after, until the earliest live
// hold expires (sooner if one is released).
#pragma once

#include <cstdint>

#include "algorithms/sliding_window_log.h"
#include "caudal/algorithms/limit.h"

namespace caudal::concurrency {

// The log's list type (so the stores keep holds where they keep logs); call these functions
// qualified: argument-dependent lookup also finds the log's.
using Holds = sliding_window_log::LogState;

// Decides a request of `cost` (0: a peek) on the holds live at `now`: allowed iff fewer than
// `limit` are live (cost > 0 takes one slot). remaining: the slots free after it; reset_after:
// until the last live hold (the new one included) expires; retry_after (refused): until the
// earliest expires. Changes nothing. Preconditions: cost >= 0; limit is a concurrency limit.
Decision Evaluate(const Limit& limit, const Holds& holds, Micros now, int64_t cost);

// Records a hold `id` expiring at now + hold, and drops the holds expired at `now`; call only
// after Evaluate allowed a request of cost > 0 at the same `now`.
void Take(const Limit& limit, Holds& holds, Micros now, int64_t id);

// Frees the hold `id` when it is live at `now` (`*released` says whether it was), and drops
// the holds expired at `now`. Returns a peek's decision after it.
Decision Release(const Limit& limit, Holds& holds, Micros now, int64_t id, bool* released);

}  // namespace caudal::concurrency
