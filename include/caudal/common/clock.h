// Clock: the one way time enters caudal, as Envoy's TimeSource does; and the durations and
// rates that configs write (Rate, ParseDuration, ParseRate, below).
//
// Two readings: Now() is wall-clock time, which decisions use (stores persist and compare
// timestamps, and instances must agree on them); Monotonic() never goes backwards and measures
// latencies and deadlines. A thread that waits for a deadline waits with WaitUntil(). Only main()
// (src/cli/) makes the SystemClock; everything else receives a Clock&, and unit tests drive a
// manual clock (tests/support/manual_clock.h), which ends a wait when it is advanced past its
// deadline, so they never wait for time to pass. tests/lint/clock.sh holds the code to this
// and names the few waits not yet made through a Clock. The Redis store takes decision time
// from Redis itself instead (see redis_store.h), so instances whose clocks disagree still
// decide alike.
//
// Thread-safety: every method may be called from any thread.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <string_view>

#include "caudal/common/status.h"

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

  // Blocks until `done()` holds or Monotonic() reaches `deadline`, whichever comes first, and
  // returns done(). `lock` holds the mutex that guards what done() reads, the one `cv` waits
  // with; it is released while blocked and held whenever done() runs and on return. Whoever
  // changes what done() reads does so under that mutex and then notifies `cv`. The default waits
  // in real time for what is left until `deadline` when called, for a clock that follows real time.
  virtual bool WaitUntil(std::condition_variable& cv, std::unique_lock<std::mutex>& lock,
                         Nanos deadline, const std::function<bool()>& done) const;
};

// std::chrono::system_clock and std::chrono::steady_clock; MonotonicCoarse() reads
// CLOCK_MONOTONIC_COARSE, steady_clock's clock at tick resolution, several times cheaper.
class SystemClock final : public Clock {
 public:
  Nanos Now() const override;
  Nanos Monotonic() const override;
  Nanos MonotonicCoarse() const override;
  bool WaitUntil(std::condition_variable& cv, std::unique_lock<std::mutex>& lock, Nanos deadline,
                 const std::function<bool()>& done) const override;
  // A process-wide instance, for main() alone.
  static SystemClock& Instance();
};

// Durations and rates as written in configs and on the command line.
//
// A rate is an exact rational, "count per period" ("100/1m"), never a double: 100 per 60 s admits
// exactly 100·k after k·60 s, for any k. Durations are whole microseconds, the unit every
// algorithm (and the Redis scripts, whose numbers are doubles exact below 2^53) works in.
struct Rate {
  int64_t count = 0;  // how many
  Micros period{0};   // per how long
  friend bool operator==(const Rate&, const Rate&) = default;
};

// Parses "<integer><unit>" with unit one of us, ms, s, m, h, d, w, y (y = 365 d), e.g. "250ms",
// "1m", "1d". Whitespace around the whole is allowed; anything else is kInvalidArgument with a
// message that quotes the input. Values that overflow int64 microseconds are refused.
Result<Micros> ParseDuration(std::string_view text);

// Parses "<count>/<duration>" ("100/1m", "5/1s"); a bare unit after the slash means one of it
// ("100/m"). The count must be a positive integer.
Result<Rate> ParseRate(std::string_view text);

// The shortest spelling that ParseDuration reads back as `d` ("90s", "1500ms", "1d").
std::string FormatDuration(Micros d);
// "100/1m".
std::string FormatRate(const Rate& r);

}  // namespace caudal
