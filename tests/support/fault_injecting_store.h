// FaultInjectingStore: a Store wrapper that fails on demand, like a store that is down. Test code
// only.
//
// Thread-safety: every method may be called from any thread.
#pragma once

#include <atomic>
#include <memory>
#include <string_view>

#include "caudal/store.h"

namespace caudal::testing {

class FaultInjectingStore final : public Store {
 public:
  explicit FaultInjectingStore(std::unique_ptr<Store> inner) : inner_(std::move(inner)) {}

  // While failing, every call answers kUnavailable without reaching the wrapped store.
  void SetFailing(bool failing) { failing_.store(failing, std::memory_order_release); }
  Store& inner() { return *inner_; }

  void DecideAsync(std::span<const EntryRef> entries, DecideCallback done) override {
    if (failing_.load(std::memory_order_acquire)) return done(Failure());
    inner_->DecideAsync(entries, std::move(done));
  }
  Status Ping() override {
    return failing_.load(std::memory_order_acquire) ? Failure() : inner_->Ping();
  }
  std::string_view Name() const override { return inner_->Name(); }

 private:
  static Status Failure() { return Status::Unavailable("store failing on demand (test)"); }

  std::unique_ptr<Store> inner_;
  std::atomic<bool> failing_{false};
};

}  // namespace caudal::testing
