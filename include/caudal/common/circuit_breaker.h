// CircuitBreaker: the state machine of a circuit breaker, without threads, clocks or I/O, for
// every breaker in caudal: the engine's BreakerStore (a whole store) and a Redis Cluster
// store's per-node breaker (src/redis/node.h) hold one each and differ only in what they guard.
//
//   closed     calls go out; `failures_to_open` consecutive failures open it, and when the last
//              of them was slow (a timeout) the run must also have lasted `failing_for`
//   open       calls are refused at once (the caller's failure mode decides) for `open_for`
//   half-open  then one call goes out as the probe: its success closes the breaker, its failure
//              opens it again for another `open_for`; other calls are refused meanwhile, and a
//              probe that never comes back is replaced after another `open_for`
//
// While open or half-open only the probe's outcome counts: calls sent before the breaker opened
// answer late and change nothing. Why consecutive failures, and why `failing_for`:
// docs/reliability.md, the circuit breaker.
//
// Thread-safety: none; the owner serializes calls (a mutex, or one io thread).
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

#include "caudal/common/clock.h"

namespace caudal {

enum class BreakerState : uint8_t { kClosed, kOpen, kHalfOpen };
// "closed", "open", "half_open".
std::string_view BreakerStateName(BreakerState s);

struct BreakerRules {
  int failures_to_open = 5;
  // ...and, when the last of them was slow (a timeout), the first at least this long ago.
  Nanos failing_for = std::chrono::milliseconds(100);
  Nanos open_for = std::chrono::milliseconds(500);
};

class CircuitBreaker {
 public:
  enum class Verdict : uint8_t { kPass, kProbe, kRefuse };
  // Whether a call was the half-open probe (Admit said kProbe).
  enum class Call : uint8_t { kOrdinary, kProbe };
  // How a call failed: answered at once (no connection, refused), or slowly (a timeout).
  enum class Failure : uint8_t { kAtOnce, kSlow };

  explicit CircuitBreaker(BreakerRules rules = {}) : rules_(rules) {}

  // True while calls are refused at `now` (open, or half-open with its probe out).
  bool Refusing(Nanos now) const { return state_ != BreakerState::kClosed && now < open_until_; }
  // Whether a call may leave at `now` (monotonic); kProbe: as the half-open probe (an open
  // breaker whose `open_for` is over turns half-open here).
  Verdict Admit(Nanos now);
  // The call came back with an answer (the server is up, whatever it said).
  void Succeeded(Call call);
  // The call failed at `now`, or passed its deadline; `why` is kept for messages.
  void Failed(Nanos now, Call call, Failure how, std::string why);

  BreakerState state() const { return state_; }
  const BreakerRules& rules() const { return rules_; }
  // Times it opened from closed (a failed probe reopening it is the same outage).
  uint64_t opens() const { return opens_; }
  // The failure that last counted.
  const std::string& last_error() const { return last_error_; }
  // True when closed with no failure counted since the last success: a success changes nothing.
  bool clean() const { return state_ == BreakerState::kClosed && run_ == 0; }

 private:
  void Open(Nanos now);

  const BreakerRules rules_;
  BreakerState state_ = BreakerState::kClosed;
  int run_ = 0;          // consecutive failures while closed
  Nanos run_start_{0};   // when the run's first failure came
  Nanos open_until_{0};  // open: when a probe may go; half-open: when a lost probe is replaced
  uint64_t opens_ = 0;
  std::string last_error_;
};

}  // namespace caudal
