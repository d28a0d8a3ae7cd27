// Which policies apply to a request, and the store keys of their limits. Pure: no store, no clock.
#pragma once

#include <string>
#include <vector>

#include "caudal/limiter.h"
#include "caudal/policy.h"
#include "caudal/status.h"

namespace caudal {

struct ApplicableItem {
  size_t index = 0;  // in the PolicySet
  const PolicySet::Policy* policy = nullptr;
  int64_t cost = 0;
  std::string identity;                 // the encoded identity values, the tail of every key
  std::vector<std::string> keys;        // one per limit
  std::vector<std::string> local_keys;  // filled only when failing over to local
  PolicyResult result;
};

// kInvalidArgument naming the descriptor: none, too many, a bad or repeated name, an empty or
// over-long value.
Status ValidateDescriptors(const Descriptors& descriptors);

// The identity tail of `policy`'s keys, or nullopt when a field of its identity is missing.
// An `ip` field is parsed and masked by the policy's prefix (kInvalidArgument when not an IP).
// Each value is length-prefixed, so no two identities encode alike.
Result<std::optional<std::string>> EncodeIdentity(const PolicySet::Policy& policy,
                                                  const Descriptors& descriptors);

// Validates the request and lists the policies that apply, with keys and cost. Errors:
// kInvalidArgument for bad descriptors, a cost < 1, or a cost above an applicable limit's capacity.
Result<std::vector<ApplicableItem>> ResolveApplicable(const PolicySet& set,
                                                      const CheckRequest& request);

}  // namespace caudal
