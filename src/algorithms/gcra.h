// GCRA: the token bucket's policy held as a single theoretical arrival time (TAT), the instant at
// which the bucket would be full again (folly's TokenBucket keeps the same single number).
// Emission interval e = period / count, burst tolerance τ = B·e; a request of cost c at `now`
// is allowed iff max(TAT, now) + c·e − now ≤ τ. A TAT in the future is debt: the retry-after.
//
// TAT is exact: whole µs plus a fraction with refill_count() as denominator.
// State words: w[0] = TAT whole µs, w[1] = fraction numerator, w[2] unused (0).
//
// On every trace whose timestamps never decrease it decides exactly as token_bucket does (and
// so after an Overdraw or a Charge too)
// (tested decision for decision). When time goes backwards it judges the request at the earlier
// `now`, which can only refuse more, never admit more.
#pragma once

#include "algorithms/compact_state.h"
#include "caudal/algorithms/limit.h"

namespace caudal::gcra {

// Preconditions: limit.algorithm() is a bucket algorithm; cost >= 0.
Step Decide(const Limit& limit, const CompactState* state, Micros now, int64_t cost);

// Moves TAT back by units·e, never before now: token_bucket's refund, as a time. Preconditions: as
// Decide; units >= 0.
Step Refund(const Limit& limit, const CompactState* state, Micros now, int64_t units);

// Gives back up to `units` consumed by a decision at `at` that reported `reset`: the arrival time
// moves back by the units' time, but by no more than was left until at + reset, and never before
// now (compact_state.h). Preconditions: as Refund.
Step GiveBack(const Limit& limit, const CompactState* state, Micros now, int64_t units, Micros at,
              Micros reset);

// Moves TAT forward by units·e whatever the tolerance, so that TAT − now may pass τ (debt, up to
// MaxDebt units past it): every request is refused until TAT − now + c·e ≤ τ again, as
// token_bucket's Overdraw. Preconditions: as Refund.
Step Overdraw(const Limit& limit, const CompactState* state, Micros now, int64_t units);

// Counts `cost` whatever the verdict (a ChargeEntry, store.h): moves TAT on as Overdraw does. The
// verdict is Decide's for the state before, except that a peek in debt (TAT − now > τ) is
// kDenied; a kDenied retry_after is until a hit of this cost fits the TAT the charge left, as
// token_bucket's Charge. Preconditions: as Decide.
Step Charge(const Limit& limit, const CompactState* state, Micros now, int64_t cost);

}  // namespace caudal::gcra
