// Field values (field_values.h) that read scalars as YAML 1.1 does, for envoyproxy/ratelimit's
// files (see yaml11.h): `yes` is true, `0x10` is 16, `1.5` a float the reference refuses where it
// wants a string, and null (`~`, or no value) stands for the field's zero value.
#pragma once

#include <yaml-cpp/yaml.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

#include "caudal/common/status.h"
#include "caudal/engine/ratelimit_config.h"
#include "config/field_table.h"
#include "config/yaml11.h"
#include "config/yaml_reader.h"

namespace caudal::config_internal {

// "\"text\"" (at most 60 characters), "a map", "a list" or "nothing", for messages.
std::string ShownScalar(const YAML::Node& n);

// Any scalar reads as its text (null as ""), except one that YAML 1.1 reads as a float: the
// reference refuses those outside `metadata`.
Result<std::string> Yaml11Text(const YamlReader& r, const YAML::Node& n, const std::string& field);

// A `metadata` value, as the reference turns it into a google.protobuf.Struct; `depth` counts
// the levels above it (at most 32).
Result<envoy::MetadataValue> Metadata(const YamlReader& r, const YAML::Node& n,
                                      const std::string& field, size_t depth);

// true / false, and YAML 1.1's other spellings (yes, on, ...); null is false, as for the
// reference. Quoted text is a string, not a boolean.
template <typename T, typename Get>
Value<T> Yaml11Bool(Get get) {
  return {.shape = {.kind = Shape::Kind::kBool, .what = "or YAML 1.1's yes, no, on, off"},
          .read = [get](const YamlReader& r, const YAML::Node& n, const std::string& path,
                        T& out) -> Status {
            const Yaml11Scalar s = Resolve(n);
            if (s.kind != Yaml11Scalar::Kind::kNull && s.kind != Yaml11Scalar::Kind::kBool) {
              return r.Error(n, path, Cat("expected true or false (got ", ShownScalar(n), ')'));
            }
            std::invoke(get, out) = s.kind == Yaml11Scalar::Kind::kBool && s.boolean;
            return Status::Ok();
          },
          .show = [get](const T& d) { return std::invoke(get, d) ? "true" : "false"; }};
}

template <typename T, typename Get>
Value<T> Yaml11String(Get get) {
  return {.shape = {.kind = Shape::Kind::kText},
          .read = [get](const YamlReader& r, const YAML::Node& n, const std::string& path,
                        T& out) -> Status {
            auto text = Yaml11Text(r, n, path);
            if (!text.ok()) return text.status();
            std::invoke(get, out) = std::move(*text);
            return Status::Ok();
          },
          .show = [get](const T& d) { return std::string(std::invoke(get, d)); }};
}

// An unquoted integer (decimal, or 0x / 0o / 0b as YAML 1.1 allows) from 0 to 2^32 - 1; null
// leaves the member as it is (the table's check tells a missing count).
template <typename T, typename Get>
Value<T> Yaml11Count(Get get) {
  return {.shape = {.kind = Shape::Kind::kInteger, .min = 0, .max = UINT32_MAX},
          .read = [get](const YamlReader& r, const YAML::Node& n, const std::string& path,
                        T& out) -> Status {
            if (n.IsNull()) return Status::Ok();
            const Yaml11Scalar s = Resolve(n);
            if (s.kind != Yaml11Scalar::Kind::kInt || s.integer < 0 || s.integer > UINT32_MAX) {
              return r.Error(
                  n, path,
                  Cat("expected an integer from 0 to 4294967295 (got ", ShownScalar(n), ')'));
            }
            std::invoke(get, out) = static_cast<uint32_t>(s.integer);
            return Status::Ok();
          }};
}

}  // namespace caudal::config_internal
