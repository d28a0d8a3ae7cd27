// Store: where rate-limit state lives, and the one place a decision becomes atomic.
//
// One verb per operation, each with its own request and result: Decide (consume, refund and
// charge entries, all-or-nothing), GiveBack (a lease's unspent units), Release (a concurrency
// hold), Settle (a reservation), Share (a consumer's share of a capacity's refill). Each call is
// one atomic step at the store's own current time — the MemoryStore's injected Clock, Redis's TIME
// for the Redis stores — and answers one Decision per entry. Each verb's contract is beside it
// below.
//
// Keys name state. A key must always be used with the same Limit; callers (the engine) build
// keys that include the policy and the limit, so a changed limit gets a fresh key. A call names
// each key once.
//
// A grouped key, "#<member>#<group>", names the member <member> of group <group>: the state of a
// compact algorithm (StateShape::kCompact, algorithms/algorithm.h) that a store may keep in one
// record with the group's other members, so that a decision on several reads and writes it once.
// The Redis stores do (one value per group, docs/stores.md); the memory store keeps each key
// apart. <member> is text without '#'; <group> holds a hash tag, which puts every member in
// one Redis Cluster slot. A group's members are told apart by a 52-bit hash of <member>.
//
// Errors, every verb: kInvalidArgument for an empty key, a key over kMaxKeyLength, a key twice
// in one call, a key starting with '#' that is no grouped key or names no compact algorithm's
// state (or a native count's, or a share's), a cost or units < 0 or > kMaxCost, no entry or more
// than kMaxEntriesPerRequest, a null limit, or an entry its algorithm cannot take (each verb says
// which); kUnavailable / kDeadlineExceeded (the store cannot answer in time); kResourceExhausted (a
// bounded table is full). A refused call changes nothing.
//
// Callbacks: `done` runs exactly once, possibly inline before the verb returns, possibly on a
// store thread; it must not block. The entries and what they point to need stay valid only until
// the verb returns. The blocking forms must not be called from a store callback.
//
// Implementing a store: every verb is encoded, in one place (store.cc), as one batch of the
// store's internal encoding (store/batch.h, private), which a store or a decorator implements
// through DecideBatchAsync (and, optionally, a faster blocking DecideBatch).
//
// Thread-safety: every Store is safe to call from any number of threads at once.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "caudal/algorithms/fairness.h"
#include "caudal/algorithms/limit.h"
#include "caudal/common/clock.h"
#include "caudal/common/status.h"

namespace caudal {

// Bounds on one call, checked by every store (kInvalidArgument beyond them).
inline constexpr size_t kMaxEntriesPerRequest = 64;
inline constexpr size_t kMaxKeyLength = 512;
// Costs above the largest capacity can never pass anything; refusing them keeps sums exact.
inline constexpr int64_t kMaxCost = kMaxCapacity;

// A concurrency hold's id: 104 random bits, as two words below 2^52 each, so that the Redis
// script (in doubles) keeps them exactly. Whoever knows it can release the hold: a caller makes
// it unguessable (engine/hold.h).
struct HoldId {
  int64_t hi = 0;
  int64_t lo = 0;
  friend bool operator==(const HoldId&, const HoldId&) = default;
};
inline constexpr int64_t kHoldIdWordLimit = int64_t{1} << 52;  // each word is below it

// A reservation's id: as a hold's, two words below kHoldIdWordLimit, unguessable.
struct ReservationId {
  int64_t hi = 0;
  int64_t lo = 0;
  friend bool operator==(const ReservationId&, const ReservationId&) = default;
};

// What an unsettled reservation does at its expiry.
enum class ExpiryOutcome : uint8_t {
  kKeep,      // its estimate stays consumed
  kGiveBack,  // its estimate comes back, what still counts of it (as a GiveBack)
};

// How a key's reservations live: its policy's `reservations`.
struct ReservationTerms {
  Micros ttl = std::chrono::seconds(60);  // from its reserve until the reservation expires
  ExpiryOutcome on_expiry = ExpiryOutcome::kKeep;
  // Open reservations a key holds at most; it keeps as many settled ones (to answer a repeated
  // settle) and as many open ones of cost 0 (which take no slot), forgetting the earliest to
  // expire first.
  int64_t max_open = 1000;
  friend bool operator==(const ReservationTerms&, const ReservationTerms&) = default;
};
inline constexpr Micros kMinReservationTtl = std::chrono::milliseconds(1);
inline constexpr Micros kMaxReservationTtl = std::chrono::hours(24);
inline constexpr int64_t kMaxOpenReservations = 10'000;

// How a key leases, for a lease decorator above the store (caudal/decorators/lease_terms.h); the
// stores ignore it.
struct LeaseTerms;
struct ShareOf;

// Every entry of a decision may carry its key's reservation terms (`reservations`): the key's
// unsettled reservations that expired by then are first applied by them (ExpiryOutcome); null:
// they are left for a later entry that carries them (the engine gives every entry of a policy
// that reserves its policy's terms). `lease_terms` is for a lease decorator; null: its default.

// Decide `cost` units, consumed only if the whole decision is allowed (cost 0 is a peek: report,
// consume nothing). On a concurrency limit, only a peek (its slots are taken by a HoldEntry).
struct ConsumeEntry {
  std::string_view key;
  const Limit* limit = nullptr;
  int64_t cost = 1;
  // Also take up to `lease` more units, as many as fit at that moment, in the same atomic step
  // when the decision is allowed (Decision::leased, at Decision::leased_at). A lease of cost 0 is
  // a renewal: a peek that takes what fits. Only algorithms with SupportsLease lease
  // (token_bucket, gcra, fixed_window).
  int64_t lease = 0;
  const ReservationTerms* reservations = nullptr;
  const LeaseTerms* lease_terms = nullptr;
  // A capacity shared among identities: decided by the lease decorator from the identity's share
  // (caudal/decorators/lease_terms.h); a store refuses it.
  const ShareOf* share_of = nullptr;
};

// Take one slot of a concurrency limit (algorithms/concurrency.h) under `hold` when the decision
// is allowed, expiring the limit's `hold` after the store's time. Its slot comes back by Release,
// or by itself at its expiry. Decided as a consume of 1 unit.
struct HoldEntry {
  std::string_view key;
  const Limit* limit = nullptr;
  HoldId hold = {};
};

// Open the reservation `id` (on an algorithm with SupportsReserve), by `terms`: `cost` is an
// estimate, decided as a consume's; admitted, the key records the reservation, expiring
// `terms.ttl` after the store's time (Settle ends it). A key holds at most `terms.max_open` open
// reservations: past them the reserve is refused (Decision::reservation kFull, retry_after until
// the earliest expires). A reserve of cost 0 consumes nothing and takes no open slot (a key keeps
// at most `max_open` of those besides, forgetting the one that expires first); it is refused on a
// state in debt or overdrawn, as a charge's peek, so that only reservations opened out of debt
// add to a debt.
struct ReserveEntry {
  std::string_view key;
  const Limit* limit = nullptr;
  int64_t cost = 1;
  ReservationId id = {};
  ReservationTerms terms = {};
};

// Give back up to `cost` units a past decision consumed, never past a fresh state. Never
// refused, and applied whatever the decision's other entries decide: tying it to an unrelated
// limit's refusal would lose units that were really returned. Not on a concurrency limit (its
// slots come back by Release).
struct RefundEntry {
  std::string_view key;
  const Limit* limit = nullptr;
  int64_t cost = 1;
  // Counted natively (see `native` below): takes units off the window's counter, never below 0.
  bool native = false;
  // Forget the key's reservations, open and settled, in the same atomic step (an identity's
  // reset): none gives anything back at its expiry, and a Settle of any of them finds none.
  // Never natively.
  bool forget_reservations = false;
  const ReservationTerms* reservations = nullptr;
  const LeaseTerms* lease_terms = nullptr;
};

// envoyproxy/ratelimit's INCRBY: count `cost` whatever the verdict, so a refused hit still uses
// the limit up (and may overdraw it: a fixed window's count past its limit until the window ends,
// a bucket's tokens into debt, up to MaxDebt; Charge in algorithms/compact_state.h). Its verdict
// says whether the cost fitted (a peek, cost 0, is refused on a state in debt or overdrawn) and
// counts in `allowed` as a consume's (a charge that does not fit keeps the decision's consumes
// from consuming), but the charge itself is applied whatever the decision. Only algorithms with
// SupportsCharge (token_bucket, gcra, fixed_window).
//
// `native` (a fixed_window's charge or refund): envoyproxy/ratelimit's own commands, INCRBY on a
// counter of the key's current window and its expiry, in one transaction, with no script, where
// the store has them (RedisStore, RedisSentinelStore; elsewhere an ordinary charge). The window
// is the store's: an estimate of its clock from the TIME each such call carries, so a hit decided
// within that estimate's error of a window's start may count in the window before
// (docs/algorithms.md, "Native counts"). A native count's state is that counter, not the script's:
// a key counted natively must always be, and a decision that counts natively holds native charges
// and refunds only, none leasing.
struct ChargeEntry {
  std::string_view key;
  const Limit* limit = nullptr;
  int64_t cost = 1;
  bool native = false;
  const ReservationTerms* reservations = nullptr;
  const LeaseTerms* lease_terms = nullptr;
};

struct DecideRequest {
  std::span<const ConsumeEntry> consumes = {};
  std::span<const HoldEntry> holds = {};
  std::span<const ReserveEntry> reserves = {};
  std::span<const RefundEntry> refunds = {};
  std::span<const ChargeEntry> charges = {};

  size_t size() const {
    return consumes.size() + holds.size() + reserves.size() + refunds.size() + charges.size();
  }
};

// What a Share call says of each consumer's share (store.h, ShareEntry, below).
struct ShareState {
  int64_t allocation = 0;    // units per rate period allotted to this consumer
  int64_t consumers = 0;     // the key's live consumers, this one included
  int64_t demand_total = 0;  // their demands' sum
  friend bool operator==(const ShareState&, const ShareState&) = default;
};

struct DecideResponse {
  // Every consume, hold, reserve and charge fitted, and the consumes, holds and reserves took
  // theirs.
  bool allowed = false;
  // One per entry: the consumes', holds', reserves', refunds', then charges', each in request
  // order. When the decision was refused, entries that would have fitted report their state
  // without the consumption (remaining as before); a refund or a charge reports the state after
  // it.
  std::vector<Decision> decisions;
  // A Share call's, one per entry (store/batch.h); empty for any other.
  std::vector<ShareState> shares = {};
};

// Give back up to `units` unspent units of the lease `grant`, and only those that still count,
// as an undo does (a unit counted in a window that has passed, or absorbed by a bucket that has
// refilled since, stays consumed): never leaves the state fuller than if they had never been
// leased. Never refused.
struct LeaseGrant {
  Micros at{0};           // the grant's Decision::leased_at
  Micros reset_after{0};  // the grant's Decision::reset_after
};
struct GiveBackEntry {
  std::string_view key;
  const Limit* limit = nullptr;
  int64_t units = 0;
  LeaseGrant grant;
};
struct GiveBackResponse {
  std::vector<Decision> decisions;  // the state after, one per entry
};

// Free the slot the concurrency hold `hold` took on a key (a concurrency limit's, the same limit
// it was taken with). Never refused; Decision::released says whether the hold was live.
struct ReleaseEntry {
  std::string_view key;
  const Limit* limit = nullptr;
  HoldId hold;
};
struct ReleaseResponse {
  std::vector<Decision> decisions;  // one per entry
};

// Settle the reservation `id` at the actual `cost` (on an algorithm with SupportsReserve; its
// key's `terms`). Less than the estimate gives the difference back as a GiveBack does (only what
// still counts, the reservation's decision being the grant); more overdraws the excess into debt
// (Overdraw in algorithms/compact_state.h), so later decisions wait until the long-run rate is
// met, charging at most the limit's capacity above the estimate (the rest is forgiven;
// Decision::overrun reports all of it). The settled reservation keeps its cost and its decision
// until its expiry: a settle of the same cost again answers that decision (Decision::reservation
// kRepeated) and changes nothing, another cost kConflict, no live reservation kUnknown. An
// unsettled one keeps its estimate, or gives it back, by its terms' on_expiry.
struct SettleEntry {
  std::string_view key;
  const Limit* limit = nullptr;
  int64_t cost = 0;
  ReservationId id;
  ReservationTerms terms;
};
struct SettleResponse {
  std::vector<Decision> decisions;  // one per entry (Decision::reservation, overrun)
};

// Take this consumer's share of a capacity's refill (one step at the store's time `now`):
//  1. the key's consumers whose expiry is before `now` are forgotten; this one is recorded with
//     its group, demand and weight (a call with a group sets the group's weight for all its
//     members), expiring at now + 2·ttl; a new one starts as if it last took at now − ttl/2;
//  2. the limit's refill, rate count n per rate period p as written (Limit::rate), is divided
//     among the live consumers, in the order they first called, by `fairness` (AllocateShares,
//     src/algorithms/share.h: the allocations add up to n exactly); another consumer whose last
//     call is more than 3/4 of this call's ttl ago counts with demand 0 (it stopped renewing);
//  3. this consumer accrues its allocation over min(now − its last call, ttl) (AccrueShare, its
//     fraction of a unit carried; a new consumer, no more than its demand: its first grant is at
//     most half a ttl of what it asked for), and is granted as many of those units as fit in the
//     key's state now, taken as a lease renewal's are (a ConsumeEntry of cost 0 and that lease), so
//     every granted unit was consumed in the store: units accrued that do not fit are dropped.
// A key holds at most kMaxShareConsumers live consumers: a new one beyond them is refused
// (kResourceExhausted, nothing changed) until one expires, so a flood of names holds a key's
// table for 2·ttl at most. The consumers live beside the key's state until they expire: on Redis
// in a hash under the state's key + ":sh" (same slot), expiring with its last consumer; in the
// memory store in a table per key, for at most max_keys keys (then kResourceExhausted). Each call
// allocates by its own fairness: a key's consumers are meant to share one. Errors (besides every
// verb's): an algorithm without SupportsLease, a consumer of 0 or more than 128 bytes, a group of
// more than 128, a demand < 0 or > kMaxCost, a weight < 1 or > kMaxShareWeight, a ttl out of
// [1ms, 1h], or a limit refilling 2^52 units or more in a ttl. On Redis Cluster a batch whose keys
// span slots is decided slot by slot: refused kResourceExhausted, the other slots' grants are taken
// and lost (never more admitted); one key per call avoids it.
inline constexpr size_t kMaxShareNameLength = 128;
inline constexpr Micros kMinShareTtl = std::chrono::milliseconds(1);
inline constexpr Micros kMaxShareTtl = std::chrono::hours(1);
struct ShareEntry {
  std::string_view key;
  const Limit* limit = nullptr;    // token_bucket, gcra or fixed_window
  std::string_view consumer = {};  // who holds the share, e.g. "identity@instance"
  std::string_view group = {};     // its group for two-level max-min; "": its own
  int64_t demand = 0;              // the units per rate period it wants (measured)
  int64_t weight = 1;              // its group's weight
  Micros ttl = std::chrono::seconds(1);
  Fairness fairness = Fairness::kMaxMin;
};
struct ShareResponse {
  // The state after, one per entry: `leased` the units granted, at `leased_at` (a GiveBack of
  // that grant returns what is unspent).
  std::vector<Decision> decisions;
  std::vector<ShareState> shares = {};  // one per entry
};

template <typename Response>
using StoreCallback = std::function<void(Result<Response>)>;
using DecideCallback = StoreCallback<DecideResponse>;

struct EntryRef;  // the stores' internal encoding of a call (store/batch.h)

// True when `key` holds a Redis Cluster hash tag: a '{' followed later by '}' with something
// between (a grouped key's group must).
bool HasHashTag(std::string_view key);

// A grouped key read back: views into it. Nullopt when `key` is not one (see above).
struct GroupedKey {
  std::string_view member;
  std::string_view group;
};
std::optional<GroupedKey> ReadGroupedKey(std::string_view key);

class Store {
 public:
  virtual ~Store() = default;

  // Decides the request's entries all-or-nothing: if a consume, a hold, a reserve or a charge does
  // not fit, none of the consumes, holds and reserves takes anything; refunds and charges apply
  // whatever the verdict.
  // Errors (besides every verb's): a lease < 0 or > kMaxCost, or on an algorithm without
  // SupportsLease; a charge without SupportsCharge; a concurrency limit anywhere but a hold or a
  // consume's peek, a hold on any other limit, a hold id's word >= kHoldIdWordLimit; a reserve on
  // an algorithm without SupportsReserve, its terms out of range; native counts beside an entry
  // that is not a native refund or charge, or not on a fixed_window; forget_reservations with
  // native.
  void DecideAsync(const DecideRequest& request, DecideCallback done);
  Result<DecideResponse> Decide(const DecideRequest& request);

  // Gives back lease units (GiveBackEntry). Errors: an algorithm without SupportsLease.
  void GiveBackAsync(std::span<const GiveBackEntry> entries, StoreCallback<GiveBackResponse> done);
  Result<GiveBackResponse> GiveBack(std::span<const GiveBackEntry> entries);

  // Releases concurrency holds (ReleaseEntry). Errors: a limit that is not a concurrency limit.
  void ReleaseAsync(std::span<const ReleaseEntry> entries, StoreCallback<ReleaseResponse> done);
  Result<ReleaseResponse> Release(std::span<const ReleaseEntry> entries);

  // Settles reservations (SettleEntry). Errors: an algorithm without SupportsReserve, terms out
  // of range.
  void SettleAsync(std::span<const SettleEntry> entries, StoreCallback<SettleResponse> done);
  Result<SettleResponse> Settle(std::span<const SettleEntry> entries);

  // Takes consumers' shares (ShareEntry).
  void ShareAsync(std::span<const ShareEntry> entries, StoreCallback<ShareResponse> done);
  Result<ShareResponse> Share(std::span<const ShareEntry> entries);

  // Ok when the store can decide right now; used for readiness. May block up to the store's
  // own deadline.
  virtual Status Ping() = 0;

  // "memory", "redis".
  virtual std::string_view Name() const = 0;

 protected:
  // One call in the stores' internal encoding (store/batch.h, which states it); every verb above
  // arrives here. A decorator forwards to another store with caudal::DecideBatchAsync.
  virtual void DecideBatchAsync(std::span<const EntryRef> entries, DecideCallback done) = 0;
  // Blocking form; by default DecideBatchAsync and a wait.
  virtual Result<DecideResponse> DecideBatch(std::span<const EntryRef> entries);

  friend void DecideBatchAsync(Store& store, std::span<const EntryRef> entries,
                               DecideCallback done);
  friend Result<DecideResponse> DecideBatch(Store& store, std::span<const EntryRef> entries);
};

}  // namespace caudal
