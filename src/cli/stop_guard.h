// The guard `caudal serve` holds while its service stops.
#pragma once

#include <pthread.h>

#include <condition_variable>
#include <csignal>
#include <mutex>
#include <thread>

#include "caudal/common/clock.h"
#include "caudal/observe/log.h"

namespace caudal::cli {

// Held while the service stops: a second SIGINT or SIGTERM ends the process at once (exit code
// 128 + the signal, as a shell reports a process a signal ended), and so does `deadline`
// should anything hang past it (exit code 1). SIGHUP is ignored meanwhile.
class StopGuard {
 public:
  // `signals` are blocked in every thread; `clock` and `log` outlive the guard.
  StopGuard(const sigset_t& signals, const Clock& clock, Nanos deadline, const Logger& log);
  ~StopGuard();
  StopGuard(const StopGuard&) = delete;
  StopGuard& operator=(const StopGuard&) = delete;

 private:
  void AwaitSecondSignal();

  const sigset_t signals_;
  const Logger& log_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;  // guarded by mu_
  std::thread signal_thread_;
  std::thread watchdog_;
};

}  // namespace caudal::cli
