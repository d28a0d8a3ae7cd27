// OverLimitCache: the refusals the store gave, remembered until the store would have admitted
// the same request again, so that a key flooding past its limit costs the store nothing more.
//
// When the store refuses cost c on a key with retry_after X, a request of cost c or more on that
// key cannot pass before X whatever else happens — other requests only consume more — except a
// refund. Remember() records it until `sent` + X, where `sent` is when the request left for the
// store: the store decided after that, so the entry never outlives the store's own refusal.
// Lookup() answers from the entry (a refusal of the request, and the store is not asked) for
// costs ≥ c until then, and only until then; smaller costs, and every key not remembered, go to
// the store. A refund made through this instance forgets the key first. A refund made through
// another instance sharing the store is not seen: the entry then refuses at most until its end,
// which it would have done without that refund.
//
// Bounded: at most `max_keys` entries; a full shard drops its expired entries, then an arbitrary
// one (forgetting only costs a store call).
//
// Thread-safety: every method may be called from any thread (a mutex per shard).
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>

#include "caudal/algorithms/limit.h"
#include "caudal/common/clock.h"

namespace caudal::engine_internal {

class OverLimitCache {
 public:
  explicit OverLimitCache(size_t max_keys);

  // The refusal to give a request of `cost` on `key` at monotonic time `now`, or nullopt when
  // the store must decide. The decision's retry_after is what is left of the store's.
  std::optional<Decision> Lookup(std::string_view key, int64_t cost, Nanos now);
  // The store refused `refused` (verdict kDenied) for `cost` on `key`, for a request sent at
  // `sent`.
  void Remember(std::string_view key, int64_t cost, Nanos sent, const Decision& refused);
  void Forget(std::string_view key);
  // Forgets every key (an override changed, or an identity's state was reset).
  void Clear();

  uint64_t hits() const { return hits_.load(std::memory_order_relaxed); }

 private:
  struct Entry {
    int64_t cost = 0;   // the least cost refused
    Nanos until{0};     // refused before this (monotonic)
    Decision decision;  // as the store gave it
  };
  struct alignas(64) Shard {
    std::mutex mu;
    std::unordered_map<std::string, Entry> entries;  // guarded by mu
  };
  static constexpr size_t kShards = 16;

  Shard& ShardOf(std::string_view key);

  const size_t max_per_shard_;
  std::array<Shard, kShards> shards_;
  std::atomic<uint64_t> hits_{0};
};

}  // namespace caudal::engine_internal
