#include "algorithms/gcra.h"

#include <algorithm>

#include "algorithms/algorithm.h"
#include "algorithms/exact_math.h"

namespace caudal::gcra {
namespace {

// True when a stored TAT is after `now`: the state holds debt, it is not fresh.
bool InDebt(const CompactState* state, int64_t now) {
  return state != nullptr && (state->w[0] > now || (state->w[0] == now && state->w[1] > 0));
}

// Tokens left are B − (TAT − now)/e, rounded down; the state is fresh once TAT ≤ now.
void Report(Decision& d, int64_t tw, int64_t tf, int64_t now, const Limit& limit,
            exact::QuotRem tau) {
  const int64_t cap = limit.capacity();
  const int64_t n = limit.refill_count();
  const int64_t p = limit.refill_period_us();
  d.limit = cap;
  const int64_t dw = tw - now;
  if (dw > tau.quot) {
    d.remaining = 0;  // in debt, or time went backwards past the whole burst tolerance
  } else {
    const auto [q, r] = exact::MulDiv(dw, n, p);
    const int64_t whole = q + (r + tf) / p;
    const int64_t rem = (r + tf) % p;
    d.remaining = cap - whole - (rem > 0 ? 1 : 0);
    if (d.remaining < 0) d.remaining = 0;
  }
  d.reset_after = Micros(dw + (tf > 0 ? 1 : 0));
}

// The arrival time tw + tf/n moved back by gw + gf/n, never before now.
void PullBack(int64_t& tw, int64_t& tf, int64_t gw, int64_t gf, int64_t now, int64_t n) {
  tw -= gw;
  tf -= gf;
  if (tf < 0) {
    tf += n;
    --tw;
  }
  if (tw < now || (tw == now && tf == 0)) {
    tw = now;
    tf = 0;
  }
}

// The wait (µs, rounded up) until a hit of `cost` fits when the arrival time is max(TAT, now)
// for the TAT tw + tf/n: 0 when max(TAT, now) + c·e − now ≤ τ already.
int64_t WaitFor(int64_t tw, int64_t tf, int64_t now, int64_t cost, const Limit& limit,
                exact::QuotRem tau) {
  const int64_t n = limit.refill_count();
  if (tw < now || (tw == now && tf == 0)) {
    tw = now;
    tf = 0;
  }
  const auto [cw, cf] = exact::MulDiv(cost, limit.refill_period_us(), n);
  int64_t nw = tw + cw;
  int64_t nf = tf + cf;
  if (nf >= n) {
    nf -= n;
    ++nw;
  }
  const int64_t dw = nw - now;
  if (dw < tau.quot || (dw == tau.quot && nf <= tau.rem)) return 0;
  return (dw - tau.quot) + exact::CeilDiv(nf - tau.rem, n);
}

}  // namespace

Step Decide(const Limit& limit, const CompactState* state, Micros now_us, int64_t cost) {
  const int64_t cap = limit.capacity();
  const int64_t n = limit.refill_count();
  const int64_t p = limit.refill_period_us();
  const int64_t now = now_us.count();

  // base = max(TAT, now), as whole µs plus a fraction over n.
  int64_t bw = now;
  int64_t bf = 0;
  if (InDebt(state, now)) {
    bw = state->w[0];
    bf = state->w[1];
  }
  const exact::QuotRem tau = exact::MulDiv(cap, p, n);  // τ = B·e = B·p/n
  const int64_t tau_w = tau.quot;
  const int64_t tau_f = tau.rem;

  Step step;
  Decision& d = step.decision;
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
      step.changed = cost > 0;
    } else {
      d.verdict = Verdict::kDenied;
      d.retry_after = Micros((dw - tau_w) + exact::CeilDiv(nf - tau_f, n));
    }
  }

  Report(d, tw, tf, now, limit, tau);
  if (step.changed) {
    step.next.w = {tw, tf, 0};
  } else if (state != nullptr) {
    step.next = *state;
  } else {
    step.next.w = {now, 0, 0};
  }
  return step;
}

Step Refund(const Limit& limit, const CompactState* state, Micros now_us, int64_t units) {
  const int64_t n = limit.refill_count();
  const int64_t p = limit.refill_period_us();
  const int64_t now = now_us.count();
  Step step;
  int64_t tw = now;  // max(TAT, now)
  int64_t tf = 0;
  if (InDebt(state, now)) {
    tw = state->w[0];
    tf = state->w[1];
    if (units > 0) {
      // TAT − units·e, never before now (a full bucket holds no more). Capping units at B and
      // the most debt keeps the product within the limit's fill time and kMaxDebtTime.
      const auto [uw, uf] = exact::MulDiv(std::min(units, limit.capacity() + MaxDebt(limit)), p, n);
      PullBack(tw, tf, uw, uf, now, n);
      step.changed = true;
    }
  }
  Report(step.decision, tw, tf, now, limit, exact::MulDiv(limit.capacity(), p, n));
  step.next.w = {tw, tf, 0};
  if (!step.changed && state != nullptr) step.next = *state;
  return step;
}

Step GiveBack(const Limit& limit, const CompactState* state, Micros now_us, int64_t units,
              Micros at, Micros reset) {
  const int64_t n = limit.refill_count();
  const int64_t p = limit.refill_period_us();
  const int64_t now = now_us.count();
  Step step;
  int64_t tw = now;
  int64_t tf = 0;
  if (InDebt(state, now)) {
    tw = state->w[0];
    tf = state->w[1];
    // The units' time, but no more than was left until the decision's arrival time (at + reset).
    auto [gw, gf] = exact::MulDiv(std::min(units, limit.capacity() + MaxDebt(limit)), p, n);
    if (now > at.count()) {
      const int64_t left = at.count() + reset.count() - now;
      if (left <= 0) {
        gw = 0;
        gf = 0;
      } else if (left < gw || (left == gw && gf > 0)) {
        gw = left;
        gf = 0;
      }
    }
    if (gw > 0 || gf > 0) {
      PullBack(tw, tf, gw, gf, now, n);
      step.changed = true;
    }
  }
  Report(step.decision, tw, tf, now, limit, exact::MulDiv(limit.capacity(), p, n));
  step.next.w = {tw, tf, 0};
  if (!step.changed && state != nullptr) step.next = *state;
  return step;
}

Step Overdraw(const Limit& limit, const CompactState* state, Micros now_us, int64_t units) {
  const int64_t n = limit.refill_count();
  const int64_t p = limit.refill_period_us();
  const int64_t now = now_us.count();
  const exact::QuotRem tau = exact::MulDiv(limit.capacity(), p, n);
  int64_t tw = now;  // max(TAT, now)
  int64_t tf = 0;
  if (InDebt(state, now)) {
    tw = state->w[0];
    tf = state->w[1];
  }
  // TAT + units·e, but never past now + τ + MaxDebt·e (token_bucket's floor, as a time).
  const exact::QuotRem most = exact::MulDiv(MaxDebt(limit), p, n);
  int64_t mw = now + tau.quot + most.quot;
  int64_t mf = tau.rem + most.rem;
  if (mf >= n) {
    mf -= n;
    ++mw;
  }
  const auto [uw, uf] = exact::MulDiv(std::min(units, limit.capacity() + MaxDebt(limit)), p, n);
  int64_t nw = tw + uw;
  int64_t nf = tf + uf;
  if (nf >= n) {
    nf -= n;
    ++nw;
  }
  if (nw > mw || (nw == mw && nf > mf)) {
    nw = mw;
    nf = mf;
  }
  Step step;
  step.changed = nw > tw || (nw == tw && nf > tf);
  if (!step.changed) {
    nw = tw;
    nf = tf;
  }
  Report(step.decision, nw, nf, now, limit, tau);
  step.next.w = {nw, nf, 0};
  if (!step.changed && state != nullptr) step.next = *state;
  if (!step.changed && state == nullptr) step.next.w = {now, 0, 0};
  return step;
}

Step Charge(const Limit& limit, const CompactState* state, Micros now_us, int64_t cost) {
  const int64_t now = now_us.count();
  const exact::QuotRem tau =
      exact::MulDiv(limit.capacity(), limit.refill_period_us(), limit.refill_count());
  Step step = Overdraw(limit, state, now_us, cost);  // counted whatever the verdict
  Decision& d = step.decision;
  if (cost > limit.capacity()) {
    d.verdict = Verdict::kNeverFits;
    return step;
  }
  const int64_t bw = state != nullptr ? state->w[0] : now;
  const int64_t bf = state != nullptr ? state->w[1] : 0;
  // As Decide, but a peek is refused in debt (TAT − now > τ), as token_bucket's Charge.
  if (WaitFor(bw, bf, now, cost, limit, tau) > 0) {
    d.verdict = Verdict::kDenied;
    // Until a hit of this cost fits the arrival time the charge left.
    d.retry_after = Micros(WaitFor(step.next.w[0], step.next.w[1], now, cost, limit, tau));
  }
  return step;
}

}  // namespace caudal::gcra
