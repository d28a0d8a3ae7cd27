// Identities sharing one capacity (a policy with `share`, docs/algorithms.md, "Shares among
// identities"): the model `caudal simulate --share` runs. `instances` engines, each behind a lease
// decorator of the service's own (src/decorators/lease_store.h), decide on one memory store on a
// simulated clock, a store call answered at once. Each tenant's requests come evenly spaced at its
// rate from its start, to the instances in turn; its weight is a tier's (`overrides:` with
// `weight`).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "caudal/algorithms/fairness.h"
#include "caudal/algorithms/limit.h"
#include "caudal/common/status.h"

namespace caudal::simulate {

struct ShareTenant {
  std::string name;  // its identity: a descriptor value
  Rate rate;         // offered, evenly spaced
  Micros from{0};    // its first request, from the run's start
  int64_t weight = 1;
};

struct IdentitySharesOptions {
  Limit limit;  // the shared capacity: token_bucket, gcra or fixed_window
  Fairness fairness = Fairness::kMaxMin;
  Micros window = std::chrono::seconds(2);
  int64_t instances = 1;
  Micros duration = std::chrono::seconds(10);
};

struct TenantRun {
  std::string name;
  int64_t weight = 1;
  int64_t offered = 0;
  int64_t admitted = 0;
  int64_t refused = 0;
  int64_t admitted_late = 0;  // admitted in the run's second half
  int64_t share = 0;          // at the end: its shares at every instance, units per rate period
  // Its max-min (or proportional) part of the refill by the tenants' offered rates and weights,
  // every tenant offering (FairShares: no spare), units per rate period: what it should be
  // admitted.
  int64_t expected = 0;
  std::vector<int64_t> series = {};          // admitted per SharesRun::step, from the run's start
  std::vector<int64_t> offered_series = {};  // offered, likewise
};

struct SharesRun {
  std::vector<TenantRun> tenants;
  int64_t admitted = 0;
  // B + r·(t + window) over the run: what all tenants together may be admitted.
  int64_t bound = 0;
  int64_t store_calls = 0;  // calls the lease decorators made to the store
  Micros step{0};           // each series point's span: a second, or duration / 600 if longer
  Rate rate;                // the capacity's refill
};

// Errors: kInvalidArgument for a limit that cannot be shared, a window or a weight out of range,
// more than 64 tenants or instances, no tenant, a tenant's name repeated or empty, a rate of 0.
Result<SharesRun> RunIdentityShares(const std::vector<ShareTenant>& tenants,
                                    const IdentitySharesOptions& options);

// "NAME=RATE[@START][*WEIGHT]", e.g. "late=10000/1s@5s*2".
Result<ShareTenant> ParseShareTenant(std::string_view text);

// A chart of the run: time on x, each tenant's admitted per second on y (a line each) and its
// expected part (dashed). Standalone SVG 1.1.
std::string RenderSharesSvg(const SharesRun& run, std::string_view title);

}  // namespace caudal::simulate
