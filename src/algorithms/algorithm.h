// The algorithm table: one entry per algorithm, the one place that lists them.
//
// Everything that varies by algorithm reads its entry: config names (ParseAlgorithm), the window
// or bucket reading of a LimitSpec (IsWindowAlgorithm), the stores' dispatch (DecideCompact and
// the log functions below), the Redis script (its Lua constants are generated from this table at
// build time, and each entry's Lua part is src/redis/lua/<name>.lua), and the colours of
// `caudal simulate --svg`. docs/contributing.md says how to add an algorithm.
#pragma once

#include <cassert>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <string_view>

#include "algorithms/compact_state.h"
#include "algorithms/concurrency.h"
#include "algorithms/fixed_window.h"
#include "algorithms/gcra.h"
#include "algorithms/sliding_window_counter.h"
#include "algorithms/sliding_window_log.h"
#include "algorithms/token_bucket.h"
#include "caudal/algorithms/limit.h"

namespace caudal {

// Window algorithms count `limit` per window (LimitSpec::Window); bucket algorithms refill
// continuously (LimitSpec::Bucket); concurrency counts slots held (LimitSpec::Concurrency).
enum class AlgorithmFamily : uint8_t { kWindow, kBucket, kConcurrency };

// What a key's state is, and so which of the functions below decide it.
enum class StateShape : uint8_t {
  kCompact,  // three integers (CompactState): one fixed-size slot in a store
  kLog,      // a list of arrivals (sliding_window_log::LogState), kept out of line
  kHolds,    // a list of live holds (concurrency::Holds), kept out of line; no rate functions
};

// The pure functions of a compact algorithm (see compact_state.h for their contract).
struct CompactFunctions {
  Step (*decide)(const Limit&, const CompactState*, Micros now, int64_t cost) = nullptr;
  Step (*refund)(const Limit&, const CompactState*, Micros now, int64_t units) = nullptr;
  // Counts `cost` whatever the verdict (a ChargeEntry, store.h), past the limit into debt; nullptr
  // where the algorithm cannot overdraw (the sliding windows).
  Step (*charge)(const Limit&, const CompactState*, Micros now, int64_t cost) = nullptr;
  // Gives back a lease's units that still count (Store::GiveBack); nullptr where the algorithm
  // takes no leases (SupportsLease).
  Step (*give_back)(const Limit&, const CompactState*, Micros now, int64_t units, Micros at,
                    Micros reset) = nullptr;
  // Counts `units` into debt past empty (a reservation settled above its estimate); nullptr where
  // the algorithm settles no reservations (SupportsReserve).
  Step (*overdraw)(const Limit&, const CompactState*, Micros now, int64_t units) = nullptr;
};

// The pure functions of a log algorithm (see sliding_window_log.h for their contract).
struct LogFunctions {
  using LogState = sliding_window_log::LogState;
  Decision (*evaluate)(const Limit&, const LogState&, Micros now, int64_t cost) = nullptr;
  void (*commit)(const Limit&, LogState&, Micros now, int64_t cost) = nullptr;
  Decision (*refund)(const Limit&, LogState&, Micros now, int64_t units) = nullptr;
};

// How `caudal simulate --svg` draws the algorithm's line.
struct ChartStyle {
  std::string_view colour;     // an SVG colour, "#rrggbb"
  std::string_view dash = {};  // stroke-dasharray, empty for a solid line
};

struct AlgorithmInfo {
  Algorithm algorithm;
  // In config files, JSON and metrics; in upper case, its constant in the Redis script. Its Lua
  // part is src/redis/lua/<name>.lua.
  std::string_view name;
  AlgorithmFamily family;
  StateShape state;
  CompactFunctions compact = {};  // set iff state == kCompact
  LogFunctions log = {};          // set iff state == kLog
  ChartStyle chart;
};

// Entry i is the enumerator of value i (checked at compile time below). An enumerator without an
// entry is refused by Limit::Create as an unknown algorithm.
inline constexpr AlgorithmInfo kAlgorithmTable[] = {
    {.algorithm = Algorithm::kFixedWindow,
     .name = "fixed_window",
     .family = AlgorithmFamily::kWindow,
     .state = StateShape::kCompact,
     .compact = {fixed_window::Decide, fixed_window::Refund, fixed_window::Charge,
                 fixed_window::GiveBack, fixed_window::Overdraw},
     .chart = {.colour = "#d62728"}},
    {.algorithm = Algorithm::kSlidingWindowLog,
     .name = "sliding_window_log",
     .family = AlgorithmFamily::kWindow,
     .state = StateShape::kLog,
     .log = {sliding_window_log::Evaluate, sliding_window_log::Commit, sliding_window_log::Refund},
     .chart = {.colour = "#1f77b4"}},
    {.algorithm = Algorithm::kSlidingWindowCounter,
     .name = "sliding_window_counter",
     .family = AlgorithmFamily::kWindow,
     .state = StateShape::kCompact,
     .compact = {sliding_window_counter::Decide, sliding_window_counter::Refund},
     .chart = {.colour = "#9467bd"}},
    {.algorithm = Algorithm::kTokenBucket,
     .name = "token_bucket",
     .family = AlgorithmFamily::kBucket,
     .state = StateShape::kCompact,
     .compact = {token_bucket::Decide, token_bucket::Refund, token_bucket::Charge,
                 token_bucket::GiveBack, token_bucket::Overdraw},
     .chart = {.colour = "#2ca02c"}},
    {.algorithm = Algorithm::kGcra,
     .name = "gcra",
     .family = AlgorithmFamily::kBucket,
     .state = StateShape::kCompact,
     .compact = {gcra::Decide, gcra::Refund, gcra::Charge, gcra::GiveBack, gcra::Overdraw},
     .chart = {.colour = "#ff7f0e", .dash = "6 4"}},  // dashed: it draws over token_bucket
    // Not a rate: the stores call algorithms/concurrency.h directly, and kAllAlgorithms
    // (the rate algorithms, which the simulator and the rate contract run) leaves it out.
    {.algorithm = Algorithm::kConcurrency,
     .name = "concurrency",
     .family = AlgorithmFamily::kConcurrency,
     .state = StateShape::kHolds,
     .chart = {.colour = "#8c564b"}},
};

inline constexpr size_t kAlgorithmCount = std::size(kAlgorithmTable);

namespace algorithm_table_internal {

// Entry i is enumerator i. (That each entry has its state shape's functions is checked by
// algorithm_test.cc: GCC does not fold a function's address against nullptr under sanitizers.)
constexpr bool InEnumOrder() {
  for (size_t i = 0; i < kAlgorithmCount; ++i) {
    if (static_cast<size_t>(kAlgorithmTable[i].algorithm) != i) return false;
  }
  return true;
}

}  // namespace algorithm_table_internal

static_assert(algorithm_table_internal::InEnumOrder(),
              "kAlgorithmTable: one entry per Algorithm, in enum order");

// The entry of `a`. Precondition: `a` is an enumerator (as every Limit's algorithm is).
constexpr const AlgorithmInfo& AlgorithmInfoOf(Algorithm a) {
  return kAlgorithmTable[static_cast<size_t>(a)];
}

// Whether the algorithm keeps a log (LogFunctions) rather than a CompactState.
constexpr bool HasLogState(Algorithm a) { return AlgorithmInfoOf(a).state == StateShape::kLog; }
// Whether the algorithm keeps holds (concurrency.h).
constexpr bool HasHolds(Algorithm a) { return AlgorithmInfoOf(a).state == StateShape::kHolds; }

// Decides with the compact algorithm `limit` names. Preconditions: its state is kCompact;
// cost >= 0.
inline Step DecideCompact(const Limit& limit, const CompactState* state, Micros now, int64_t cost) {
  assert(AlgorithmInfoOf(limit.algorithm()).state == StateShape::kCompact);
  return AlgorithmInfoOf(limit.algorithm()).compact.decide(limit, state, now, cost);
}

// Returns up to `units` to the limit (see compact_state.h). Preconditions: as DecideCompact.
inline Step RefundCompact(const Limit& limit, const CompactState* state, Micros now,
                          int64_t units) {
  assert(AlgorithmInfoOf(limit.algorithm()).state == StateShape::kCompact);
  return AlgorithmInfoOf(limit.algorithm()).compact.refund(limit, state, now, units);
}

// Whether the algorithm can count a hit whatever its verdict (a ChargeEntry, store.h):
// token_bucket, gcra and fixed_window (compact_state.h, Charge).
inline bool SupportsCharge(Algorithm a) {
  return AlgorithmInfoOf(a).state == StateShape::kCompact &&
         AlgorithmInfoOf(a).compact.charge != nullptr;
}

// Counts `cost` whatever the verdict. Preconditions: SupportsCharge; cost >= 0.
inline Step ChargeCompact(const Limit& limit, const CompactState* state, Micros now, int64_t cost) {
  assert(SupportsCharge(limit.algorithm()));
  return AlgorithmInfoOf(limit.algorithm()).compact.charge(limit, state, now, cost);
}

// Whether a store takes leases for the algorithm (ConsumeEntry::lease) and gives them back
// (Store::GiveBack). The sliding windows do not: see docs/algorithms.md, Leases.
inline bool SupportsLease(Algorithm a) {
  return AlgorithmInfoOf(a).state == StateShape::kCompact &&
         AlgorithmInfoOf(a).compact.give_back != nullptr;
}

// Gives back what still counts of `units` leased at `at` with `reset` (compact_state.h).
// Preconditions: SupportsLease; units >= 0.
inline Step GiveBackCompact(const Limit& limit, const CompactState* state, Micros now,
                            int64_t units, Micros at, Micros reset) {
  assert(SupportsLease(limit.algorithm()));
  return AlgorithmInfoOf(limit.algorithm()).compact.give_back(limit, state, now, units, at, reset);
}

// Whether a store takes reservations for the algorithm (ReserveEntry, Store::Settle): it
// gives back what still counts (SupportsLease) and overdraws into debt. The sliding windows and
// concurrency do not: see docs/algorithms.md, Reservations.
inline bool SupportsReserve(Algorithm a) {
  return SupportsLease(a) && AlgorithmInfoOf(a).compact.overdraw != nullptr;
}

// The most debt a state holds (compact_state.h, Overdraw): 2^40 units, and for a bucket no more
// than it refills in kMaxDebtTime, so that its times stay below 2^53.
inline constexpr Micros kMaxDebtTime = std::chrono::hours(24 * 365 * 25);
int64_t MaxDebt(const Limit& limit);

// Counts `units` into debt. Preconditions: SupportsReserve; units >= 0.
inline Step OverdrawCompact(const Limit& limit, const CompactState* state, Micros now,
                            int64_t units) {
  assert(SupportsReserve(limit.algorithm()));
  return AlgorithmInfoOf(limit.algorithm()).compact.overdraw(limit, state, now, units);
}

// Decides `cost` and, when allowed, takes up to `lease` more units, as many as fit (the lease a
// store grants in the same step, ConsumeEntry::lease): the decision reports them in `leased` and
// the state after both. Preconditions: as DecideCompact; SupportsLease when lease > 0.
inline Step DecideCompactWithLease(const Limit& limit, const CompactState* state, Micros now,
                                   int64_t cost, int64_t lease) {
  Step step = DecideCompact(limit, state, now, cost);
  if (lease <= 0 || !step.decision.allowed() || step.decision.remaining <= 0) return step;
  const int64_t units = lease < step.decision.remaining ? lease : step.decision.remaining;
  Step taken = DecideCompact(limit, &step.next, now, units);
  // `remaining` is the most a request could take now, so taking it always fits.
  assert(taken.decision.allowed());
  taken.changed = true;
  taken.decision.leased = units;
  taken.decision.leased_at = now;
  return taken;
}

// The log algorithm `limit` names, as sliding_window_log.h describes. Precondition: HasLogState.
inline const LogFunctions& LogFunctionsOf(const Limit& limit) {
  assert(HasLogState(limit.algorithm()));
  return AlgorithmInfoOf(limit.algorithm()).log;
}

}  // namespace caudal
