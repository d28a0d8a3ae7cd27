// Reading envoyproxy/ratelimit's YAML configuration files into a RateLimitConfig.
//
// Every field of the reference is read with the reference's meaning; anything else is refused by
// name with file, line and field, never ignored (see ratelimit_config.h for the model).
//
// Thread-safety: pure functions.
#pragma once

#include <span>
#include <string>
#include <string_view>

#include "caudal/envoy/ratelimit_config.h"
#include "caudal/status.h"

namespace caudal::envoy {

struct RateLimitDocument {
  std::string name;  // file name, used in messages
  std::string text;
};

// Loads documents already read; a domain may appear in one document only.
Result<RateLimitConfig> ParseRateLimitConfig(std::span<const RateLimitDocument> documents);
Result<RateLimitConfig> ParseRateLimitConfigText(std::string_view text,
                                                 std::string name = "<config>");
// Loads a file, or every *.yaml / *.yml file of a directory (sorted by name, one domain each).
Result<RateLimitConfig> LoadRateLimitConfig(const std::string& path);

}  // namespace caudal::envoy
