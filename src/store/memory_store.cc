#include "caudal/store/memory_store.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <bit>
#include <cstring>
#include <mutex>
#include <new>
#include <string>
#include <type_traits>
#include <unordered_map>

#include "algorithms/algorithm.h"
#include "algorithms/concurrency.h"
#include "algorithms/sliding_window_log.h"
#include "common/cat.h"
#include "store/batch.h"
#include "store/reservation_book.h"
#include "store/shard_table.h"
#include "store/share_book.h"
#include "store/siphash.h"

namespace caudal {
namespace {

constexpr size_t kMaxShards = size_t{1} << 12;
// Small tables use fewer shards, so that a shard's share of max_keys stays large enough for
// keys to spread evenly (the bound is per shard; see memory_store.h).
constexpr size_t kMinKeysPerShard = 1024;
constexpr int64_t kMicrosPerTick = 1'000'000;

// A shard's lock: held for a table probe and a state update (a rebuild, rarely, for a scan of
// the shard), so a waiter spins a little before it sleeps. Taking it is one compare-and-swap and
// releasing it one exchange, inline; a waiter that sleeps is woken by the release (C++20 atomic
// wait, a futex on Linux). With std::mutex, DecideEach made 7-12% fewer decisions per second at
// a million keys on 2 threads: its calls through the C library and its sleep on the first
// failed attempt cost more than the table probe they guard.
class ShardLock {
 public:
  void lock() {
    uint32_t expected = kFree;
    if (state_.compare_exchange_strong(expected, kHeld, std::memory_order_acquire)) return;
    LockSlow();
  }
  void unlock() {
    if (state_.exchange(kFree, std::memory_order_release) == kHeldWithSleepers) {
      state_.notify_one();
    }
  }

 private:
  static constexpr uint32_t kFree = 0, kHeld = 1, kHeldWithSleepers = 2;
  static constexpr int kSpins = 100;  // about the time of a probe and an update, several times

  static void CpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    asm volatile("yield");
#endif
  }

  void LockSlow() {
    for (int i = 0; i < kSpins; ++i) {
      uint32_t expected = kFree;
      if (state_.load(std::memory_order_relaxed) == kFree &&
          state_.compare_exchange_weak(expected, kHeld, std::memory_order_acquire)) {
        return;
      }
      CpuRelax();
    }
    // Marked as having sleepers from here on, until a release wakes one: a thread that takes
    // the lock this way releases it with a wake-up, even when no one sleeps any more.
    while (state_.exchange(kHeldWithSleepers, std::memory_order_acquire) != kFree) {
      state_.wait(kHeldWithSleepers, std::memory_order_relaxed);
    }
  }

  std::atomic<uint32_t> state_{kFree};
};

// A key's reservations, with the limit its expired ones give back under.
struct KeyReservations {
  Limit limit;
  ReservationBook book;
};

// Padded to a cache line so that two cores locking neighbouring shards do not share one.
struct alignas(64) Shard {
  ShardLock mu;
  ShardTable table{1};  // guarded by mu
  // The reservations of the shard's keys, by fingerprint; at most the table's share of max_keys
  // keys hold some. Guarded by mu.
  std::unordered_map<uint64_t, KeyReservations> reservations;
  size_t max_reserving = 1;
  // The consumers of the shard's keys' shares, by fingerprint; as many keys at most as
  // reservations. Guarded by mu.
  std::unordered_map<uint64_t, ShareBook> shares;
};

int64_t FloorDiv(int64_t a, int64_t b) { return a / b - (a % b != 0 && (a < 0) != (b < 0)); }

// Per entry of a request: where its state lives and what the algorithm said.
struct Pending {
  uint64_t fp = 0;
  uint32_t shard = 0;
  bool is_log = false;    // the state is a list out of line: a log, or holds
  bool holds = false;     // a concurrency limit's holds
  bool refund = false;    // a refund, give-back or release: applied whatever the request decides
  bool charge = false;    // EntryOp::kCharge: written whatever the request decides
  bool writes = false;    // consuming and allowed (stored if the request passes), or refunding
  bool new_slot = false;  // writes, and its slot is absent or fresh (may need a new one)
  bool no_room = false;   // a reserve whose key cannot hold reservations: the shard has too many
  bool forget = false;    // a refund that forgets the key's reservations (a reset)
  Step step;              // for logs, only step.decision is used
  ShardTable::Slot* slot = nullptr;  // as Evaluate found it; valid until a shard makes room
};

// Room for a request's Pending entries without constructing all kMaxEntriesPerRequest of them
// on every call: only the first n are built.
union PendingArray {
  PendingArray() {}  // NOLINT: deliberately leaves the entries unconstructed
  Pending items[kMaxEntriesPerRequest];
};
static_assert(std::is_trivially_destructible_v<Pending>);

// Locks the distinct shards of a request in ascending index order, so that two requests
// sharing shards can never wait on each other in a cycle.
class ShardLocks {
 public:
  ShardLocks(Shard* shards, std::span<const Pending> pending) : shards_(shards) {
    for (const Pending& p : pending) ids_[n_++] = p.shard;
    // Insertion sort: n_ is tiny (usually 1) and at most kMaxEntriesPerRequest.
    for (size_t i = 1; i < n_; ++i) {
      for (size_t j = i; j > 0 && ids_[j - 1] > ids_[j]; --j) std::swap(ids_[j - 1], ids_[j]);
    }
    n_ = static_cast<size_t>(std::unique(ids_.begin(), ids_.begin() + n_) - ids_.begin());
    for (size_t i = 0; i < n_; ++i) shards_[ids_[i]].mu.lock();
  }
  ~ShardLocks() {
    for (size_t i = n_; i > 0; --i) shards_[ids_[i - 1]].mu.unlock();
  }
  ShardLocks(const ShardLocks&) = delete;
  ShardLocks& operator=(const ShardLocks&) = delete;

  std::span<const uint32_t> ids() const { return {ids_.data(), n_}; }

 private:
  Shard* shards_;
  std::array<uint32_t, kMaxEntriesPerRequest> ids_;
  size_t n_ = 0;
};

}  // namespace

struct MemoryStore::Impl {
  Impl(const Clock& c, MemoryStoreOptions options);

  Shard& ShardOf(const Pending& p) { return shards[p.shard]; }
  FreshTick TickAtOrBefore(int64_t us) const { return FloorDiv(us - epoch_us, kMicrosPerTick); }
  FreshTick TickAtOrAfter(int64_t us) const {
    const int64_t d = us - epoch_us;
    return d <= 0 ? 0 : std::min<int64_t>(kNeverFresh, (d - 1) / kMicrosPerTick + 1);
  }

  void Fingerprint(const EntryRef& e, Pending& p) const;
  // What a hold keeps of its id: a keyed 63-bit fingerprint (two ids share one with probability
  // about n²/2^64 for n holds of a key).
  int64_t HoldFingerprint(const HoldId& id) const;
  void Evaluate(const EntryRef& e, Pending& p, Micros now, FreshTick tick);
  // The key's reservations (created for a reserve; null when it has none, or no room is left),
  // after its expired ones' outcomes were applied to its slot.
  KeyReservations* Reservations(const EntryRef& e, Pending& p, Micros now);
  // Forgets the keys whose reservations all expired, applying their outcomes.
  void SweepReservations(Shard& shard, Micros now);
  Decision Peek(const EntryRef& e, const Pending& p, Micros now);
  // `moved`: a shard made room since Evaluate, so the slot it found must be looked up again.
  void Commit(const EntryRef& e, Pending& p, Micros now, bool moved);
  void ApplyRefund(const EntryRef& e, Pending& p, Micros now, bool moved);
  // After a write: when the entry turns fresh, and what forgetting it would admit.
  void Record(ShardTable& table, ShardTable::Slot& slot, const Pending& p, Micros now) const;
  // Decides a validated request whose shards are locked, at `now_us`: whether it was allowed
  // (and then committed), or kResourceExhausted.
  Result<bool> DecideLocked(std::span<const EntryRef> entries, std::span<Pending> pending,
                            std::span<const uint32_t> shard_ids, int64_t now_us);
  // Room for every new entry; sets `moved` when a shard was asked for room (its slots may have
  // moved).
  Status ReserveNewSlots(std::span<const Pending> pending, std::span<const uint32_t> shard_ids,
                         FreshTick tick, bool& moved);
  int64_t NowMicros() const { return FloorDiv(clock.Now().count(), 1000); }
  // A validated batch of shares (EntryOp::kShare).
  Result<DecideResponse> DecideShares(std::span<const EntryRef> entries);

  const Clock& clock;
  const int64_t epoch_us;
  const SipKey sip_key = RandomSipKey();
  unsigned shard_bits = 0;
  size_t shard_count = 0;
  std::unique_ptr<Shard[]> shards;
  std::atomic<uint64_t> evictions{0};  // live entries forgotten to make room
};

MemoryStore::Impl::Impl(const Clock& c, MemoryStoreOptions options)
    : clock(c), epoch_us(FloorDiv(c.Now().count(), 1000)) {
  const size_t max_keys = std::max<size_t>(options.max_keys, 1);
  size_t n = std::bit_ceil(std::clamp<size_t>(options.shards, 1, kMaxShards));
  while (n > 1 && max_keys / n < kMinKeysPerShard) n /= 2;
  shard_bits = static_cast<unsigned>(std::countr_zero(n));
  const size_t per_shard = (max_keys + n - 1) / n;
  shard_count = n;
  shards = std::make_unique<Shard[]>(n);
  for (size_t i = 0; i < n; ++i) {
    shards[i].table = ShardTable(per_shard);
    shards[i].max_reserving = per_shard;
  }
}

void MemoryStore::Impl::Fingerprint(const EntryRef& e, Pending& p) const {
  // One PRF key per algorithm, so a key reused with another algorithm gets its own state
  // instead of misreading the other's words.
  const auto a = static_cast<uint64_t>(e.limit->algorithm()) + 1;
  const SipKey k{.k0 = sip_key.k0 ^ (a * 0x9e3779b97f4a7c15ULL), .k1 = sip_key.k1};
  p.holds = HasHolds(e.limit->algorithm());
  p.is_log = HasLogState(e.limit->algorithm()) || p.holds;
  p.fp = (SipHash13(k, e.key) & ~uint64_t{1}) | (p.is_log ? 1 : 0);
  if (p.fp == 0) p.fp = 2;  // 0 marks an empty slot
  p.shard = shard_bits == 0 ? 0 : static_cast<uint32_t>(p.fp >> (64 - shard_bits));
}

int64_t MemoryStore::Impl::HoldFingerprint(const HoldId& id) const {
  char bytes[16];
  std::memcpy(bytes, &id.hi, 8);
  std::memcpy(bytes + 8, &id.lo, 8);
  return static_cast<int64_t>(SipHash13(sip_key, {bytes, sizeof bytes}) >> 1);
}

void MemoryStore::Impl::Evaluate(const EntryRef& e, Pending& p, Micros now, FreshTick tick) {
  ShardTable& table = ShardOf(p).table;
  ShardTable::Slot* slot = table.Find(p.fp);
  p.slot = slot;
  // A give-back or a release is applied as a refund is (never refused, never a new slot), with
  // its own rule.
  p.refund = e.op == EntryOp::kRefund || e.op == EntryOp::kGiveBack || e.op == EntryOp::kRelease;
  p.charge = e.op == EntryOp::kCharge;
  p.forget = e.forget_reservations;
  if (p.holds) {
    static const concurrency::Holds kNone;
    const auto& holds = slot != nullptr ? table.Log(*slot) : kNone;
    // A release's own decision comes from ApplyRefund; until then it reports a peek.
    p.step.decision = concurrency::Evaluate(*e.limit, holds, now, p.refund ? 0 : e.cost);
    p.writes = p.refund ? slot != nullptr && !holds.entries.empty()
                        : p.step.decision.allowed() && e.cost > 0;
  } else if (p.is_log) {  // never a charge (ValidateEntries)
    static const sliding_window_log::LogState kEmpty;
    const auto& log = slot != nullptr ? table.Log(*slot) : kEmpty;
    // A refund's own decision comes from ApplyRefund; until then it reports a peek.
    p.step.decision = LogFunctionsOf(*e.limit).evaluate(*e.limit, log, now, p.refund ? 0 : e.cost);
    p.writes = p.refund ? slot != nullptr && e.cost > 0 && !log.entries.empty()
                        : p.step.decision.allowed() && e.cost > 0;
  } else {
    // Reservations a reset forgets give nothing back first.
    KeyReservations* reservations =
        e.reservation != nullptr && !p.forget ? Reservations(e, p, now) : nullptr;
    slot = p.slot;
    CompactState state;
    if (slot != nullptr) state = slot->State();
    const CompactState* s = slot != nullptr ? &state : nullptr;
    if (e.op == EntryOp::kReserve) {
      static const ReservationBook kNoBook;
      p.step = DecideReserve(*e.limit, reservations != nullptr ? reservations->book : kNoBook, s,
                             now, e.cost, *e.reservation);
      p.writes = p.step.decision.allowed();  // a reservation of 0 is recorded too
      p.no_room = reservations == nullptr;
    } else if (e.op == EntryOp::kSettle) {
      if (reservations == nullptr) {
        p.step = DecideCompact(*e.limit, s, now, 0);
        p.step.decision.reservation = Reservation::kUnknown;
      } else {
        p.step = caudal::Settle(*e.limit, reservations->book, s, now, HoldFingerprint(*e.hold),
                                e.cost, *e.reservation);
      }
      p.writes = p.step.changed;
    } else if (e.op == EntryOp::kGiveBack) {
      p.step = GiveBackCompact(*e.limit, s, now, e.cost, e.grant->at, e.grant->reset_after);
    } else {
      p.step = p.refund   ? RefundCompact(*e.limit, s, now, e.cost)
               : p.charge ? ChargeCompact(*e.limit, s, now, e.cost)
                          : DecideCompactWithLease(*e.limit, s, now, e.cost, e.lease);
    }
    if (e.op != EntryOp::kReserve && e.op != EntryOp::kSettle) p.writes = p.step.changed;
  }
  // A refund never needs a slot: with none there was nothing to give back.
  p.new_slot = p.writes && !p.refund && (slot == nullptr || ShardTable::IsFresh(*slot, tick));
}

Decision MemoryStore::Impl::Peek(const EntryRef& e, const Pending& p, Micros now) {
  ShardTable& table = ShardOf(p).table;
  ShardTable::Slot* slot = table.Find(p.fp);
  if (p.holds) {
    static const concurrency::Holds kNone;
    return concurrency::Evaluate(*e.limit, slot != nullptr ? table.Log(*slot) : kNone, now, 0);
  }
  if (p.is_log) {
    static const sliding_window_log::LogState kEmpty;
    return LogFunctionsOf(*e.limit).evaluate(*e.limit, slot != nullptr ? table.Log(*slot) : kEmpty,
                                             now, 0);
  }
  CompactState state;
  if (slot != nullptr) state = slot->State();
  return DecideCompact(*e.limit, slot != nullptr ? &state : nullptr, now, 0).decision;
}

void MemoryStore::Impl::Commit(const EntryRef& e, Pending& p, Micros now, bool moved) {
  ShardTable& table = ShardOf(p).table;
  ShardTable::Slot* slot = moved ? table.Find(p.fp) : p.slot;
  if (slot == nullptr) slot = table.Insert(p.fp);
  if (p.holds) {
    concurrency::Take(*e.limit, table.Log(*slot), now, HoldFingerprint(*e.hold));
  } else if (p.is_log) {
    // The list Evaluate pruned, or a new empty one if a rebuild reclaimed it as fresh (then it
    // had no entry left in the window either).
    LogFunctionsOf(*e.limit).commit(*e.limit, table.Log(*slot), now, e.cost);
  } else {
    slot->SetState(p.step.next);
    if (e.op == EntryOp::kReserve) {
      // Evaluate made the key's entry (no_room otherwise), and nothing sweeps before the commit.
      KeyReservations& r = ShardOf(p).reservations.at(p.fp);
      OpenReservation(r.book, HoldFingerprint(*e.hold), now, e.cost, *e.reservation,
                      p.step.decision);
    }
  }
  Record(table, *slot, p, now);
}

KeyReservations* MemoryStore::Impl::Reservations(const EntryRef& e, Pending& p, Micros now) {
  Shard& shard = ShardOf(p);
  auto it = shard.reservations.find(p.fp);
  if (it == shard.reservations.end()) {
    if (e.op != EntryOp::kReserve) return nullptr;
    if (shard.reservations.size() >= shard.max_reserving) SweepReservations(shard, now);
    if (shard.reservations.size() >= shard.max_reserving) return nullptr;
    it = shard.reservations.try_emplace(p.fp, KeyReservations{*e.limit, {}}).first;
  }
  KeyReservations& r = it->second;
  std::optional<CompactState> state;
  if (p.slot != nullptr) state = p.slot->State();
  if (ExpireReservations(r.limit, r.book, state, now) && p.slot != nullptr) {
    p.slot->SetState(*state);
  }
  if (r.book.records.empty() && e.op != EntryOp::kReserve) {
    shard.reservations.erase(it);
    return nullptr;
  }
  return &r;
}

void MemoryStore::Impl::SweepReservations(Shard& shard, Micros now) {
  for (auto it = shard.reservations.begin(); it != shard.reservations.end();) {
    KeyReservations& r = it->second;
    ShardTable::Slot* slot = shard.table.Find(it->first);
    std::optional<CompactState> state;
    if (slot != nullptr) state = slot->State();
    if (ExpireReservations(r.limit, r.book, state, now) && slot != nullptr) slot->SetState(*state);
    it = r.book.records.empty() ? shard.reservations.erase(it) : std::next(it);
  }
}

void MemoryStore::Impl::ApplyRefund(const EntryRef& e, Pending& p, Micros now, bool moved) {
  ShardTable& table = ShardOf(p).table;
  ShardTable::Slot* slot = moved ? table.Find(p.fp) : p.slot;
  // Evaluate found the slot, but making room for new keys may since have reclaimed it as fresh:
  // then nothing was left to give back.
  if (slot == nullptr) return;
  if (p.holds) {
    bool released = false;
    p.step.decision =
        concurrency::Release(*e.limit, table.Log(*slot), now, HoldFingerprint(*e.hold), &released);
    p.step.decision.released = released;
  } else if (p.is_log) {
    p.step.decision = LogFunctionsOf(*e.limit).refund(*e.limit, table.Log(*slot), now, e.cost);
  } else {
    slot->SetState(p.step.next);
  }
  Record(table, *slot, p, now);
}

void MemoryStore::Impl::Record(ShardTable& table, ShardTable::Slot& slot, const Pending& p,
                               Micros now) const {
  const Decision& d = p.step.decision;
  table.Record(slot, TickAtOrAfter((now + d.reset_after).count()), d.limit - d.remaining);
}

MemoryStore::MemoryStore(const Clock& clock, MemoryStoreOptions options)
    : impl_(std::make_unique<Impl>(clock, options)) {}

MemoryStore::~MemoryStore() = default;

void MemoryStore::DecideBatchAsync(std::span<const EntryRef> entries, DecideCallback done) {
  done(DecideBatch(entries));
}

Status MemoryStore::Impl::ReserveNewSlots(std::span<const Pending> pending,
                                          std::span<const uint32_t> shard_ids, FreshTick tick,
                                          bool& moved) {
  for (uint32_t id : shard_ids) {
    size_t needed = 0;
    std::array<uint64_t, kMaxEntriesPerRequest> keep;  // the request's own entries stay
    size_t kept = 0;
    for (const Pending& p : pending) {
      if (p.shard != id) continue;
      needed += p.new_slot;
      keep[kept++] = p.fp;
    }
    if (needed == 0) continue;
    moved = true;
    const ShardTable::Room room = shards[id].table.MakeRoom(needed, tick, {keep.data(), kept});
    if (room.evicted > 0) evictions.fetch_add(room.evicted, std::memory_order_relaxed);
    if (!room.ok) {
      return Status::ResourceExhausted(
          Cat("memory store is full: one request needs more new keys in a shard than it holds; "
              "raise max_keys (",
              shards[id].table.size(), " keys in the shard)"));
    }
  }
  return Status::Ok();
}

Result<bool> MemoryStore::Impl::DecideLocked(std::span<const EntryRef> entries,
                                             std::span<Pending> pending,
                                             std::span<const uint32_t> shard_ids, int64_t now_us) {
  const Micros now(now_us);
  const FreshTick tick = TickAtOrBefore(now_us);
  bool allowed = true;
  for (size_t i = 0; i < entries.size(); ++i) {
    Evaluate(entries[i], pending[i], now, tick);
    if (pending[i].no_room && pending[i].writes) {
      return Status::ResourceExhausted(
          "memory store is full: as many keys of the shard hold reservations as it holds keys; "
          "raise max_keys");
    }
    allowed = allowed && (pending[i].refund || pending[i].step.decision.allowed());
  }
  if (!allowed) {
    // Nothing is consumed; entries that would have passed report their unchanged state, and
    // refunds and charges apply all the same (charges first find room, as a commit does).
    bool charges = false;
    for (size_t i = 0; i < entries.size(); ++i) {
      if (!pending[i].charge) pending[i].new_slot = false;
      charges = charges || (pending[i].charge && pending[i].writes);
    }
    bool moved = false;
    if (charges) {
      if (Status s = ReserveNewSlots(pending, shard_ids, tick, moved); !s.ok()) return s;
    }
    for (size_t i = 0; i < entries.size(); ++i) {
      if (pending[i].refund) {
        if (pending[i].forget) ShardOf(pending[i]).reservations.erase(pending[i].fp);
        if (pending[i].writes) ApplyRefund(entries[i], pending[i], now, moved);
      } else if (pending[i].charge) {
        if (pending[i].writes) Commit(entries[i], pending[i], now, moved);
      } else if (pending[i].step.decision.allowed()) {
        pending[i].step.decision = Peek(entries[i], pending[i], now);
      }
    }
    return false;
  }
  // Room for every new entry first, so that a full shard fails the whole request before
  // anything is written.
  bool moved = false;
  if (Status s = ReserveNewSlots(pending, shard_ids, tick, moved); !s.ok()) return s;
  for (size_t i = 0; i < entries.size(); ++i) {
    if (pending[i].forget) ShardOf(pending[i]).reservations.erase(pending[i].fp);
    if (!pending[i].writes) continue;
    if (pending[i].refund) {
      ApplyRefund(entries[i], pending[i], now, moved);
    } else {
      Commit(entries[i], pending[i], now, moved);
    }
  }
  return true;
}

Result<DecideResponse> MemoryStore::Impl::DecideShares(std::span<const EntryRef> entries) {
  const size_t n = entries.size();
  PendingArray storage;
  Pending* pending = storage.items;
  for (size_t i = 0; i < n; ++i) {
    new (&pending[i]) Pending;
    Fingerprint(entries[i], pending[i]);
  }
  const int64_t now_us = NowMicros();
  const Micros now(now_us);
  const FreshTick tick = TickAtOrBefore(now_us);
  DecideResponse response;
  response.allowed = true;
  std::vector<ShareBook> books(n);
  std::array<bool, kMaxEntriesPerRequest> new_book{};
  ShardLocks locks(shards.get(), {pending, n});
  // Every entry on copies first, so that a refused one leaves everything as it was.
  for (size_t i = 0; i < n; ++i) {
    Pending& p = pending[i];
    Shard& shard = ShardOf(p);
    p.slot = shard.table.Find(p.fp);
    if (auto it = shard.shares.find(p.fp); it != shard.shares.end()) {
      books[i] = it->second;
    } else {
      new_book[i] = true;
      size_t added = 0;  // the shard's new tables, this one's included
      for (size_t j = 0; j <= i; ++j) added += new_book[j] && pending[j].shard == p.shard;
      if (shard.shares.size() + added > shard.max_reserving) {
        for (auto k = shard.shares.begin(); k != shard.shares.end();) {
          k = ExpireShares(k->second, now) ? shard.shares.erase(k) : std::next(k);
        }
      }
      if (shard.shares.size() + added > shard.max_reserving) {
        return Status::ResourceExhausted(
            "memory store is full: as many keys of the shard hold shares as it holds keys; "
            "raise max_keys");
      }
    }
    CompactState state;
    if (p.slot != nullptr) state = p.slot->State();
    Result<ShareTaken> taken =
        TakeShare(*entries[i].share, books[i], p.slot != nullptr ? &state : nullptr, now);
    if (!taken.ok()) return taken.status();
    p.step = taken->step;
    p.writes = p.step.changed;
    p.new_slot = p.writes && (p.slot == nullptr || ShardTable::IsFresh(*p.slot, tick));
    response.shares.push_back(taken->share);
  }
  bool moved = false;
  if (Status s = ReserveNewSlots({pending, n}, locks.ids(), tick, moved); !s.ok()) return s;
  for (size_t i = 0; i < n; ++i) {
    if (pending[i].writes) Commit(entries[i], pending[i], now, moved);
    ShardOf(pending[i]).shares[pending[i].fp] = std::move(books[i]);
    response.decisions.push_back(pending[i].step.decision);
  }
  return response;
}

Result<DecideResponse> MemoryStore::DecideBatch(std::span<const EntryRef> entries) {
  if (Status s = ValidateEntries(entries); !s.ok()) return s;
  if (entries[0].op == EntryOp::kShare) return impl_->DecideShares(entries);
  const size_t n = entries.size();
  PendingArray storage;
  Pending* pending = storage.items;
  for (size_t i = 0; i < n; ++i) {
    new (&pending[i]) Pending;  // default-initialized: no zeroing pass on the hot path
    impl_->Fingerprint(entries[i], pending[i]);
    impl_->ShardOf(pending[i]).table.Prefetch(pending[i].fp);
  }
  // The clock is read before the locks, so that they guard only the probe and the update. Two
  // requests on one shard may then apply their times out of order (by at most a lock wait),
  // which every algorithm is defined for: a time earlier than its state's is judged as no time
  // passing, or in the stored window (include/caudal/algorithms/*.h, the contract tests).
  const int64_t now_us = impl_->NowMicros();
  Result<bool> allowed = false;
  {
    ShardLocks locks(impl_->shards.get(), {pending, n});
    allowed = impl_->DecideLocked(entries, {pending, n}, locks.ids(), now_us);
  }
  if (!allowed.ok()) return allowed.status();
  StoreResponse response;
  response.allowed = *allowed;
  response.decisions.reserve(n);
  for (size_t i = 0; i < n; ++i) response.decisions.push_back(pending[i].step.decision);
  return response;
}

Status MemoryStore::DecideEach(std::span<const ConsumeEntry> consumes,
                               std::span<Decision> decisions) {
  if (decisions.size() != consumes.size()) {
    return Status::InvalidArgument("DecideEach: one decision per entry");
  }
  constexpr size_t kGroup = 16;  // entries hashed and prefetched ahead of their decisions
  // The group's entries in the batch encoding (batch.h).
  std::array<EntryRef, kGroup> batch;
  for (const ConsumeEntry& c : consumes) {
    const EntryRef e = EncodeConsume(c);
    if (Status s = ValidateEntries({&e, 1}); !s.ok()) return s;
  }
  std::array<Pending, kGroup> pending;
  const int64_t now_us = impl_->NowMicros();
  for (size_t base = 0; base < consumes.size(); base += kGroup) {
    const size_t n = std::min(kGroup, consumes.size() - base);
    for (size_t i = 0; i < n; ++i) {
      batch[i] = EncodeConsume(consumes[base + i]);
      pending[i] = Pending{};
      impl_->Fingerprint(batch[i], pending[i]);
      Shard& shard = impl_->ShardOf(pending[i]);
      shard.table.Prefetch(pending[i].fp);
      // The lock's line too, for writing: the other threads' locking moves it between cores.
      __builtin_prefetch(&shard.mu, 1);
    }
    for (size_t i = 0; i < n; ++i) {
      const uint32_t shard = pending[i].shard;
      Result<bool> allowed = false;
      {
        std::lock_guard<ShardLock> lock(impl_->shards[shard].mu);
        allowed = impl_->DecideLocked({&batch[i], 1}, {&pending[i], 1}, {&shard, 1}, now_us);
      }
      // One new key always fits in a shard (it holds at least one), so only a broken invariant
      // could fail here.
      if (!allowed.ok()) return allowed.status();
      decisions[base + i] = pending[i].step.decision;
    }
  }
  return Status::Ok();
}

size_t MemoryStore::Size() const {
  size_t total = 0;
  for (size_t i = 0; i < impl_->shard_count; ++i) {
    std::lock_guard<ShardLock> lock(impl_->shards[i].mu);
    total += impl_->shards[i].table.size();
  }
  return total;
}

uint64_t MemoryStore::evictions() const { return impl_->evictions.load(std::memory_order_relaxed); }

size_t MemoryStore::MemoryUsage() const {
  size_t total = sizeof(Impl) + impl_->shard_count * sizeof(Shard);
  for (size_t i = 0; i < impl_->shard_count; ++i) {
    std::lock_guard<ShardLock> lock(impl_->shards[i].mu);
    total += impl_->shards[i].table.MemoryUsage();
  }
  return total;
}

}  // namespace caudal
