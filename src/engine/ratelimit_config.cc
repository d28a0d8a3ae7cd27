#include "caudal/envoy/ratelimit_config.h"

#include <chrono>
#include <string>

namespace caudal::envoy {
namespace {

// Keys of the lookup tables: the length prefix keeps ("ab","c") and ("a","bc") apart.
std::string ExactKey(std::string_view key, std::string_view value) {
  std::string k = std::to_string(key.size());
  k += ':';
  k += key;
  k += value;
  return k;
}

bool IsWildcard(std::string_view value) { return !value.empty() && value.back() == '*'; }

}  // namespace

std::string_view UnitName(Unit u) {
  switch (u) {
    case Unit::kSecond: return "second";
    case Unit::kMinute: return "minute";
    case Unit::kHour: return "hour";
    case Unit::kDay: return "day";
    case Unit::kMonth: return "month";
    case Unit::kYear: return "year";
  }
  return "unknown";
}

Micros UnitDuration(Unit u) {
  using std::chrono::hours;
  switch (u) {
    case Unit::kSecond: return std::chrono::seconds(1);
    case Unit::kMinute: return std::chrono::minutes(1);
    case Unit::kHour: return hours(1);
    case Unit::kDay: return hours(24);
    case Unit::kMonth: return hours(24 * 30);
    case Unit::kYear: return hours(24 * 365);
  }
  return Micros(0);
}

Result<Limit> MakeLimit(Algorithm algorithm, uint32_t requests_per_unit, Unit unit,
                        int64_t capacity) {
  if (requests_per_unit == 0) {
    return Status::InvalidArgument("requests_per_unit must be positive");
  }
  const Micros period = UnitDuration(unit);
  if (IsWindowAlgorithm(algorithm)) {
    if (capacity != 0 && capacity != requests_per_unit) {
      return Status::InvalidArgument(
          "capacity applies to token_bucket and gcra; a window allows requests_per_unit");
    }
    return Limit::Create(LimitSpec::Window(algorithm, requests_per_unit, period));
  }
  const int64_t burst = capacity == 0 ? int64_t{requests_per_unit} : capacity;
  return Limit::Create(
      LimitSpec::Bucket(algorithm, burst, Rate{.count = requests_per_unit, .period = period}));
}

const DescriptorNode* DescriptorNode::Select(std::string_view entry_key,
                                             std::string_view entry_value) const {
  if (auto it = exact_.find(ExactKey(entry_key, entry_value)); it != exact_.end()) {
    return it->second;
  }
  for (const DescriptorNode* w : wildcards_) {
    const std::string_view prefix = std::string_view(w->value).substr(0, w->value.size() - 1);
    if (w->key == entry_key && entry_value.starts_with(prefix)) return w;
  }
  if (auto it = key_only_.find(std::string(entry_key)); it != key_only_.end()) return it->second;
  return nullptr;
}

Result<DescriptorNode*> DescriptorNode::AddChild(std::unique_ptr<DescriptorNode> child) {
  DescriptorNode* raw = child.get();
  bool inserted = false;
  if (raw->value.empty()) {
    inserted = key_only_.emplace(raw->key, raw).second;
  } else {
    inserted = exact_.emplace(ExactKey(raw->key, raw->value), raw).second;
  }
  if (!inserted) {
    return Status::InvalidArgument("duplicate descriptor key '" + raw->key +
                                   (raw->value.empty() ? "" : "' value '" + raw->value) + "'");
  }
  // A wildcard value also matches itself exactly (the reference looks it up both ways).
  if (IsWildcard(raw->value)) wildcards_.push_back(raw);
  children_.push_back(std::move(child));
  return raw;
}

Status RateLimitConfig::AddDomain(std::string domain, std::shared_ptr<const DescriptorNode> root) {
  if (!domains_.emplace(std::move(domain), std::move(root)).second) {
    return Status::InvalidArgument("domain defined twice");
  }
  return Status::Ok();
}

namespace {

void WalkRules(const DescriptorNode& node, const std::string& path,
               const std::function<void(const RateLimitRule&, std::string_view)>& fn) {
  for (const auto& child : node.children()) {
    std::string key = path + "." + child->key;
    if (!child->value.empty()) key += "_" + child->value;
    if (child->rule) fn(*child->rule, key);
    WalkRules(*child, key, fn);
  }
}

}  // namespace

void RateLimitConfig::ForEachRule(
    const std::function<void(const RateLimitRule&, std::string_view)>& fn) const {
  for (const auto& [domain, root] : domains_) WalkRules(*root, domain, fn);
}

bool RateLimitConfig::HasDomain(std::string_view domain) const {
  return domains_.find(std::string(domain)) != domains_.end();
}

const RateLimitRule* RateLimitConfig::Match(std::string_view domain,
                                            std::span<const DescriptorEntry> entries) const {
  auto it = domains_.find(std::string(domain));
  if (it == domains_.end() || entries.empty()) return nullptr;
  const DescriptorNode* level = it->second.get();
  for (size_t i = 0; i < entries.size(); ++i) {
    const DescriptorNode* next = level->Select(entries[i].key, entries[i].value);
    if (next == nullptr) return nullptr;
    if (i + 1 == entries.size()) return next->rule ? &*next->rule : nullptr;
    // More entries than the configuration is deep: the reference applies no limit.
    if (!next->has_children()) return nullptr;
    level = next;
  }
  return nullptr;
}

}  // namespace caudal::envoy
