#include "caudal/clock.h"

#include <ctime>

namespace caudal {

Nanos SystemClock::Now() const {
  return std::chrono::duration_cast<Nanos>(std::chrono::system_clock::now().time_since_epoch());
}

Nanos SystemClock::Monotonic() const {
  return std::chrono::duration_cast<Nanos>(std::chrono::steady_clock::now().time_since_epoch());
}

Nanos SystemClock::MonotonicCoarse() const {
  // The vDSO answers without a system call, and without reading the TSC either.
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
  return std::chrono::seconds(ts.tv_sec) + Nanos(ts.tv_nsec);
}

SystemClock& SystemClock::Instance() {
  static SystemClock clock;
  return clock;
}

}  // namespace caudal
