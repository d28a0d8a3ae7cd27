// Clock: the one way time enters caudal.
//
// Only main() creates a SystemClock; everything else receives a Clock& and tests drive a
// ManualClock, so no test ever sleeps. The Redis store takes time from Redis itself instead
// (see redis_store.h), so instances whose clocks disagree still decide alike.
//
// Time is integer nanoseconds since the Unix epoch.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>

namespace caudal {

using Nanos = std::chrono::nanoseconds;
using Micros = std::chrono::microseconds;

class Clock {
 public:
  virtual ~Clock() = default;
  // Thread-safe.
  virtual Nanos Now() const = 0;
};

// Wall-clock time (std::chrono::system_clock), since stores persist and compare timestamps.
class SystemClock final : public Clock {
 public:
  Nanos Now() const override;
  // A process-wide instance.
  static SystemClock& Instance();
};

// Time that moves only when told to. Thread-safe.
class ManualClock final : public Clock {
 public:
  explicit ManualClock(Nanos start = std::chrono::seconds(1'700'000'000)) : now_(start.count()) {}
  Nanos Now() const override { return Nanos(now_.load(std::memory_order_acquire)); }
  void Set(Nanos t) { now_.store(t.count(), std::memory_order_release); }
  // A negative d moves time backwards, which callers must tolerate.
  void Advance(Nanos d) { now_.fetch_add(d.count(), std::memory_order_acq_rel); }

 private:
  std::atomic<int64_t> now_;
};

}  // namespace caudal
