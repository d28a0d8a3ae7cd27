#include "caudal/algorithms/sliding_window_counter.h"

#include "algorithms/exact_math.h"

namespace caudal::sliding_window_counter {
namespace {

// The smallest elapsed time e in the window at which floor(prev·(w − e)/w) <= allowed, where
// allowed >= 0; may be w or more when no e inside the window suffices.
int64_t FirstElapsedWithin(int64_t prev, int64_t allowed, int64_t w) {
  const int64_t a1 = allowed + 1;
  if (a1 > prev) return 0;
  if (a1 == prev) return 1;
  // prev·(w − e) < a1·w  ⇔  e ≥ w − ceil(a1·w / prev) + 1
  const auto [q, r] = exact::MulDiv(a1, w, prev);
  return w - (q + (r > 0 ? 1 : 0)) + 1;
}

}  // namespace

Step Decide(const Limit& limit, const CompactState* state, Micros now_us, int64_t cost) {
  const int64_t max = limit.capacity();
  const int64_t w = limit.window().count();
  const int64_t now = now_us.count();

  int64_t start = exact::WindowStart(now, w);
  int64_t cur = 0;
  int64_t prev = 0;
  if (state != nullptr) {
    const int64_t s = state->w[0];
    if (s >= start) {  // the same window, or time went backwards: judge in the stored one
      start = s;
      cur = state->w[1];
      prev = state->w[2];
    } else if (s == start - w) {  // the stored window is now the previous one
      prev = state->w[1];
    }
  }
  const int64_t elapsed = (now > start ? now : start) - start;
  const int64_t weighted = prev > 0 ? exact::MulDiv(prev, w - elapsed, w).quot : 0;

  Step step;
  Decision& d = step.decision;
  d.limit = max;
  if (cost > max) {
    d.verdict = Verdict::kNeverFits;
  } else if (weighted + cur + cost <= max) {
    d.verdict = Verdict::kAllowed;
    cur += cost;
    step.consumed = cost > 0;
  } else {
    d.verdict = Verdict::kDenied;
    int64_t at = -1;  // absolute time (µs) at which the request would pass
    if (max - cur - cost >= 0) {
      const int64_t e = FirstElapsedWithin(prev, max - cur - cost, w);
      if (e < w) at = start + e;
    }
    if (at < 0) {  // in the next window cur becomes prev and the count restarts at 0
      const int64_t e = cur > 0 ? FirstElapsedWithin(cur, max - cost, w) : 0;
      at = e < w ? start + w + e : start + 2 * w;
    }
    d.retry_after = Micros(at - now);
  }
  const int64_t left = max - weighted - cur;
  d.remaining = left > 0 ? left : 0;
  d.reset_after = Micros(cur > 0 ? start + 2 * w - now : (prev > 0 ? start + w - now : 0));
  step.next.w = {start, cur, prev};
  return step;
}

}  // namespace caudal::sliding_window_counter
