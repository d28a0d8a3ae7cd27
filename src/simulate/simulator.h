// The simulator: replays one Traffic through every algorithm, each with its own per-key state,
// and measures what each admitted.
//
// The algorithms are the pure functions of include/caudal/algorithms/, called exactly as a store
// calls them, with the requests' timestamps as `now`. The limit "N/W" is the window algorithms'
// limit per window and the buckets' refill rate r; `burst` is the buckets' capacity B.
//
// Counts (offered, admitted, rejected) are requests; max_in_window and bound are units of cost
// (the same thing when every cost is 1).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "caudal/algorithms/limit.h"
#include "caudal/common/clock.h"
#include "caudal/common/status.h"
#include "simulate/lease_regions.h"
#include "simulate/traffic.h"

namespace caudal::simulate {

// The most points a chart series holds.
inline constexpr size_t kMaxChartPoints = 2000;

// The most regions a simulation splits its deciders into.
inline constexpr int64_t kMaxRegions = 64;

struct SimulationOptions {
  Rate limit{};             // N per W
  int64_t burst = 0;        // B
  size_t chart_points = 0;  // 0: no series; otherwise 1..kMaxChartPoints
  // Regions, each deciding against its own copy of every key's state, as with one store per
  // region replicated asynchronously. Request i goes to region i mod `regions`. A region's write
  // reaches every other region `replication_lag` later and replaces that region's copy unless
  // the copy was written after it (last writer wins, as replicating a key does); nullopt: never.
  // With one region, or a lag of 0, every decision sees every earlier write: one store.
  int64_t regions = 1;
  std::optional<Micros> replication_lag = Micros(0);
  // Also decide the same requests with leases from one store instead (lease_regions.h), each
  // region `replication_lag` (which must be set) from it one way: AlgorithmRun::leases.
  bool leases = false;
  Nanos lease_ttl = std::chrono::seconds(1);
  int64_t lease_max_share_ppm = 300'000;
  // Regions cut off, for both models: from the store (leases), and from the other regions
  // (replication: writes to or from a cut region land `replication_lag` after its heal).
  std::vector<Partition> partitions{};
};

struct AlgorithmRun {
  Algorithm algorithm = Algorithm::kFixedWindow;
  int64_t offered = 0;
  int64_t admitted = 0;
  int64_t rejected = 0;
  // The most cost one key had admitted within any window of length W, (t − W, t] over every t.
  int64_t max_in_window = 0;
  // What that maximum should not exceed: N for the window algorithms (fixed_window and
  // sliding_window_counter can exceed it; that is the point), B + r·W = B + N for the buckets.
  int64_t bound = 0;
  // series[j]: the most one key had admitted within a window ending in
  // (series_times[j−1], series_times[j]] (the first interval starts at Simulation::start).
  std::vector<int64_t> series;
  // With SimulationOptions::leases: the same requests decided with leases, and what their
  // max_in_window should not exceed: N for the windows, B + r·(W + ttl) for the buckets (the
  // leases' bound, docs/algorithms.md).
  std::optional<LeaseRun> leases{};
  int64_t lease_bound = 0;

  bool within_bound() const { return max_in_window <= bound; }
  bool leases_within_bound() const { return leases && leases->max_in_window <= lease_bound; }
};

struct Simulation {
  Micros window{0};  // W
  Micros start{0};   // the traffic's span
  Micros end{0};
  int64_t regions = 1;  // as in SimulationOptions
  std::optional<Micros> replication_lag = Micros(0);
  bool leases = false;  // as in SimulationOptions
  Nanos lease_ttl{0};
  int64_t lease_max_share_ppm = 0;
  std::vector<Partition> partitions{};
  std::vector<Micros> series_times;  // chart_points evenly spaced times, the last one `end`
  std::vector<AlgorithmRun> runs;    // kAllAlgorithms order, minus the skipped ones
  // Algorithms that cannot run with these options, each "<algorithm>: <reason>" (today only
  // sliding_window_log, whose limit is capped at kMaxLogLimit).
  std::vector<std::string> skipped;
};

// kInvalidArgument when N/W is not a valid window limit (e.g. a window that is not whole
// milliseconds) — the message comes from Limit::Create.
Status ValidateLimit(const Rate& limit);
// kInvalidArgument when B with refill N/W is not a valid bucket.
Status ValidateBurst(int64_t burst, const Rate& limit);
// kInvalidArgument when `regions` is outside 1..kMaxRegions.
Status ValidateRegions(int64_t regions);
// kInvalidArgument for leases without a replication lag or with terms ValidateLeaseTerms refuses,
// and for a partition of no region or ending before it starts.
Status ValidateLeases(const SimulationOptions& options);

// Errors: those of ValidateLimit/ValidateBurst; chart_points above kMaxChartPoints; regions
// outside 1..kMaxRegions; a negative replication_lag; leases without a replication_lag, or with
// a ttl or share ValidateLeaseTerms refuses; a partition of no region, or ending before it starts.
// Preconditions: traffic's requests are in time order and their keys index traffic.keys.
Result<Simulation> Simulate(const Traffic& traffic, const SimulationOptions& options);

}  // namespace caudal::simulate
