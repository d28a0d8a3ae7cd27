#include "caudal/common/clock.h"

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

bool Clock::WaitUntil(std::condition_variable& cv, std::unique_lock<std::mutex>& lock,
                      Nanos deadline, const std::function<bool()>& done) const {
  const auto until = std::chrono::steady_clock::now() + (deadline - Monotonic());
  return cv.wait_until(lock, until, done);
}

bool SystemClock::WaitUntil(std::condition_variable& cv, std::unique_lock<std::mutex>& lock,
                            Nanos deadline, const std::function<bool()>& done) const {
  // Monotonic() is steady_clock's reading, so the deadline is one of its time points.
  const std::chrono::steady_clock::time_point until(
      std::chrono::duration_cast<std::chrono::steady_clock::duration>(deadline));
  return cv.wait_until(lock, until, done);
}

SystemClock& SystemClock::Instance() {
  static SystemClock clock;
  return clock;
}

}  // namespace caudal
