// Shares: one capacity's refill (n units per period) divided among consumers by their measured
// demand, each consumer then holding its part as a rate for a while (accruing it with
// AccrueShare). The Redis scripts compute the same with Lua doubles: with n and every demand
// below 2^53, every intermediate value is an integer below 2^53 (bounds per step in share.cc).
//
// AllocateShares = FairShares, then SpreadSpare:
//  1. Units. Capacity in units of u = max(1, ceil(n / kShareUnits)): C = floor(n / u).
//     kMaxMin counts a demand up to n (no one gets more): d'_i = ceil(min(d_i, n) / u).
//     kProportional counts it whole, in units of t·u, t = max(1, ceil(max d / (u·kShareUnits))):
//     d'_i = ceil(d_i / (t·u)). Rounding up keeps a demand above 0. Then a_i = min(out_i·u, d_i),
//     so a_i <= d_i and Σa <= C·u <= n. Rounding loses under one demand unit (t·u) per consumer
//     and under u of the capacity, nothing for n, d <= kShareUnits; step 3 hands it out.
//  2. kMaxMin, two levels. Groups first: weighted water-filling on D_g = min(C, Σ members' d')
//     with the group's weight, out_g = min(D_g, L·w_g) for the level L that spends C or satisfies
//     every group; then each group's out_g is water-filled equally among its members.
//     kProportional, one level: out_i = min(d'_i·t, L·w_i·d'_i), i.e. proportional to w_i·d_i
//     when demand exceeds the capacity, all of it when it does not.
//     Integer rounding in a fill: those left unsatisfied get floor(L·w) each and the left-over
//     units (fewer than those rounded down) go one each to the lowest-indexed of those rounded
//     down (groups are indexed by their first member). So each share is the exact
//     water-filling's rounded down or up, and Σout = min(C, Σ demands), exactly.
//  3. Spare: S = n − Σa (unmet capacity, and what rounding left) goes to every consumer alike:
//     floor(S/k) each, and the S mod k left over one each to the first consumers in input
//     order. Afterwards Σa = n exactly (k >= 1), so a consumer whose demand grows between
//     renewals has headroom.
// Deterministic: the output depends on the input order only through those tie-breaks. Raising
// one demand never lowers that consumer's share in kMaxMin; in kProportional by less than two
// demand units (the unit grows with the largest demand, moving every demand's rounding).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "caudal/algorithms/fairness.h"
#include "caudal/algorithms/limit.h"
#include "caudal/common/status.h"

namespace caudal {

inline constexpr int64_t kMaxShareAmount = int64_t{1} << 62;  // a capacity or a demand
inline constexpr int64_t kShareUnits = int64_t{1} << 22;      // capacity units (step 1)

struct ShareConsumer {
  uint32_t group = 0;  // kMaxMin: the identity it serves; kProportional ignores it
  int64_t demand = 0;  // units per period, 0..kMaxShareAmount
  int64_t weight = 1;  // 1..kMaxShareWeight; in kMaxMin every member of a group carries the same
};

// The demand-bounded fill (steps 1–2): a_i <= d_i, Σa <= n. Errors: InvalidArgument for a
// capacity, demand or weight out of range, more than kMaxShareConsumers consumers, or (kMaxMin)
// a group whose members carry different weights.
Result<std::vector<int64_t>> FairShares(int64_t capacity, Fairness fairness,
                                        std::span<const ShareConsumer> consumers);

// Step 3: raises `shares` until they add up to `capacity`. Preconditions: shares are >= 0 and
// add up to at most capacity.
void SpreadSpare(int64_t capacity, std::vector<int64_t>& shares);

// FairShares, then SpreadSpare: every consumer's rate, units per period, adding up to capacity.
Result<std::vector<int64_t>> AllocateShares(int64_t capacity, Fairness fairness,
                                            std::span<const ShareConsumer> consumers);

// What a consumer holding `allocation` units per `period` has earned since it last took at `last`:
// floor((allocation·min(now − last, ttl) + rem) / period) units, and the new remainder (over the
// period). now < last counts as no time.
struct Accrual {
  int64_t units = 0;
  int64_t rem = 0;
};
// Preconditions: allocation >= 0; 0 < period < 2^45; 0 <= ttl < 2^45; 0 <= rem < period;
// allocation·ttl / period < 2^53 − 1.
Accrual AccrueShare(int64_t allocation, Micros period, Micros ttl, Micros last, Micros now,
                    int64_t rem);

}  // namespace caudal
