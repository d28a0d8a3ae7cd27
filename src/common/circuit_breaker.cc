#include "caudal/common/circuit_breaker.h"

#include <utility>

namespace caudal {

std::string_view BreakerStateName(BreakerState s) {
  switch (s) {
    case BreakerState::kClosed:
      return "closed";
    case BreakerState::kOpen:
      return "open";
    case BreakerState::kHalfOpen:
      return "half_open";
  }
  return "unknown";
}

CircuitBreaker::Verdict CircuitBreaker::Admit(Nanos now) {
  if (state_ == BreakerState::kClosed) return Verdict::kPass;
  if (now < open_until_) return Verdict::kRefuse;
  state_ = BreakerState::kHalfOpen;
  open_until_ = now + rules_.open_for;
  return Verdict::kProbe;
}

void CircuitBreaker::Succeeded(Call call) {
  if (state_ == BreakerState::kClosed) {
    run_ = 0;
  } else if (call == Call::kProbe && state_ == BreakerState::kHalfOpen) {
    state_ = BreakerState::kClosed;
    run_ = 0;
  }
}

void CircuitBreaker::Failed(Nanos now, Call call, Failure how, std::string why) {
  switch (state_) {
    case BreakerState::kClosed:
      if (run_++ == 0) run_start_ = now;
      last_error_ = std::move(why);
      if (run_ >= rules_.failures_to_open &&
          (how == Failure::kAtOnce || now - run_start_ >= rules_.failing_for)) {
        Open(now);
      }
      return;
    case BreakerState::kHalfOpen:
      if (call != Call::kProbe) return;  // sent before it opened, failing late
      last_error_ = std::move(why);
      Open(now);
      return;
    case BreakerState::kOpen:  // calls sent before it opened, failing late
      return;
  }
}

void CircuitBreaker::Open(Nanos now) {
  if (state_ == BreakerState::kClosed) ++opens_;
  state_ = BreakerState::kOpen;
  open_until_ = now + rules_.open_for;
  run_ = 0;
}

}  // namespace caudal
