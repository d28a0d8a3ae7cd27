// Engine: the one place a request becomes a decision, for every front end.
//
// HTTP (/v1/check, /v1/auth), Envoy's RLS and `caudal check` each translate their request into
// one of the two requests below and the CheckResult back into their protocol; nothing else.
// A check whose policies hold a concurrency limit takes a slot of each when admitted and
// answers a hold id, which ReleaseAsync (HTTP /v1/release) gives back. A reserve (a check with
// CheckRequest::reserve) consumes its cost as an estimate and answers a reservation id, which
// SettleAsync (HTTP /v1/settle) settles at the actual cost, from any instance.
//
//   Engine engine(store, clock, {.local_store = &fallback, .metrics = &metrics, .log = &log});
//   engine.SetPolicies(*PolicySet::Create(specs, {.on_failure = FailureMode::kDeny}));
//   engine.CheckAsync({.descriptors = {{"api_key", "k1"}}}, [](Result<CheckResult> r) { … });
//
// A decision: the plan (which policies or Envoy rules apply, their keys: src/engine/plan.h);
// the enforced checks that consume in one store request (kAllOrNothing: one refusal and nothing
// is consumed) or each alone (kConsumeEach), refunds and an always_charge Envoy rule's charges
// riding along whatever the others decide (a charge counts its hits even when they do not fit);
// then shadow checks, charged if the request was admitted and only looked at if not (a shadow
// refusal is counted and logged, never enforced), and count_rejected checks, charged on a
// refusal when they have room. When the store fails, each enforced check follows its failure
// mode: allow (admitted, degraded), deny (Outcome::kUnavailable), or local (decided together,
// all-or-nothing, in `local_store` with the limits divided by the instance count).
//
// Errors (Result) are the caller's fault only (bad descriptors, a bad cost) and consume
// nothing: kInvalidArgument, whose reason (engine_reason, below) names the field at fault; a
// store's failure is never an error here, but a decision by failure mode.
//
// Thread-safety: every method may be called from any thread. SetPolicies and SetDomains swap
// what they install atomically; a decision uses the set it started with from beginning to end.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "caudal/algorithms/limit.h"
#include "caudal/common/clock.h"
#include "caudal/engine/policy.h"
#include "caudal/engine/ratelimit_config.h"
#include "caudal/observe/log.h"
#include "caudal/store/store.h"

namespace caudal {

// --- Requests ----------------------------------------------------------------------------------

struct Descriptor {
  std::string name;
  std::string value;
};
using Descriptors = std::vector<Descriptor>;

inline constexpr size_t kMaxDescriptors = 32;
inline constexpr size_t kMaxDescriptorValueLength = 256;

// The reasons (Status::reason()) of a request's kInvalidArgument: the field at fault. An error
// without one is about the request's descriptors.
namespace engine_reason {
inline constexpr std::string_view kInvalidCost = "invalid_cost";
inline constexpr std::string_view kInvalidDescriptors = "invalid_descriptors";
inline constexpr std::string_view kInvalidReservation = "invalid_reservation";  // a settle's id
}  // namespace engine_reason

// A request's units in one dimension (caudal/algorithms/limit.h): input tokens, output tokens,
// micro-dollars... Each limit consumes the sum of its dimensions' units; a dimension a request
// does not name costs it 0.
struct DimensionCost {
  std::string dimension;  // a name some limit in force counts, each once in a request
  int64_t units = 0;      // 0..kMaxCost
};
using Costs = std::vector<DimensionCost>;
inline constexpr size_t kMaxCostDimensions = 16;

// A request against caudal's policies (HTTP, CLI): every policy whose identity the descriptors
// hold applies.
struct CheckRequest {
  // 1..kMaxDescriptors, unique names; values 1..kMaxDescriptorValueLength bytes of UTF-8 with no
  // control characters; `ip`, when present, must be an IPv4 or IPv6 address.
  Descriptors descriptors;
  std::optional<int64_t> cost;  // the requests dimension's; unset: each policy's default cost
  // Set: the units of each dimension (1..kMaxCostDimensions of them), `requests` standing for
  // `cost`, which must then be unset. Unset: `cost` (or the default) for requests, 0 for others.
  std::optional<Costs> costs = std::nullopt;
  bool refund = false;  // give the costs back to every applicable policy instead of taking them
  Api api = Api::kHttp;
  // Set: a reserve whose reservation lives this long (kMinReservationTtl..kMaxReservationTtl):
  // `cost` is an estimate, consumed all-or-nothing in every enforced policy, each of whose limits
  // must take reservations (SupportsReserve); settle it with SettleAsync.
  std::optional<Micros> reserve = std::nullopt;
  // Not ok: decided as when the store fails with this error, without asking it (each enforced
  // check by its failure mode). For an Idempotency-Key request whose record could not be read
  // (src/server/idempotency.h): the store is then charged nothing that no record says was charged.
  Status store_failed = Status::Ok();
};
inline constexpr Micros kDefaultReservationTtl = std::chrono::seconds(60);

// One descriptor of an Envoy request: the entries select a rule of the domain (see
// ratelimit_config.h), or `limit` overrides it.
struct DomainDescriptor {
  struct Override {
    uint32_t requests_per_unit = 0;
    int unit = 0;  // RateLimitResponse.RateLimit.Unit's number
  };
  std::vector<envoy::DescriptorEntry> entries;  // views: valid until CheckAsync returns
  std::optional<uint64_t> hits;                 // unset: the request's hits_addend
  std::optional<Override> limit;
  bool refund = false;  // is_negative_hits: give the hits back
};

// A request against envoyproxy/ratelimit's domains (Envoy's RLS): one check per descriptor.
struct DomainRequest {
  std::string_view domain;  // a view: valid until CheckAsync returns
  std::vector<DomainDescriptor> descriptors;
  uint64_t hits_addend = 0;  // 0 means 1 (proto3 cannot tell unset from 0)
  size_t wire_bytes = 0;     // the request's size as received, checked against max_request_bytes
};

// --- Results -----------------------------------------------------------------------------------

enum class DecidedBy : uint8_t {
  kStore,
  kLocal,           // the store failed; this instance's local fallback decided
  kFailOpen,        // the store failed; admitted without a decision
  kFailClosed,      // the store failed; refused
  kOverLimitCache,  // refused from the store's earlier refusal, without asking it again
  kSkipped,         // not decided: another check refused the request from the over-limit cache
};
std::string_view DecidedByName(DecidedBy d);
// A failure mode decided (the store failed).
bool IsFailover(DecidedBy d);

enum class CheckKind : uint8_t {
  kNoLimit,    // Envoy: no rule matched (or it was replaced): nothing counted
  kUnlimited,  // Envoy: the rule says unlimited
  kBlocked,    // Envoy: requests_per_unit 0, always over the limit, nothing counted
  kLimited,    // decided by the store
};

// x is closer to its limit than y: refused first, then the smaller share of its capacity left.
bool CloserToLimit(const Decision& x, const Decision& y);

// One policy (HTTP, CLI) or one Envoy descriptor, as decided.
struct PolicyResult {
  std::string_view name;                       // the policy's or rule's name; may be empty
  const PolicySet::Policy* policy = nullptr;   // policies only
  const envoy::RateLimitRule* rule = nullptr;  // Envoy only; null for overrides and no match
  CheckKind kind = CheckKind::kLimited;
  bool shadow = false;
  int64_t cost = 0;  // the requests dimension's (Envoy: the descriptor's hits)
  // Per limit, the units it consumes, its dimension's (Limit::dimension); empty when every limit
  // consumes `cost` (CostOf reads either).
  std::vector<int64_t> costs;
  bool refund = false;
  std::vector<const Limit*> limits;  // the limits that decided: the local ones when kLocal
  std::vector<Decision> decisions;   // one per limit; empty when kFailOpen / kFailClosed
  bool allowed = true;               // the check's own verdict (a shadow check's too)
  DecidedBy decided_by = DecidedBy::kStore;

  // The decision with the smallest share of its capacity left (refused ones first); -1 if none.
  int Tightest() const;
  // The units limit `k` consumes.
  int64_t CostOf(size_t k) const { return k < costs.size() ? costs[k] : cost; }
};

enum class Outcome : uint8_t {
  kAllowed,
  kDenied,       // over a limit: 429 / OVER_LIMIT
  kUnavailable,  // the store failed and a check fails closed: 503 / per envoy.deny_as
};
std::string_view OutcomeName(Outcome o);

struct CheckResult {
  std::shared_ptr<const void> keepalive;  // holds what `results` point into
  Outcome outcome = Outcome::kAllowed;
  bool degraded = false;              // some check was decided by a failure mode
  std::vector<PolicyResult> results;  // policies: the applicable ones, in config order;
                                      // Envoy: one per descriptor, in request order
  // kDenied: the least wait after which the same request could pass (max over refused limits).
  Micros retry_after{0};
  Status store_error;  // degraded: the store's error that sent checks to their failure mode
  // Admitted with concurrency slots (the shared store's or, failing over, the local one's): the
  // id that releases them (ReleaseAsync); empty otherwise. A slot not released frees itself
  // its limit's `hold` after it was taken.
  std::string hold;
  // An admitted reserve: the id that settles it (SettleAsync), and its ttl. The keys of checks
  // decided by a failure mode hold no reservation (their settle finds none).
  std::string reservation;
  Micros reservation_ttl{0};

  bool allowed() const { return outcome == Outcome::kAllowed; }
  // Enforced checks that refused (over limit or failing closed).
  std::vector<const PolicyResult*> Refused() const;
  // The enforced check and decision closest to its limit, for the RateLimit headers; null if none.
  const PolicyResult* ClosestToLimit(int* decision_index) const;
};

using CheckCallback = std::function<void(Result<CheckResult>)>;

// What a release did: `released` when at least one of the hold's slots was live and is now free
// (false: unknown, freed already, or expired; the front ends answer 404).
struct ReleaseResult {
  bool released = false;
  int slots = 0;  // slots freed
};
using ReleaseCallback = std::function<void(Result<ReleaseResult>)>;

// One limit a settle settled, and its state after it.
struct SettledLimit {
  std::string_view policy;  // the policy's name
  const Limit* limit = nullptr;
  Decision decision;  // decision.reservation: what happened to this key's reservation
};

// What a settle did, over every key of the reservation: kSettled (some key settled now),
// kRepeated (every live key had been settled at this cost: the first settle's decisions),
// kConflict (some key had been settled at another cost: nothing changed), kUnknown (no key held
// it: unknown, expired, or its policy's limits changed since; nothing changed).
struct SettleResult {
  std::shared_ptr<const void> keepalive = nullptr;  // holds what `limits` point into
  Reservation outcome = Reservation::kUnknown;
  std::vector<SettledLimit> limits = {};  // the keys that held it, in the reservation's order
};
using SettleCallback = std::function<void(Result<SettleResult>)>;

// --- The engine --------------------------------------------------------------------------------

struct DomainOptions {
  DescriptorMode mode = DescriptorMode::kAllOrNothing;
  FailureMode on_failure = FailureMode::kAllow;
  int64_t instances = 1;  // divides the limits of `local` failure mode
  size_t max_request_bytes = 64 * 1024;
  LeaseTerms lease{};  // store.lease: the terms of rules that set none (and of overrides)
};

class Metrics;           // observe/metrics.h
class Refusals;          // observe/refusals.h
class RuntimeOverrides;  // caudal/engine/runtime_overrides.h

struct EngineOptions {
  Store* local_store = nullptr;  // required when any check may fail over to `local`
  Metrics* metrics = nullptr;    // optional
  const Logger* log = nullptr;   // optional
  // Remember this many keys' refusals and refuse their floods without asking the store again
  // (see engine/over_limit_cache.h); 0: off. For a remote store.
  size_t over_limit_cache_keys = 0;
  // Told of every refusal (heaviest refused identities, throttled log lines); optional.
  Refusals* refusals = nullptr;
};

class LogThrottle;
namespace engine_internal {
class OverLimitCache;
}

class Engine {
 public:
  Engine(Store& store, const Clock& clock, EngineOptions options);
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // kInvalidArgument when `set` may fail over to `local` and no local store was given. This, and
  // SetDomains, check the runtime overrides held again: only those that fit apply
  // (caudal/engine/runtime_overrides.h).
  Status SetPolicies(std::shared_ptr<const PolicySet> set);
  std::shared_ptr<const PolicySet> policies() const;
  // The Envoy domains and how they are decided; kInvalidArgument as for SetPolicies.
  Status SetDomains(std::shared_ptr<const envoy::RateLimitConfig> domains, DomainOptions options);
  std::shared_ptr<const envoy::RateLimitConfig> domains() const;
  // The runtime overrides checks look up before a policy's tiers or an Envoy rule's limit
  // (caudal/engine/runtime_overrides.h); null: none. Each applies only while it fits the policies
  // and domains in force (one that does not is logged at warning, once). Installing a set also
  // forgets the over-limit cache, so that no remembered refusal outlives a raised limit.
  void SetRuntimeOverrides(std::shared_ptr<const RuntimeOverrides> overrides);
  // As installed: applied, and held but not applied.
  std::shared_ptr<const RuntimeOverrides> runtime_overrides() const;
  // Forgets every refusal the over-limit cache remembers (an identity's state was reset).
  void ForgetRefusals();

  // `done` runs exactly once, inline or on a store thread; it must not block.
  void CheckAsync(CheckRequest request, CheckCallback done);
  void CheckAsync(const DomainRequest& request, CheckCallback done);
  // Blocking forms. Must not be called from a store callback.
  Result<CheckResult> Check(CheckRequest request);
  Result<CheckResult> Check(const DomainRequest& request);

  // Gives back the concurrency slots of `hold` (CheckResult::hold), from any instance sharing the
  // store: the keys it names whose limit is a concurrency limit of the policies in force are
  // released in one store request (and in the local store too, where a policy fails over to
  // it). Errors: kInvalidArgument for text that is no hold id; kUnavailable (or the store's
  // error) when the store cannot answer and no slot was freed. `done` runs exactly once.
  void ReleaseAsync(std::string_view hold, ReleaseCallback done);
  Result<ReleaseResult> Release(std::string_view hold);

  // Settles the reservation `reservation` (CheckResult::reservation) at the actual `cost`, from
  // any instance sharing the store, in one store request: under the estimate gives the rest
  // back, over it charges the excess into debt, up to each limit's capacity. `cost` is the
  // requests dimension's: a limit of another dimension settles at 0. Errors: kInvalidArgument
  // for text that is no reservation id or a cost outside 0..2^40; kUnavailable (or the store's
  // error) when the store cannot answer. `done` runs exactly once.
  void SettleAsync(std::string_view reservation, int64_t cost, SettleCallback done);
  Result<SettleResult> Settle(std::string_view reservation, int64_t cost);
  // The same with the actual units of each dimension (CheckRequest::costs): each limit settles at
  // its dimension's, each dimension giving back or overdrawing on its own.
  void SettleAsync(std::string_view reservation, const Costs& costs, SettleCallback done);
  Result<SettleResult> Settle(std::string_view reservation, const Costs& costs);

  // What an RLQS assignment divides (src/envoy/rlqs_service.h): the limits in force for the
  // identity of `policy` in `descriptors`, with their store keys, as a check of that policy alone
  // takes them (the identity's runtime override, its tier, or the policy's own; with `share`, the
  // policy's capacity and the identity's weight in it). kNotFound when no such policy is in force
  // or `descriptors` lack its identity; the planning's kInvalidArgument for bad descriptors.
  struct PolicyQuota {
    std::vector<std::string> keys;  // one per limit
    std::vector<Limit> limits;
    FailureMode on_failure = FailureMode::kDeny;
    std::string identity;  // as encoded in its keys
    bool shared = false;   // the policy's capacity, shared by all its identities
    int64_t weight = 1;    // with `shared`: the identity's weight
    Fairness fairness = Fairness::kMaxMin;
  };
  Result<PolicyQuota> QuotaOf(std::string_view policy, const Descriptors& descriptors) const;

  Store& store() { return store_; }
  const Clock& clock() const { return clock_; }
  // Where it counts (null without metrics), for front ends counting what never reaches it.
  Metrics* metrics() const { return options_.metrics; }

  struct Snapshot;  // what a decision uses (src/engine/plan.h)
  std::shared_ptr<const Snapshot> snapshot() const;

 private:
  class Operation;
  friend class Operation;
  void SettleWith(std::string_view reservation, int64_t requests, const std::optional<Costs>& costs,
                  SettleCallback done);

  Store& store_;
  const Clock& clock_;
  EngineOptions options_;
  std::mutex install_mu_;  // serialises SetPolicies and SetDomains
  std::atomic<std::shared_ptr<const Snapshot>> snapshot_;
  std::unique_ptr<LogThrottle> shadow_log_;  // one shadow-refusal line per check per second
  std::unique_ptr<engine_internal::OverLimitCache> cache_;  // null: off
};

}  // namespace caudal
