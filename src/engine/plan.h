// Planning: a request becomes a Plan, one Check per applicable policy (policies) or per
// descriptor (Envoy domains), each with its limits, store keys, cost and the rules that decide
// it. Pure: no store, no clock. The engine then executes any plan the same way (engine.cc).
//
// Store keys are built and read by engine/store_key.h, which spells them.
#pragma once

#include <bitset>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "caudal/decorators/lease_terms.h"
#include "caudal/engine/engine.h"
#include "caudal/engine/runtime_overrides.h"
#include "observe/metrics.h"

namespace caudal {

// What an engine decides against, swapped whole by SetPolicies / SetDomains.
struct Engine::Snapshot {
  std::shared_ptr<const PolicySet> policies;
  std::vector<PolicyCounters*> policy_counters;  // parallel to policies->policies(); null: none
  // Per policy (parallel to policies->policies(); empty without metrics): each dimension its
  // limits and its tiers' count, and the series of caudal_units_admitted_total counting it.
  struct DimensionSeries {
    std::string_view dimension;  // into the policy set
    std::atomic<uint64_t>* units = nullptr;
  };
  std::vector<std::vector<DimensionSeries>> policy_units;
  std::shared_ptr<const envoy::RateLimitConfig> domains;
  DomainOptions domain_options;
  // Per Envoy rule: its metric name (envoyproxy/ratelimit's stat key, "domain.key_value.key")
  // and counters.
  struct RuleStats {
    std::string name;
    PolicyCounters* counters = nullptr;
  };
  std::unordered_map<const envoy::RateLimitRule*, RuleStats> rule_stats;
  std::shared_ptr<const RuntimeOverrides> runtime;  // null: none
};

namespace engine_internal {

// Where a policy's check took its limits from (precedence: runtime, tier, policy).
enum class LimitsFrom : uint8_t {
  kPolicy,   // the policy's own `limits`
  kTier,     // one of its static `overrides` (Check::tier says which)
  kRuntime,  // the identity's runtime override
};

// One check being decided. `result` is what the front end gets back.
struct Check {
  PolicyResult result;
  FailureMode on_failure = FailureMode::kDeny;
  bool count_rejected = false;
  std::vector<std::string> keys;  // one per limit, for the shared store
  // Bit k: keys[k] is a concurrency limit's, which takes one slot per admitted request whatever
  // its cost (a HoldEntry) and is never refunded, reset or cached (its slots come back by
  // release). Planning decides it, once; everything after reads it here.
  std::bitset<kMaxLimitsPerPolicy> slots;
  // The limits `local` failure mode applies, parallel to keys: a policy's precomputed ones, or
  // limits computed when failing over (kept in `local_owned`).
  std::vector<const Limit*> local_limits;
  std::vector<Limit> local_owned;
  std::shared_ptr<const Limit> override_limit;  // an Envoy descriptor's own limit
  PolicyCounters* counters = nullptr;
  // A policy's dimensions and their units' series (Snapshot::policy_units); null: not counted.
  const std::vector<Engine::Snapshot::DimensionSeries>* units = nullptr;
  std::string_view stat_name;  // the metrics' name: the policy's, or the Envoy rule's stat key
  std::string detailed_name;   // Envoy: the per-value metric name (detailed_metric, ...)
  // Counted whatever the verdict (ChargeEntry): the reference's INCRBY, for Envoy checks
  // decided one by one whose limits are all fixed windows, and an always_charge rule's.
  bool charge = false;
  // An always_charge rule's: charged whatever the request decides (refused by another check,
  // or blocked), in either descriptor mode; its keys never lease.
  bool always_charge = false;
  // An Envoy quota_mode rule: refused, it refuses the request only when every quota check of
  // the request is refused too.
  bool quota = false;
  // A reserve's enforced check: its keys reserve under Plan::reservation with these terms (its
  // policy's, with the request's ttl).
  bool reserves = false;
  ReservationTerms reservation{};
  // Its policy expires reservations by giving them back: every entry carries these terms
  // (ConsumeEntry::reservations), so that its keys apply the expired ones first. Null: none needed.
  const ReservationTerms* expiry = nullptr;
  // How its keys lease (ConsumeEntry::lease_terms): its policy's, its rule's or the domain's;
  // outlives the plan (the snapshot holds it). Null: none given.
  const LeaseTerms* lease = nullptr;
  // A policy with `share`: its keys are its capacity's (one for all identities), consumed from
  // this identity's share (ConsumeEntry::share_of). Null otherwise.
  struct Shared {
    std::string identity;  // the encoded identity, which `of` points into
    ShareOf of;
  };
  std::shared_ptr<const Shared> shared;
  Status error;  // kConsumeEach: this check's store call failed
  LimitsFrom limits_from = LimitsFrom::kPolicy;
  int tier = -1;  // kTier: the index in the policy's overrides
  // What its first limit had counted before this check's hits, as envoyproxy/ratelimit's counter
  // would read before its INCRBY (the hits of earlier checks of the request on the same key
  // included); -1 until a store (shared or local) decided it. For the hit statistics.
  int64_t used_before = -1;
};

struct Plan {
  std::vector<Check> checks;
  // A check has a concurrency limit and a cost to take (not a refund); the engine then draws
  // `hold`, the id its slots are taken under (HoldEntry::hold), planning being pure.
  bool takes_slots = false;
  HoldId hold;
  // A reserve (CheckRequest::reserve): the engine draws the reservation's id, as it draws `hold`.
  bool reserves = false;
  HoldId reservation;
  Micros reservation_ttl{0};
  DescriptorMode mode = DescriptorMode::kAllOrNothing;
  bool blocked = false;  // an enforced check is kBlocked: the request is refused whatever else
  int64_t instances = 1;
  std::optional<Costs> costs;  // the request's (CheckRequest::costs), for the units' metrics
};

// Where `c` took its limits from, as the admin API names it: "limits", "overrides[1]",
// "runtime_override".
std::string LimitsFromName(const Check& c);

// The identity of `policy` in `descriptors` (each value length-prefixed, so no two identities
// encode alike; `ip` masked by the policy's prefix), or nullopt when a field is missing;
// kInvalidArgument for an `ip` that is no address.
Result<std::optional<std::string>> EncodeIdentity(const PolicySet::Policy& policy,
                                                  const Descriptors& descriptors);

// Policies that apply to `request`, in config order, each with the limits that apply to its
// identity (runtime override, static override, its own). kInvalidArgument for bad descriptors, a
// cost < 1, a cost above an applicable rate limit's capacity, or more than kMaxHeldSlots
// concurrency limits (hold.h). A concurrency limit takes one slot whatever the cost.
Result<Plan> PlanPolicies(const Engine::Snapshot& snap, const CheckRequest& request);

// A request's costs (CheckRequest::costs, unset: valid): 1..kMaxCostDimensions dimensions of
// `set`'s (PolicySet::dimensions), each once and 0..kMaxCost units, and no `cost` beside them
// (`request_cost`). kInvalidArgument (reason invalid_cost) naming the field at fault.
Status ValidateCosts(const std::optional<Costs>& costs, bool request_cost, const PolicySet& set);
// The units a request costs `limit`: the sum over its dimensions of `costs`' units, `requests`
// standing for the requests dimension's. Above kMaxCost: kMaxCost + 1, which no capacity holds.
int64_t LimitCost(const Limit& limit, int64_t requests, const std::optional<Costs>& costs);
// The requests dimension's units in `costs`: its `requests`, or 0.
int64_t RequestsIn(const Costs& costs);

// An Envoy descriptor's entries as a runtime override of its rule keys them (length-prefixed).
std::string EncodeEntries(std::span<const envoy::DescriptorEntry> entries);

// One check per descriptor of `request`, by envoyproxy/ratelimit's matching rules; a runtime
// override of the matched rule for the descriptor's entries replaces the rule's limit (the
// engine applies only overrides that fit the rule: override_fit.h). An always_charge rule's
// check charges (Check::always_charge).
// A request that matches a quota_mode rule is decided one by one (kConsumeEach) whatever the
// domain's mode: a quota is debited with what was used, as the reference does.
// kInvalidArgument naming the descriptor and field for a malformed request.
Result<Plan> PlanDomain(const Engine::Snapshot& snap, const DomainRequest& request);

// The limit in force whose store key `key` is, when `want` holds for its algorithm, and its
// policy and its local failure mode's limit (when `has_local` and the policy fails over to
// local); `limit` null when none is (the policy, its tier or its runtime override changed since,
// or the key is no such limit's). Policy keys only.
struct KeyedLimit {
  const Limit* limit = nullptr;
  const Limit* local = nullptr;
  const PolicySet::Policy* policy = nullptr;
};
KeyedLimit LookUpKey(const Engine::Snapshot& snap, std::string_view key, bool has_local,
                     bool (*want)(Algorithm));

// The limits of `check` divided among `instances` for the local fallback store; false when a
// limit cannot be divided exactly (the check then fails closed).
bool PrepareLocal(Check& check, int64_t instances);

// kInvalidArgument unless `value` is UTF-8 without NUL (and, unless `allow_controls`, without any
// other control character); `field` names it in the message.
Status ValidateValue(std::string_view field, std::string_view value, bool allow_controls = false);

}  // namespace engine_internal
}  // namespace caudal
