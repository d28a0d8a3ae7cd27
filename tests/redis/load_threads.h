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

#include "caudal/store.h"

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
          std::vector<EntryRef> entries;
          for (size_t k : r) entries.push_back({.key = keys_[k], .limit = &limit_, .cost = 1});
          Outcome o;
          o.sent = SteadyClock::now();
          o.key = r.front();
          const Result<StoreResponse> got = store_.Decide(entries);
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

inline double Ms(SteadyClock::duration d) {
  return std::chrono::duration<double, std::milli>(d).count();
}

}  // namespace caudal::load
