#include "config/envoy_yaml_reader.h"

#include <algorithm>
#include <cctype>

#include "common/cat.h"
#include "config/yaml11.h"

namespace caudal::config_internal {
namespace {

using envoy::Unit;
using ScalarKind = Yaml11Scalar::Kind;

// Configuration is trusted more than requests, but still bounded.
constexpr size_t kMaxDepth = 32;
constexpr size_t kMaxDescriptors = 100'000;
constexpr size_t kMaxMetadataDepth = 32;

constexpr std::string_view kUnits = "second, minute, hour, day, week, month or year";
constexpr Unit kAllUnits[] = {Unit::kSecond, Unit::kMinute, Unit::kHour, Unit::kDay,
                              Unit::kWeek,   Unit::kMonth,  Unit::kYear};

// Where a field the reference knows belongs; empty for a field it does not know.
std::string_view HomeOf(std::string_view field) {
  for (std::string_view f : {"unit", "requests_per_unit", "unlimited", "name", "replaces"}) {
    if (field == f) return "in rate_limit";
  }
  for (std::string_view f :
       {"key", "value", "rate_limit", "descriptors", "shadow_mode", "quota_mode", "detailed_metric",
        "value_to_metric", "share_threshold", "metadata"}) {
    if (field == f) return "in a descriptor";
  }
  if (field == "domain") return "at the top of the file";
  return {};
}

std::string Join(std::string_view a, std::string_view b) {
  return a.empty() ? std::string(b) : Cat(a, '.', b);
}

std::string Shown(const YAML::Node& n) {
  if (n.IsScalar()) return Quoted(n.Scalar().substr(0, 60));
  return n.IsMap() ? "a map" : n.IsSequence() ? "a list" : "nothing";
}

}  // namespace

Status EnvoyReader::Fields(const YAML::Node& n, const std::string& field,
                           std::initializer_list<std::string_view> allowed) const {
  if (n.IsMap()) {
    for (const auto& kv : n) {
      const std::string key = kv.first.IsScalar() ? kv.first.Scalar() : std::string();
      if (std::find(allowed.begin(), allowed.end(), key) != allowed.end()) continue;
      if (const std::string_view home = HomeOf(key); !home.empty()) {
        return r_.Error(kv.first, Join(field, key),
                        Cat("does not belong here (it goes ", home,
                            "); envoyproxy/ratelimit would ignore it, caudal refuses it"));
      }
    }
  }
  const std::vector<std::string_view> names(allowed);
  return r_.ExpectMap(n, field, names);
}

Result<std::string> EnvoyReader::String(const YAML::Node& n, const std::string& field) const {
  if (n.IsNull()) return std::string();
  if (n.IsScalar() && config_internal::Resolve(n).kind == ScalarKind::kFloat) {
    return r_.Error(n, field,
                    Cat("expected a string, got ", Quoted(n.Scalar()),
                        ", which YAML 1.1 reads as a floating-point number and "
                        "envoyproxy/ratelimit refuses; quote it"));
  }
  return r_.String(n, field);
}

Result<bool> EnvoyReader::Bool(const YAML::Node& n, const std::string& field) const {
  const Yaml11Scalar s = config_internal::Resolve(n);
  if (s.kind == ScalarKind::kNull) return false;
  if (s.kind == ScalarKind::kBool) return s.boolean;
  return r_.Error(n, field, Cat("expected true or false (got ", Shown(n), ')'));
}

Result<uint32_t> EnvoyReader::Uint32(const YAML::Node& n, const std::string& field) const {
  const Yaml11Scalar s = config_internal::Resolve(n);
  if (s.kind != ScalarKind::kInt || s.integer < 0 || s.integer > UINT32_MAX) {
    return r_.Error(n, field, Cat("expected an integer from 0 to 4294967295 (got ", Shown(n), ')'));
  }
  return static_cast<uint32_t>(s.integer);
}

Result<MetadataValue> EnvoyReader::Metadata(const YAML::Node& n, const std::string& field,
                                            size_t depth) const {
  if (depth > kMaxMetadataDepth) return r_.Error(n, field, "nested deeper than 32 levels");
  MetadataValue v;
  if (n.IsNull()) return v;
  if (n.IsScalar()) {
    const Yaml11Scalar s = config_internal::Resolve(n);
    switch (s.kind) {
      case ScalarKind::kNull:
        break;
      case ScalarKind::kBool:
        v.kind = s.boolean;
        break;
      case ScalarKind::kInt:
      case ScalarKind::kFloat:
        v.kind = s.number;
        break;
      case ScalarKind::kString:
        v.kind = n.Scalar();
        break;
    }
    return v;
  }
  if (n.IsSequence()) {
    MetadataValue::List list;
    for (size_t i = 0; i < n.size(); ++i) {
      auto item = Metadata(n[i], Cat(field, '[', i, ']'), depth + 1);
      if (!item.ok()) return item.status();
      list.push_back(std::move(*item));
    }
    v.kind = std::move(list);
    return v;
  }
  MetadataValue::Struct fields;
  for (const auto& kv : n) {
    if (!kv.first.IsScalar()) return r_.Error(kv.first, field, "keys must be plain text");
    // As the reference prints a key it decoded as a number or a boolean: `1` and `yes` are
    // "1" and "true".
    const Yaml11Scalar k = config_internal::Resolve(kv.first);
    if (k.kind == ScalarKind::kNull) return r_.Error(kv.first, field, "a key must not be null");
    const std::string key = config_internal::GoText(k, kv.first.Scalar());
    auto value = Metadata(kv.second, Join(field, key), depth + 1);
    if (!value.ok()) return value.status();
    if (!fields.emplace(key, std::move(*value)).second) {
      return r_.Error(kv.first, Join(field, key), "given twice");
    }
  }
  v.kind = std::move(fields);
  return v;
}

Result<RateLimitRule> EnvoyReader::Rule(const YAML::Node& n, const std::string& field) const {
  if (Status s = Fields(
          n, field,
          {"unit", "requests_per_unit", "unlimited", "name", "replaces", "algorithm", "capacity"});
      !s.ok()) {
    return s;
  }
  const auto sub = [&](std::string_view name) { return Cat(field, '.', name); };
  RateLimitRule rule;
  if (n["unlimited"]) {
    auto b = Bool(n["unlimited"], sub("unlimited"));
    if (!b.ok()) return b.status();
    rule.unlimited = *b;
  }
  if (n["name"]) {
    auto s = String(n["name"], sub("name"));
    if (!s.ok()) return s.status();
    rule.name = *s;
  }
  if (const YAML::Node list = n["replaces"]; list && !list.IsNull()) {
    if (Status s = r_.ExpectSequence(list, sub("replaces"), kMaxDescriptors); !s.ok()) return s;
    for (size_t i = 0; i < list.size(); ++i) {
      const std::string at = Cat(field, ".replaces[", i, ']');
      if (Status s = Fields(list[i], at, {"name"}); !s.ok()) return s;
      auto name = list[i]["name"] ? String(list[i]["name"], at + ".name")
                                  : Result<std::string>(std::string());
      if (!name.ok()) return name.status();
      if (name->empty()) return r_.Error(list[i], at, "should not have an empty replaces entry");
      if (*name == rule.name) {
        return r_.Error(list[i], at, "replaces should not contain name of same descriptor");
      }
      rule.replaces.push_back(*name);
    }
  }
  const YAML::Node unit = n["unit"];
  const YAML::Node rpu = n["requests_per_unit"];
  if (rule.unlimited) {
    if (unit && !unit.IsNull()) {
      return r_.Error(unit, sub("unit"), "should not specify rate limit unit when unlimited");
    }
    for (const char* f : {"requests_per_unit", "algorithm", "capacity"}) {
      if (n[f]) return r_.Error(n[f], sub(f), "means nothing when unlimited is true");
    }
    return rule;
  }
  if (!unit || unit.IsNull()) {
    return r_.Error(n, sub("unit"), Cat("missing (expected ", kUnits, "; or unlimited: true)"));
  }
  auto unit_name = String(unit, sub("unit"));
  if (!unit_name.ok()) return unit_name.status();
  std::string lower = *unit_name;
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  const Unit* found = std::find_if(std::begin(kAllUnits), std::end(kAllUnits),
                                   [&](Unit u) { return UnitName(u) == lower; });
  if (found == std::end(kAllUnits)) {
    return r_.Error(unit, sub("unit"),
                    Cat("invalid rate limit unit '", *unit_name, "' (expected ", kUnits, ')'));
  }
  rule.unit = *found;
  if (!rpu || rpu.IsNull()) {
    return r_.Error(n, sub("requests_per_unit"),
                    "missing (envoyproxy/ratelimit would read it as 0, which refuses every "
                    "request; write requests_per_unit: 0 if that is meant)");
  }
  auto count = Uint32(rpu, sub("requests_per_unit"));
  if (!count.ok()) return count.status();
  rule.requests_per_unit = *count;
  if (rule.requests_per_unit == 0) {
    // The reference's way to block a value outright: every hit is over the limit.
    for (const char* f : {"algorithm", "capacity"}) {
      if (n[f]) return r_.Error(n[f], sub(f), "must not be set when requests_per_unit is 0");
    }
    return rule;
  }
  Algorithm algorithm = Algorithm::kFixedWindow;
  if (n["algorithm"]) {
    auto name = String(n["algorithm"], sub("algorithm"));
    if (!name.ok()) return name.status();
    auto a = ParseAlgorithm(*name);
    if (!a.ok()) return r_.Error(n["algorithm"], sub("algorithm"), a.status().message());
    algorithm = *a;
  }
  int64_t capacity = 0;
  if (n["capacity"]) {
    auto c = r_.Integer(n["capacity"], sub("capacity"), 1, kMaxCapacity);
    if (!c.ok()) return c.status();
    capacity = *c;
  }
  auto limit = MakeLimit(algorithm, rule.requests_per_unit, rule.unit, capacity);
  if (!limit.ok()) return r_.Error(n, field, limit.status().message());
  rule.limit = *limit;
  return rule;
}

Status EnvoyReader::Descriptors(const YAML::Node& list, DescriptorNode& parent,
                                const std::string& field, const std::string& path, size_t depth) {
  if (list.IsNull()) return Status::Ok();
  if (depth > kMaxDepth) return r_.Error(list, field, "nested deeper than 32 levels");
  if (Status s = r_.ExpectSequence(list, field, kMaxDescriptors); !s.ok()) return s;
  for (size_t i = 0; i < list.size(); ++i) {
    const YAML::Node d = list[i];
    const std::string at = Cat(field, '[', i, ']');
    const auto sub = [&](std::string_view name) { return Cat(at, '.', name); };
    if (Status s = Fields(d, at,
                          {"key", "value", "rate_limit", "descriptors", "shadow_mode", "quota_mode",
                           "detailed_metric", "value_to_metric", "share_threshold", "metadata"});
        !s.ok()) {
      return s;
    }
    if (++descriptors_ > kMaxDescriptors) {
      return r_.Error(d, at, "more than 100000 descriptors in one file");
    }
    auto node = std::make_unique<DescriptorNode>();
    auto key = d["key"] ? String(d["key"], sub("key")) : Result<std::string>(std::string());
    if (!key.ok()) return key.status();
    if (key->empty())
      return r_.Error(d["key"] ? d["key"] : d, sub("key"), "descriptor has empty key");
    node->key = *key;
    if (d["value"]) {
      auto value = String(d["value"], sub("value"));
      if (!value.ok()) return value.status();
      node->value = *value;
    }
    const std::string composite = DescriptorNode::ComposeKey(node->key, node->value);
    if (const YAML::Node rl = d["rate_limit"]; rl && !rl.IsNull()) {
      auto rule = Rule(rl, sub("rate_limit"));
      if (!rule.ok()) return rule.status();
      node->rule = std::move(*rule);
      node->rule->source = Cat(r_.file(), ':', d.Mark().line + 1);
    }
    bool flags[5] = {};
    const char* names[5] = {"shadow_mode", "quota_mode", "detailed_metric", "value_to_metric",
                            "share_threshold"};
    for (int f = 0; f < 5; ++f) {
      if (!d[names[f]]) continue;
      auto b = Bool(d[names[f]], sub(names[f]));
      if (!b.ok()) return b.status();
      flags[f] = *b;
    }
    if (node->rule) {
      node->rule->shadow_mode = flags[0];
      node->rule->quota_mode = flags[1];
      node->rule->detailed_metric = flags[2];
    }
    node->value_to_metric = flags[3];
    node->share_threshold = flags[4];
    if (node->share_threshold && composite.find('*') == std::string::npos) {
      return r_.Error(d["share_threshold"], sub("share_threshold"),
                      Cat("share_threshold can only be used with wildcard values (containing "
                          "'*'), but found key '",
                          composite, "'"));
    }
    if (const YAML::Node m = d["metadata"]; m && !m.IsNull()) {
      if (!m.IsMap()) return r_.Error(m, sub("metadata"), "expected a map");
      auto metadata = Metadata(m, sub("metadata"), 1);
      if (!metadata.ok()) return metadata.status();
      if (node->rule) node->rule->metadata = std::get<MetadataValue::Struct>(metadata->kind);
    }
    const YAML::Node children = d["descriptors"];
    DescriptorNode* raw = node.get();
    if (!parent.AddChild(std::move(node)).ok()) {
      return r_.Error(d, at, Cat("duplicate descriptor composite key '", path, composite, "'"));
    }
    if (children) {
      if (Status s =
              Descriptors(children, *raw, sub("descriptors"), Cat(path, composite, '.'), depth + 1);
          !s.ok()) {
        return s;
      }
    }
  }
  return Status::Ok();
}

}  // namespace caudal::config_internal
