// ManualClock: a Clock that moves only when a test tells it to. Test code only.
//
// Advance() moves both readings; Set() moves the wall clock alone (to any time, backwards too),
// as an NTP step would, while the monotonic reading stays put.
//
// Thread-safety: every method may be called from any thread.
#pragma once

#include <atomic>
#include <cstdint>

#include "caudal/clock.h"

namespace caudal {

class ManualClock final : public Clock {
 public:
  explicit ManualClock(Nanos start = std::chrono::seconds(1'700'000'000)) : now_(start.count()) {}
  Nanos Now() const override { return Nanos(now_.load(std::memory_order_acquire)); }
  Nanos Monotonic() const override { return Nanos(mono_.load(std::memory_order_acquire)); }
  void Set(Nanos t) { now_.store(t.count(), std::memory_order_release); }
  // A negative d moves the wall clock backwards, which callers must tolerate; the monotonic
  // reading only ever moves forwards.
  void Advance(Nanos d) {
    now_.fetch_add(d.count(), std::memory_order_acq_rel);
    if (d.count() > 0) mono_.fetch_add(d.count(), std::memory_order_acq_rel);
  }

 private:
  std::atomic<int64_t> now_;
  std::atomic<int64_t> mono_{0};
};

}  // namespace caudal
