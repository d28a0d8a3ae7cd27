// The benchmarks' second baseline: the fast table a careful engineer would write without
// caudal's guarantees — 64 shards, each a std::mutex and a flat open-addressing table with
// linear probing over 24-byte slots {hash, tokens as double, last time}, keyed by
// std::hash<std::string_view> (not keyed, so a client could aim collisions at it), preallocated
// for every key (no growth, no reclaiming, no bound), floating-point refill. It shows what a
// bare flat table costs on this machine, so caudal's figure can be read against it.
#pragma once

#include <algorithm>
#include <bit>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string_view>
#include <vector>

namespace caudal::bench {

class BaselineFlatTable {
 public:
  BaselineFlatTable(size_t max_keys, double capacity, double tokens_per_second)
      : capacity_(capacity), per_ns_(tokens_per_second / 1e9) {
    // Load at most 1/2 once every key is in.
    const size_t per_shard = std::bit_ceil(std::max<size_t>(16, 2 * max_keys / kShards));
    for (Shard& s : shards_) s.slots.assign(per_shard, Slot{});
  }

  bool Allow(std::string_view key, int64_t now_ns) {
    uint64_t h = std::hash<std::string_view>{}(key) | 1;  // 0 marks an empty slot
    Shard& shard = shards_[h >> 58];
    const size_t mask = shard.slots.size() - 1;
    std::lock_guard<std::mutex> lock(shard.mu);
    for (size_t i = h & mask;; i = (i + 1) & mask) {
      Slot& s = shard.slots[i];
      if (s.hash == 0) {
        s = Slot{h, capacity_ - 1.0, now_ns};
        return true;
      }
      if (s.hash != h) continue;
      s.tokens = std::min(capacity_, s.tokens + static_cast<double>(now_ns - s.last_ns) * per_ns_);
      s.last_ns = std::max(s.last_ns, now_ns);
      if (s.tokens < 1.0) return false;
      s.tokens -= 1.0;
      return true;
    }
  }

 private:
  static constexpr size_t kShards = 64;
  struct Slot {
    uint64_t hash = 0;
    double tokens = 0;
    int64_t last_ns = 0;
  };
  struct alignas(64) Shard {
    std::mutex mu;
    std::vector<Slot> slots;  // guarded by mu
  };
  const double capacity_;
  const double per_ns_;
  Shard shards_[kShards];
};

}  // namespace caudal::bench
