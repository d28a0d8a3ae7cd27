// LeaseStore: exact leases in front of a remote store, so that a hot key is decided at local
// speed without ever admitting a unit the store did not consume first (docs/algorithms.md,
// Leases, states and proves the bounds).
//
// A key this instance sees again within `ttl` asks, in the same store call that decides its
// request, for a lease: the store consumes the request's cost and then up to L more units, as
// many as fit (ConsumeEntry::lease). Later requests whose every entry is covered by live leases are
// answered here, in memory; any other request goes to the store as it would without leases (and
// may ask for one). How L is sized (the key's demand, within its instance's share of
// max_share), when a lease is renewed, when a key is refused here as dry and when a lease
// expires: docs/algorithms.md, Leases, the rules' one statement. Unspent units of an ended lease
// are given back (Store::GiveBack: only what still counts), batched, by ReturnEnded() — a
// thread when return_interval is set. A refund of a key with live leases goes back into them
// (never beyond what they were granted).
//
// A consume of a capacity shared among identities (ConsumeEntry::share_of) is decided here alone,
// from the identity's share of it (LeaseTable's identity shares, docs/algorithms.md, "Shares
// among identities"), the request's other entries in the store once those are covered; the first
// request of an identity waits for its first share.
//
// Above the limit, a bucket key the store found dry or low takes shares instead (LeaseTable's share
// mode, docs/algorithms.md, Leases): about every ttl/2 this instance asks the store for its part
// of the refill by its demand (Store::Share, as consumer `consumer`), spends the units granted
// here and refuses here what they do not cover.
//
// What a decision from a lease reports: verdict kAllowed (a dry key's refusal: kDenied, nothing
// spent, retry_after one round trip); remaining is the units the key's
// leases still hold here (a lower bound on what the store would admit through this instance,
// never more than the store granted); reset_after is the latest grant's, less the time since.
// A decision from the store reports remaining as the store's plus what this instance now holds
// for the key. Put it above the circuit breaker: while the store is down, leases keep being
// spent, exactly, and only requests they do not cover meet the failure mode (or, for a dry key, a
// refusal here).
//
// Thread-safety: as every Store. Store calls it makes answer into state shared with their
// callbacks, so the store may answer after the LeaseStore is gone.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "caudal/common/clock.h"
#include "caudal/decorators/lease_terms.h"
#include "caudal/store/store.h"
#include "observe/metrics.h"

namespace caudal {

struct LeaseStoreOptions {
  // The terms of entries that carry none (ConsumeEntry::lease_terms and the like); the engine
  // gives each entry its policy's or rule's.
  Nanos ttl = std::chrono::milliseconds(250);
  // The share of a limit's capacity all instances together may hold in leases, in parts per
  // million (100'000: a tenth).
  int64_t max_share_ppm = 100'000;
  // Whether entries that carry no terms lease (with the two above).
  bool lease_by_default = true;
  // Whether any entry leases; off, only shared capacities' consumes are decided here (a local
  // store's decorator, where a lease would save nothing).
  bool leases = true;
  int64_t instances = 1;     // how many instances share the store (store.instances)
  size_t max_keys = 65'536;  // keys whose demand and leases are tracked
  // Ended leases are given back this often by a thread of the store's own; 0: no thread (the
  // owner calls ReturnEnded()).
  Nanos return_interval = Nanos(0);
  Metrics* metrics = nullptr;  // the caudal_lease_* rows; null: counted apart (counts())
  // Whether bucket keys found dry or under a quarter full take shares (above); off, they keep
  // leasing units.
  bool shares = true;
  // This instance's name as a consumer of shares, unique among the instances on one store;
  // empty: a random one.
  std::string consumer = {};
};

// What a LeaseStore has done, as its rows of /metrics count it (caudal_lease_*).
struct LeaseCounts {
  uint64_t grants = 0;            // leases taken in the call deciding a request
  uint64_t renewals = 0;          // leases taken by a renewal call
  uint64_t local = 0;             // requests answered from leases
  uint64_t forwarded = 0;         // requests of keys that may lease, sent to the store
  uint64_t units_given_back = 0;  // unspent units given back
  uint64_t units_lost = 0;        // unspent units whose give-back failed
  uint64_t shares = 0;            // share renewals that granted units
};

// What the store took for an instance's leases that is neither spent nor back: what the instance
// leaves under-admitted if it crashes at this moment (docs/algorithms.md, Leases).
struct LeaseOwed {
  int64_t held = 0;    // in live leases (UnitsHeld)
  int64_t asked = 0;   // asked for in calls not answered yet (the store may grant less)
  int64_t ending = 0;  // in leases ended unspent: waiting for, or in, a give-back call
  int64_t total() const { return held + asked + ending; }
};

class LeaseStore final : public Store {
 public:
  // `inner` and `clock` (its monotonic time) must outlive the LeaseStore.
  LeaseStore(Store& inner, const Clock& clock, LeaseStoreOptions options);
  ~LeaseStore() override;  // stops the thread; gives nothing back (ReturnAll does)
  LeaseStore(const LeaseStore&) = delete;
  LeaseStore& operator=(const LeaseStore&) = delete;

  Status Ping() override { return inner_.Ping(); }
  std::string_view Name() const override { return inner_.Name(); }

  // Gives back, batched, what the leases that ended since the last call held unspent.
  void ReturnEnded();
  // Ends every lease and gives back what they held, then waits up to `wait` for the store's
  // answers (shutdown). Leases taken afterwards end as usual.
  void ReturnAll(Nanos wait);

  LeaseCounts counters() const;
  // Units held in live leases (granted, unspent). Also sets the caudal_lease_units gauge.
  int64_t UnitsHeld() const;
  LeaseOwed Owed() const;
  // What this instance holds of `identity`'s share of the shared capacity `key`
  // (ConsumeEntry::share_of): its allocation, units per rate period, and the units unspent here;
  // nullopt before its first answered share.
  struct IdentityShare {
    int64_t allocation = 0;
    int64_t held = 0;
  };
  std::optional<IdentityShare> HeldShare(std::string_view key, std::string_view identity) const;

  struct Core;

 protected:
  void DecideBatchAsync(std::span<const EntryRef> entries, DecideCallback done) override;

 private:
  Store& inner_;
  const Clock& clock_;
  const LeaseStoreOptions options_;
  std::shared_ptr<Core> core_;  // shared with the store's callbacks
  std::mutex mu_;
  std::condition_variable wake_;
  bool stopping_ = false;  // guarded by mu_
  std::thread thread_;
};

}  // namespace caudal
