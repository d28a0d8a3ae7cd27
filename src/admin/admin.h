// Admin: the admin API's operations (docs/http-api.md, "Admin API") over an Engine and the
// OverrideStore beside its store: runtime overrides set, listed and deleted, and an identity's
// state read without consuming or reset to fresh.
//
//   Admin admin(engine, *overrides, clock, {.log = &log, .metrics = &metrics});
//   admin.Start();  // polls the store's overrides once a second (AdminOptions::poll)
//   admin.Submit([&] { auto r = admin.SetOverride(target, limits, std::chrono::hours(1), who); });
//
// Every instance polls the OverrideStore's version and, when it changed (or an override
// expired: the thread wakes at the first end), lists the overrides again and installs them in its
// Engine, which also forgets its over-limit cache; the instance that made a change applies it at
// once. A reset touches the version, so that every instance forgets the refusals it remembered.
// A store that announces changes (OverrideStore::Watch: Redis Pub/Sub) wakes the thread to read
// at once, by the same path as the poll: an announcement of the version installed already reads
// nothing, announcements that come together are one read, at most one per
// AdminOptions::min_reread; a resubscription reads too (some may have been missed). The poll
// stays, for what an announcement lost. Each change is logged once
// (who, what: the identity as the Refusals show identities) and counted in
// caudal_admin_changes_total. An error is a Status with a reason (admin_reason, below): bad input
// (kInvalidArgument, kNotFound, kResourceExhausted) changes nothing; kUnavailable is the store's.
//
// The operations block on the store (up to its deadline): run them through Submit, on the
// admin's own thread, never on an I/O thread or in a store callback.
//
// Thread-safety: every method may be called from any thread.
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "caudal/common/clock.h"
#include "caudal/engine/engine.h"
#include "caudal/engine/runtime_overrides.h"
#include "store/override_store.h"

namespace caudal {

class Refusals;

// An identity's share of a shared capacity at this instance (LeaseStore::HeldShare).
struct HeldShare {
  int64_t allocation = 0;  // units per rate period, as last allotted
  int64_t held = 0;        // units held unspent
};

// An identity's buckets on this instance's RLQS streams (RlqsService::Held).
struct HeldRlqs {
  int64_t buckets = 0;
  double assigned_per_second = 0;  // the active token buckets' rates
  uint64_t allowed = 0;
  uint64_t denied = 0;
};

struct AdminOptions {
  const Logger* log = nullptr;         // optional
  Metrics* metrics = nullptr;          // optional
  const Refusals* refusals = nullptr;  // shows identities in the log lines; optional (hash)
  size_t max_overrides = kMaxRuntimeOverrides;
  Micros poll = std::chrono::seconds(1);
  // Reads an announcement prompts are at least this far apart.
  Micros min_reread = std::chrono::milliseconds(10);
  size_t max_queued = 64;  // Submit refuses beyond
  // Called on the admin's thread after a change of the overrides or a reset took effect here
  // (the Service ends the instance's leases, so none keeps admitting from units taken before).
  std::function<void()> on_change = nullptr;
  // What this instance holds of an identity's share of a shared capacity (its key, the encoded
  // identity), for the state; null or nullopt: none.
  std::function<std::optional<HeldShare>(std::string_view key, std::string_view identity)>
      held_share = nullptr;
  // The identity's RLQS buckets at this instance (policy, identity descriptors), for the state;
  // null or nullopt: none.
  std::function<std::optional<HeldRlqs>(std::string_view policy,
                                        const std::vector<std::pair<std::string, std::string>>&)>
      held_rlqs = nullptr;
};

// What an admin request names: a policy and the identity, as the query's parameters (decoded,
// in the order given).
struct AdminTarget {
  std::string policy;
  std::vector<std::pair<std::string, std::string>> params;
};

// The reasons (Status::reason()) of the operations' errors, by their code.
namespace admin_reason {
// kInvalidArgument: an identity field not given, a parameter that is none, one given twice, a
// value that cannot be a descriptor's, limits the config would refuse (or below the policy's cost),
// a weight the config would refuse.
inline constexpr std::string_view kMissingParameter = "missing_parameter";
inline constexpr std::string_view kUnknownParameter = "unknown_parameter";
inline constexpr std::string_view kDuplicateParameter = "duplicate_parameter";
inline constexpr std::string_view kInvalidParameter = "invalid_parameter";
inline constexpr std::string_view kInvalidLimits = "invalid_limits";
inline constexpr std::string_view kInvalidWeight =
    "invalid_weight";  // or one of a policy without share
// kNotFound: neither a policy nor an Envoy rule's stat key; no override for the identity.
inline constexpr std::string_view kUnknownPolicy = "unknown_policy";
inline constexpr std::string_view kNoOverride = "no_override";
// kResourceExhausted: max_overrides are held. kUnavailable: the store did not answer.
inline constexpr std::string_view kTooManyOverrides = "too_many_overrides";
inline constexpr std::string_view kStoreUnavailable = "store_unavailable";
}  // namespace admin_reason

struct OverrideView {
  RuntimeOverride spec;
  std::optional<Micros> expires_in;  // from the store's now
};

struct LimitState {
  Limit limit;
  int64_t remaining = 0;
  Micros reset_after{0};
  Micros retry_after{0};  // for a request of cost 1; 0 when it would be admitted now
  // A capacity shared among identities (a policy with `share`): the identity's share at this
  // instance (units per rate period, as last allotted) and the units it holds of it here; -1 and
  // 0 when this instance holds none. The rest above is the capacity's, all identities'.
  bool shared = false;
  int64_t share = -1;
  int64_t share_held = 0;
};

struct StateView {
  std::string policy;  // a policy's name, or an Envoy rule's stat key
  OverrideKind kind = OverrideKind::kPolicy;
  std::vector<std::pair<std::string, std::string>> identity;
  std::string limits_from;  // "runtime_override", "overrides[i]", "limits" (an Envoy rule's own)
  std::vector<LimitState> limits;
  std::optional<HeldRlqs> rlqs = std::nullopt;  // the identity's RLQS buckets here, if any
};

class Admin {
 public:
  struct Resolved;  // a target found in the engine's snapshot (admin.cc)
  Admin(Engine& engine, OverrideStore& overrides, const Clock& clock, AdminOptions options);
  ~Admin();  // stops the thread; work still queued is dropped
  Admin(const Admin&) = delete;
  Admin& operator=(const Admin&) = delete;

  // Starts the thread that runs submitted work and polls the store, and watches the store's
  // announcements.
  void Start();
  // Runs `work` on the admin's thread; false (nothing runs) when max_queued are waiting.
  bool Submit(std::function<void()> work);
  // One poll, now: reads the version and, if it changed or an override ended, the overrides.
  Status Sync();

  // Sets the identity's limits, or, for a policy with share, its weight (ValidateOverrideTerms:
  // kInvalidLimits for limits it would refuse, kInvalidWeight for a weight).
  Result<std::pair<OverrideView, bool>> SetOverride(const AdminTarget& target,
                                                    std::vector<Limit> limits,
                                                    std::optional<Micros> expires_in,
                                                    std::string_view who,
                                                    std::optional<int64_t> weight = std::nullopt);
  Result<std::vector<OverrideView>> ListOverrides(std::string_view policy);
  // Whether `policy` names a policy or (not being one) an Envoy rule's stat key.
  OverrideKind KindOf(std::string_view policy) const;
  Result<OverrideView> DeleteOverride(const AdminTarget& target, std::string_view who);
  // Consumes nothing and writes nothing.
  Result<StateView> GetState(const AdminTarget& target);
  Result<StateView> ResetState(const AdminTarget& target, std::string_view who);

 private:
  Result<Resolved> Resolve(const AdminTarget& target) const;
  Result<Resolved> ResolveRule(const AdminTarget& target, Resolved r) const;
  Result<StateView> ReadState(const Resolved& r);
  Result<OverrideList> SyncLocked(bool force);
  void Loop();
  // The store's announcements (any thread, never blocking): a read wanted, of `version` if known.
  void Announced(std::optional<uint64_t> version, bool resubscribed);
  // The read an announcement prompted, on the admin's thread.
  void Reread(std::optional<uint64_t> version);
  void FeedLost(const Status& why);
  void Changed(std::string_view op, std::string message) const;
  // An identity as the log shows identities (Refusals::Display: a hash unless configured).
  std::string Shown(const std::vector<std::pair<std::string, std::string>>& identity) const;

  Engine& engine_;
  OverrideStore& overrides_;
  const Clock& clock_;
  AdminOptions options_;

  std::mutex sync_mu_;                // one sync at a time
  uint64_t version_ = 0;              // guarded by sync_mu_: the version last installed
  bool synced_ = false;               // guarded by sync_mu_
  std::optional<Nanos> next_expiry_;  // guarded by sync_mu_: monotonic

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> queue_;  // guarded by mu_
  bool stop_ = false;                        // guarded by mu_
  bool reread_ = false;                      // guarded by mu_: an announcement came
  std::optional<uint64_t> reread_version_;   // guarded by mu_: the last one's version, if any
  uint64_t announcements_ = 0;               // guarded by mu_: wakes the thread's wait
  std::atomic<bool> feed_down_{false};       // the loss was logged (once per outage)
  std::unique_ptr<OverrideWatch> watch_;     // destroyed first: no announcement after
  std::thread thread_;
};

}  // namespace caudal
