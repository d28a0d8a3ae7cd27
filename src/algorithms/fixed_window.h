// Fixed window: at most `limit` per window of length W, windows aligned to multiples of W since
// the Unix epoch. Cheap and simple, with the burst across a window boundary: a client can spend
// a whole window's limit just before a boundary and another just after, up to 2·limit within
// any W that spans the boundary.
//
// A limit with a calendar (LimitSpec::CalendarWindow, caudal/algorithms/calendar.h) counts per
// calendar window instead: a day, an ISO week, a month or a year from local midnight in its time
// zone, of 23 to 25 hours for a day across a daylight-saving change; the same burst across a
// boundary.
//
// State words: w[0] = start of the counted window (µs), w[1] = count, w[2] = its end (µs) on a
// calendar, unused (0) otherwise. A count of 0 (everything refunded) is a fresh state. Only Charge
// and Overdraw make count exceed the limit.
// Time going backwards into an earlier window is judged in the stored (later) window.
#pragma once

#include "algorithms/compact_state.h"
#include "caudal/algorithms/limit.h"

namespace caudal::fixed_window {

// Preconditions: cost >= 0. limit.capacity() is the per-window limit, limit.window() is W (a
// calendar's nominal length, unused).
Step Decide(const Limit& limit, const CompactState* state, Micros now, int64_t cost);

// Decide on a calendar's window given by its boundaries near `now` (Calendar::BoundsAround),
// rather than computed from a time zone: the window holding now among them (PickWindow), counted
// as a calendar's (its end in the state's third word). What the Redis scripts and the caudal
// module are handed (lua_protocol.h, kCalendarFlag); limit.capacity() is the window's limit.
Step DecideOnBounds(const Limit& limit, const CalendarBounds& bounds, const CompactState* state,
                    Micros now, int64_t cost);

// The reference's INCRBY (envoyproxy/ratelimit): counts `cost` whatever the verdict, so the
// window may be overdrawn (count above the limit, up to limit + kMaxCapacity); remaining is then
// 0 and every hit, a peek included, is kDenied until the next window. The verdict is Decide's
// for the state before (kAllowed iff count + cost <= limit; kNeverFits above the capacity),
// except that a peek on an overdrawn window is kDenied. Preconditions: as Decide.
Step Charge(const Limit& limit, const CompactState* state, Micros now, int64_t cost);

// Takes the units back from the current window only: a past window no longer counts. Preconditions:
// as Decide; units >= 0.
Step Refund(const Limit& limit, const CompactState* state, Micros now, int64_t units);

// Gives back up to `units` consumed by a decision at `at` that reported `reset`, from the window
// that decision counted them in (the one ending at at + reset), and nothing once that window is
// no longer the stored one. Preconditions: as Refund.
Step GiveBack(const Limit& limit, const CompactState* state, Micros now, int64_t units, Micros at,
              Micros reset);

// Counts `units` in the current window whatever is left, up to limit + MaxDebt (kMaxCapacity): a
// settle's excess, held until the window ends (the next window starts empty). Always kAllowed.
// Preconditions: as Refund.
Step Overdraw(const Limit& limit, const CompactState* state, Micros now, int64_t units);

}  // namespace caudal::fixed_window
