// EnvoyReader: the typed reads of envoyproxy/ratelimit's YAML (fields, YAML 1.1 scalars,
// metadata, rate limits, descriptor trees) on top of YamlReader, so errors read as in caudal's
// own config: file:line:column: field: message.
//
// Thread-safety: one reader per document.
#pragma once

#include <yaml-cpp/yaml.h>

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>

#include "caudal/envoy/ratelimit_config.h"
#include "caudal/status.h"
#include "config/yaml_reader.h"

namespace caudal::config_internal {

using envoy::DescriptorNode;
using envoy::MetadataValue;
using envoy::RateLimitRule;

class EnvoyReader {
 public:
  explicit EnvoyReader(std::string_view file) : r_(file) {}

  const YamlReader& r() const { return r_; }

  // A map whose keys are all `allowed`; a field the reference knows, at a level where it would
  // silently ignore it, is named as such.
  Status Fields(const YAML::Node& n, const std::string& field,
                std::initializer_list<std::string_view> allowed) const;
  // Any scalar reads as its text (null as ""), except one that YAML 1.1 reads as a float: the
  // reference refuses those outside `metadata`.
  Result<std::string> String(const YAML::Node& n, const std::string& field) const;
  // true / false, and YAML 1.1's other spellings (yes, on, ...); null is false, as for the
  // reference. Quoted text is a string, not a boolean.
  Result<bool> Bool(const YAML::Node& n, const std::string& field) const;
  // An unquoted integer (decimal, or 0x / 0o / 0b as YAML 1.1 allows) from 0 to 2^32 - 1.
  Result<uint32_t> Uint32(const YAML::Node& n, const std::string& field) const;

  // A `metadata` value, as the reference turns it into a google.protobuf.Struct.
  Result<MetadataValue> Metadata(const YAML::Node& n, const std::string& field, size_t depth) const;
  // A `rate_limit` map.
  Result<RateLimitRule> Rule(const YAML::Node& n, const std::string& field) const;
  // A `descriptors` list into `parent`'s children; `path` is the reference's name of `parent`
  // ("domain." or "domain.key_value."), for messages. Bounded in depth and count.
  Status Descriptors(const YAML::Node& list, DescriptorNode& parent, const std::string& field,
                     const std::string& path, size_t depth);

 private:
  YamlReader r_;
  size_t descriptors_ = 0;
};

}  // namespace caudal::config_internal
