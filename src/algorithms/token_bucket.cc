#include "algorithms/token_bucket.h"

#include <algorithm>

#include "algorithms/algorithm.h"
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

struct Level {
  int64_t tokens = 0;
  int64_t frac = 0;  // over p
  int64_t last = 0;
};

// The bucket at `now`: T = min(B, T + r·Δt) with Δt = max(0, now − last).
Level Refill(const CompactState* state, int64_t now, int64_t cap, int64_t n, int64_t p) {
  if (state == nullptr) return {.tokens = cap, .frac = 0, .last = now};
  Level l{.tokens = state->w[0], .frac = state->w[1], .last = state->w[2]};
  if (now > l.last) {
    const int64_t dt = now - l.last;
    if (dt >= TimeToReach(cap, l.tokens, l.frac, n, p)) {
      l.tokens = cap;
      l.frac = 0;
    } else {
      const auto [q, r] = exact::MulDiv(dt, n, p);
      l.tokens += q;
      l.frac += r;
      if (l.frac >= p) {
        l.frac -= p;
        ++l.tokens;
      }
    }
    l.last = now;
  }
  return l;
}

void Report(Step& step, const Level& l, int64_t now, int64_t cap, int64_t n, int64_t p) {
  step.decision.limit = cap;
  step.decision.remaining = std::max<int64_t>(0, l.tokens);  // below 0 only in debt
  step.decision.reset_after = Micros((l.last - now) + TimeToReach(cap, l.tokens, l.frac, n, p));
  step.next.w = {l.tokens, l.frac, l.last};
}

}  // namespace

Step Decide(const Limit& limit, const CompactState* state, Micros now_us, int64_t cost) {
  const int64_t cap = limit.capacity();
  const int64_t n = limit.refill_count();
  const int64_t p = limit.refill_period_us();
  const int64_t now = now_us.count();
  Level level = Refill(state, now, cap, n, p);
  int64_t& tokens = level.tokens;

  Step step;
  Decision& d = step.decision;
  if (cost > cap) {
    d.verdict = Verdict::kNeverFits;
  } else if (tokens >= cost || cost == 0) {  // T ≥ c (whole, so whole tokens decide); a peek
                                             // passes even in debt
    d.verdict = Verdict::kAllowed;
    tokens -= cost;
    step.changed = cost > 0;
  } else {
    d.verdict = Verdict::kDenied;
    d.retry_after = Micros((level.last - now) + TimeToReach(cost, tokens, level.frac, n, p));
  }
  Report(step, level, now, cap, n, p);
  return step;
}

Step Refund(const Limit& limit, const CompactState* state, Micros now_us, int64_t units) {
  const int64_t cap = limit.capacity();
  const int64_t n = limit.refill_count();
  const int64_t p = limit.refill_period_us();
  const int64_t now = now_us.count();
  Level level = Refill(state, now, cap, n, p);
  Step step;
  if (level.tokens < cap && units > 0) {
    step.changed = true;
    if (units >= cap - level.tokens) {  // T = min(B, T + units); whole units, so T ≥ B is full
      level.tokens = cap;
      level.frac = 0;
    } else {
      level.tokens += units;
    }
  }
  Report(step, level, now, cap, n, p);
  return step;
}

Step GiveBack(const Limit& limit, const CompactState* state, Micros now_us, int64_t units,
              Micros at, Micros reset) {
  const int64_t cap = limit.capacity();
  const int64_t n = limit.refill_count();
  const int64_t p = limit.refill_period_us();
  const int64_t now = now_us.count();
  Level level = Refill(state, now, cap, n, p);
  // Whole units and a fraction over p: all of them at the decision's own time; later, what
  // refills in the time that was left until its bucket would have been full.
  int64_t whole = units;
  int64_t frac = 0;
  if (now > at.count()) {
    const int64_t left = at.count() + reset.count() - now;
    if (left <= 0) {
      whole = 0;
    } else if (const auto [q, r] = exact::MulDiv(left, n, p); q < whole) {
      whole = q;
      frac = r;
    }
  }
  Step step;
  if (level.tokens < cap && (whole > 0 || frac > 0)) {
    step.changed = true;
    level.tokens += whole;
    level.frac += frac;
    if (level.frac >= p) {
      level.frac -= p;
      ++level.tokens;
    }
    if (level.tokens >= cap) {
      level.tokens = cap;
      level.frac = 0;
    }
  }
  Report(step, level, now, cap, n, p);
  return step;
}

Step Overdraw(const Limit& limit, const CompactState* state, Micros now_us, int64_t units) {
  const int64_t cap = limit.capacity();
  const int64_t n = limit.refill_count();
  const int64_t p = limit.refill_period_us();
  const int64_t now = now_us.count();
  Level level = Refill(state, now, cap, n, p);
  const int64_t floor = -MaxDebt(limit);
  const int64_t tokens = level.tokens - units < floor ? floor : level.tokens - units;
  Step step;
  step.changed = tokens != level.tokens;
  level.tokens = tokens;
  Report(step, level, now, cap, n, p);
  return step;
}

Step Charge(const Limit& limit, const CompactState* state, Micros now_us, int64_t cost) {
  const int64_t cap = limit.capacity();
  const int64_t n = limit.refill_count();
  const int64_t p = limit.refill_period_us();
  const int64_t now = now_us.count();
  const Level before = Refill(state, now, cap, n, p);
  Step step = Overdraw(limit, state, now_us, cost);  // counted whatever the verdict
  Decision& d = step.decision;
  if (cost > cap) {
    d.verdict = Verdict::kNeverFits;
  } else if (before.tokens < cost) {  // T < c: a peek (c = 0) is refused in debt
    d.verdict = Verdict::kDenied;
    // Until a hit of this cost fits the bucket as the charge left it.
    const Level after{.tokens = step.next.w[0], .frac = step.next.w[1], .last = step.next.w[2]};
    d.retry_after = Micros((after.last - now) + TimeToReach(cost, after.tokens, after.frac, n, p));
  }
  return step;
}

}  // namespace caudal::token_bucket
