#include "algorithms/concurrency.h"

#include <algorithm>

namespace caudal::concurrency {
namespace {

// Drops the holds that expired at or before `now`.
void DropExpired(Holds& holds, Micros now) {
  std::erase_if(holds.entries,
                [&](const sliding_window_log::Entry& h) { return h.at_us <= now.count(); });
}

}  // namespace

Decision Evaluate(const Limit& limit, const Holds& holds, Micros now, int64_t cost) {
  int64_t live = 0;
  int64_t earliest = 0;
  int64_t latest = now.count();
  for (const sliding_window_log::Entry& h : holds.entries) {
    if (h.at_us <= now.count()) continue;
    earliest = live == 0 ? h.at_us : std::min(earliest, h.at_us);
    latest = std::max(latest, h.at_us);
    ++live;
  }
  Decision d;
  d.limit = limit.capacity();
  if (cost > 0 && live >= limit.capacity()) {
    d.verdict = Verdict::kDenied;
    d.remaining = 0;
    d.retry_after = Micros(earliest - now.count());
  } else {
    if (cost > 0) {
      ++live;
      latest = std::max(latest, now.count() + limit.window().count());
    }
    d.remaining = std::max<int64_t>(0, limit.capacity() - live);
  }
  d.reset_after = Micros(latest - now.count());
  return d;
}

void Take(const Limit& limit, Holds& holds, Micros now, int64_t id) {
  DropExpired(holds, now);
  holds.entries.push_back({.at_us = now.count() + limit.window().count(), .cost = id});
}

Decision Release(const Limit& limit, Holds& holds, Micros now, int64_t id, bool* released) {
  DropExpired(holds, now);
  const auto before = holds.entries.size();
  std::erase_if(holds.entries, [&](const sliding_window_log::Entry& h) { return h.cost == id; });
  *released = holds.entries.size() != before;
  return concurrency::Evaluate(limit, holds, now, 0);
}

}  // namespace caudal::concurrency
