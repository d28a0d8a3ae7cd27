// RateLimitConfig: envoyproxy/ratelimit's YAML configuration, loaded as a caudal policy source.
//
// A deployment of the reference service switches to caudal by pointing caudal at the same files:
//
//   domain: mongo_cps
//   descriptors:
//     - key: database
//       value: users
//       rate_limit: {unit: second, requests_per_unit: 500, name: users, replaces: [{name: x}]}
//       shadow_mode: false
//       detailed_metric: false
//       descriptors: [...]        # nested descriptors
//
// Every field of the reference is read with the reference's meaning; anything else is refused
// by name with file, line and field, never ignored. Units: second, minute, hour, day, month
// (30 days) and year (365 days), as the reference computes them. caudal's extension, inside
// rate_limit: `algorithm` (fixed_window by default, so a migrated file decides as the reference
// did; or token_bucket, gcra, sliding_window_log, sliding_window_counter) and, for the bucket
// algorithms, `capacity` (the burst; requests_per_unit by default). A bucket refills
// requests_per_unit per unit.
//
// Matching follows the reference: at each level an entry matches a descriptor with its exact
// key and value first, else the first wildcard descriptor (value ending in `*`) whose prefix the
// value starts with, else the descriptor with the key and no value; a limit applies only when
// the request's last entry lands on it, and a request deeper than the configuration matches
// nothing.
//
// Thread-safety: immutable after loading; safe to share between threads.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "caudal/limit.h"
#include "caudal/status.h"

namespace caudal::envoy {

// Values equal the RLS API's RateLimit.Unit numbers.
enum class Unit : uint8_t { kSecond = 1, kMinute = 2, kHour = 3, kDay = 4, kMonth = 5, kYear = 6 };

std::string_view UnitName(Unit u);  // "second", ...
Micros UnitDuration(Unit u);        // month = 30 days, year = 365 days, as the reference

// Builds the limit the reference would apply for `requests_per_unit` per `unit` (a fixed window
// aligned to the unit), or the caudal algorithm named. `capacity` 0 means requests_per_unit.
Result<Limit> MakeLimit(Algorithm algorithm, uint32_t requests_per_unit, Unit unit,
                        int64_t capacity = 0);

struct RateLimitRule {
  std::string name;                   // may be empty
  bool unlimited = false;             // when true there is no limit (and no unit)
  Unit unit = Unit::kSecond;
  uint32_t requests_per_unit = 0;
  std::optional<Limit> limit;         // set unless unlimited or blocking
  std::vector<std::string> replaces;  // names of rules this one replaces in the same request
  bool shadow_mode = false;           // decide and count, but never refuse
  bool detailed_metric = false;       // read for compatibility; caudal has no per-value metrics
  std::string source;                 // "file:line", for messages

  // requests_per_unit 0: every hit is over the limit (the reference's way to block a value).
  bool blocks_all() const { return !unlimited && requests_per_unit == 0; }
};

class DescriptorNode {
 public:
  std::string key;
  std::string value;  // empty: matches any value of `key` (the default for the key)
  std::optional<RateLimitRule> rule;

  // The child an entry selects by the reference's rules, or nullptr.
  const DescriptorNode* Select(std::string_view entry_key, std::string_view entry_value) const;
  bool has_children() const { return !children_.empty(); }
  const std::vector<std::unique_ptr<DescriptorNode>>& children() const { return children_; }

  // Adds a child; kInvalidArgument when the same key and value is already there.
  Result<DescriptorNode*> AddChild(std::unique_ptr<DescriptorNode> child);

 private:
  std::vector<std::unique_ptr<DescriptorNode>> children_;
  std::unordered_map<std::string, const DescriptorNode*> exact_;     // key + value
  std::unordered_map<std::string, const DescriptorNode*> key_only_;  // key
  std::vector<const DescriptorNode*> wildcards_;                     // in file order
};

struct DescriptorEntry {
  std::string_view key;
  std::string_view value;
};

class RateLimitConfig {
 public:
  // Adds a domain's descriptor tree; kInvalidArgument when the domain is already there.
  Status AddDomain(std::string domain, std::shared_ptr<const DescriptorNode> root);

  bool HasDomain(std::string_view domain) const;
  // Calls `fn(rule, stat_key)` for every rule, where stat_key is envoyproxy/ratelimit's stats
  // name for it: the domain, then each level's "key_value" (or "key"), joined by dots.
  void ForEachRule(
      const std::function<void(const RateLimitRule&, std::string_view stat_key)>& fn) const;
  // The rule for `entries` in `domain` by the reference's rules; nullptr when none applies.
  const RateLimitRule* Match(std::string_view domain,
                             std::span<const DescriptorEntry> entries) const;
  size_t DomainCount() const { return domains_.size(); }

 private:
  std::unordered_map<std::string, std::shared_ptr<const DescriptorNode>> domains_;
};

}  // namespace caudal::envoy
