#include "caudal/store_health.h"

#include <gtest/gtest.h>

#include <functional>

#include "caudal/memory_store.h"
#include "support/fault_injecting_store.h"
#include "support/manual_clock.h"

namespace caudal {
namespace {

using std::chrono::seconds;

// Holds each request until the test answers it, as a stalled store would.
class StallingStore final : public Store {
 public:
  void DecideAsync(std::span<const EntryRef>, DecideCallback done) override {
    ++calls;
    pending = std::move(done);
  }
  Status Ping() override { return Status::Ok(); }
  std::string_view Name() const override { return "stalling"; }
  void Answer(Status s) { std::exchange(pending, nullptr)(std::move(s)); }

  int calls = 0;
  DecideCallback pending;
};

TEST(StoreHealth, NotReadyUntilAProbeAnswers) {
  ManualClock clock;
  MemoryStore memory(clock);
  StoreHealth health(memory, clock, {});
  EXPECT_EQ(health.Ready().code(), StatusCode::kUnavailable);
  health.ProbeOnce();
  EXPECT_TRUE(health.Ready().ok());
}

TEST(StoreHealth, AFailingStoreIsNotReadyAndSaysWhy) {
  ManualClock clock;
  testing::FaultInjectingStore store(std::make_unique<MemoryStore>(clock));
  StoreHealth health(store, clock, {});
  health.ProbeOnce();
  ASSERT_TRUE(health.Ready().ok());
  store.SetFailing(true);
  health.ProbeOnce();
  const Status s = health.Ready();
  EXPECT_EQ(s.code(), StatusCode::kUnavailable);
  EXPECT_NE(s.message().find("failing on demand"), std::string::npos) << s.message();
  store.SetFailing(false);
  health.ProbeOnce();
  EXPECT_TRUE(health.Ready().ok());
}

TEST(StoreHealth, AStalledStoreTurnsStaleWithoutAnyoneWaiting) {
  ManualClock clock;
  StallingStore store;
  StoreHealth health(store, clock, {.interval = seconds(1), .stale_after = seconds(3)});
  health.ProbeOnce();
  store.Answer(Status::Ok());
  EXPECT_TRUE(health.Ready().ok());
  health.ProbeOnce();  // never answered
  health.ProbeOnce();  // not doubled while the first waits
  EXPECT_EQ(store.calls, 2);
  clock.Advance(seconds(3));
  EXPECT_TRUE(health.Ready().ok());
  clock.Advance(std::chrono::milliseconds(1));
  const Status s = health.Ready();  // answers at once, whatever the store does
  EXPECT_EQ(s.code(), StatusCode::kUnavailable);
  EXPECT_NE(s.message().find("no answer to the probes"), std::string::npos) << s.message();
  store.Answer(Status::Ok());
  EXPECT_TRUE(health.Ready().ok());
}

TEST(StoreHealth, AProbeWritesSoAStoreRefusingWritesIsNotReady) {
  // The probe consumes a unit: a store whose writes fail (as Redis at maxmemory refuses a
  // script that writes) answers the probe with an error.
  ManualClock clock;
  class ReadOnlyStore final : public Store {
   public:
    void DecideAsync(std::span<const EntryRef> entries, DecideCallback done) override {
      for (const EntryRef& e : entries) {
        if (e.cost > 0) return done(Status::Unavailable("OOM command not allowed"));
      }
      done(StoreResponse{.allowed = true, .decisions = {}});
    }
    Status Ping() override { return Status::Ok(); }
    std::string_view Name() const override { return "read-only"; }
  } store;
  StoreHealth health(store, clock, {});
  health.ProbeOnce();
  EXPECT_NE(health.Ready().message().find("OOM"), std::string::npos);
}

}  // namespace
}  // namespace caudal
