// LeaseTable: the bookkeeping behind LeaseStore (decorators/lease_store.h), with no store calls,
// so every rule is tested on a manual clock.
//
// Per key (a bounded table), for entries whose terms (ConsumeEntry::lease_terms) lease: the lots
// the store granted it (each its units left, its local expiry and its grant), the demand seen at
// this instance in the last two periods of `ttl`, and whether an ask for more is in flight; a key's
// target, renewal and dryness follow docs/algorithms.md, Leases. Begin() takes a request: when
// every entry is covered by a live lot it spends from the lots (earliest expiry first) and
// answers; a dry key's request its lots cannot cover is refused, nothing spent; otherwise it says
// which entries should ask the store for a lease, and which keys need a renewal of their own.
// Lots end at their expiry, when their key is used with another limit, or all at once (TakeAll);
// what they held unspent is returned by TakeEnded() to be given back.
//
// Share mode (docs/algorithms.md, Leases, "Above the limit: shares"): a bucket key the store
// found dry or under a quarter full, with a store a measured round trip away, renews by taking this
// instance's share of the refill (Store::Share) about every ttl/2 instead of leasing units;
// requests its lots cannot cover are refused here while those renewals are answered (the last one
// answered, the one in flight sent less than three round trips or ttl/8 ago). It leaves share mode
// when a grant finds the bucket half full.
//
// Identity shares (BeginShared): a consume of a capacity shared among identities
// (EntryRef::share_of) is decided here alone, from its identity's entry (the capacity's key and the
// identity), which is always in share mode: its renewals take the identity's share as consumer
// "<identity>@<instance>" of group <identity>, with its weight, its policy's fairness and the
// share's window as ttl, every half window (from a quarter once low). A request its grants cannot
// cover is refused here while those renewals are answered, waits for the renewal in flight when
// the identity has none answered yet (or its last is a window old), and is the store's failure
// otherwise (docs/algorithms.md, "Shares among identities").
//
// Thread-safety: every method may be called from any thread; a mutex per shard.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "caudal/common/clock.h"
#include "caudal/decorators/lease_terms.h"
#include "caudal/store/store.h"
#include "store/batch.h"

namespace caudal::engine_internal {

inline constexpr size_t kMaxLotsPerKey = 4;
// A renewal costs a store call of its own: it is sent only for this many units or more.
inline constexpr int64_t kMinRenewal = 2;

struct LeaseTableOptions {
  // For entries without terms of their own (ConsumeEntry::lease_terms). Every instance together
  // holds at most max_share_ppm / 10^6 of a limit's capacity: each capacity · max_share_ppm / (10^6
  // · instances), rounded down.
  LeaseTerms defaults{.enabled = true};
  int64_t instances = 1;
  size_t max_keys = 65'536;
  // Whether dry bucket keys take shares (see above); off, they keep leasing units.
  bool shares = true;
};

// Units of a lot that ended unspent, to be given back (Store::GiveBack).
struct EndedLot {
  std::string key;
  Limit limit;
  int64_t units = 0;
  LeaseGrant grant;
};

// A lease to ask the store for, for one entry of a request or as a renewal of its own.
struct LeaseAsk {
  size_t entry = 0;  // the entry of the request (renewals: unused)
  std::string key;   // the table's key
  Limit limit;
  int64_t units = 0;
  // A share renewal (Store::Share, renewals only): this instance's demand, units per rate period
  // of `limit`, over a ttl of `ttl`; `units` is the most it can grant.
  bool share = false;
  int64_t demand = 0;
  Nanos ttl{0};
  // An identity's share (BeginShared): the capacity's key in the store, the group the consumer
  // takes its share in (its consumer name: "<group>@<instance>"), its weight and fairness. Empty
  // store_key: `key` is the store's too.
  std::string store_key = {};
  std::string group = {};
  int64_t weight = 1;
  Fairness fairness = Fairness::kMaxMin;

  std::string_view StoreKey() const { return store_key.empty() ? key : store_key; }
};

struct LeasePlan {
  bool local = false;               // `decisions` answer the request: every entry was covered,
  bool allowed = true;              // or (not allowed) one was dry (see Begin)
  std::vector<Decision> decisions;  // local: one per entry
  std::vector<LeaseAsk> asks;       // not local: leases the forwarded entries ask for
  std::vector<LeaseAsk> renewals;   // renewals to send now, each as a request of its own
};

// What BeginShared decided for a request's consumes of shared capacities.
struct SharePlan {
  enum class Kind : uint8_t {
    kAllowed,      // every entry was covered, and spent (`decisions`)
    kDenied,       // an entry's share does not cover it: nothing spent (`decisions`)
    kWait,         // `waits` wait for their renewals' answers (Await)
    kUnavailable,  // an entry has no share and its renewals fail: the store's failure
  };
  Kind kind = Kind::kAllowed;
  std::vector<Decision> decisions;  // kAllowed, kDenied: one per entry
  std::vector<LeaseAsk> renewals;   // to send now, each as a call of its own
  std::vector<size_t> waits;        // kWait: the entries waiting
};
// A request waits for at most this many others' renewals of one identity's entry at once; past
// them it is refused (kDenied): the identity asks faster than its first share can come back.
inline constexpr size_t kMaxShareWaiters = 1024;

struct LeaseTableCounts {
  int64_t held = 0;    // units in live lots (granted, unspent)
  int64_t asked = 0;   // units of the asks in flight
  int64_t ending = 0;  // units of lots ended unspent, not yet taken to be given back
  size_t keys = 0;     // keys tracked
  size_t sharing = 0;  // of them, keys in share mode
};

class LeaseTable {
 public:
  explicit LeaseTable(LeaseTableOptions options);
  ~LeaseTable();
  LeaseTable(const LeaseTable&) = delete;
  LeaseTable& operator=(const LeaseTable&) = delete;

  // The most one instance holds in leases of `limit` with a share of `share_ppm`.
  int64_t MaxHeld(const Limit& limit, int64_t share_ppm) const;

  // Takes a request at monotonic time `now` (see above). Preconditions: ValidateEntries.
  LeasePlan Begin(std::span<const EntryRef> entries, Nanos now);
  LeasePlan Begin(const DecideRequest& request, Nanos now) {
    const EncodedBatch batch(request);
    return Begin(batch.entries(), now);
  }

  // The store answered an ask for `key` sent at `sent` (monotonic): `allowed` and its decision,
  // or `decision` null when the call failed. A grant becomes a lot living until sent + ttl (a
  // fixed window's: no later than its window's end), less a margin for clock rates (see .cc).
  // Returns the units added.
  int64_t Granted(std::string_view key, const Limit& limit, Nanos sent, bool allowed,
                  const Decision* decision);

  // A share renewal for `key` (the table's) sent at `sent` was answered: `decision` and `share`
  // (null when the call failed). The grant becomes a lot as in Granted. Returns the units added,
  // and hands the requests waiting for it (BeginShared) to `woken`, to be run after.
  int64_t GrantedShare(std::string_view key, const Limit& limit, Nanos sent,
                       const Decision* decision, const ShareState* share,
                       std::vector<std::function<void()>>* woken = nullptr);

  // Decides `entries`, consumes of shared capacities (EntryRef::share_of, each an op kConsume of
  // an algorithm with SupportsLease and distinct keys), at monotonic time `now` (see above).
  // `waited`: this request already waited for a renewal (then it does not wait again, nor count
  // its units as demand again).
  SharePlan BeginShared(std::span<const EntryRef> entries, Nanos now, bool waited);
  // Runs `wake` once every entry `waits` names (of a kWait plan of `entries`) has had its renewal
  // answered (GrantedShare hands it over), or at once for those answered already.
  void Await(std::span<const EntryRef> entries, std::span<const size_t> waits,
             std::function<void()> wake);
  // Puts back what a kAllowed BeginShared of `entries` spent (the rest of its request was
  // refused), into their lots as a refund goes (what no live lot can take is lost).
  void Unspend(std::span<const EntryRef> entries);
  // The table's key of a shared capacity's entry: the capacity's key and the identity.
  static std::string SharedKey(const EntryRef& e);

  // Ends every lot past its expiry at `now`; returns what ended unspent since the last call
  // (expired, or displaced by a changed limit), and forgets idle keys.
  std::vector<EndedLot> TakeEnded(Nanos now);
  // Ends every lot now, for shutdown; returns what they held and what had ended before.
  std::vector<EndedLot> TakeAll();

  LeaseTableCounts Counts() const;

  // An identity's entry (SharedKey): its allocation as last answered and the units its lots hold;
  // nullopt when the table has no answered share for it.
  struct Held {
    int64_t allocation = 0;
    int64_t units = 0;
  };
  std::optional<Held> HeldShare(std::string_view key) const;
  // Per policy (ShareOf::policy), its identities' entries with an answered share: their
  // allocations' sum and how many.
  struct PolicyShares {
    int64_t allotted = 0;
    int64_t identities = 0;
  };
  std::map<std::string, PolicyShares> SharesByPolicy() const;

  // A store call's round trip (sent to answered, monotonic): leases are sized and renewed to
  // outlast it (see Begin). Until one is observed, or while the store answers at once, sizing
  // follows the demand seen alone.
  void ObserveRoundTrip(Nanos took);
  Nanos RoundTrip() const { return Nanos(round_trip_ns_.load(std::memory_order_relaxed)); }

  struct Shard;

 private:
  Shard& ShardOf(std::string_view key) const;
  // Makes `units` granted by `decision` a lot of `key` (or ends them at once); under the shard's
  // lock.
  int64_t Keep(Shard& shard, std::string_view key, const Limit& limit, Nanos sent, int64_t units,
               const Decision* decision);

  const LeaseTableOptions options_;
  std::unique_ptr<Shard[]> shards_;
  std::atomic<int64_t> round_trip_ns_{0};  // smoothed; racing updates may drop a sample
};

// An identity's group name among a capacity's consumers: the identity, or for one too long to
// leave room for "@<instance>" in a consumer's name, "#" and 128 bits of two FNV-1a hashes of it.
// Every consumer of one identity's share takes it (this table's, and RLQS's).
std::string ShareGroupName(std::string_view identity);

}  // namespace caudal::engine_internal
