#include "observe/log_throttle.h"

namespace caudal {

std::optional<uint64_t> LogThrottle::Admit(std::string_view key) {
  const Nanos now = clock_.Now();
  std::lock_guard<std::mutex> lock(mu_);
  auto it = entries_.find(key);
  if (it == entries_.end()) {
    if (entries_.size() >= options_.max_keys) DropIdle(now);
    if (entries_.size() >= options_.max_keys) return 0;  // untracked, never silenced
    entries_.emplace(std::string(key), Entry{.last_admitted = now, .suppressed = 0});
    return 0;
  }
  Entry& e = it->second;
  if (now - e.last_admitted < options_.interval) {
    ++e.suppressed;
    return std::nullopt;
  }
  const uint64_t suppressed = e.suppressed;
  e = {.last_admitted = now, .suppressed = 0};
  return suppressed;
}

void LogThrottle::DropIdle(Nanos now) {
  std::erase_if(entries_, [&](const auto& kv) {
    // A key idle for an interval has nothing to hold back; its pending count, if any, is lost.
    return now - kv.second.last_admitted >= options_.interval;
  });
}

}  // namespace caudal
