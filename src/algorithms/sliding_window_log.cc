#include "caudal/algorithms/sliding_window_log.h"

#include <algorithm>

namespace caudal::sliding_window_log {
namespace {

int64_t EffectiveNow(const LogState& state, int64_t now) {
  return state.entries.empty() ? now : std::max(now, state.entries.back().at_us);
}

}  // namespace

Decision Evaluate(const Limit& limit, LogState& state, Micros now_us, int64_t cost) {
  const int64_t max = limit.capacity();
  const int64_t w = limit.window().count();
  const int64_t now = now_us.count();
  const int64_t eff = EffectiveNow(state, now);
  auto& entries = state.entries;

  // Once the newest entry has left the window the log is fresh (reset_after has passed), and it
  // is emptied, as a store may drop it. Otherwise the judging time never falls below the newest
  // entry, so only entries at or before newest − W can never count again. Entries that merely
  // left (now − W, now] stay: a clock stepping back must still see them.
  if (!entries.empty()) {
    const int64_t horizon = entries.back().at_us <= now - w ? now : entries.back().at_us - w;
    entries.erase(entries.begin(),
                  std::partition_point(entries.begin(), entries.end(),
                                       [&](const Entry& e) { return e.at_us <= horizon; }));
  }
  const auto live = std::partition_point(entries.begin(), entries.end(),
                                         [&](const Entry& e) { return e.at_us <= eff - w; });
  int64_t used = 0;
  for (auto it = live; it != entries.end(); ++it) used += it->cost;

  Decision d;
  d.limit = max;
  int64_t newest = live != entries.end() ? entries.back().at_us : -1;  // newest entry in window
  if (cost > max) {
    d.verdict = Verdict::kNeverFits;
  } else if (used + cost <= max) {
    d.verdict = Verdict::kAllowed;
    used += cost;
    if (cost > 0) newest = eff;
  } else {
    d.verdict = Verdict::kDenied;
    // The oldest units leave first: wait until enough of them have.
    const int64_t must_leave = used + cost - max;
    int64_t left = 0;
    for (auto it = live; it != entries.end(); ++it) {
      left += it->cost;
      if (left >= must_leave) {
        d.retry_after = Micros(it->at_us + w - now);
        break;
      }
    }
  }
  d.remaining = max - used;
  d.reset_after = Micros(newest >= 0 ? newest + w - now : 0);
  return d;
}

void Commit(LogState& state, Micros now_us, int64_t cost) {
  if (cost <= 0) return;
  const int64_t eff = EffectiveNow(state, now_us.count());
  if (!state.entries.empty() && state.entries.back().at_us == eff) {
    state.entries.back().cost += cost;
  } else {
    state.entries.push_back({.at_us = eff, .cost = cost});
  }
}

}  // namespace caudal::sliding_window_log
