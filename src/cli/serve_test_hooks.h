// Test hooks for `caudal serve --test-hooks`: a manual clock and a store that fails on demand,
// driven over POST /debug/... so process-level tests control time and failures without
// sleeping. Never enable them in production: anyone who can reach the port can move time.
//
//   POST /debug/clock/advance?ms=N   moves the server's clock forward N ms
//   POST /debug/store/fail           every store call fails (kUnavailable) until
//   POST /debug/store/recover
#pragma once

#include <atomic>
#include <memory>

#include "caudal/clock.h"
#include "caudal/server.h"
#include "caudal/store.h"
#include "support/manual_clock.h"

namespace caudal::cli {

// Wraps a store; while failing, every call answers kUnavailable without reaching it.
class FaultInjectingStore final : public Store {
 public:
  explicit FaultInjectingStore(std::unique_ptr<Store> inner) : inner_(std::move(inner)) {}
  void DecideAsync(std::span<const EntryRef> entries, DecideCallback done) override;
  Status Ping() override;
  std::string_view Name() const override { return inner_->Name(); }
  void SetFailing(bool failing) { failing_.store(failing); }
  Store& inner() { return *inner_; }

 private:
  std::unique_ptr<Store> inner_;
  std::atomic<bool> failing_{false};
};

// The /debug/ handler over `clock` and `store`.
DebugHandler MakeDebugHandler(ManualClock& clock, FaultInjectingStore& store);

}  // namespace caudal::cli
