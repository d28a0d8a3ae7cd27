#include "caudal/algorithms/fixed_window.h"

#include "algorithms/exact_math.h"

namespace caudal::fixed_window {

Step Decide(const Limit& limit, const CompactState* state, Micros now_us, int64_t cost) {
  const int64_t max = limit.capacity();
  const int64_t w = limit.window().count();
  const int64_t now = now_us.count();

  int64_t start = exact::WindowStart(now, w);
  int64_t count = 0;
  if (state != nullptr && state->w[0] >= start) {  // same window, or time went backwards
    start = state->w[0];
    count = state->w[1];
  }

  Step step;
  Decision& d = step.decision;
  d.limit = max;
  if (cost > max) {
    d.verdict = Verdict::kNeverFits;
  } else if (count + cost <= max) {
    d.verdict = Verdict::kAllowed;
    count += cost;
    step.consumed = cost > 0;
  } else {
    d.verdict = Verdict::kDenied;
    d.retry_after = Micros(start + w - now);  // the next window starts empty
  }
  d.remaining = max - count;
  d.reset_after = Micros(count > 0 ? start + w - now : 0);
  step.next.w = {start, count, 0};
  return step;
}

}  // namespace caudal::fixed_window
