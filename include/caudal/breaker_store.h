// BreakerStore: a circuit breaker around a Store, so that a failing store costs no waiting.
//
//   closed     every call goes to the store; `failures_to_open` consecutive failures (errors or
//              timeouts: kUnavailable, kDeadlineExceeded, kInternal) over at least
//              `failing_for` open the breaker
//   open       every call fails at once with kUnavailable naming the last error, for `open_for`
//   half-open  then one call goes through as a probe: its success closes the breaker, its
//              failure opens it again for another `open_for`; calls meanwhile fail at once
//
// Only consecutive failures open it, so isolated timeouts on a healthy store (which still each
// go to their failure mode) never do, and interleaved successes and failures cannot make it flap.
// A run of slow failures (each taking 1 ms or more: timeouts) must also last `failing_for`,
// while failures answered at once (no connection) open it on their count: on a busy machine one
// scheduling stall of a few milliseconds times out every call in flight at once — dozens of
// consecutive failures under load — and opening on that would fail every decision for `open_for`
// over a stall that was already over. One log line when it opens, one when it closes again; a probe
// failing again is not logged. Bad requests (kInvalidArgument) and a full table
// (kResourceExhausted) are not the store's health and change nothing.
//
// Thread-safety: as every Store. State changes take a short mutex; the closed path reads one
// atomic.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

#include "caudal/clock.h"
#include "caudal/log.h"
#include "caudal/metrics.h"
#include "caudal/store.h"

namespace caudal {

enum class BreakerState : uint8_t { kClosed, kOpen, kHalfOpen };
std::string_view BreakerStateName(BreakerState s);

struct BreakerOptions {
  int failures_to_open = 5;
  // ...and, when they are slow (timeouts), the first of them at least this long ago.
  Nanos failing_for = std::chrono::milliseconds(100);
  Nanos open_for = std::chrono::milliseconds(500);
  const Logger* log = nullptr;  // optional
  Metrics* metrics = nullptr;   // optional: the store's state gauge
};

class BreakerStore final : public Store {
 public:
  // `inner` and `clock` (its monotonic time) must outlive the breaker.
  BreakerStore(Store& inner, const Clock& clock, BreakerOptions options);

  void DecideAsync(std::span<const EntryRef> entries, DecideCallback done) override;
  // The inner store's Ping (a probe is the store's health, whatever the breaker says).
  Status Ping() override { return inner_.Ping(); }
  std::string_view Name() const override { return inner_.Name(); }

  BreakerState state() const { return state_.load(std::memory_order_acquire); }

 private:
  enum class Admission : uint8_t { kRefuse, kPass, kProbe };
  // Whether the call may go to the store (kProbe: as the half-open probe); `why` when refused.
  Admission Admit(Status* why);
  void Observe(const Status& s, bool probe, Nanos took);
  void SetState(BreakerState next);  // mu_ held

  Store& inner_;
  const Clock& clock_;
  const BreakerOptions options_;
  std::atomic<BreakerState> state_{BreakerState::kClosed};
  std::atomic<int> consecutive_failures_{0};
  std::atomic<int64_t> first_failure_{0};  // monotonic ns of the run's first failure
  std::mutex mu_;
  Nanos open_until_{0};   // guarded by mu_
  bool probing_ = false;  // guarded by mu_: a half-open probe is in flight
  Status last_error_;     // guarded by mu_
};

}  // namespace caudal
