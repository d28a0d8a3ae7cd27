// Stores for the envoy layer's tests.
//
// LockedMapStore: a small, complete Store (one mutex, one map, every algorithm, all-or-nothing)
// so the RLS logic is tested against real decisions. FailingStore: answers every request with a
// fixed error, as a store that is down does.
#pragma once

#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <string>
#include <variant>
#include <vector>

#include "caudal/algorithms/algorithm.h"
#include "caudal/algorithms/sliding_window_log.h"
#include "caudal/store.h"

namespace caudal::envoy::testing {

class LockedMapStore final : public Store {
 public:
  explicit LockedMapStore(const Clock& clock) : clock_(clock) {}

  void DecideAsync(std::span<const EntryRef> entries, DecideCallback done) override {
    done(DecideLocked(entries));
  }
  Status Ping() override { return Status::Ok(); }
  std::string_view Name() const override { return "locked-map"; }

  // How many store requests were made (to prove that some paths make none).
  size_t requests() const {
    std::lock_guard lock(mu_);
    return requests_;
  }

 private:
  using State = std::variant<CompactState, sliding_window_log::LogState>;

  Result<StoreResponse> DecideLocked(std::span<const EntryRef> entries) {
    if (Status s = ValidateEntries(entries); !s.ok()) return s;
    std::lock_guard lock(mu_);
    ++requests_;
    const Micros now = std::chrono::duration_cast<Micros>(clock_.Now());
    StoreResponse out;
    out.allowed = true;
    std::vector<State> next;
    for (const EntryRef& e : entries) {
      auto it = states_.find(std::string(e.key));
      if (e.limit->algorithm() == Algorithm::kSlidingWindowLog) {
        auto log = it == states_.end() ? sliding_window_log::LogState{}
                                       : std::get<sliding_window_log::LogState>(it->second);
        out.decisions.push_back(sliding_window_log::Evaluate(*e.limit, log, now, e.cost));
        if (out.decisions.back().allowed()) sliding_window_log::Commit(log, now, e.cost);
        next.emplace_back(std::move(log));
      } else {
        const CompactState* prev =
            it == states_.end() ? nullptr : &std::get<CompactState>(it->second);
        const Step step = DecideCompact(*e.limit, prev, now, e.cost);
        out.decisions.push_back(step.decision);
        next.emplace_back(step.next);
      }
      out.allowed &= out.decisions.back().allowed();
    }
    if (!out.allowed) {
      // Report what the passing entries had before this request: nothing was consumed.
      for (size_t i = 0; i < entries.size(); ++i) {
        if (!out.decisions[i].allowed()) continue;
        EntryRef peek = entries[i];
        peek.cost = 0;
        auto it = states_.find(std::string(peek.key));
        if (peek.limit->algorithm() == Algorithm::kSlidingWindowLog) {
          auto log = it == states_.end() ? sliding_window_log::LogState{}
                                         : std::get<sliding_window_log::LogState>(it->second);
          out.decisions[i] = sliding_window_log::Evaluate(*peek.limit, log, now, 0);
        } else {
          const CompactState* prev =
              it == states_.end() ? nullptr : &std::get<CompactState>(it->second);
          out.decisions[i] = DecideCompact(*peek.limit, prev, now, 0).decision;
        }
      }
      return out;
    }
    for (size_t i = 0; i < entries.size(); ++i) {
      states_[std::string(entries[i].key)] = std::move(next[i]);
    }
    return out;
  }

  const Clock& clock_;
  mutable std::mutex mu_;
  std::map<std::string, State> states_;  // guarded by mu_
  size_t requests_ = 0;                  // guarded by mu_
};

// Holds every request until told to answer, so calls stay in flight as long as a test needs.
class ParkingStore final : public Store {
 public:
  void DecideAsync(std::span<const EntryRef>, DecideCallback done) override {
    std::lock_guard lock(mu_);
    parked_.push_back(std::move(done));
    cv_.notify_all();
  }
  Status Ping() override { return Status::Ok(); }
  std::string_view Name() const override { return "parking"; }

  size_t parked() const {
    std::lock_guard lock(mu_);
    return parked_.size();
  }
  // True once `n` requests are parked; false after `timeout` without.
  bool WaitForParked(size_t n, std::chrono::milliseconds timeout) {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, timeout, [&] { return parked_.size() >= n; });
  }
  // Answers every parked request with `status`.
  void ReleaseAll(const Status& status) {
    std::vector<DecideCallback> parked;
    {
      std::lock_guard lock(mu_);
      parked.swap(parked_);
    }
    for (auto& done : parked) done(status);
  }

 private:
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::vector<DecideCallback> parked_;  // guarded by mu_
};

class FailingStore final : public Store {
 public:
  explicit FailingStore(Status status) : status_(std::move(status)) {}
  void DecideAsync(std::span<const EntryRef>, DecideCallback done) override { done(status_); }
  Status Ping() override { return status_; }
  std::string_view Name() const override { return "failing"; }

 private:
  Status status_;
};

}  // namespace caudal::envoy::testing
