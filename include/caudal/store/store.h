// Store: where rate-limit state lives, and the one place a decision becomes atomic.
//
// A request carries one or more entries (key, limit, cost). The store decides all of them at its
// own current time — the MemoryStore's injected Clock, Redis's TIME for the Redis store — and
// applies them all-or-nothing: if any entry is refused, no entry consumes anything. The response
// reports every entry's decision, so a caller can say which limit refused.
//
// An entry may instead be a refund (EntryOp::kRefund): it gives back up to `cost` units a past
// request consumed, never past a fresh state. A refund is never refused and is applied whatever
// the request's other entries decide: tying it to an unrelated limit's refusal would lose units
// that were really returned.
//
// An entry may also be a charge (EntryOp::kCharge): envoyproxy/ratelimit's INCRBY, which counts
// `cost` whatever the verdict, so a refused hit still uses the limit up (and may overdraw it: a
// fixed window's count past its limit until the window ends, a bucket's tokens into debt, up to
// MaxDebt; Charge in algorithms/compact_state.h). Its verdict says whether the cost
// fitted (a peek, cost 0, is refused on a state in debt or overdrawn), and counts in `allowed`
// like any consuming entry (so a charge that does not fit keeps the request's kConsume entries
// from consuming), but the charge itself is applied whatever the request decides. Only
// algorithms that can overdraw take it (SupportsCharge: token_bucket, gcra, fixed_window);
// others are refused with kInvalidArgument.
//
// An entry may ask for a lease (EntryRef::lease, kConsume only): when the whole request is
// allowed, the store consumes `cost` and then up to `lease` more units, as many as fit at that
// moment, in the same atomic step, and reports them in Decision::leased (with the grant's time,
// Decision::leased_at). A lease of cost 0 is a renewal: a peek that takes what fits. Only
// algorithms with SupportsLease take leases (token_bucket, gcra, fixed_window).
//
// A lease's unspent units go back with EntryOp::kGiveBack: up to `cost` units of the grant
// EntryRef::grant names, and only those that still count, as an undo does (a unit counted in a
// window that has passed, or absorbed by a bucket that has refilled since, stays consumed), so
// a give-back never leaves the state fuller than if the units had never been leased. A request
// that gives back holds give-backs only, and is always allowed.
//
// A charge (or a refund) may be a native count (EntryRef::native_count): envoyproxy/ratelimit's
// own commands, `INCRBY` on a counter of the key's current window and its expiry (a refund takes
// units off that counter, never below 0), in one transaction, with no script,
// where the store has them (RedisStore, RedisSentinelStore; elsewhere it is an ordinary charge).
// The window is the store's: an estimate of its clock from the `TIME` each such call carries, so
// a hit decided within that estimate's error of a window's start may count in the window before
// (docs/algorithms.md, "Native counts"). A native count's state is that counter, not the
// script's: a key counted natively must always be, and a request holds native counts only.
//
// An entry of a concurrency limit (algorithms/concurrency.h) takes one slot when the whole
// request is allowed and its cost is above 0, under the hold id EntryRef::hold names, expiring
// the limit's `hold` after the store's time; it is never a refund, a charge or a lease. Its
// slot comes back with EntryOp::kRelease of the same id (Decision::released says whether it was
// live), or by itself at its expiry. A request that releases holds releases only, and is always
// allowed.
//
// An entry may reserve (EntryOp::kReserve, on an algorithm with SupportsReserve): a consume of
// `cost`, an estimate, decided all-or-nothing with the request's other entries, which, admitted,
// also records a reservation on the key under the id EntryRef::hold, expiring
// EntryRef::reservation's ttl after the store's time. A key holds at most `max_open` open
// reservations: a reserve past them is refused (Decision::reservation kFull, retry_after until the
// earliest expires). A reserve of cost 0 consumes nothing, so it takes no open slot: a key keeps at
// most `max_open` of those besides, forgetting the one that expires first. EntryOp::kSettle with
// the same id names the actual cost: less than the estimate gives the difference back as a
// give-back does (only what still counts, the reservation's decision being the grant), more
// overdraws the excess into debt (Overdraw in algorithms/compact_state.h), so later requests
// wait until the long-run rate is met. A settle charges at most the limit's capacity above the
// estimate (the rest is forgiven; Decision::overrun reports all of it), and a reserve of 0 is
// refused on a state in debt or overdrawn, as a charge's peek, so that only reservations opened out
// of debt add to a debt. The settled reservation keeps its cost and its decision until its expiry:
// a settle of the same cost again answers that decision (kRepeated) and changes nothing, another
// cost kConflict, no live reservation kUnknown. A reservation not settled by its expiry keeps its
// estimate, or gives it back (ExpiryOutcome::kGiveBack, as a give-back at that moment), at the next
// entry on its key that carries EntryRef::reservation (the engine gives every entry of a policy
// that reserves its policy's terms). A request that settles holds settles only, and is always
// allowed. A refund with EntryRef::forget_reservations (an identity's reset) forgets the key's
// reservations, open and settled, in the same atomic step: none gives anything back at its expiry,
// and a settle of any of them finds no live one.
//
// Keys name state. A key must always be used with the same Limit; callers (the engine)
// build keys that include the policy and the limit, so a changed limit gets a fresh key.
//
// Thread-safety: every Store is safe to call from any number of threads at once.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include "caudal/algorithms/decision.h"
#include "caudal/algorithms/limit.h"
#include "caudal/common/clock.h"
#include "caudal/common/status.h"

namespace caudal {

// Bounds on one request, checked by every store (kInvalidArgument beyond them).
inline constexpr size_t kMaxEntriesPerRequest = 64;
inline constexpr size_t kMaxKeyLength = 512;
// Costs above the largest capacity can never pass anything; refusing them keeps sums exact.
inline constexpr int64_t kMaxCost = kMaxCapacity;

enum class EntryOp : uint8_t {
  kConsume,   // decide; consume `cost` if the whole request is allowed
  kRefund,    // give back up to `cost` units (see above)
  kCharge,    // consume `cost` whatever the verdict (see above)
  kGiveBack,  // give back up to `cost` unspent units of the lease `grant` (see above)
  kRelease,   // free the concurrency hold `hold` (see above)
  kReserve,   // consume `cost` as kConsume does and record the reservation `hold` (see above)
  kSettle,    // settle the reservation `hold` at the actual `cost` (see above)
};

// A concurrency hold's id: 104 random bits, as two words below 2^52 each, so that the Redis
// script (in doubles) keeps them exactly. Whoever knows it can release the hold: a caller makes
// it unguessable (caudal/engine/hold.h).
struct HoldId {
  int64_t hi = 0;
  int64_t lo = 0;
  friend bool operator==(const HoldId&, const HoldId&) = default;
};
inline constexpr int64_t kHoldIdWordLimit = int64_t{1} << 52;  // each word is below it

// A lease's grant, as its decision reported it: what a give-back needs to return only what still
// counts.
struct LeaseGrant {
  Micros at{0};           // Decision::leased_at
  Micros reset_after{0};  // the grant's Decision::reset_after
};

// Whether and how a key may lease, for a LeaseStore above the store (engine/lease_store.h): the
// stores ignore it. From `store.lease`, a policy's or an Envoy rule's `lease`.
struct LeaseTerms {
  bool enabled = false;
  Nanos ttl = std::chrono::milliseconds(250);  // a lease is never spent longer after its request
  // All instances together hold at most this share of a limit's capacity, per million.
  int64_t max_share_ppm = 100'000;
  friend bool operator==(const LeaseTerms&, const LeaseTerms&) = default;
};
inline constexpr Nanos kMinLeaseTtl = std::chrono::milliseconds(1);
inline constexpr Nanos kMaxLeaseTtl = std::chrono::seconds(10);

// What an unsettled reservation does at its expiry.
enum class ExpiryOutcome : uint8_t {
  kKeep,      // its estimate stays consumed
  kGiveBack,  // its estimate comes back, what still counts of it (as kGiveBack)
};

// How a key's reservations live (EntryRef::reservation): its policy's `reservations`.
struct ReservationTerms {
  Micros ttl = std::chrono::seconds(60);  // kReserve: until the reservation expires
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

struct EntryRef {
  std::string_view key;
  const Limit* limit = nullptr;
  int64_t cost = 1;  // 0 is a peek: report, consume nothing
  EntryOp op = EntryOp::kConsume;
  int64_t lease = 0;                  // kConsume: also take up to this many units (see above)
  const LeaseGrant* grant = nullptr;  // kGiveBack: the grant the units come from
  const LeaseTerms* terms = nullptr;  // for a LeaseStore above the store; null: its default
  bool native_count = false;  // kCharge or kRefund of a fixed_window: counted natively (above)
  // A concurrency limit's kConsume with cost > 0, or a kRelease: the hold it takes or frees. A
  // kReserve or a kSettle: the reservation's id.
  const HoldId* hold = nullptr;
  // A kReserve or a kSettle: its terms (required). Any other entry: the key's reservations expire
  // first by these terms (see above); null: they are left for later.
  const ReservationTerms* reservation = nullptr;
  bool forget_reservations = false;  // a kRefund: the key's reservations are forgotten (above)
};

struct StoreResponse {
  bool allowed = false;  // every consuming (or charged) entry allowed, and all of them consumed
  std::vector<Decision> decisions;  // one per entry, in request order
  // When the request was refused, entries that would have passed report their state without the
  // consumption (remaining as before the request). A refund or a charge reports the state after
  // it.
};

using DecideCallback = std::function<void(Result<StoreResponse>)>;

class Store {
 public:
  virtual ~Store() = default;

  // Decides `entries` all-or-nothing. `entries` and the keys and limits they point to need stay
  // valid only until DecideAsync returns. `done` runs exactly once, possibly inline before
  // DecideAsync returns, possibly on a store thread; it must not block.
  // Errors: kInvalidArgument (empty key, key over kMaxKeyLength, duplicate key in one request,
  // cost < 0 or > kMaxCost, too many entries, null limit, a charge on an algorithm without
  // SupportsCharge, a lease < 0 or > kMaxCost or on an entry that is not a kConsume or on an
  // algorithm without SupportsLease, a give-back without its grant or beside other ops, a
  // native count that is not a fixed_window charge or refund without a lease, or beside other
  // entries, a concurrency entry that is not a consume or a release, a consume of cost > 0 or a
  // release without its hold, a release of another limit or beside other ops, a reserve or a
  // settle without its id or terms or on an algorithm without SupportsReserve, terms out of
  // range, a settle beside other ops, forget_reservations on an entry that is not a refund or is
  // a native count),
  // kUnavailable / kDeadlineExceeded
  // (the store cannot answer in time), kResourceExhausted (a bounded table is full).
  virtual void DecideAsync(std::span<const EntryRef> entries, DecideCallback done) = 0;

  // Blocking form of DecideAsync. Must not be called from a store callback.
  virtual Result<StoreResponse> Decide(std::span<const EntryRef> entries);

  // Ok when the store can decide right now; used for readiness. May block up to the store's
  // own deadline.
  virtual Status Ping() = 0;

  // "memory", "redis".
  virtual std::string_view Name() const = 0;
};

// Checks the request bounds above; shared by every store implementation.
Status ValidateEntries(std::span<const EntryRef> entries);

}  // namespace caudal
