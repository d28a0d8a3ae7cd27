// Whether and how a key may lease, for the lease decorator above the store
// (src/decorators/lease_store.h, which states what leasing does): from `store.lease`, a policy's or
// an Envoy rule's `lease`. The stores never read it (caudal/store/store.h carries it through).
#pragma once

#include <chrono>
#include <cstdint>
#include <string_view>

#include "caudal/algorithms/fairness.h"
#include "caudal/common/clock.h"

namespace caudal {

struct LeaseTerms {
  bool enabled = false;
  Nanos ttl = std::chrono::milliseconds(250);  // a lease is never spent longer after its request
  // All instances together hold at most this share of a limit's capacity, per million.
  int64_t max_share_ppm = 100'000;
  friend bool operator==(const LeaseTerms&, const LeaseTerms&) = default;
};
inline constexpr Nanos kMinLeaseTtl = std::chrono::milliseconds(1);
inline constexpr Nanos kMaxLeaseTtl = std::chrono::seconds(10);

// A consume of a capacity its policy shares among identities (a policy's `share`): the lease
// decorator decides it from this identity's share of the capacity (lease_store.h), never the
// store itself, which refuses it.
struct ShareOf {
  std::string_view policy;    // the policy's name (the metrics')
  std::string_view identity;  // the encoded identity: its group among the capacity's consumers
  int64_t weight = 1;         // 1..kMaxShareWeight
  Fairness fairness = Fairness::kMaxMin;
  Nanos window = std::chrono::seconds(2);  // the share's ttl (kMinShareTtl..kMaxShareTtl)
};

}  // namespace caudal
