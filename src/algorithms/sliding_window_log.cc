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

  // The window is (eff − w, eff]: an entry at t has left it once t <= eff − w.
  auto& entries = state.entries;
  const auto first_live = std::find_if(entries.begin(), entries.end(),
                                       [&](const Entry& e) { return e.at_us > eff - w; });
  entries.erase(entries.begin(), first_live);
  int64_t used = 0;
  for (const Entry& e : entries) used += e.cost;

  Decision d;
  d.limit = max;
  int64_t newest = entries.empty() ? -1 : entries.back().at_us;
  if (cost > max) {
    d.verdict = Verdict::kNeverFits;
  } else if (used + cost <= max) {
    d.verdict = Verdict::kAllowed;
    used += cost;
    if (cost > 0) newest = eff;
  } else {
    d.verdict = Verdict::kDenied;
    const int64_t must_leave = used + cost - max;
    int64_t left = 0;
    for (const Entry& e : entries) {
      left += e.cost;
      if (left >= must_leave) {
        d.retry_after = Micros(e.at_us + w - now);
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
