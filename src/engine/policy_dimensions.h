// The dimensions a policy counts (caudal/algorithms/limit.h): what its units are counted in, by
// the engine's metrics and the status page.
#pragma once

#include <string_view>
#include <vector>

#include "caudal/engine/policy.h"

namespace caudal::engine_internal {

// Every dimension `p`'s limits and its tiers' limits count (`requests` for a limit of requests,
// each name of a sum), each once, in ascending order; concurrency limits count slots, not units,
// and add none. Views into `p`, which must outlive them.
std::vector<std::string_view> CountedDimensions(const PolicySet::Policy& p);

}  // namespace caudal::engine_internal
