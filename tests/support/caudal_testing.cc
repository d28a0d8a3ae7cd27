// caudal-testing: the `caudal` command line with test hooks, for process-level tests only. It is
// never installed; the release `caudal` holds none of this.
//
// Decisions take their time from a wall clock that moves only when told (latencies and
// connection deadlines keep the real monotonic time), and the store opened by `serve` or `check`
// can be made to fail. Commands arrive on stdin, one per line; each is answered with one line on
// stdout:
//
//   advance <ms>   moves the clock forward        → "now <µs since the epoch>"
//   fail           every store call fails          → "failing"
//   recover        the store answers again         → "recovered"
//   hold           answers are parked from now on  → "holding"
//   held <n>       waits until n answers are parked → "held <n>" (or "held <k>" after 10 s)
//   release        the parked answers are delivered (later ones are parked still) → "released"
//   overadmit <n>  one refused answer in n is delivered as admitted (0 stops) → "overadmitting <n>"
//   overadmitted   how many answers were turned so far → "overadmitted <k>"
//
// With CAUDAL_TESTING_CLOCK=real in its environment, decisions take the real time and the
// stores their own (Redis's TIME), as the release binary's do; `advance` is then refused.
#include <pthread.h>

#include <algorithm>
#include <csignal>
#include <cstdlib>
#include <iostream>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>

#include "cli/command.h"
#include "support/fake_store.h"
#include "support/manual_clock.h"

namespace caudal {
namespace {

// Manual wall time, real monotonic time.
class ScriptedClock final : public Clock {
 public:
  Nanos Now() const override { return wall_.Now(); }
  Nanos Monotonic() const override { return SystemClock::Instance().Monotonic(); }
  void Advance(Nanos d) { wall_.Advance(d); }

 private:
  ManualClock wall_{SystemClock::Instance().Now()};
};

class Hooks {
 public:
  std::unique_ptr<Store> Wrap(std::unique_ptr<Store> store) {
    auto faulty = std::make_unique<testing::FakeStore>(std::move(store));
    std::lock_guard lock(mu_);
    stores_.push_back(faulty.get());
    return faulty;
  }

  // Reads commands until stdin closes.
  void Serve(ScriptedClock& clock, bool real_clock) {
    std::string line;
    while (std::getline(std::cin, line)) {
      std::istringstream in(line);
      std::string verb;
      in >> verb;
      std::string reply;
      if (verb == "advance") {
        int64_t ms = -1;
        in >> ms;
        if (real_clock) {
          reply = "error: advance: the clock is real (CAUDAL_TESTING_CLOCK=real)";
        } else if (ms < 0) {
          reply = "error: advance <ms>, a non-negative integer";
        } else {
          clock.Advance(std::chrono::milliseconds(ms));
          reply = "now " + std::to_string(clock.Now().count() / 1000);
        }
      } else if (verb == "fail" || verb == "recover") {
        std::lock_guard lock(mu_);
        for (testing::FakeStore* s : stores_) {
          if (verb == "fail") {
            s->FailWith(Status::Unavailable("store failing on demand (test)"));
          } else {
            s->Recover();
          }
        }
        reply = verb == "fail" ? "failing" : "recovered";
      } else if (verb == "hold" || verb == "release") {
        std::lock_guard lock(mu_);
        for (testing::FakeStore* s : stores_) {
          if (verb == "hold") {
            s->Hold();
          } else {
            s->ReleaseHeld();
          }
        }
        reply = verb == "hold" ? "holding" : "released";
      } else if (verb == "overadmit") {
        int64_t n = -1;
        in >> n;
        if (n < 0) {
          reply = "error: overadmit <n>, a non-negative integer";
        } else {
          std::lock_guard lock(mu_);
          for (testing::FakeStore* s : stores_) s->OverAdmitOneIn(static_cast<uint64_t>(n));
          reply = "overadmitting " + std::to_string(n);
        }
      } else if (verb == "overadmitted") {
        std::lock_guard lock(mu_);
        uint64_t k = 0;
        for (testing::FakeStore* s : stores_) k += s->over_admitted();
        reply = "overadmitted " + std::to_string(k);
      } else if (verb == "held") {
        size_t n = 0;
        in >> n;
        reply = "held " + std::to_string(Held(n));
      } else {
        reply = "error: unknown command " + verb;
      }
      std::cout << reply << std::endl;
    }
  }

 private:
  // Parked answers across the stores, once at least `n` are (or after 10 s without).
  size_t Held(size_t n) {
    std::lock_guard lock(mu_);
    size_t held = 0;
    for (testing::FakeStore* s : stores_) {
      s->WaitForHeld(n - std::min(n, held));
      held += s->held();
    }
    return held;
  }

  std::mutex mu_;
  std::vector<testing::FakeStore*> stores_;  // guarded by mu_; they outlive the process
};

}  // namespace
}  // namespace caudal

int main(int argc, char** argv) {
  static caudal::ScriptedClock clock;
  static caudal::Hooks hooks;
  const char* clock_env = std::getenv("CAUDAL_TESTING_CLOCK");
  static const bool real_clock = clock_env != nullptr && std::string(clock_env) == "real";
  std::thread([] {
    // Signals are serve's, which waits for them on its own thread (sigwait): a thread that
    // does not block them would take them instead, and die of them.
    sigset_t signals;
    sigemptyset(&signals);
    for (int s : {SIGHUP, SIGINT, SIGTERM}) sigaddset(&signals, s);
    pthread_sigmask(SIG_BLOCK, &signals, nullptr);
    hooks.Serve(clock, real_clock);
  }).detach();
  caudal::cli::Env env{
      .out = std::cout,
      .err = std::cerr,
      .clock = real_clock ? static_cast<const caudal::Clock&>(caudal::SystemClock::Instance())
                          : static_cast<const caudal::Clock&>(clock),
      .stores_use_clock = !real_clock,
      .wrap_store = [](std::unique_ptr<caudal::Store> s) { return hooks.Wrap(std::move(s)); }};
  return caudal::cli::RunCommandLine(argc, argv, env);
}
