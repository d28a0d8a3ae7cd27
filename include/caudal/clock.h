// Clock: the one way time enters caudal, as Envoy's TimeSource does.
//
// Two readings: Now() is wall-clock time, which decisions use (stores persist and compare
// timestamps, and instances must agree on them); Monotonic() never goes backwards and measures
// latencies and deadlines. Only main() chooses the SystemClock: everything else receives a
// Clock& (no default), waits for time only through it, and tests drive a manual clock
// (tests/support/manual_clock.h) instead of sleeping. The Redis stores take decision time from
// Redis itself (see redis_store.h), so instances whose clocks disagree still decide alike.
//
// Thread-safety: every method may be called from any thread.
#pragma once

#include <chrono>
#include <cstdint>

namespace caudal {

using Nanos = std::chrono::nanoseconds;
using Micros = std::chrono::microseconds;

class Clock {
 public:
  virtual ~Clock() = default;
  // Integer nanoseconds since the Unix epoch.
  virtual Nanos Now() const = 0;
  // Nanoseconds since an arbitrary origin; never decreases.
  virtual Nanos Monotonic() const = 0;
  // Monotonic() as of the last timer interrupt (a few ms behind at most), for deadlines checked
  // on every request where a cheaper, coarser reading is enough. Never decreases, and never
  // runs ahead of Monotonic(). By default, Monotonic() itself.
  virtual Nanos MonotonicCoarse() const { return Monotonic(); }
};

// std::chrono::system_clock and std::chrono::steady_clock; MonotonicCoarse() reads
// CLOCK_MONOTONIC_COARSE, steady_clock's clock at tick resolution, several times cheaper.
class SystemClock final : public Clock {
 public:
  Nanos Now() const override;
  Nanos Monotonic() const override;
  Nanos MonotonicCoarse() const override;
  // A process-wide instance.
  static SystemClock& Instance();
};

}  // namespace caudal
