#include "store/shard_table.h"

#include <algorithm>
#include <cassert>
#include <utility>

namespace caudal {
namespace {

constexpr size_t kInitialSlots = 16;

}  // namespace

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
  slot.SetState({});
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

void ShardTable::SetFreshAt(Slot& slot, FreshTick at) {
  at = std::clamp<FreshTick>(at, 0, kNeverFresh);
  slot.Store<uint32_t>(32, static_cast<uint32_t>(at));
  earliest_fresh_ = std::min(earliest_fresh_, at);
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

bool ShardTable::MakeRoom(size_t needed, FreshTick now) {
  if (size_ + needed <= std::min(max_keys_, MaxLoad(slots_.size()))) return true;
  size_t live = size_;
  if (now >= earliest_fresh_) {  // some entries may be fresh: reclaim them before growing
    live = 0;
    for (const Slot& s : slots_) live += s.Fingerprint() != 0 && !IsFresh(s, now);
  } else if (size_ + needed > max_keys_) {
    return false;  // full of live entries, and none turns fresh before earliest_fresh_
  }
  Rebuild(SlotsFor(live + needed), now);
  return size_ + needed <= std::min(max_keys_, MaxLoad(slots_.size()));
}

void ShardTable::Rebuild(size_t slots, FreshTick now) {
  std::vector<Slot> old(slots, Slot{});
  old.swap(slots_);
  hint_base_.store(reinterpret_cast<uintptr_t>(slots_.data()), std::memory_order_relaxed);
  hint_slots_.store(slots_.size(), std::memory_order_relaxed);
  size_ = 0;
  earliest_fresh_ = kNeverFresh;
  for (const Slot& s : old) {
    const uint64_t fp = s.Fingerprint();
    if (fp == 0) continue;
    if (IsFresh(s, now)) {
      if (IsLog(fp)) FreeLog(s.LogIndex());
      continue;
    }
    size_t i = Home(fp);
    while (slots_[i].Fingerprint() != 0) i = (i + 1 == slots ? 0 : i + 1);
    slots_[i] = s;
    ++size_;
    earliest_fresh_ = std::min(earliest_fresh_, s.FreshAt());
  }
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
