// RateLimitConfig: envoyproxy/ratelimit's YAML configuration, loaded as a caudal policy source,
// so that a deployment of the reference switches to caudal by pointing caudal at the same files.
// Every field of the reference is read with the reference's meaning, and caudal's `algorithm`,
// `capacity`, `lease` and `always_charge` inside rate_limit (fixed_window by default, so a
// migrated file decides as the reference did); docs/envoy.md lists them, with the units. Reading
// the files is ratelimit_config_yaml.h.
//
// Matching is the reference's, step for step. A descriptor's composite key is `key`, or
// `key_value` when it has a value; at each level an entry `key`/`value` selects
//   1. the descriptor whose composite key is `key_value` (the entry's key, '_', its value),
//   2. else the first wildcard descriptor, in file order, whose composite key (with every `*`
//      matching any run of characters, empty included) matches `key_value`,
//   3. else the descriptor whose composite key is `key` (the key's default).
// A limit applies only when the request's last entry lands on it, and a request deeper than the
// configuration matches nothing. Since composite keys are joined with '_', `{key: a_b}` and
// `{key: a, value: b}` are the same descriptor to the reference, so caudal refuses both in one
// level as it does.
//
// Thread-safety: immutable after loading; safe to share between threads.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <variant>
#include <vector>

#include "caudal/algorithms/limit.h"
#include "caudal/common/status.h"
#include "caudal/decorators/lease_terms.h"
#include "caudal/store/store.h"

namespace caudal::envoy {

// Values equal the RLS API's RateLimitResponse.RateLimit.Unit numbers (WEEK was added last, as 7).
enum class Unit : uint8_t {
  kSecond = 1,
  kMinute = 2,
  kHour = 3,
  kDay = 4,
  kMonth = 5,
  kYear = 6,
  kWeek = 7,
};

std::string_view UnitName(Unit u);  // "second", ...
Micros UnitDuration(Unit u);  // week = 7 days, month = 30 days, year = 365 days, as the reference

// Builds the limit the reference would apply for `requests_per_unit` per `unit` (a fixed window
// aligned to the unit), or the caudal algorithm named. `capacity` 0 means requests_per_unit.
Result<Limit> MakeLimit(Algorithm algorithm, uint32_t requests_per_unit, Unit unit,
                        int64_t capacity = 0);

// A descriptor's `metadata`, as the reference turns it into a google.protobuf.Struct: each value
// is null, a bool, a number (YAML integers become doubles), a string, a list or a struct.
struct MetadataValue {
  using List = std::vector<MetadataValue>;
  using Struct = std::map<std::string, MetadataValue, std::less<>>;
  std::variant<std::monostate, bool, double, std::string, List, Struct> kind;

  bool operator==(const MetadataValue& other) const;
};
using Metadata = MetadataValue::Struct;

// Merges `from` into `into` as the reference merges the metadata of the descriptors that passed:
// a key already in `into` keeps its value, except that two structs merge recursively.
void MergeMetadata(Metadata& into, const Metadata& from);

struct RateLimitRule {
  std::string name;        // may be empty
  bool unlimited = false;  // when true there is no limit (and no unit)
  Unit unit = Unit::kSecond;
  uint32_t requests_per_unit = 0;
  std::optional<Limit> limit;         // set unless unlimited or blocking
  std::vector<std::string> replaces;  // names of rules this one replaces in the same request
  bool shadow_mode = false;           // decide and count, but never refuse
  bool detailed_metric = false;       // metrics per value: see RuleMatch::stats_key
  std::string source;                 // "file:line", for messages
  // quota_mode: an over-limit quota descriptor refuses the request only when every quota
  // descriptor of the request is over its limit (any ordinary one still refuses on its own).
  bool quota_mode = false;
  // The descriptor's metadata: the reference returns the merged metadata of the descriptors
  // that passed in the response's dynamic_metadata, under "metadata". Empty when none.
  Metadata metadata;
  // caudal's addition: how the rule's keys lease (LeaseStore); unset: store.lease.
  std::optional<LeaseTerms> lease;
  // caudal's addition: every hit is counted whatever the verdict, into debt past the limit
  // (ChargeEntry), in either descriptor mode and whatever the request's other descriptors
  // decide; its keys never lease. Only on a limit whose algorithm SupportsCharge.
  bool always_charge = false;

  // requests_per_unit 0: every hit is over the limit (the reference's way to block a value).
  bool blocks_all() const { return !unlimited && requests_per_unit == 0; }
};

// Why a limit of `algorithm` cannot be `rule`'s, or nullopt; `field` names the rule's field at
// fault ("algorithm", "always_charge"). A concurrency limit never fits (Envoy's protocol cannot
// release a slot), nor one that cannot count past itself on an always_charge rule. The one check
// of a rule's limit, whichever way it arrives: its own (the file, a reload), a runtime
// override's (the admin API, and each held one again at every install).
struct RuleLimitProblem {
  std::string_view field;
  std::string message;
};
std::optional<RuleLimitProblem> CheckRuleLimit(const RateLimitRule& rule, Algorithm algorithm);

// How an entry selected a descriptor (see the matching rules above).
enum class MatchKind : uint8_t { kExactValue, kWildcard, kKeyDefault };

class DescriptorNode {
 public:
  std::string key;
  std::string value;  // empty: matches any value of `key` (the default for the key)
  std::optional<RateLimitRule> rule;
  // value_to_metric: the stats key carries the request's value at this level (RuleMatch).
  bool value_to_metric = false;
  // share_threshold (wildcard values only): every value this wildcard matches counts against
  // one shared counter, keyed by the pattern, instead of one counter per value.
  bool share_threshold = false;

  // `key`, or `key_value` when `value` is not empty: the name the reference files a node under.
  static std::string ComposeKey(std::string_view key, std::string_view value);
  // This node's composite key; set when it is added to its parent.
  const std::string& composite_key() const { return composite_; }
  bool IsWildcard() const { return composite_.find('*') != std::string::npos; }

  // The child an entry selects by the reference's rules, or nullptr; `kind` (if given) says how.
  const DescriptorNode* Select(std::string_view entry_key, std::string_view entry_value,
                               MatchKind* kind = nullptr) const;
  bool has_children() const { return !children_.empty(); }
  const std::vector<std::unique_ptr<DescriptorNode>>& children() const { return children_; }

  // Adds a child; kInvalidArgument when a child with the same composite key is already there.
  Result<DescriptorNode*> AddChild(std::unique_ptr<DescriptorNode> child);

 private:
  struct Wildcard {
    const DescriptorNode* node;
    std::vector<std::string> parts;  // the composite key split on '*'
  };
  std::string composite_;
  std::vector<std::unique_ptr<DescriptorNode>> children_;
  std::unordered_map<std::string, const DescriptorNode*> by_composite_;
  std::vector<Wildcard> wildcards_;  // in file order
};

// Whether `text` matches `pattern`, each '*' standing for any run of characters (empty too).
bool WildcardMatch(std::string_view pattern, std::string_view text);

struct DescriptorEntry {
  std::string_view key;
  std::string_view value;
};

// What a request's descriptor matched, with what the reference derives from the path taken.
struct RuleMatch {
  const RateLimitRule* rule = nullptr;  // nullptr: no limit applies
  // The reference's stats key (its metric names are "<stats_key>.total_hits", ".over_limit",
  // ".near_limit", ".within_limit", ".shadow_mode"): "domain.key_value.key2" by default, the
  // request's own values everywhere with detailed_metric, at value_to_metric levels otherwise,
  // and a share_threshold wildcard's pattern at its level in both cases.
  std::string stats_key;
  // One per request entry: the value its counter is keyed by. The request's own value, except at
  // a share_threshold wildcard, where it is the pattern (so "files/a" and "files/b" matched by
  // "files/*" share one counter). Views into the request or the configuration.
  std::vector<std::string_view> counter_values;
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
  // Match, with the stats key and counter values (allocates; Match does not).
  RuleMatch MatchDetailed(std::string_view domain, std::span<const DescriptorEntry> entries) const;
  // The reference's stats key for a descriptor carrying its own limit override:
  // "domain.key_value.key2" (a key alone where the value is empty).
  static std::string OverrideStatsKey(std::string_view domain,
                                      std::span<const DescriptorEntry> entries);
  size_t DomainCount() const { return domains_.size(); }

 private:
  struct Step {
    const DescriptorNode* node;
    MatchKind kind;
  };
  // The rule `entries` reach, recording each level's node in `steps` when given.
  const RateLimitRule* Walk(std::string_view domain, std::span<const DescriptorEntry> entries,
                            std::vector<Step>* steps) const;

  std::unordered_map<std::string, std::shared_ptr<const DescriptorNode>> domains_;
};

}  // namespace caudal::envoy
