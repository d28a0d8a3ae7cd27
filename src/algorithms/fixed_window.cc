#include "algorithms/fixed_window.h"

#include <algorithm>

#include "algorithms/exact_math.h"

namespace caudal::fixed_window {
namespace {

struct Window {
  int64_t start = 0;
  int64_t end = 0;
  int64_t count = 0;
};

// The window holding `now`: a multiple of W since the epoch, or the limit's calendar's.
Window WindowAt(const Limit& limit, int64_t now) {
  if (const std::optional<Calendar>& c = limit.calendar()) {
    const CalendarWindow w = c->WindowAt(Micros(now));
    return {.start = w.start.count(), .end = w.end.count()};
  }
  const int64_t w = limit.window().count();
  const int64_t start = exact::WindowStart(now, w);
  return {.start = start, .end = start + w};
}

// The window counted, from `win`, the one holding now (`calendar`: a calendar's, whose end the
// state keeps).
Window LoadIn(const Limit& limit, bool calendar, Window win, const CompactState* state) {
  // The same window, or time went backwards. An empty window (all refunded) is fresh.
  if (state != nullptr && state->w[0] >= win.start && state->w[1] > 0) {
    if (state->w[0] != win.start) {  // the stored window, which a calendar's state says the end of
      win.end = calendar ? state->w[2] : state->w[0] + limit.window().count();
      win.start = state->w[0];
    }
    win.count = state->w[1];
  }
  return win;
}

Window Load(const Limit& limit, const CompactState* state, int64_t now) {
  return LoadIn(limit, limit.calendar().has_value(), WindowAt(limit, now), state);
}

void ReportIn(Step& step, const Limit& limit, bool calendar, Window win, int64_t now) {
  const int64_t max = limit.capacity();
  step.decision.limit = max;
  // A charge may overdraw the window (count > max); nothing is left then.
  step.decision.remaining = std::max<int64_t>(0, max - win.count);
  step.decision.overdrawn = std::max<int64_t>(0, win.count - max);
  step.decision.reset_after = Micros(win.count > 0 ? win.end - now : 0);
  step.next.w = {win.start, win.count, calendar ? win.end : 0};
}

void Report(Step& step, const Limit& limit, Window win, int64_t now) {
  ReportIn(step, limit, limit.calendar().has_value(), win, now);
}

// Decide, in `win` as loaded.
Step DecideIn(const Limit& limit, bool calendar, Window win, int64_t now, int64_t cost) {
  const int64_t max = limit.capacity();
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
    d.retry_after = Micros(win.end - now);  // the next window starts empty
  }
  ReportIn(step, limit, calendar, win, now);
  return step;
}

}  // namespace

Step Decide(const Limit& limit, const CompactState* state, Micros now_us, int64_t cost) {
  const int64_t now = now_us.count();
  const bool calendar = limit.calendar().has_value();
  return DecideIn(limit, calendar, LoadIn(limit, calendar, WindowAt(limit, now), state), now, cost);
}

Step DecideOnBounds(const Limit& limit, const CalendarBounds& bounds, const CompactState* state,
                    Micros now_us, int64_t cost) {
  const int64_t now = now_us.count();
  const CalendarWindow w = PickWindow(bounds, now_us);
  return DecideIn(limit, true,
                  LoadIn(limit, true, {.start = w.start.count(), .end = w.end.count()}, state), now,
                  cost);
}

Step Charge(const Limit& limit, const CompactState* state, Micros now_us, int64_t cost) {
  const int64_t max = limit.capacity();
  const int64_t now = now_us.count();
  Window win = Load(limit, state, now);
  Step step;
  Decision& d = step.decision;
  if (cost > max) {
    d.verdict = Verdict::kNeverFits;
  } else if (win.count + cost <= max) {
    d.verdict = Verdict::kAllowed;
  } else {
    d.verdict = Verdict::kDenied;
    d.retry_after = Micros(win.end - now);
  }
  // Counted whatever the verdict, saturating where every hit is refused anyway.
  const int64_t counted = std::min(win.count + cost, max + kMaxCapacity);
  step.changed = counted != win.count;
  win.count = counted;
  Report(step, limit, win, now);
  return step;
}

Step Overdraw(const Limit& limit, const CompactState* state, Micros now, int64_t units) {
  Step step = Charge(limit, state, now, units);
  step.decision.verdict = Verdict::kAllowed;
  step.decision.retry_after = Micros(0);
  return step;
}

Step Refund(const Limit& limit, const CompactState* state, Micros now_us, int64_t units) {
  const int64_t now = now_us.count();
  Window win = Load(limit, state, now);
  const int64_t back = std::min(win.count, units);
  win.count -= back;
  Step step;
  step.changed = back > 0;
  Report(step, limit, win, now);
  return step;
}

Step GiveBack(const Limit& limit, const CompactState* state, Micros now, int64_t units, Micros at,
              Micros reset) {
  // The decision counted its units in the window ending at at + reset; once another window is
  // stored, they no longer count.
  const int64_t end = at.count() + reset.count();
  const bool same =
      state != nullptr &&
      (limit.calendar() ? state->w[2] == end : state->w[0] == end - limit.window().count());
  return Refund(limit, state, now, same ? units : 0);
}

}  // namespace caudal::fixed_window
