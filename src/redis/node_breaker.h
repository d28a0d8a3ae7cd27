// NodeBreaker: a circuit breaker for one Redis server of a store that talks to several (Redis
// Cluster), so that one failed primary fails its own slots at once and nothing else.
//
//   closed     calls go out; `failures_to_open` consecutive failures (a lost or refused call, a
//              call past its deadline) over at least `failing_for` open it
//   open       calls are refused at once (their parts fail, the caller's failure mode decides)
//              for `open_for`
//   half-open  one call goes out as a probe: an answer closes the breaker, a failure opens it
//              again; other calls are refused meanwhile (and a probe that never comes back is
//              replaced after another `open_for`)
//
// The same rules as the engine's BreakerStore (include/caudal/breaker_store.h), which guards a
// whole store; this one lives beside the node's connections, where a cluster's failures are
// known one server at a time.
//
// Thread-safety: none; it belongs to a Node and runs on its store's io thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

#include "caudal/clock.h"

namespace caudal::redis {

struct NodeBreakerOptions {
  int failures_to_open = 5;
  Nanos failing_for = std::chrono::milliseconds(100);
  Nanos open_for = std::chrono::milliseconds(500);
};

class NodeBreaker {
 public:
  enum class Verdict : uint8_t { kPass, kProbe, kRefuse };
  enum class State : uint8_t { kClosed, kOpen, kHalfOpen };

  explicit NodeBreaker(NodeBreakerOptions options) : options_(options) {}

  // True while calls are refused at `now` (open, or half-open with its probe out).
  bool Refusing(Nanos now) const { return state_ != State::kClosed && now < open_until_; }
  // Whether a call may leave at `now` (monotonic); kProbe: as the half-open probe.
  Verdict Admit(Nanos now);
  // A call came back with a reply (any reply: the server answers).
  void Succeeded(bool probe);
  // A call failed, or a part sent on this node passed its deadline.
  void Failed(Nanos now, std::string why);

  State state() const { return state_; }
  int failures_to_open() const { return options_.failures_to_open; }
  uint64_t opens() const { return opens_; }
  const std::string& last_error() const { return last_error_; }

 private:
  void Open(Nanos now);

  const NodeBreakerOptions options_;
  State state_ = State::kClosed;
  int run_ = 0;          // consecutive failures while closed
  Nanos run_start_{0};   // when the run's first failure came
  Nanos open_until_{0};  // open: when a probe may go; half-open: when a lost probe is replaced
  uint64_t opens_ = 0;
  std::string last_error_;
};

}  // namespace caudal::redis
