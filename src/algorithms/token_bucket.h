// Token bucket, in its textbook form: capacity B, refill r, cost c,
//   Δt = max(0, now − last);  T = min(B, T + r·Δt);  allow iff T ≥ c, then T −= c.
// T is an exact rational: whole tokens plus a fraction with the rate's period as denominator, so
// no refill is ever lost to rounding. In any interval of length t it admits at most B + r·t.
//
// Overdraw and Charge take tokens below 0 (debt, up to MaxDebt); the bucket then refuses
// everything until it has refilled past it. remaining is never reported below 0.
//
// State words: w[0] = whole tokens (negative: debt), w[1] = fraction numerator over
// refill_period_us(), w[2] = time of the last update (µs). Time going backwards counts as Δt = 0.
#pragma once

#include "algorithms/compact_state.h"
#include "caudal/algorithms/limit.h"

namespace caudal::token_bucket {

// Preconditions: limit.algorithm() is a bucket algorithm; cost >= 0.
Step Decide(const Limit& limit, const CompactState* state, Micros now, int64_t cost);

// Adds the units back after the refill, up to the capacity. Preconditions: as Decide; units >= 0.
Step Refund(const Limit& limit, const CompactState* state, Micros now, int64_t units);

// Gives back up to `units` consumed by a decision at `at` that reported `reset`: all of them at
// `at`; later, at most what refills in the time left until that decision's bucket would have
// been full (at + reset), in time, fractions of a unit included (compact_state.h). Preconditions:
// as Refund.
Step GiveBack(const Limit& limit, const CompactState* state, Micros now, int64_t units, Micros at,
              Micros reset);

// Takes `units` tokens whatever is left, down to −MaxDebt (compact_state.h). Preconditions: as
// Refund.
Step Overdraw(const Limit& limit, const CompactState* state, Micros now, int64_t units);

// Counts `cost` whatever the verdict (a ChargeEntry, store.h): takes it as Overdraw does, into debt
// past empty. The verdict is Decide's for the bucket before (kAllowed iff T >= cost, kNeverFits
// above the capacity), except that a peek in debt (T < 0) is kDenied; a kDenied retry_after is
// until a hit of this cost fits the bucket as the charge left it. Preconditions: as Decide.
Step Charge(const Limit& limit, const CompactState* state, Micros now, int64_t cost);

}  // namespace caudal::token_bucket
