// ShardTable: one memory-store shard's keys, in a compact open-addressing table.
//
// A slot is 36 bytes: the key's 64-bit keyed fingerprint (never the key itself; see siphash.h),
// the three-word CompactState, and the time the entry turns fresh, in whole seconds since the
// store's epoch, rounded up. Fingerprint 0 marks an empty slot. The fingerprint's lowest bit is
// set for sliding_window_log entries, whose lists live out of line in a pool owned by the table
// (state word 0 holds the list's index). The top byte of state word 2, which every algorithm
// leaves zero (its values stay in [0, 2^53)), holds the entry's eviction rank: how much it had
// consumed at its last write (see EvictionRank).
//
// Linear probing from a home slot chosen by fingerprint bits 1..32 (the store picks shards by
// the top bits). There is no deletion: fresh entries are dropped by rebuilding, which also grows
// the table. The load stays at most 7/8, so every probe run ends at an empty slot.
//
// Bounded: at most `max_keys` entries. MakeRoom reclaims fresh entries (whose reset time has
// passed, so dropping them changes no decision) before growing. It tracks a lower bound on the
// earliest fresh time, so "nothing to reclaim" is an O(1) answer. When the shard holds
// `max_keys` live entries it evicts: one pass forgets the max_keys / kEvictionShare entries
// (or what the request needs, if more) whose forgetting admits least — the lowest eviction
// rank, then the earliest fresh time — never the request's own. Passes cost O(max_keys) each,
// so O(kEvictionShare) per new key.
//
// Thread-safety: none; the owning shard's lock guards every call but Prefetch.
#pragma once

#include <atomic>
#include <bit>
#include <cassert>
#include <cstdint>
#include <cstring>
#include <span>
#include <vector>

#include "algorithms/compact_state.h"
#include "algorithms/sliding_window_log.h"

namespace caudal {

// Freshness is tracked in whole seconds since an epoch: a time a slot turns fresh is rounded up
// and "now" rounded down, so an entry is only ever judged fresh after its reset time passed.
using FreshTick = int64_t;
inline constexpr FreshTick kNeverFresh = UINT32_MAX;

// A full shard forgets this share of its entries per eviction pass (1/16).
inline constexpr size_t kEvictionShare = 16;

// An upper bound on `consumed` units (limit − remaining at a write) in one byte, monotonic:
// exact below 8, then to within 25% (two bits of mantissa), rounded up; 0 for nothing consumed.
uint8_t EvictionRank(int64_t consumed);

class ShardTable {
 public:
  // 4-byte aligned so that 36 bytes stay 36; fields are read and written through memcpy.
  struct alignas(4) Slot {
    uint64_t Fingerprint() const { return Load<uint64_t>(0); }
    CompactState State() const {
      CompactState s = Load<CompactState>(8);
      s.w[2] &= kStateWord2Mask;  // without the eviction rank
      return s;
    }
    // Precondition: s.w[2] in [0, 2^56), as every algorithm's is (below 2^53).
    void SetState(const CompactState& s) {
      assert(s.w[2] >= 0 && s.w[2] <= kStateWord2Mask);
      const uint8_t rank = Rank();
      Store(8, s);
      bytes_[kRankByte] = rank;
    }
    uint32_t LogIndex() const { return static_cast<uint32_t>(Load<int64_t>(8)); }
    FreshTick FreshAt() const { return Load<uint32_t>(32); }
    uint8_t Rank() const { return bytes_[kRankByte]; }

   private:
    friend class ShardTable;
    static constexpr int64_t kStateWord2Mask = (int64_t{1} << 56) - 1;
    static constexpr size_t kRankByte = 31;  // state word 2's top byte (little-endian)
    static_assert(std::endian::native == std::endian::little);
    template <typename T>
    T Load(size_t at) const {
      T v;
      std::memcpy(&v, bytes_ + at, sizeof v);
      return v;
    }
    template <typename T>
    void Store(size_t at, const T& v) {
      std::memcpy(bytes_ + at, &v, sizeof v);
    }
    unsigned char bytes_[36];
  };
  static_assert(sizeof(Slot) == 36);

  static bool IsLog(uint64_t fp) { return (fp & 1) != 0; }

  explicit ShardTable(size_t max_keys);
  ShardTable(ShardTable&& other) noexcept;
  ShardTable& operator=(ShardTable&& other) noexcept;

  size_t size() const { return size_; }

  // The slot holding `fp`, or nullptr.
  Slot* Find(uint64_t fp);
  // Starts loading the cache line where Find(fp) begins. The one call that is safe without the
  // shard's lock: it reads a hint of the table's place and size that may be stale, and a
  // prefetch of a stale address is harmless. Lets the miss overlap locking and the clock read.
  void Prefetch(uint64_t fp) const {
    const uintptr_t base = hint_base_.load(std::memory_order_relaxed);
    const size_t n = hint_slots_.load(std::memory_order_relaxed);
    const uintptr_t home = base + HomeIn(fp, n) * sizeof(Slot);
    // A successful probe reads about three 36-byte slots: usually two cache lines.
    __builtin_prefetch(reinterpret_cast<const void*>(home));
    __builtin_prefetch(reinterpret_cast<const void*>(home + 64));
  }
  // Whether the entry's reset time has passed at `now` (see FreshTick).
  static bool IsFresh(const Slot& slot, FreshTick now) { return slot.FreshAt() <= now; }

  // Ensures `needed` more entries fit: reclaims fresh entries, grows, and when the shard is full
  // of live entries evicts (see above), never an entry whose fingerprint is in `keep`. False
  // (and nothing evicted) only when `needed` and the live entries of `keep` exceed max_keys.
  // Invalidates Slot pointers when it rebuilds.
  struct Room {
    bool ok = false;
    size_t evicted = 0;  // live entries forgotten
  };
  Room MakeRoom(size_t needed, FreshTick now, std::span<const uint64_t> keep = {});
  // Adds `fp` with a zero state (or, for a log fingerprint, a new empty list). Preconditions:
  // `fp` is absent, non-zero, and MakeRoom made room for it.
  Slot* Insert(uint64_t fp);
  // Records when the entry turns fresh, and how much it has consumed (limit − remaining, summed
  // for nothing else: one entry, one limit) as its eviction rank.
  void Record(Slot& slot, FreshTick fresh_at, int64_t consumed);
  // Records when the entry turns fresh (its eviction rank stays).
  void SetFreshAt(Slot& slot, FreshTick at);

  sliding_window_log::LogState& Log(const Slot& slot) { return logs_[slot.LogIndex()]; }

  // Bytes held by the slots and the out-of-line lists.
  size_t MemoryUsage() const;

 private:
  static size_t HomeIn(uint64_t fp, size_t slots) {
    // Lemire's multiply-shift maps 32 uniform bits onto [0, slots) without a division, so the
    // table can have any size, not only powers of two.
    return static_cast<size_t>((static_cast<uint64_t>(static_cast<uint32_t>(fp >> 1)) * slots) >>
                               32);
  }
  size_t Home(uint64_t fp) const { return HomeIn(fp, slots_.size()); }
  static size_t MaxLoad(size_t slots) { return slots - (slots + 7) / 8; }
  size_t SlotsFor(size_t keys) const;
  // Which live entries an eviction pass forgets: those ranking below `threshold`, and the first
  // `ties` ranking equal to it (in slot order), never one in `keep`.
  struct Eviction {
    uint64_t threshold = 0;
    size_t ties = 0;
    std::span<const uint64_t> keep;
  };
  // Rank, then fresh time, then 16 fingerprint bits that pick neither the shard nor the home
  // slot: entries that tie go in an order unrelated to where they sit. Breaking ties by position
  // would empty one end of the table and crowd the new keys' probes into the rest.
  static uint64_t EvictionKey(const Slot& s) {
    return (uint64_t{s.Rank()} << 48) | (static_cast<uint64_t>(s.FreshAt()) << 16) |
           ((s.Fingerprint() >> 33) & 0xFFFF);
  }
  static bool Kept(uint64_t fp, std::span<const uint64_t> keep);
  // Plans forgetting `count` live entries at `now`.
  Eviction PlanEviction(size_t count, FreshTick now, std::span<const uint64_t> keep) const;
  // Rebuilds into `slots` slots, dropping fresh entries and those `evict` names. Returns how
  // many live entries it dropped.
  size_t Rebuild(size_t slots, FreshTick now, const Eviction* evict = nullptr);
  void FreeLog(uint32_t index);

  size_t max_keys_;
  size_t max_slots_;  // the smallest table whose MaxLoad holds max_keys_
  size_t size_ = 0;
  // No entry turns fresh before this: a lower bound kept on every write and exact after a
  // rebuild. While now < earliest_fresh_, nothing can be reclaimed.
  FreshTick earliest_fresh_ = kNeverFresh;
  std::vector<Slot> slots_;
  std::vector<sliding_window_log::LogState> logs_;
  std::vector<uint32_t> free_logs_;
  // Copies of slots_.data() and slots_.size() for Prefetch, updated on every rebuild. On a cache
  // line of their own (the alignment pads the table to whole lines after them too): the fields
  // above change under the lock, so a line shared with them would move between cores on each
  // prefetch, the stall the prefetch is there to hide.
  alignas(64) std::atomic<uintptr_t> hint_base_{0};
  std::atomic<size_t> hint_slots_{0};
};

}  // namespace caudal
