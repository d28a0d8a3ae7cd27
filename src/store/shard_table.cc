#include "store/shard_table.h"

#include <algorithm>
#include <cassert>
#include <utility>

namespace caudal {
namespace {

constexpr size_t kInitialSlots = 16;

}  // namespace

uint8_t EvictionRank(int64_t consumed) {
  if (consumed <= 0) return 0;
  if (consumed < 8) return static_cast<uint8_t>(consumed);
  // consumed ≤ m · 2^e with m in [4, 8): codes 8 + 4(e − 1) + (m − 4), in order of m · 2^e.
  const auto c = static_cast<uint64_t>(std::min<int64_t>(consumed, int64_t{1} << 50));
  int e = std::bit_width(c) - 3;
  uint64_t m = (c + (uint64_t{1} << e) - 1) >> e;
  if (m == 8) {
    m = 4;
    ++e;
  }
  return static_cast<uint8_t>(std::min<uint64_t>(255, 8 + 4 * (e - 1) + (m - 4)));
}

ShardTable::ShardTable(size_t max_keys) : max_keys_(std::max<size_t>(max_keys, 1)) {
  max_slots_ = max_keys_ + max_keys_ / 7 + 1;
  while (MaxLoad(max_slots_) < max_keys_) ++max_slots_;
}

ShardTable::ShardTable(ShardTable&& other) noexcept { *this = std::move(other); }

ShardTable& ShardTable::operator=(ShardTable&& other) noexcept {
  max_keys_ = other.max_keys_;
  max_slots_ = other.max_slots_;
  size_ = std::exchange(other.size_, 0);
  earliest_fresh_ = other.earliest_fresh_;
  slots_ = std::move(other.slots_);
  logs_ = std::move(other.logs_);
  free_logs_ = std::move(other.free_logs_);
  hint_base_ = reinterpret_cast<uintptr_t>(slots_.data());
  hint_slots_ = slots_.size();
  other.slots_.clear();
  other.hint_base_ = 0;
  other.hint_slots_ = 0;
  return *this;
}

ShardTable::Slot* ShardTable::Find(uint64_t fp) {
  const size_t n = slots_.size();
  if (n == 0) return nullptr;
  for (size_t i = Home(fp);; i = (i + 1 == n ? 0 : i + 1)) {
    const uint64_t at = slots_[i].Fingerprint();
    if (at == fp) return &slots_[i];
    if (at == 0) return nullptr;
  }
}

ShardTable::Slot* ShardTable::Insert(uint64_t fp) {
  assert(fp != 0 && size_ < MaxLoad(slots_.size()));
  const size_t n = slots_.size();
  size_t i = Home(fp);
  while (slots_[i].Fingerprint() != 0) i = (i + 1 == n ? 0 : i + 1);
  Slot& slot = slots_[i];
  slot.Store<uint64_t>(0, fp);
  slot.Store(8, CompactState{});  // the eviction rank too
  slot.Store<uint32_t>(32, 0);
  if (IsLog(fp)) {
    uint32_t index;
    if (free_logs_.empty()) {
      index = static_cast<uint32_t>(logs_.size());
      logs_.emplace_back();
    } else {
      index = free_logs_.back();
      free_logs_.pop_back();
    }
    slot.SetState({.w = {index, 0, 0}});
  }
  ++size_;
  return &slot;
}

void ShardTable::Record(Slot& slot, FreshTick fresh_at, int64_t consumed) {
  SetFreshAt(slot, fresh_at);
  slot.bytes_[Slot::kRankByte] = EvictionRank(consumed);
}

void ShardTable::SetFreshAt(Slot& slot, FreshTick at) {
  at = std::clamp<FreshTick>(at, 0, kNeverFresh);
  slot.Store<uint32_t>(32, static_cast<uint32_t>(at));
  // Stored only when it moves: an unconditional store would dirty the line on every write.
  if (at < earliest_fresh_) earliest_fresh_ = at;
}

size_t ShardTable::SlotsFor(size_t keys) const {
  // Grow by doubling, keeping 1/8 of the load limit free after a rebuild so that the next
  // rebuild is far away; the last step lands exactly on max_slots_.
  size_t slots = std::max(slots_.size(), std::min(kInitialSlots, max_slots_));
  while (slots < max_slots_ && keys > MaxLoad(slots) - MaxLoad(slots) / 8) {
    slots = std::min(slots * 2, max_slots_);
  }
  return slots;
}

bool ShardTable::Kept(uint64_t fp, std::span<const uint64_t> keep) {
  return std::find(keep.begin(), keep.end(), fp) != keep.end();
}

ShardTable::Room ShardTable::MakeRoom(size_t needed, FreshTick now,
                                      std::span<const uint64_t> keep) {
  if (size_ + needed <= std::min(max_keys_, MaxLoad(slots_.size()))) return {.ok = true};
  size_t live = size_;
  if (now >= earliest_fresh_) {  // some entries may be fresh: reclaim them before growing
    live = 0;
    for (const Slot& s : slots_) live += s.Fingerprint() != 0 && !IsFresh(s, now);
  }
  if (live + needed <= max_keys_) {
    Rebuild(SlotsFor(live + needed), now);
    return {.ok = size_ + needed <= std::min(max_keys_, MaxLoad(slots_.size()))};
  }
  // Full of live entries: forget the ones whose loss admits least, a share at a time so that
  // the scan is paid once per max_keys / kEvictionShare new keys.
  size_t kept = 0;
  for (uint64_t fp : keep) {
    const Slot* s = Find(fp);
    kept += s != nullptr && !IsFresh(*s, now);
  }
  if (needed + kept > max_keys_) return {};
  const size_t evictable = live - kept;
  const size_t count = std::min(
      evictable,
      std::max(live + needed - max_keys_, (max_keys_ + kEvictionShare - 1) / kEvictionShare));
  const Eviction plan = PlanEviction(count, now, keep);
  const size_t evicted = Rebuild(SlotsFor(live - count + needed), now, &plan);
  return {.ok = size_ + needed <= std::min(max_keys_, MaxLoad(slots_.size())), .evicted = evicted};
}

ShardTable::Eviction ShardTable::PlanEviction(size_t count, FreshTick now,
                                              std::span<const uint64_t> keep) const {
  std::vector<uint64_t> keys;
  keys.reserve(size_);
  for (const Slot& s : slots_) {
    const uint64_t fp = s.Fingerprint();
    if (fp == 0 || IsFresh(s, now) || Kept(fp, keep)) continue;
    keys.push_back(EvictionKey(s));
  }
  Eviction plan{.keep = keep};
  if (count == 0 || keys.empty()) return plan;
  count = std::min(count, keys.size());
  std::nth_element(keys.begin(), keys.begin() + static_cast<ptrdiff_t>(count - 1), keys.end());
  plan.threshold = keys[count - 1];
  size_t below = 0;
  for (uint64_t k : keys) below += k < plan.threshold;
  plan.ties = count - below;
  return plan;
}

size_t ShardTable::Rebuild(size_t slots, FreshTick now, const Eviction* evict) {
  std::vector<Slot> old(slots, Slot{});
  old.swap(slots_);
  hint_base_.store(reinterpret_cast<uintptr_t>(slots_.data()), std::memory_order_relaxed);
  hint_slots_.store(slots_.size(), std::memory_order_relaxed);
  size_ = 0;
  earliest_fresh_ = kNeverFresh;
  size_t ties = evict != nullptr ? evict->ties : 0;
  size_t evicted = 0;
  for (const Slot& s : old) {
    const uint64_t fp = s.Fingerprint();
    if (fp == 0) continue;
    bool drop = IsFresh(s, now);
    if (!drop && evict != nullptr && !Kept(fp, evict->keep)) {
      const uint64_t key = EvictionKey(s);
      drop = key < evict->threshold || (key == evict->threshold && ties > 0);
      if (drop && key == evict->threshold) --ties;
      evicted += drop;
    }
    if (drop) {
      if (IsLog(fp)) FreeLog(s.LogIndex());
      continue;
    }
    size_t i = Home(fp);
    while (slots_[i].Fingerprint() != 0) i = (i + 1 == slots ? 0 : i + 1);
    slots_[i] = s;
    ++size_;
    earliest_fresh_ = std::min(earliest_fresh_, s.FreshAt());
  }
  return evicted;
}

void ShardTable::FreeLog(uint32_t index) {
  logs_[index] = {};  // releases the list's memory
  free_logs_.push_back(index);
}

size_t ShardTable::MemoryUsage() const {
  size_t bytes = slots_.capacity() * sizeof(Slot) +
                 logs_.capacity() * sizeof(sliding_window_log::LogState) +
                 free_logs_.capacity() * sizeof(uint32_t);
  for (const auto& log : logs_) bytes += log.entries.capacity() * sizeof(sliding_window_log::Entry);
  return bytes;
}

}  // namespace caudal
