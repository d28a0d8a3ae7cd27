// A config's policies over a trace of costs per dimension (trace_csv.h's CostTrace): the model
// `caudal simulate --config` runs. One engine of the service's own, behind the lease decorator
// (leases off: it decides only a shared capacity's consumes, as in identity_shares.h), decides
// every row in timestamp order on a memory store, on a simulated clock set to the row's time: a
// request whose descriptors are every identity field of the policies set to the row's key and
// whose costs are the row's cells, decided all-or-nothing across every limit of every policy as
// /v1/check decides it. The trace has no releases: a concurrency limit's slot stays taken until
// its hold ends.
//
// Thread-safety: a pure function of its arguments.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "caudal/common/status.h"
#include "caudal/engine/policy.h"
#include "simulate/trace_csv.h"

namespace caudal::simulate {

struct DimensionRunOptions {
  // The policies replayed (each applies to every row); their options decide as in the service.
  std::shared_ptr<const PolicySet> policies = nullptr;
  // The dimensions a column may name: PolicySet::dimensions() of the whole config, of which
  // `policies` may be a part. A column that no limit of `policies` counts is offered and reported,
  // not sent; one that is not in `accepted` either is refused, as the HTTP API refuses it.
  std::vector<std::string> accepted = {};
  // Points in each series; the series' step is the trace's span divided by this, rounded up to a
  // whole millisecond.
  size_t points = 600;
};

// One column of the trace.
struct DimensionTally {
  std::string dimension = {};
  bool counted = false;                       // some limit of the policies counts it
  int64_t requests = 0;                       // rows naming it
  int64_t offered = 0;                        // units, over every row
  int64_t admitted = 0;                       // units, over the admitted rows
  std::vector<int64_t> admitted_series = {};  // admitted units per step
};

// One limit of a policy (its own, or a tier's), as the rows it applied to met it.
struct LimitTally {
  std::string policy = {};
  std::string field = {};        // where the policy gives it: "limits[0]", "overrides[1].limits[0]"
  const Limit* limit = nullptr;  // into DimensionRunOptions::policies
  bool shadow = false;           // a shadow policy's: its refusals were reported, never enforced
  int64_t requests = 0;          // rows it applied to
  int64_t offered = 0;           // units of its dimension (PolicyResult::costs), over those rows
  int64_t admitted = 0;          // units, over the admitted rows
  int64_t refusals = 0;          // rows it refused (one row may be refused by several limits)
  // The most of it one key had used (Decision: limit - remaining + overdrawn) just after an
  // admitted row; use only grows when a request is admitted, so this is the peak.
  int64_t peak_used = 0;
  std::vector<int64_t> peak_series = {};  // the peak within each step
};

struct DimensionRun {
  int64_t requests = 0;
  int64_t admitted = 0;
  int64_t refused = 0;  // over a limit (shadow refusals admit)
  // Refused as /v1/check refuses them with 400: a cost beyond a limit's capacity, which could
  // never pass. Counted as offered, not admitted; `too_large_error` is the first one's error.
  int64_t too_large = 0;
  std::string too_large_error;
  std::vector<DimensionTally> dimensions;  // the trace's columns, in its order
  // Each policy's own limits, then those of its tiers (overrides) that some row met; in config
  // order.
  std::vector<LimitTally> limits;
  Micros start{0};  // the trace's first row
  Micros step{0};   // each series point's span
};

// Errors: kInvalidArgument "<trace>:<line>: ..." for a column no accepted dimension is, or a row
// the engine refuses for another reason than a cost too large (its descriptors); for no policy.
Result<DimensionRun> RunDimensions(const CostTrace& trace, const DimensionRunOptions& options);

}  // namespace caudal::simulate
