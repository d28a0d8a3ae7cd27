#include "caudal/algorithms/token_bucket.h"

#include "algorithms/exact_math.h"

namespace caudal::token_bucket {
namespace {

// Time (µs, rounded up) until a bucket holding tokens + frac/p holds `target`, at n tokens per
// p µs: ceil(((target − tokens)·p − frac) / n), or 0 when it already does.
int64_t TimeToReach(int64_t target, int64_t tokens, int64_t frac, int64_t n, int64_t p) {
  if (target <= tokens) return 0;
  const auto [q, r] = exact::MulDiv(target - tokens, p, n);
  return q + exact::CeilDiv(r - frac, n);
}

}  // namespace

Step Decide(const Limit& limit, const CompactState* state, Micros now_us, int64_t cost) {
  const int64_t cap = limit.capacity();
  const int64_t n = limit.refill_count();
  const int64_t p = limit.refill_period_us();
  const int64_t now = now_us.count();

  int64_t tokens = cap;
  int64_t frac = 0;
  int64_t last = now;
  if (state != nullptr) {
    tokens = state->w[0];
    frac = state->w[1];
    last = state->w[2];
    if (now > last) {  // Δt = max(0, now − last)
      const int64_t dt = now - last;
      if (dt >= TimeToReach(cap, tokens, frac, n, p)) {  // T = min(B, T + r·Δt)
        tokens = cap;
        frac = 0;
      } else {
        const auto [q, r] = exact::MulDiv(dt, n, p);
        tokens += q;
        frac += r;
        if (frac >= p) {
          frac -= p;
          ++tokens;
        }
      }
      last = now;
    }
  }

  Step step;
  Decision& d = step.decision;
  d.limit = cap;
  if (cost > cap) {
    d.verdict = Verdict::kNeverFits;
  } else if (tokens >= cost) {  // T ≥ c, and c is whole, so whole tokens decide
    d.verdict = Verdict::kAllowed;
    tokens -= cost;
    step.consumed = cost > 0;
  } else {
    d.verdict = Verdict::kDenied;
    d.retry_after = Micros((last - now) + TimeToReach(cost, tokens, frac, n, p));
  }
  d.remaining = tokens;
  d.reset_after = Micros((last - now) + TimeToReach(cap, tokens, frac, n, p));
  step.next.w = {tokens, frac, last};
  return step;
}

}  // namespace caudal::token_bucket
