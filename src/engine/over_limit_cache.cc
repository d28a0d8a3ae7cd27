#include "engine/over_limit_cache.h"

#include <algorithm>
#include <functional>

namespace caudal::engine_internal {

OverLimitCache::OverLimitCache(size_t max_keys)
    : max_per_shard_(std::max<size_t>(1, max_keys / kShards)) {}

OverLimitCache::Shard& OverLimitCache::ShardOf(std::string_view key) {
  return shards_[std::hash<std::string_view>{}(key) % kShards];
}

std::optional<Decision> OverLimitCache::Lookup(std::string_view key, int64_t cost, Nanos now) {
  Shard& s = ShardOf(key);
  std::lock_guard lock(s.mu);
  auto it = s.entries.find(std::string(key));
  if (it == s.entries.end()) return std::nullopt;
  const Entry& e = it->second;
  if (now >= e.until) {
    s.entries.erase(it);
    return std::nullopt;
  }
  if (cost < e.cost) return std::nullopt;
  Decision d = e.decision;
  d.retry_after = std::max(Micros(1), std::chrono::duration_cast<Micros>(e.until - now));
  hits_.fetch_add(1, std::memory_order_relaxed);
  return d;
}

void OverLimitCache::Remember(std::string_view key, int64_t cost, Nanos sent,
                              const Decision& refused) {
  if (refused.verdict != Verdict::kDenied || refused.retry_after.count() <= 0) return;
  const Nanos until = sent + refused.retry_after;
  Shard& s = ShardOf(key);
  std::lock_guard lock(s.mu);
  auto it = s.entries.find(std::string(key));
  if (it == s.entries.end() && s.entries.size() >= max_per_shard_) {
    std::erase_if(s.entries, [&](const auto& kv) { return kv.second.until <= sent; });
    if (s.entries.size() >= max_per_shard_) s.entries.erase(s.entries.begin());
  }
  if (it == s.entries.end()) {
    s.entries.emplace(std::string(key), Entry{cost, until, refused});
    return;
  }
  // Keep the entry that refuses the most: the smaller cost, or the same cost for longer.
  Entry& e = it->second;
  if (cost < e.cost || (cost == e.cost && until > e.until) || e.until <= sent) {
    e = Entry{cost, until, refused};
  }
}

void OverLimitCache::Forget(std::string_view key) {
  Shard& s = ShardOf(key);
  std::lock_guard lock(s.mu);
  s.entries.erase(std::string(key));
}

void OverLimitCache::Clear() {
  for (Shard& s : shards_) {
    std::lock_guard lock(s.mu);
    s.entries.clear();
  }
}

}  // namespace caudal::engine_internal
