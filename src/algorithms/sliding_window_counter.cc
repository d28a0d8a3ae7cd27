#include "algorithms/sliding_window_counter.h"

#include <algorithm>

#include "algorithms/exact_math.h"

namespace caudal::sliding_window_counter {
namespace {

// The previous window's share of the true window (now − W, now] at elapsed e: that window keeps
// W − 1 − e of its W microseconds inside, so its estimated count is prev·(W − 1 − e)/W, rounded
// up. Rounding up is what keeps any true window below 2·limit (see the header); counting the
// current microsecond as elapsed is what lets a steady client get exactly `limit` per window.
int64_t Weighted(int64_t prev, int64_t elapsed, int64_t w) {
  if (prev == 0) return 0;
  const auto [q, r] = exact::MulDiv(prev, w - 1 - elapsed, w);
  return q + (r > 0 ? 1 : 0);
}

// The smallest elapsed e in [0, W − 1] with Weighted(prev, e, w) <= allowed, for allowed >= 0:
// prev·(W − 1 − e) <= allowed·W  ⇔  e >= W − 1 − floor(allowed·W / prev). Weighted is 0 at
// e = W − 1, so such an e always exists.
int64_t FirstElapsedWithin(int64_t prev, int64_t allowed, int64_t w) {
  if (allowed >= prev) return 0;
  return w - 1 - exact::MulDiv(allowed, w, prev).quot;
}

struct Counts {
  int64_t start = 0;
  int64_t cur = 0;
  int64_t prev = 0;
};

Counts Load(const CompactState* state, int64_t now, int64_t w) {
  Counts c{.start = exact::WindowStart(now, w)};
  // Both counts at 0 (all refunded) is a fresh state.
  if (state != nullptr && (state->w[1] > 0 || state->w[2] > 0)) {
    const int64_t s = state->w[0];
    if (s >= c.start) {  // the same window, or time went backwards: judge in the stored one
      c = {.start = s, .cur = state->w[1], .prev = state->w[2]};
    } else if (s == c.start - w) {  // the stored window is now the previous one
      c.prev = state->w[1];
    }
  }
  return c;
}

int64_t WeightedPrev(const Counts& c, int64_t now, int64_t w) {
  const int64_t elapsed = (now > c.start ? now : c.start) - c.start;
  return Weighted(c.prev, elapsed, w);
}

void Report(Step& step, int64_t max, const Counts& c, int64_t weighted, int64_t w, int64_t now) {
  Decision& d = step.decision;
  d.limit = max;
  const int64_t left = max - weighted - c.cur;
  d.remaining = left > 0 ? left : 0;
  d.reset_after = Micros(c.cur > 0 ? c.start + 2 * w - now : (c.prev > 0 ? c.start + w - now : 0));
  step.next.w = {c.start, c.cur, c.prev};
}

}  // namespace

Step Decide(const Limit& limit, const CompactState* state, Micros now_us, int64_t cost) {
  const int64_t max = limit.capacity();
  const int64_t w = limit.window().count();
  const int64_t now = now_us.count();
  Counts c = Load(state, now, w);
  const int64_t start = c.start;
  const int64_t prev = c.prev;
  int64_t& cur = c.cur;
  const int64_t weighted = WeightedPrev(c, now, w);

  Step step;
  Decision& d = step.decision;
  if (cost > max) {
    d.verdict = Verdict::kNeverFits;
  } else if (cost == 0 || weighted + cur + cost <= max) {  // a peek always passes
    d.verdict = Verdict::kAllowed;
    cur += cost;
    step.changed = cost > 0;
  } else {
    d.verdict = Verdict::kDenied;
    // Within this window if cur leaves room for the cost once prev has faded enough; otherwise in
    // the next one, where cur becomes prev and the count restarts at 0 (cost <= max, so it fits
    // by that window's last microsecond at the latest).
    const int64_t at = max - cur - cost >= 0 ? start + FirstElapsedWithin(prev, max - cur - cost, w)
                                             : start + w + FirstElapsedWithin(cur, max - cost, w);
    d.retry_after = Micros(at - now);
  }
  Report(step, max, c, weighted, w, now);
  return step;
}

Step Refund(const Limit& limit, const CompactState* state, Micros now_us, int64_t units) {
  const int64_t w = limit.window().count();
  const int64_t now = now_us.count();
  Counts c = Load(state, now, w);
  const int64_t from_cur = std::min(c.cur, units);
  const int64_t from_prev = std::min(c.prev, units - from_cur);
  c.cur -= from_cur;
  c.prev -= from_prev;
  Step step;
  step.changed = from_cur + from_prev > 0;
  Report(step, limit.capacity(), c, WeightedPrev(c, now, w), w, now);
  return step;
}

}  // namespace caudal::sliding_window_counter
