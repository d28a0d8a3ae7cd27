// RLQS bucket mapping: which policy and identity a reported BucketId stands for (rlqs.domains in
// the config, caudal/config/config.h).
//
// A rule maps a BucketId when the BucketId holds every entry of its `match` (key and value) and
// every key its `identity` takes a descriptor from, with a value the policy can take as an
// identity (engine's ValidateValue: UTF-8, no control character, at most
// kMaxDescriptorValueLength bytes); the first such rule in the domain's order wins. Other keys
// of the BucketId are ignored. A BucketId no rule maps gets the domain's no_match.
//
// Thread-safety: immutable once built.
#pragma once

#include <string_view>

#include "caudal/config/config.h"
#include "caudal/engine/engine.h"
#include "envoy/rlqs_wire.h"

namespace caudal::envoy {

struct RlqsTarget {
  const RlqsBucketRule* rule = nullptr;  // null: no rule maps it (the domain's no_match)
  Descriptors descriptors;               // the policy's identity, in the rule's order
};

class RlqsBuckets {
 public:
  explicit RlqsBuckets(RlqsConfig config) : config_(std::move(config)) {}

  const RlqsConfig& config() const { return config_; }
  // The domain's configuration; null when it is not served.
  const RlqsDomainConfig* Domain(std::string_view domain) const;
  RlqsTarget Map(const RlqsDomainConfig& domain, const RlqsBucketId& bucket) const;

 private:
  RlqsConfig config_;
};

}  // namespace caudal::envoy
