// The no-double-spend check shared by the Redis stores' tests: several processes, each with its
// own store and threads, hammer the same keys of five limits (one per algorithm); each process
// tallies what it was admitted, the parent merges the tallies, and Violations() lists every way
// the total exceeds what the limits allow over the run (B + r·t for the buckets, the limit for
// the windows, per window for the fixed window).
#pragma once

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <functional>
#include <map>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "caudal/algorithms/limit.h"
#include "caudal/common/status.h"
#include "redis/redis_test_util.h"

namespace caudal::double_spend {

using std::chrono::hours;
using std::chrono::milliseconds;
using std::chrono::seconds;
using SteadyClock = std::chrono::steady_clock;

// The limits under test. Buckets: burst 20, 50/s. Windows: the log and the counter over an hour
// (the whole run is inside one window: at most `limit` in total), the fixed window over 500 ms
// (at most `limit` in each window).
struct Limits {
  Limit token_bucket = Bucket(Algorithm::kTokenBucket, 20, {50, seconds(1)});
  Limit gcra = Bucket(Algorithm::kGcra, 20, {50, seconds(1)});
  Limit log = Window(Algorithm::kSlidingWindowLog, 150, hours(1));
  Limit counter = Window(Algorithm::kSlidingWindowCounter, 150, hours(1));
  Limit fixed = Window(Algorithm::kFixedWindow, 30, milliseconds(500));
};

// What one process admitted: per limit name, and for the fixed window per window (identified by
// its end, local time + reset_after, rounded to the window; local and Redis clocks are the same
// machine's, far closer than half a window).
struct Tally {
  std::map<std::string, int64_t> admitted;
  std::map<int64_t, int64_t> fixed_per_window;
  int64_t errors = 0;

  void Add(const Limit& l, const std::string& name, const Decision& d) {
    if (!d.allowed()) return;
    ++admitted[name];
    if (name == "fixed_window") {
      const int64_t w = l.window().count();
      const int64_t now =
          std::chrono::duration_cast<Micros>(std::chrono::system_clock::now().time_since_epoch())
              .count();
      ++fixed_per_window[(now + d.reset_after.count() + w / 2) / w];
    }
  }
  std::string Serialize() const {
    std::ostringstream out;
    for (const auto& [k, v] : admitted) out << "a " << k << " " << v << "\n";
    for (const auto& [k, v] : fixed_per_window) out << "w " << k << " " << v << "\n";
    out << "e " << errors << "\n";
    return out.str();
  }
  void Merge(const std::string& text) {
    std::istringstream in(text);
    for (std::string tag; in >> tag;) {
      if (tag == "a") {
        std::string k;
        int64_t v = 0;
        in >> k >> v;
        admitted[k] += v;
      } else if (tag == "w") {
        int64_t k = 0, v = 0;
        in >> k >> v;
        fixed_per_window[k] += v;
      } else {
        int64_t v = 0;
        in >> v;
        errors += v;
      }
    }
  }
};

// Every way the tally exceeds the limits over a run of `elapsed`. With leases of `lease_ttl`, the
// buckets' bound is B + r·(t + ttl) (docs/algorithms.md, Leases); the windows' is unchanged.
inline std::vector<std::string> Violations(const Tally& t, const Limits& l,
                                           SteadyClock::duration elapsed,
                                           Nanos lease_ttl = Nanos(0)) {
  std::vector<std::string> out;
  const double secs = std::chrono::duration<double>(elapsed + lease_ttl).count();
  auto check = [&](const std::string& name, int64_t bound) {
    const auto it = t.admitted.find(name);
    const int64_t got = it == t.admitted.end() ? 0 : it->second;
    if (got > bound) {
      out.push_back(name + ": admitted " + std::to_string(got) + " > " + std::to_string(bound));
    }
  };
  // B + r·t (or r·(t + ttl)) for the buckets.
  check("token_bucket", 20 + static_cast<int64_t>(50 * secs));
  check("gcra", 20 + static_cast<int64_t>(50 * secs));
  check("sliding_window_log", l.log.capacity());
  check("sliding_window_counter", l.counter.capacity());
  for (const auto& [window, got] : t.fixed_per_window) {
    if (got > l.fixed.capacity()) {
      out.push_back("fixed_window: " + std::to_string(got) + " in window " +
                    std::to_string(window));
    }
  }
  return out;
}

// Runs `work(tally)` in `processes` forked processes and merges what they report.
inline Tally RunProcesses(int processes, const std::function<void(Tally&)>& work) {
  std::vector<std::pair<pid_t, int>> children;
  for (int p = 0; p < processes; ++p) {
    int fds[2];
    if (::pipe(fds) != 0) ADD_FAILURE() << "pipe";
    const pid_t pid = ::fork();
    if (pid == 0) {  // the child: its own store, its own threads
      ::close(fds[0]);
      Tally tally;
      work(tally);
      const std::string text = tally.Serialize();
      (void)!::write(fds[1], text.data(), text.size());
      ::_exit(0);
    }
    ::close(fds[1]);
    children.push_back({pid, fds[0]});
  }
  Tally total;
  for (const auto& [pid, fd] : children) {
    std::string text;
    char buf[4096];
    for (ssize_t n; (n = ::read(fd, buf, sizeof(buf))) > 0;)
      text.append(buf, static_cast<size_t>(n));
    ::close(fd);
    int status = 0;
    ::waitpid(pid, &status, 0);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    total.Merge(text);
  }
  return total;
}

// `threads` threads calling `decide(key, limit)` for every limit in turn until `run_for` is over.
inline void Hammer(
    Tally& tally, const Limits& l, int threads, SteadyClock::duration run_for,
    const std::function<Result<Decision>(int thread, const std::string&, const Limit&)>& decide) {
  const std::pair<std::string, const Limit*> all[] = {{"token_bucket", &l.token_bucket},
                                                      {"gcra", &l.gcra},
                                                      {"sliding_window_log", &l.log},
                                                      {"sliding_window_counter", &l.counter},
                                                      {"fixed_window", &l.fixed}};
  std::mutex mu;
  std::vector<std::thread> workers;
  const auto until = SteadyClock::now() + run_for;
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([&, t] {
      while (SteadyClock::now() < until) {
        for (const auto& [name, limit] : all) {
          Result<Decision> d = decide(t, name, *limit);
          std::lock_guard lock(mu);
          if (d.ok()) {
            tally.Add(*limit, name, *d);
          } else {
            ++tally.errors;
          }
        }
      }
    });
  }
  for (std::thread& t : workers) t.join();
}

}  // namespace caudal::double_spend
