// The simulator's clock: both readings are the simulation's time, set as it advances.
#pragma once

#include "caudal/common/clock.h"

namespace caudal::simulate {

// How often, in simulated time, a simulation's instances give back what their ended leases
// hold (ReturnEnded): one interval for every simulation.
inline constexpr Micros kGiveBackEvery = std::chrono::milliseconds(50);

class SimClock final : public Clock {
 public:
  Nanos Now() const override { return now_; }
  Nanos Monotonic() const override { return now_; }
  void Set(Micros t) { now_ = t; }

 private:
  Nanos now_{0};
};

}  // namespace caudal::simulate
