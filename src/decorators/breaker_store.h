// BreakerStore: a circuit breaker around a Store, so that a failing store costs no waiting.
//
// The rules are CircuitBreaker's (caudal/common/circuit_breaker.h): `failures_to_open` consecutive
// failures (errors or timeouts: kUnavailable, kDeadlineExceeded, kInternal) open it, a run of
// slow ones (each taking 1 ms or more: timeouts) only once it has lasted `failing_for`; while
// open every call fails at once with kUnavailable naming the last error, for `open_for`; then
// one call goes through as a probe, whose success closes it and whose failure opens it again.
// Bad requests (kInvalidArgument) and a full table (kResourceExhausted) are not the store's
// health and change nothing. Each change is told to a BreakerReporter: the log (one line when it
// opens, one when it closes again) and the store's state gauge in /metrics.
//
// Thread-safety: as every Store. State changes take a short mutex; a success on a closed
// breaker with no failure counted reads one atomic.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <string_view>

#include "caudal/common/circuit_breaker.h"
#include "caudal/common/clock.h"
#include "caudal/observe/log.h"
#include "caudal/store/store.h"
#include "observe/metrics.h"

namespace caudal {

class LogThrottle;

// Tells the log and /metrics of circuit breakers' changes, for the store's breaker and for each
// server's (Redis Cluster). One warning when a breaker opens and one line when it closes again;
// a failed probe reopening it is the same outage and is not logged. A flapping breaker logs at
// most one opening per `interval` (the openings held back are counted in the next one) and a
// closing only after a logged opening, so the lines always pair up.
//
// Thread-safety: every method may be called from any thread.
class BreakerReporter {
 public:
  // `clock`, `log` and `metrics` (each optional but the clock) must outlive the reporter.
  BreakerReporter(const Clock& clock, const Logger* log, Metrics* metrics,
                  Nanos interval = std::chrono::seconds(10));
  ~BreakerReporter();
  BreakerReporter(const BreakerReporter&) = delete;
  BreakerReporter& operator=(const BreakerReporter&) = delete;

  // The whole store's breaker (`store` is its name) moved from `from` to `to`.
  void StoreMoved(std::string_view store, BreakerState from, BreakerState to, std::string_view why,
                  const BreakerRules& rules);
  // One server's breaker ("host:port" of store `store`): its series in /metrics, the log on a
  // change. A node first seen (from == to) only starts its series.
  void NodeMoved(std::string_view store, std::string_view node, BreakerState from, BreakerState to,
                 uint64_t opens, std::string_view why, const BreakerRules& rules);
  // The server left the store's topology: its series ends.
  void NodeRemoved(std::string_view node);

 private:
  void Log(const std::string& subject, BreakerState from, BreakerState to, std::string_view why,
           const BreakerRules& rules);

  const Logger* log_;
  Metrics* metrics_;
  std::unique_ptr<LogThrottle> throttle_;
  std::mutex mu_;
  std::set<std::string, std::less<>> logged_open_;  // guarded by mu_: opening logged, not closing
};

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
  ~BreakerStore() override;

  // The inner store's Ping (a probe is the store's health, whatever the breaker says).
  Status Ping() override { return inner_.Ping(); }
  std::string_view Name() const override { return inner_.Name(); }

  BreakerState state() const { return state_.load(std::memory_order_acquire); }

 protected:
  void DecideBatchAsync(std::span<const EntryRef> entries, DecideCallback done) override;

 private:
  // Whether the call may go to the store (kProbe: as the half-open probe); `why` when refused.
  CircuitBreaker::Verdict Admit(Status* why);
  void Observe(const Status& s, CircuitBreaker::Call call, Nanos took);
  void Publish(BreakerState before);  // mu_ held: mirrors the breaker's state, reports a change

  Store& inner_;
  const Clock& clock_;
  BreakerReporter reporter_;
  std::mutex mu_;
  CircuitBreaker breaker_;  // guarded by mu_
  // Mirrors of breaker_ for the lock-free paths, written under mu_.
  std::atomic<BreakerState> state_{BreakerState::kClosed};
  std::atomic<bool> clean_{true};  // closed with no failure counted
};

}  // namespace caudal
