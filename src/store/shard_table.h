// ShardTable: one memory-store shard's keys, in a compact open-addressing table.
//
// A slot is 36 bytes: the key's 64-bit keyed fingerprint (never the key itself; see siphash.h),
// the three-word CompactState, and the time the entry turns fresh, in whole seconds since the
// store's epoch, rounded up. Fingerprint 0 marks an empty slot. The fingerprint's lowest bit is
// set for sliding_window_log entries, whose lists live out of line in a pool owned by the table
// (state word 0 holds the list's index).
//
// Linear probing from a home slot chosen by fingerprint bits 1..32 (the store picks shards by
// the top bits). There is no deletion: fresh entries are dropped by rebuilding, which also grows
// the table. The load stays at most 7/8, so every probe run ends at an empty slot.
//
// Bounded: at most `max_keys` entries. MakeRoom reclaims fresh entries (whose reset time has
// passed, so dropping them changes no decision) before growing, and refuses only when the
// shard holds `max_keys` live entries. It tracks a lower bound on the earliest fresh time, so a
// full table of live entries refuses in O(1) instead of rescanning.
//
// Thread-safety: none; the owning shard's mutex guards every call.
#pragma once

#include <atomic>
#include <cstdint>
#include <cstring>
#include <vector>

#include "caudal/algorithms/compact_state.h"
#include "caudal/algorithms/sliding_window_log.h"

namespace caudal {

// Freshness is tracked in whole seconds since an epoch: a time a slot turns fresh is rounded up
// and "now" rounded down, so an entry is only ever judged fresh after its reset time passed.
using FreshTick = int64_t;
inline constexpr FreshTick kNeverFresh = UINT32_MAX;

class ShardTable {
 public:
  // 4-byte aligned so that 36 bytes stay 36; fields are read and written through memcpy.
  struct alignas(4) Slot {
    uint64_t Fingerprint() const { return Load<uint64_t>(0); }
    CompactState State() const { return Load<CompactState>(8); }
    void SetState(const CompactState& s) { Store(8, s); }
    uint32_t LogIndex() const { return static_cast<uint32_t>(Load<int64_t>(8)); }
    FreshTick FreshAt() const { return Load<uint32_t>(32); }

   private:
    friend class ShardTable;
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

  // Ensures `needed` more entries fit, reclaiming fresh entries first and growing next.
  // False when the shard would hold more than `max_keys` live entries. Invalidates Slot
  // pointers when it rebuilds.
  bool MakeRoom(size_t needed, FreshTick now);
  // Adds `fp` with a zero state (or, for a log fingerprint, a new empty list). Preconditions:
  // `fp` is absent, non-zero, and MakeRoom made room for it.
  Slot* Insert(uint64_t fp);
  // Records when the entry turns fresh.
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
  void Rebuild(size_t slots, FreshTick now);
  void FreeLog(uint32_t index);

  size_t max_keys_;
  size_t max_slots_;  // the smallest table whose MaxLoad holds max_keys_
  size_t size_ = 0;
  // No entry turns fresh before this: a lower bound kept on every write and exact after a
  // rebuild. While now < earliest_fresh_, nothing can be reclaimed.
  FreshTick earliest_fresh_ = kNeverFresh;
  std::vector<Slot> slots_;
  // Copies of slots_.data() and slots_.size() for Prefetch, updated on every rebuild.
  std::atomic<uintptr_t> hint_base_{0};
  std::atomic<size_t> hint_slots_{0};
  std::vector<sliding_window_log::LogState> logs_;
  std::vector<uint32_t> free_logs_;
};

}  // namespace caudal
