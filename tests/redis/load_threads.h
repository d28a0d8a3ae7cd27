// Load threads for the tests that change a Redis topology under traffic: each thread sends
// requests round-robin over a list (each request: indexes into a key list, cost 1 each, one
// limit) until stopped, and records every outcome with its timestamps.
#pragma once

#include <atomic>
#include <chrono>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "caudal/store/store.h"

namespace caudal::load {

using SteadyClock = std::chrono::steady_clock;

struct Outcome {
  SteadyClock::time_point sent, answered;
  size_t key = 0;        // index of the request's first key
  bool ok = false;       // answered (not an error)
  bool allowed = false;  // admitted
  StatusCode code = StatusCode::kOk;
};

// Threads sending requests round-robin over `requests` (each a list of key indexes) until
// stopped, recording every outcome.
class Load {
 public:
  Load(Store& store, const std::vector<std::string>& keys, const Limit& limit,
       std::vector<std::vector<size_t>> requests, int threads)
      : store_(store), keys_(keys), limit_(limit), requests_(std::move(requests)) {
    for (int t = 0; t < threads; ++t) {
      workers_.emplace_back([this, t, threads] {
        std::vector<Outcome> mine;
        for (size_t i = static_cast<size_t>(t); !stop_.load(); i += static_cast<size_t>(threads)) {
          const std::vector<size_t>& r = requests_[i % requests_.size()];
          std::vector<ConsumeEntry> entries;
          for (size_t k : r) entries.push_back({.key = keys_[k], .limit = &limit_, .cost = 1});
          Outcome o;
          o.sent = SteadyClock::now();
          o.key = r.front();
          const Result<DecideResponse> got = store_.Decide({.consumes = entries});
          o.answered = SteadyClock::now();
          o.ok = got.ok();
          o.allowed = got.ok() && got->allowed;
          o.code = got.ok() ? StatusCode::kOk : got.status().code();
          mine.push_back(o);
        }
        std::lock_guard lock(mu_);
        outcomes_.insert(outcomes_.end(), mine.begin(), mine.end());
      });
    }
  }
  ~Load() { Stop(); }

  std::vector<Outcome> Stop() {
    stop_.store(true);
    for (std::thread& w : workers_) {
      if (w.joinable()) w.join();
    }
    return outcomes_;
  }

 private:
  Store& store_;
  const std::vector<std::string>& keys_;
  const Limit& limit_;
  const std::vector<std::vector<size_t>> requests_;
  std::atomic<bool> stop_{false};
  std::vector<std::thread> workers_;
  std::mutex mu_;
  std::vector<Outcome> outcomes_;  // guarded by mu_
};

// Measures how late this machine runs a thread: one thread sleeps 1 ms at a time and records
// its worst oversleep. On a loaded machine every thread (the load's, the store's io thread,
// redis-server) waits for a core about as long, so a test's timing margins add this to stay
// true to what they prove rather than to how busy the machine is.
class StallProbe {
 public:
  StallProbe()
      : thread_([this] {
          while (!stop_.load()) {
            const auto before = SteadyClock::now();
            std::this_thread::sleep_for(std::chrono::milliseconds(1));
            const auto late = SteadyClock::now() - before - std::chrono::milliseconds(1);
            if (late > worst_.load()) worst_.store(late);
          }
        }) {}
  ~StallProbe() {
    stop_.store(true);
    thread_.join();
  }
  StallProbe(const StallProbe&) = delete;
  StallProbe& operator=(const StallProbe&) = delete;

  // The longest a 1 ms sleep overslept so far.
  SteadyClock::duration worst() const { return worst_.load(); }

 private:
  std::atomic<bool> stop_{false};
  std::atomic<SteadyClock::duration> worst_{SteadyClock::duration::zero()};
  std::thread thread_;
};

inline double Ms(SteadyClock::duration d) {
  return std::chrono::duration<double, std::milli>(d).count();
}

}  // namespace caudal::load
