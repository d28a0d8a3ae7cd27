#include "envoy/rlqs_buckets.h"

#include <algorithm>

#include "common/utf8.h"

namespace caudal::envoy {
namespace {

const std::string* Find(const RlqsBucketId& bucket, std::string_view key) {
  const auto it = std::lower_bound(bucket.begin(), bucket.end(), key,
                                   [](const auto& e, std::string_view k) { return e.first < k; });
  return it != bucket.end() && it->first == key ? &it->second : nullptr;
}

// What a policy takes as an identity value (the engine's rule for descriptor values).
bool IdentityValue(std::string_view v) {
  if (v.empty() || v.size() > kMaxDescriptorValueLength || !IsValidUtf8(v)) return false;
  return std::none_of(v.begin(), v.end(), [](char c) {
    const auto u = static_cast<unsigned char>(c);
    return u < 0x20 || u == 0x7f;
  });
}

}  // namespace

const RlqsDomainConfig* RlqsBuckets::Domain(std::string_view domain) const {
  for (const RlqsDomainConfig& d : config_.domains) {
    if (d.domain == domain) return &d;
  }
  return nullptr;
}

RlqsTarget RlqsBuckets::Map(const RlqsDomainConfig& domain, const RlqsBucketId& bucket) const {
  for (const RlqsBucketRule& rule : domain.buckets) {
    const bool matches = std::all_of(rule.match.begin(), rule.match.end(), [&](const auto& m) {
      const std::string* v = Find(bucket, m.first);
      return v != nullptr && *v == m.second;
    });
    if (!matches) continue;
    RlqsTarget target{.rule = &rule, .descriptors = {}};
    for (const auto& [descriptor, key] : rule.identity) {
      const std::string* v = Find(bucket, key);
      if (v == nullptr || !IdentityValue(*v)) {
        target.rule = nullptr;
        break;
      }
      target.descriptors.push_back({.name = descriptor, .value = *v});
    }
    if (target.rule != nullptr) return target;
  }
  return {};
}

}  // namespace caudal::envoy
