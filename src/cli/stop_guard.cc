#include "cli/stop_guard.h"

#include <cstdlib>

#include "cli/command.h"
#include "common/cat.h"

namespace caudal::cli {

StopGuard::StopGuard(const sigset_t& signals, const Clock& clock, Nanos deadline, const Logger& log)
    : signals_(signals), log_(log) {
  signal_thread_ = std::thread([this] { AwaitSecondSignal(); });
  watchdog_ = std::thread([this, &clock, deadline] {
    std::unique_lock lock(mu_);
    if (clock.WaitUntil(cv_, lock, deadline, [this] { return done_; })) return;
    log_.Error("stopping took longer than server.shutdown_timeout: exiting now");
    std::_Exit(kExitFailure);
  });
}

StopGuard::~StopGuard() {
  {
    std::lock_guard lock(mu_);
    done_ = true;
  }
  cv_.notify_all();
  pthread_kill(signal_thread_.native_handle(), SIGTERM);  // ends its sigwait
  signal_thread_.join();
  watchdog_.join();
}

void StopGuard::AwaitSecondSignal() {
  for (;;) {
    int sig = 0;
    if (sigwait(&signals_, &sig) != 0 || sig == SIGHUP) continue;
    std::lock_guard lock(mu_);
    if (done_) return;
    log_.Warning(Cat("second ", sig == SIGINT ? "SIGINT" : "SIGTERM",
                     " while stopping: exiting now, unanswered requests are cut"));
    std::_Exit(128 + sig);
  }
}

}  // namespace caudal::cli
