// Reading envoyproxy/ratelimit's YAML configuration files into a RateLimitConfig.
//
// Every field of the reference is read with the reference's meaning (see ratelimit_config.h for
// the model); scalars mean what YAML 1.1 makes of them, as for the reference (`shadow_mode: yes`
// is true, `value: 1.5` is a float it refuses, `requests_per_unit: "5"` a string it refuses).
// Every file the reference refuses is refused, as caudal's own config file errors are:
//   file:line:column: field: message
// e.g. `ratelimit.yaml:6:13: descriptors[0].rate_limit.unit: invalid rate limit unit 'foo'
// (expected second, minute, hour, day, week, month or year)`. Beyond the reference, caudal also
// refuses what the reference would silently ignore: a key given twice in one map, and a field
// the reference knows at a level where it means nothing (`unit` beside `key`, say), and a
// rate_limit without requests_per_unit (write 0 to block every request).
//
// Thread-safety: pure functions.
#pragma once

#include <span>
#include <string>
#include <string_view>

#include "caudal/common/status.h"
#include "caudal/engine/ratelimit_config.h"

namespace caudal::envoy {

struct RateLimitDocument {
  std::string name;  // file name, used in messages
  std::string text;
};

struct RateLimitLoadOptions {
  // The reference's MERGE_DOMAIN_CONFIG: files naming the same domain add their descriptors to
  // it (a descriptor defined twice is still refused). Otherwise a domain is defined once.
  bool merge_domains = false;
};

// Loads documents already read, in order.
Result<RateLimitConfig> ParseRateLimitConfig(std::span<const RateLimitDocument> documents,
                                             const RateLimitLoadOptions& options = {});
Result<RateLimitConfig> ParseRateLimitConfigText(std::string_view text,
                                                 std::string name = "<config>",
                                                 const RateLimitLoadOptions& options = {});
// Loads a file, or every *.yaml / *.yml file of a directory (sorted by name; symbolic links are
// followed, so a Kubernetes ConfigMap volume reads as its files).
Result<RateLimitConfig> LoadRateLimitConfig(const std::string& path,
                                            const RateLimitLoadOptions& options = {});

}  // namespace caudal::envoy
