// LogThrottle: lets at most one line per key through per interval, and says how many lines of
// that key were held back since the last one let through, so an event that repeats on every
// request (a shadow policy refusing a busy client) cannot flood the log:
//
//   LogThrottle throttle(clock, {.interval = std::chrono::seconds(1)});
//   if (auto suppressed = throttle.Admit(policy_name)) log.Info(Cat(message, "; ", *suppressed,
//                                                            " similar lines suppressed"));
//
// Lines held back in a key's last interval are reported with its next line, if any (as the
// kernel's printk rate limit does). Keys are bounded (max_keys): when the table is full and no
// key is idle for a whole interval, a line of a new key is let through untracked.
//
// Thread-safety: Admit may be called from any thread (one mutex; callers log rare events).
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

#include "caudal/common/clock.h"

namespace caudal {

struct LogThrottleOptions {
  Nanos interval = std::chrono::seconds(1);
  size_t max_keys = 1024;
};

class LogThrottle {
 public:
  LogThrottle(const Clock& clock, LogThrottleOptions options) : clock_(clock), options_(options) {}

  // The number of lines of `key` suppressed since its last admitted one when this line should
  // be written now; nullopt when it should be dropped (and is counted instead).
  std::optional<uint64_t> Admit(std::string_view key);

 private:
  struct Entry {
    Nanos last_admitted{0};
    uint64_t suppressed = 0;
  };
  void DropIdle(Nanos now);  // requires mu_

  const Clock& clock_;
  const LogThrottleOptions options_;
  std::mutex mu_;
  std::map<std::string, Entry, std::less<>> entries_;  // guarded by mu_
};

}  // namespace caudal
