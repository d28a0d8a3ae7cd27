#include "algorithms/sliding_window_log.h"

#include <algorithm>

namespace caudal::sliding_window_log {
namespace {

int64_t EffectiveNow(const LogState& state, int64_t now) {
  return state.entries.empty() ? now : std::max(now, state.entries.back().at_us);
}

}  // namespace

Decision Evaluate(const Limit& limit, const LogState& state, Micros now_us, int64_t cost) {
  const int64_t max = limit.capacity();
  const int64_t w = limit.window().count();
  const int64_t now = now_us.count();
  const int64_t eff = EffectiveNow(state, now);
  const auto& entries = state.entries;

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

void Commit(const Limit& limit, LogState& state, Micros now_us, int64_t cost) {
  if (cost <= 0) return;
  const int64_t eff = EffectiveNow(state, now_us.count());
  auto& entries = state.entries;
  if (!entries.empty() && entries.back().at_us == eff) {
    entries.back().cost += cost;
  } else {
    entries.push_back({.at_us = eff, .cost = cost});
  }
  // Every later decision judges at eff or after, so what lies at or before eff − W never counts.
  const int64_t horizon = eff - limit.window().count();
  entries.erase(entries.begin(),
                std::partition_point(entries.begin(), entries.end(),
                                     [&](const Entry& e) { return e.at_us <= horizon; }));
}

Decision Refund(const Limit& limit, LogState& state, Micros now_us, int64_t units) {
  if (units <= 0) return Evaluate(limit, state, now_us, 0);  // a refund of nothing is a peek
  const int64_t horizon = EffectiveNow(state, now_us.count()) - limit.window().count();
  auto& entries = state.entries;
  while (units > 0 && !entries.empty() && entries.back().at_us > horizon) {
    const int64_t back = std::min(units, entries.back().cost);
    entries.back().cost -= back;
    units -= back;
    if (entries.back().cost == 0) entries.pop_back();
  }
  if (!entries.empty() && entries.back().at_us <= horizon) entries.clear();
  return Evaluate(limit, state, now_us, 0);
}

}  // namespace caudal::sliding_window_log
