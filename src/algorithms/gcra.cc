#include "caudal/algorithms/gcra.h"

#include "algorithms/exact_math.h"

namespace caudal::gcra {

Step Decide(const Limit& limit, const CompactState* state, Micros now_us, int64_t cost) {
  const int64_t cap = limit.capacity();
  const int64_t n = limit.refill_count();
  const int64_t p = limit.refill_period_us();
  const int64_t now = now_us.count();

  // base = max(TAT, now), as whole µs plus a fraction over n.
  int64_t bw = now;
  int64_t bf = 0;
  if (state != nullptr && (state->w[0] > now || (state->w[0] == now && state->w[1] > 0))) {
    bw = state->w[0];
    bf = state->w[1];
  }
  const auto [tau_w, tau_f] = exact::MulDiv(cap, p, n);  // τ = B·e = B·p/n

  Step step;
  Decision& d = step.decision;
  d.limit = cap;
  int64_t tw = bw;  // the TAT after this decision
  int64_t tf = bf;
  if (cost > cap) {
    d.verdict = Verdict::kNeverFits;
  } else {
    const auto [cw, cf] = exact::MulDiv(cost, p, n);  // c·e
    int64_t nw = bw + cw;
    int64_t nf = bf + cf;
    if (nf >= n) {
      nf -= n;
      ++nw;
    }
    const int64_t dw = nw - now;
    // new TAT − now ≤ τ; a peek always passes (after time went backwards TAT − now can exceed τ)
    if (cost == 0 || dw < tau_w || (dw == tau_w && nf <= tau_f)) {
      d.verdict = Verdict::kAllowed;
      tw = nw;
      tf = nf;
      step.consumed = cost > 0;
    } else {
      d.verdict = Verdict::kDenied;
      d.retry_after = Micros((dw - tau_w) + exact::CeilDiv(nf - tau_f, n));
    }
  }

  // Tokens left are B − (TAT − now)/e, rounded down; the state is fresh once TAT ≤ now.
  const int64_t dw = tw - now;
  if (dw > tau_w) {
    d.remaining = 0;  // only when time went backwards past the whole burst tolerance
  } else {
    const auto [q, r] = exact::MulDiv(dw, n, p);
    const int64_t whole = q + (r + tf) / p;
    const int64_t rem = (r + tf) % p;
    d.remaining = cap - whole - (rem > 0 ? 1 : 0);
    if (d.remaining < 0) d.remaining = 0;
  }
  d.reset_after = Micros(dw + (tf > 0 ? 1 : 0));
  if (step.consumed) {
    step.next.w = {tw, tf, 0};
  } else if (state != nullptr) {
    step.next = *state;
  } else {
    step.next.w = {now, 0, 0};
  }
  return step;
}

}  // namespace caudal::gcra
