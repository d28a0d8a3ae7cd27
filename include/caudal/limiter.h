// Limiter: decides a request — a set of descriptors and a cost — against every policy that
// applies to it, all-or-nothing, and applies each policy's failure mode when the store fails.
//
//   Limiter limiter(store, clock, {.local_store = &fallback, .metrics = &metrics, .log = &log});
//   limiter.SetPolicies(*PolicySet::Create(specs, {.on_failure = FailureMode::kDeny}));
//   limiter.CheckAsync({.descriptors = {{"api_key", "k1"}}}, [](Result<CheckResult> r) { … });
//
// Order of a decision: every enforced policy that applies is sent to the store in one request
// (one refusal and nothing is consumed anywhere). Then, if admitted, each shadow policy is charged
// on its own (a shadow refusal is counted and logged, never enforced); if refused, each policy
// with count_rejected is charged on its own when it has room, and shadow policies are only looked
// at (cost 0). When the store fails, each enforced policy follows its failure mode: allow
// (admitted, degraded), deny (Outcome::kUnavailable), local (decided in `local_store` with the
// limits divided by the instance count, all local policies together, all-or-nothing). The switch
// into and out of failure is logged once, not per request; shadow refusals are logged at most
// once per policy per second, with the count of lines held back.
//
// Errors (Result) are the caller's fault only — bad descriptors, bad cost — and consume nothing.
// Store failures are never errors here: they become decisions by failure mode.
//
// Thread-safety: every method may be called from any thread. SetPolicies swaps the PolicySet
// atomically; a decision uses the set it started with from beginning to end.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "caudal/clock.h"
#include "caudal/decision.h"
#include "caudal/log.h"
#include "caudal/metrics.h"
#include "caudal/policy.h"
#include "caudal/store.h"

namespace caudal {

struct Descriptor {
  std::string name;
  std::string value;
};
using Descriptors = std::vector<Descriptor>;

inline constexpr size_t kMaxDescriptors = 32;
inline constexpr size_t kMaxDescriptorValueLength = 256;

struct CheckRequest {
  // 1..kMaxDescriptors, unique names; values 1..kMaxDescriptorValueLength bytes; `ip`, when
  // present, must be an IPv4 or IPv6 address.
  Descriptors descriptors;
  std::optional<int64_t> cost;  // unset: each policy's default cost
};

enum class DecidedBy : uint8_t {
  kStore,
  kLocal,       // the store failed; this instance's local fallback decided
  kFailOpen,    // the store failed; admitted without a decision
  kFailClosed,  // the store failed; refused with 503
};
std::string_view DecidedByName(DecidedBy d);

struct PolicyResult {
  const PolicySet::Policy* policy = nullptr;  // alive as long as CheckResult::policies
  int64_t cost = 0;
  std::vector<Decision> limits;  // one per limit; empty when kFailOpen / kFailClosed
  bool allowed = true;           // the policy's own verdict (a shadow policy's too)
  DecidedBy decided_by = DecidedBy::kStore;

  // The limit with the smallest share of its capacity left (refused ones first); -1 when none.
  int Tightest() const;
};

enum class Outcome : uint8_t {
  kAllowed,
  kDenied,       // over a limit: 429
  kUnavailable,  // the store failed and a policy fails closed: 503
};
std::string_view OutcomeName(Outcome o);

struct CheckResult {
  std::shared_ptr<const PolicySet> policies;  // the set decided against
  Outcome outcome = Outcome::kAllowed;
  bool degraded = false;              // some policy was decided by a failure mode
  std::vector<PolicyResult> results;  // applicable policies, in config order
  // kDenied: the least wait after which the same request could pass (max over refused limits).
  Micros retry_after{0};

  bool allowed() const { return outcome == Outcome::kAllowed; }
  // Enforced policies that refused (over limit or failing closed).
  std::vector<const PolicyResult*> Refused() const;
  // The policy result and limit closest to its limit, for the RateLimit headers; null if none.
  const PolicyResult* ClosestToLimit(int* limit_index) const;
};

using CheckCallback = std::function<void(Result<CheckResult>)>;

struct LimiterOptions {
  Store* local_store = nullptr;  // required when any policy may fail over to `local`
  Metrics* metrics = nullptr;    // optional
  const Logger* log = nullptr;   // optional
};

class LogThrottle;

class Limiter {
 public:
  Limiter(Store& store, const Clock& clock, LimiterOptions options);
  ~Limiter();
  Limiter(const Limiter&) = delete;
  Limiter& operator=(const Limiter&) = delete;

  // kInvalidArgument when `set` may fail over to `local` and no local store was given.
  Status SetPolicies(std::shared_ptr<const PolicySet> set);
  std::shared_ptr<const PolicySet> policies() const;

  // `done` runs exactly once, inline or on a store thread; it must not block.
  void CheckAsync(CheckRequest request, CheckCallback done);
  // Blocking form. Must not be called from a store callback.
  Result<CheckResult> Check(CheckRequest request);

  // True while the store is failing (between the logged switch in and out).
  bool degraded() const { return degraded_.load(std::memory_order_acquire); }
  Store& store() { return store_; }

 private:
  struct Snapshot;
  class Operation;
  friend class Operation;

  void NoteStoreHealth(const Status& s, const PolicySet& set);

  Store& store_;
  const Clock& clock_;
  LimiterOptions options_;
  std::atomic<std::shared_ptr<const Snapshot>> snapshot_;
  std::atomic<bool> degraded_{false};
  std::unique_ptr<LogThrottle> shadow_log_;  // one shadow-refusal line per policy per second
};

}  // namespace caudal
