// Stores for the envoy layer's tests.
//
// CountingMemoryStore: the MemoryStore, counting requests. ParkingStore: holds requests until
// released, so calls stay in flight. FailingStore: answers every request with a
// fixed error, as a store that is down does.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <vector>

#include "caudal/memory_store.h"
#include "caudal/store.h"

namespace caudal::envoy::testing {

// MemoryStore that counts the requests it decides (to prove that some paths make none).
class CountingMemoryStore final : public Store {
 public:
  explicit CountingMemoryStore(const Clock& clock) : memory_(clock) {}

  void DecideAsync(std::span<const EntryRef> entries, DecideCallback done) override {
    requests_.fetch_add(1, std::memory_order_relaxed);
    memory_.DecideAsync(entries, std::move(done));
  }
  Status Ping() override { return memory_.Ping(); }
  std::string_view Name() const override { return "memory"; }
  size_t requests() const { return requests_.load(std::memory_order_relaxed); }

 private:
  MemoryStore memory_;
  std::atomic<size_t> requests_{0};
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
