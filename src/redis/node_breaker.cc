#include "redis/node_breaker.h"

namespace caudal::redis {

NodeBreaker::Verdict NodeBreaker::Admit(Nanos now) {
  if (state_ == State::kClosed) return Verdict::kPass;
  if (now < open_until_) return Verdict::kRefuse;
  state_ = State::kHalfOpen;
  open_until_ = now + options_.open_for;
  return Verdict::kProbe;
}

void NodeBreaker::Succeeded(bool probe) {
  if (state_ == State::kClosed) {
    run_ = 0;
  } else if (probe) {
    state_ = State::kClosed;
    run_ = 0;
  }
}

void NodeBreaker::Failed(Nanos now, std::string why) {
  switch (state_) {
    case State::kClosed:
      if (run_++ == 0) run_start_ = now;
      last_error_ = std::move(why);
      if (run_ >= options_.failures_to_open && now - run_start_ >= options_.failing_for) Open(now);
      return;
    case State::kHalfOpen:  // the probe failed (or a call past its deadline)
      last_error_ = std::move(why);
      Open(now);
      return;
    case State::kOpen:  // calls sent before it opened, failing late
      return;
  }
}

void NodeBreaker::Open(Nanos now) {
  if (state_ == State::kClosed) ++opens_;
  state_ = State::kOpen;
  open_until_ = now + options_.open_for;
  run_ = 0;
}

}  // namespace caudal::redis
