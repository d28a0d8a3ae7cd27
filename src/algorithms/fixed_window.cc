#include "algorithms/fixed_window.h"

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
  // A charge may overdraw the window (count > max); nothing is left then.
  step.decision.remaining = std::max<int64_t>(0, max - win.count);
  step.decision.overdrawn = std::max<int64_t>(0, win.count - max);
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
  } else if (count + cost <= max || cost == 0) {  // a peek passes, even an overdrawn window
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

Step Charge(const Limit& limit, const CompactState* state, Micros now_us, int64_t cost) {
  const int64_t max = limit.capacity();
  const int64_t w = limit.window().count();
  const int64_t now = now_us.count();
  Window win = Load(state, now, w);
  Step step;
  Decision& d = step.decision;
  if (cost > max) {
    d.verdict = Verdict::kNeverFits;
  } else if (win.count + cost <= max) {
    d.verdict = Verdict::kAllowed;
  } else {
    d.verdict = Verdict::kDenied;
    d.retry_after = Micros(win.start + w - now);
  }
  // Counted whatever the verdict, saturating where every hit is refused anyway.
  const int64_t counted = std::min(win.count + cost, max + kMaxCapacity);
  step.changed = counted != win.count;
  win.count = counted;
  Report(step, max, win, w, now);
  return step;
}

Step Overdraw(const Limit& limit, const CompactState* state, Micros now, int64_t units) {
  Step step = Charge(limit, state, now, units);
  step.decision.verdict = Verdict::kAllowed;
  step.decision.retry_after = Micros(0);
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

Step GiveBack(const Limit& limit, const CompactState* state, Micros now, int64_t units, Micros at,
              Micros reset) {
  // The decision counted its units in the window ending at at + reset; once another window is
  // stored, they no longer count.
  const bool same =
      state != nullptr && state->w[0] == at.count() + reset.count() - limit.window().count();
  return Refund(limit, state, now, same ? units : 0);
}

}  // namespace caudal::fixed_window
