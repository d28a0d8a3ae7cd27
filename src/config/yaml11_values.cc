#include "config/yaml11_values.h"

#include "common/cat.h"

namespace caudal::config_internal {
namespace {

constexpr size_t kMaxMetadataDepth = 32;
using envoy::MetadataValue;
using ScalarKind = Yaml11Scalar::Kind;

}  // namespace

std::string ShownScalar(const YAML::Node& n) {
  if (n.IsScalar()) return Quoted(n.Scalar().substr(0, 60));
  return n.IsMap() ? "a map" : n.IsSequence() ? "a list" : "nothing";
}

// Any scalar reads as its text (null as ""), except one that YAML 1.1 reads as a float: the
// reference refuses those outside `metadata`.
Result<std::string> Yaml11Text(const YamlReader& r, const YAML::Node& n, const std::string& field) {
  if (n.IsNull()) return std::string();
  if (n.IsScalar() && Resolve(n).kind == ScalarKind::kFloat) {
    return r.Error(n, field,
                   Cat("expected a string, got ", Quoted(n.Scalar()),
                       ", which YAML 1.1 reads as a floating-point number and "
                       "envoyproxy/ratelimit refuses; quote it"));
  }
  return r.String(n, field);
}

// A `metadata` value, as the reference turns it into a google.protobuf.Struct.
Result<MetadataValue> Metadata(const YamlReader& r, const YAML::Node& n, const std::string& field,
                               size_t depth) {
  if (depth > kMaxMetadataDepth) return r.Error(n, field, "nested deeper than 32 levels");
  MetadataValue v;
  if (n.IsNull()) return v;
  if (n.IsScalar()) {
    const Yaml11Scalar s = Resolve(n);
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
      auto item = Metadata(r, n[i], Cat(field, '[', i, ']'), depth + 1);
      if (!item.ok()) return item.status();
      list.push_back(std::move(*item));
    }
    v.kind = std::move(list);
    return v;
  }
  MetadataValue::Struct fields;
  for (const auto& kv : n) {
    if (!kv.first.IsScalar()) return r.Error(kv.first, field, "keys must be plain text");
    // As the reference prints a key it decoded as a number or a boolean: `1` and `yes` are
    // "1" and "true".
    const Yaml11Scalar k = Resolve(kv.first);
    if (k.kind == ScalarKind::kNull) return r.Error(kv.first, field, "a key must not be null");
    const std::string key = GoText(k, kv.first.Scalar());
    auto value = Metadata(r, kv.second, JoinPath(field, key), depth + 1);
    if (!value.ok()) return value.status();
    if (!fields.emplace(key, std::move(*value)).second) {
      return r.Error(kv.first, JoinPath(field, key), "given twice");
    }
  }
  v.kind = std::move(fields);
  return v;
}

}  // namespace caudal::config_internal
