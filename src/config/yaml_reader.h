// YamlReader: typed, bounded reads of yaml-cpp nodes whose errors carry file:line:column, the
// field path and what was expected. yaml-cpp's exceptions are caught only where a document is
// loaded and read (ParseConfig, ParseRateLimitConfig), and become such errors.
#pragma once

#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "caudal/common/clock.h"
#include "caudal/common/status.h"

namespace caudal::config_internal {

class YamlReader {
 public:
  explicit YamlReader(std::string_view filename) : file_(filename) {}

  // "file:line:col: field: message" at the node's position.
  Status Error(const YAML::Node& at, std::string_view field, std::string_view message) const;
  Status ErrorAt(const YAML::Mark& mark, std::string_view field, std::string_view message) const;

  // A map whose keys are all in `allowed`, none repeated.
  Status ExpectMap(const YAML::Node& n, std::string_view field,
                   std::span<const std::string_view> allowed) const;
  Status ExpectSequence(const YAML::Node& n, std::string_view field, size_t max_items) const;

  Result<std::string> String(const YAML::Node& n, std::string_view field) const;
  Result<int64_t> Integer(const YAML::Node& n, std::string_view field, int64_t min,
                          int64_t max) const;
  Result<bool> Bool(const YAML::Node& n, std::string_view field) const;
  Result<Micros> Duration(const YAML::Node& n, std::string_view field) const;

  const std::string& file() const { return file_; }

 private:
  std::string file_;
};

}  // namespace caudal::config_internal
