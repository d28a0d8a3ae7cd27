#include "caudal/algorithms/fixed_window.h"

#include <algorithm>

#include "algorithms/exact_math.h"

namespace caudal::fixed_window {
namespace {

struct Window {
  int64_t start = 0;
  int64_t count = 0;
};

Window Load(const CompactState* state, int64_t now, int64_t w) {
  Window win{.start = exact::WindowStart(now, w)};
  // The same window, or time went backwards. An empty window (all refunded) is fresh.
  if (state != nullptr && state->w[0] >= win.start && state->w[1] > 0) {
    win = {.start = state->w[0], .count = state->w[1]};
  }
  return win;
}

void Report(Step& step, int64_t max, Window win, int64_t w, int64_t now) {
  step.decision.limit = max;
  step.decision.remaining = max - win.count;
  step.decision.reset_after = Micros(win.count > 0 ? win.start + w - now : 0);
  step.next.w = {win.start, win.count, 0};
}

}  // namespace

Step Decide(const Limit& limit, const CompactState* state, Micros now_us, int64_t cost) {
  const int64_t max = limit.capacity();
  const int64_t w = limit.window().count();
  const int64_t now = now_us.count();
  Window win = Load(state, now, w);
  int64_t& count = win.count;

  Step step;
  Decision& d = step.decision;
  if (cost > max) {
    d.verdict = Verdict::kNeverFits;
  } else if (count + cost <= max) {
    d.verdict = Verdict::kAllowed;
    count += cost;
    step.changed = cost > 0;
  } else {
    d.verdict = Verdict::kDenied;
    d.retry_after = Micros(win.start + w - now);  // the next window starts empty
  }
  Report(step, max, win, w, now);
  return step;
}

Step Refund(const Limit& limit, const CompactState* state, Micros now_us, int64_t units) {
  const int64_t w = limit.window().count();
  const int64_t now = now_us.count();
  Window win = Load(state, now, w);
  const int64_t back = std::min(win.count, units);
  win.count -= back;
  Step step;
  step.changed = back > 0;
  Report(step, limit.capacity(), win, w, now);
  return step;
}

}  // namespace caudal::fixed_window
