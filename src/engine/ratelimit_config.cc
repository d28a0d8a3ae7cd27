#include "caudal/engine/ratelimit_config.h"

#include <chrono>
#include <string>

#include "algorithms/algorithm.h"
#include "common/cat.h"

namespace caudal::envoy {
namespace {

std::vector<std::string> SplitOnStar(std::string_view pattern) {
  std::vector<std::string> parts;
  size_t start = 0;
  while (true) {
    const size_t star = pattern.find('*', start);
    parts.emplace_back(pattern.substr(start, star - start));
    if (star == std::string_view::npos) return parts;
    start = star + 1;
  }
}

// `parts` is a pattern split on '*': the text must start with the first part, end with the
// last, and hold the others in order in between, without overlapping.
bool MatchParts(const std::vector<std::string>& parts, std::string_view text) {
  if (parts.size() == 1) return text == parts[0];
  size_t fixed = 0;
  for (const std::string& p : parts) fixed += p.size();
  if (text.size() < fixed) return false;
  if (!text.starts_with(parts.front()) || !text.ends_with(parts.back())) return false;
  std::string_view middle =
      text.substr(parts.front().size(), text.size() - parts.front().size() - parts.back().size());
  for (size_t i = 1; i + 1 < parts.size(); ++i) {
    const size_t at = middle.find(parts[i]);
    if (at == std::string_view::npos) return false;
    middle.remove_prefix(at + parts[i].size());
  }
  return true;
}

void AppendComposite(std::string& out, std::string_view key, std::string_view value) {
  out.assign(key);
  out += '_';
  out += value;
}

// The reference strips "key_" from a wildcard's composite key to name its value in stats keys.
std::string_view TrimKeyPrefix(std::string_view composite, std::string_view key) {
  if (composite.size() > key.size() && composite.starts_with(key) && composite[key.size()] == '_') {
    return composite.substr(key.size() + 1);
  }
  return composite;
}

}  // namespace

std::string_view UnitName(Unit u) {
  switch (u) {
    case Unit::kSecond:
      return "second";
    case Unit::kMinute:
      return "minute";
    case Unit::kHour:
      return "hour";
    case Unit::kDay:
      return "day";
    case Unit::kWeek:
      return "week";
    case Unit::kMonth:
      return "month";
    case Unit::kYear:
      return "year";
  }
  return "unknown";
}

Micros UnitDuration(Unit u) {
  using std::chrono::hours;
  switch (u) {
    case Unit::kSecond:
      return std::chrono::seconds(1);
    case Unit::kMinute:
      return std::chrono::minutes(1);
    case Unit::kHour:
      return hours(1);
    case Unit::kDay:
      return hours(24);
    case Unit::kWeek:
      return hours(24 * 7);
    case Unit::kMonth:
      return hours(24 * 30);
    case Unit::kYear:
      return hours(24 * 365);
  }
  return Micros(0);
}

std::optional<RuleLimitProblem> CheckRuleLimit(const RateLimitRule& rule, Algorithm algorithm) {
  if (IsConcurrency(algorithm)) {
    return RuleLimitProblem{.field = "algorithm",
                            .message =
                                "concurrency limits are for caudal's policies: Envoy's rate "
                                "limit protocol has no way to release a slot"};
  }
  if (rule.always_charge && !SupportsCharge(algorithm)) {
    return RuleLimitProblem{
        .field = "always_charge",
        .message = Cat("an always_charge rule needs an algorithm that counts past its limit "
                       "(token_bucket, gcra or fixed_window), not ",
                       AlgorithmName(algorithm))};
  }
  return std::nullopt;
}

Result<Limit> MakeLimit(Algorithm algorithm, uint32_t requests_per_unit, Unit unit,
                        int64_t capacity) {
  if (requests_per_unit == 0) {
    return Status::InvalidArgument("requests_per_unit must be positive");
  }
  if (auto problem = CheckRuleLimit(RateLimitRule{}, algorithm)) {
    return Status::InvalidArgument(problem->message);
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

bool MetadataValue::operator==(const MetadataValue& other) const { return kind == other.kind; }

void MergeMetadata(Metadata& into, const Metadata& from) {
  for (const auto& [key, value] : from) {
    auto it = into.find(key);
    if (it == into.end()) {
      into.emplace(key, value);
      continue;
    }
    auto* dest = std::get_if<MetadataValue::Struct>(&it->second.kind);
    const auto* src = std::get_if<MetadataValue::Struct>(&value.kind);
    if (dest != nullptr && src != nullptr) MergeMetadata(*dest, *src);
  }
}

bool WildcardMatch(std::string_view pattern, std::string_view text) {
  return MatchParts(SplitOnStar(pattern), text);
}

std::string DescriptorNode::ComposeKey(std::string_view key, std::string_view value) {
  std::string composite(key);
  if (!value.empty()) {
    composite += '_';
    composite += value;
  }
  return composite;
}

const DescriptorNode* DescriptorNode::Select(std::string_view entry_key,
                                             std::string_view entry_value, MatchKind* kind) const {
  std::string composite;
  AppendComposite(composite, entry_key, entry_value);
  MatchKind how = MatchKind::kExactValue;
  const DescriptorNode* found = nullptr;
  if (auto it = by_composite_.find(composite); it != by_composite_.end()) {
    found = it->second;
  } else {
    for (const Wildcard& w : wildcards_) {
      if (MatchParts(w.parts, composite)) {
        found = w.node;
        how = MatchKind::kWildcard;
        break;
      }
    }
    if (found == nullptr) {
      if (auto def = by_composite_.find(std::string(entry_key)); def != by_composite_.end()) {
        found = def->second;
        how = MatchKind::kKeyDefault;
      }
    }
  }
  if (kind != nullptr) *kind = how;
  return found;
}

Result<DescriptorNode*> DescriptorNode::AddChild(std::unique_ptr<DescriptorNode> child) {
  DescriptorNode* raw = child.get();
  raw->composite_ = ComposeKey(raw->key, raw->value);
  if (!by_composite_.emplace(raw->composite_, raw).second) {
    return Status::InvalidArgument("duplicate descriptor composite key '" + raw->composite_ + "'");
  }
  if (raw->IsWildcard()) wildcards_.push_back({raw, SplitOnStar(raw->composite_)});
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

const RateLimitRule* RateLimitConfig::Walk(std::string_view domain,
                                           std::span<const DescriptorEntry> entries,
                                           std::vector<Step>* steps) const {
  auto it = domains_.find(std::string(domain));
  if (it == domains_.end() || entries.empty()) return nullptr;
  const DescriptorNode* level = it->second.get();
  for (size_t i = 0; i < entries.size(); ++i) {
    MatchKind kind = MatchKind::kExactValue;
    const DescriptorNode* next = level->Select(entries[i].key, entries[i].value, &kind);
    if (next == nullptr) return nullptr;
    if (steps != nullptr) steps->push_back({next, kind});
    if (i + 1 == entries.size()) return next->rule ? &*next->rule : nullptr;
    // More entries than the configuration is deep: the reference applies no limit.
    if (!next->has_children()) return nullptr;
    level = next;
  }
  return nullptr;
}

const RateLimitRule* RateLimitConfig::Match(std::string_view domain,
                                            std::span<const DescriptorEntry> entries) const {
  return Walk(domain, entries, nullptr);
}

RuleMatch RateLimitConfig::MatchDetailed(std::string_view domain,
                                         std::span<const DescriptorEntry> entries) const {
  std::vector<Step> steps;
  steps.reserve(entries.size());
  RuleMatch m;
  m.rule = Walk(domain, entries, &steps);
  if (m.rule == nullptr) return m;
  // A rule is only reached at the last entry, so there is one step per entry. An entry that a
  // share_threshold wildcard matched counts, and is named, by the wildcard's pattern.
  std::vector<std::string_view> shared(entries.size());
  bool any_shared = false;
  for (size_t i = 0; i < steps.size(); ++i) {
    if (steps[i].kind == MatchKind::kWildcard && steps[i].node->share_threshold) {
      shared[i] = TrimKeyPrefix(steps[i].node->composite_key(), entries[i].key);
      any_shared = true;
    }
    m.counter_values.push_back(shared[i].empty() ? entries[i].value : shared[i]);
  }
  m.stats_key.assign(domain);
  for (size_t i = 0; i < steps.size(); ++i) {
    const DescriptorEntry& e = entries[i];
    const DescriptorNode& node = *steps[i].node;
    m.stats_key += '.';
    m.stats_key += e.key;
    if (m.rule->detailed_metric && !any_shared) {
      m.stats_key += '_';  // even before an empty value
      m.stats_key += e.value;
      continue;
    }
    std::string_view value;
    if (!shared[i].empty()) {
      value = shared[i];
    } else if (m.rule->detailed_metric) {
      value = e.value;
    } else if (steps[i].kind == MatchKind::kWildcard) {
      value = node.value_to_metric ? e.value : TrimKeyPrefix(node.composite_key(), e.key);
    } else if (steps[i].kind == MatchKind::kExactValue || node.value_to_metric) {
      value = e.value;
    }
    if (!value.empty()) {
      m.stats_key += '_';
      m.stats_key += value;
    }
  }
  return m;
}

std::string RateLimitConfig::OverrideStatsKey(std::string_view domain,
                                              std::span<const DescriptorEntry> entries) {
  std::string key(domain);
  for (size_t i = 0; i < entries.size(); ++i) {
    key += '.';
    key += entries[i].key;
    if (!entries[i].value.empty()) {
      key += '_';
      key += entries[i].value;
    }
  }
  return key;
}

}  // namespace caudal::envoy
