// envoyproxy/ratelimit's YAML as caudal reads it: one table per map of the format (field_table.h;
// the reference's fields with the reference's meaning, caudal's additions marked as such), and
// EnvoyReader, which builds descriptor trees from them, bounded in depth and count. Errors read
// as in caudal's own config: file:line:column: field: message. Scalars mean what YAML 1.1 makes
// of them, as for the reference (yaml11.h).
//
// Thread-safety: the tables are immutable; one reader per document.
#pragma once

#include <yaml-cpp/yaml.h>

#include <cstddef>
#include <string>
#include <string_view>

#include "caudal/common/status.h"
#include "caudal/engine/ratelimit_config.h"
#include "config/field_table.h"
#include "config/field_values.h"
#include "config/yaml_reader.h"

namespace caudal::config_internal {

// A file's top level. `descriptors` is kept as written, for EnvoyReader::Descriptors.
struct EnvoyDocument {
  std::string domain;
  YAML::Node descriptors;
};

// The top level; the descriptor and rate_limit tables are reached from it.
const Table<EnvoyDocument>& EnvoyDocumentTable();

class EnvoyReader {
 public:
  explicit EnvoyReader(std::string_view file) : r_(file) {}

  const YamlReader& r() const { return r_; }

  // A `descriptors` list into `parent`'s children; `path` is the reference's name of `parent`
  // ("domain." or "domain.key_value."), for messages. Bounded in depth and count.
  Status Descriptors(const YAML::Node& list, envoy::DescriptorNode& parent,
                     const std::string& field, const std::string& path, size_t depth);

 private:
  YamlReader r_;
  size_t descriptors_ = 0;
};

}  // namespace caudal::config_internal
