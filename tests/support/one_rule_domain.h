// A domain of envoyproxy/ratelimit's rules holding one rule: `requests` per minute per value of
// descriptor `key` (its stat key "<domain>.<key>"), for tests of the engine and the admin API.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "caudal/engine/ratelimit_config.h"

namespace caudal::testing {

inline std::shared_ptr<const envoy::RateLimitConfig> OneRuleDomain(const std::string& domain,
                                                                   const std::string& key,
                                                                   int64_t requests,
                                                                   bool always_charge = false) {
  auto root = std::make_shared<envoy::DescriptorNode>();
  auto node = std::make_unique<envoy::DescriptorNode>();
  node->key = key;
  envoy::RateLimitRule rule;
  rule.unit = envoy::Unit::kMinute;
  rule.requests_per_unit = requests;
  rule.limit = *envoy::MakeLimit(Algorithm::kFixedWindow, requests, envoy::Unit::kMinute);
  rule.always_charge = always_charge;
  node->rule = rule;
  EXPECT_TRUE(root->AddChild(std::move(node)).ok());
  auto domains = std::make_shared<envoy::RateLimitConfig>();
  EXPECT_TRUE(domains->AddDomain(domain, root).ok());
  return domains;
}

}  // namespace caudal::testing
