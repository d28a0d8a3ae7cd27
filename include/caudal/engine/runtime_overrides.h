// Runtime overrides: limits set without a deploy for one identity of a policy (or one value of
// an Envoy rule), kept in the store's OverrideStore so that every instance applies them.
//
// Precedence, for a request of a policy: the identity's runtime override, then the first of the
// policy's static `overrides` whose match the request meets, then the policy's `limits`. An
// override's limits name their own store keys (the key's limit segment), so an identity whose
// limits change gets fresh state under the new ones, limits it had before find the state they
// left, and the same limits set again keep counting.
//
// An override applies only while it fits its policy or rule as the config in force has them:
// the policy or rule is there, the identity is still one of its own, and the limits pass the
// checks the config file's own get (PolicyLimitProblem, envoy::CheckRuleLimit). The admin API
// refuses one that does not (400); the Engine checks every held override again whenever the
// overrides, the policies or the Envoy domains change (a poll, a reload), and one that no longer
// fits is not applied, logged at warning once, until it fits again or is deleted: the store
// keeps it, since another instance may run another config.
//
// A RuntimeOverrides is an immutable snapshot the Engine swaps in whole (SetRuntimeOverrides);
// Find is O(1), allocates nothing and takes no lock. The records' bodies are a line-based text
// of this file's own (EncodeOverride / DecodeOverride), opaque to the stores.
//
// Thread-safety: immutable once created; share it by shared_ptr.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "caudal/algorithms/limit.h"
#include "caudal/common/clock.h"
#include "caudal/common/status.h"
#include "caudal/engine/policy.h"

namespace caudal {

// Runtime overrides held across all policies and rules (a put beyond is refused).
inline constexpr size_t kMaxRuntimeOverrides = 10'000;

enum class OverrideKind : uint8_t { kPolicy, kEnvoyRule };
std::string_view OverrideKindName(OverrideKind k);  // "policy", "envoy_rule"

struct RuntimeOverride {
  OverrideKind kind = OverrideKind::kPolicy;
  std::string policy;  // a policy's name, or an Envoy rule's stat key
  // The identity as the admin gave it (a policy's fields, or a rule's entries in order).
  std::vector<std::pair<std::string, std::string>> identity;
  // How the plan keys the identity (length-prefixed values, an ip masked): what Find matches.
  std::string identity_key;
  std::vector<Limit> limits;  // none for a policy with `share`
  // A policy with `share`: the identity's weight in it (1..kMaxShareWeight). None elsewhere, and
  // in a record written before weights were; an identity given none by any override weighs 1.
  std::optional<int64_t> weight = std::nullopt;
  std::optional<Micros> expires_at;  // the store's time since the epoch; none: never
  std::string set_by;                // the admin's certificate identity or address
};

// The record id in the OverrideStore: one per (kind, policy, identity key).
std::string OverrideId(const RuntimeOverride& o);
std::string EncodeOverride(const RuntimeOverride& o);  // without expires_at (the store keeps it)
// kInvalidArgument for a body EncodeOverride did not write (or whose limits no longer validate).
Result<RuntimeOverride> DecodeOverride(std::string_view body, std::optional<Micros> expires_at);

class RuntimeOverrides {
 public:
  struct Entry {
    RuntimeOverride spec;
    LimitSet set;  // its limits, local limits and key prefixes
  };

  // An override held but not applied, and why (a field and what is wrong with it).
  struct NotApplied {
    RuntimeOverride spec;
    std::string reason;
  };
  // Why an override does not fit, or nullopt when it does.
  using Problem = std::function<std::optional<std::string>(const RuntimeOverride&)>;

  // All applied. Later duplicates of an (kind, policy, identity key) are dropped. `instances`
  // divides limits for `local` failure mode, as the policies' are.
  static std::shared_ptr<const RuntimeOverrides> Create(std::vector<RuntimeOverride> overrides,
                                                        int64_t instances);
  // The same overrides, applied and not alike, each applied iff `problem` finds none.
  std::shared_ptr<const RuntimeOverrides> Refit(const Problem& problem, int64_t instances) const;

  // Applied overrides only.
  const Entry* Find(OverrideKind kind, std::string_view policy,
                    std::string_view identity_key) const;
  const std::vector<Entry>& entries() const { return entries_; }
  size_t size() const { return entries_.size(); }
  const std::vector<NotApplied>& not_applied() const { return not_applied_; }

 private:
  struct Hash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  template <typename V>
  using Map = std::unordered_map<std::string, V, Hash, std::equal_to<>>;

  void Add(RuntimeOverride o, int64_t instances);

  std::vector<Entry> entries_;
  std::vector<NotApplied> not_applied_;
  Map<Map<size_t>> index_[2];  // by kind: policy → identity key → entry
};

}  // namespace caudal
