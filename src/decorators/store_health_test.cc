#include "decorators/store_health.h"

#include <gtest/gtest.h>

#include "support/fake_store.h"
#include "support/manual_clock.h"

namespace caudal {
namespace {

using std::chrono::seconds;
using testing::FakeStore;

TEST(StoreHealth, NotReadyUntilAProbeAnswers) {
  ManualClock clock;
  FakeStore store(clock);
  StoreHealth health(store, clock, {});
  EXPECT_EQ(health.Ready().code(), StatusCode::kUnavailable);
  health.ProbeOnce();
  EXPECT_TRUE(health.Ready().ok());
}

TEST(StoreHealth, AFailingStoreIsNotReadyAndSaysWhy) {
  ManualClock clock;
  FakeStore store(clock);
  StoreHealth health(store, clock, {});
  health.ProbeOnce();
  ASSERT_TRUE(health.Ready().ok());
  store.FailWith(Status::Unavailable("redis: connection refused"));
  health.ProbeOnce();
  const Status s = health.Ready();
  EXPECT_EQ(s.code(), StatusCode::kUnavailable);
  EXPECT_NE(s.message().find("connection refused"), std::string::npos) << s.message();
  store.Recover();
  health.ProbeOnce();
  EXPECT_TRUE(health.Ready().ok());
}

TEST(StoreHealth, AlsoHoldsReadinessBackWhileItRefuses) {
  ManualClock clock;
  FakeStore store(clock);
  Status also = Status::Unavailable("redis at a:1 may evict caudal's keys");
  StoreHealth health(store, clock, {.also = [&also] { return also; }});
  health.ProbeOnce();
  const Status s = health.Ready();
  EXPECT_EQ(s.code(), StatusCode::kUnavailable);
  EXPECT_NE(s.message().find("may evict"), std::string::npos) << s.message();
  also = Status::Ok();
  EXPECT_TRUE(health.Ready().ok());
}

TEST(StoreHealth, AStalledStoreTurnsStaleWithoutAnyoneWaiting) {
  ManualClock clock;
  FakeStore store(clock);
  store.Hold();  // a store that answers only when the test says
  StoreHealth health(store, clock, {.interval = seconds(1), .stale_after = seconds(3)});
  health.ProbeOnce();
  store.ReleaseHeld();
  EXPECT_TRUE(health.Ready().ok());
  health.ProbeOnce();  // never answered
  health.ProbeOnce();  // not doubled while the first waits
  EXPECT_EQ(store.calls(), 2u);
  EXPECT_EQ(store.held(), 1u);
  clock.Advance(seconds(3));
  EXPECT_TRUE(health.Ready().ok());
  clock.Advance(std::chrono::milliseconds(1));
  const Status s = health.Ready();  // answers at once, whatever the store does
  EXPECT_EQ(s.code(), StatusCode::kUnavailable);
  EXPECT_NE(s.message().find("no answer to the probes"), std::string::npos) << s.message();
  store.ReleaseHeld();
  EXPECT_TRUE(health.Ready().ok());
}

// A stopped prober sends nothing more, so a store that holds what it is sent (a stalled one)
// keeps no probe from the prober's end; one already in flight still records its answer.
TEST(StoreHealth, StopEndsTheProbesAndKeepsTheAnswerOfOneInFlight) {
  ManualClock clock;
  FakeStore store(clock);
  StoreHealth health(store, clock, {});
  store.Hold();
  health.ProbeOnce();
  ASSERT_EQ(store.held(), 1u);
  health.Stop();
  store.ReleaseHeld();
  EXPECT_TRUE(health.Ready().ok()) << "the answer in flight was recorded";
  health.ProbeOnce();
  EXPECT_EQ(store.calls(), 1u) << "no probe after Stop()";
  EXPECT_EQ(store.held(), 0u);
}

TEST(StoreHealth, AProbeWritesSoAStoreRefusingWritesIsNotReady) {
  // The probe consumes a unit: a store whose writes fail (as Redis at maxmemory refuses a
  // script that writes) answers the probe with an error, though it answers reads and PING.
  ManualClock clock;
  FakeStore store(clock);
  store.FailWith(Status::Unavailable("OOM command not allowed"), testing::Failing::kWrites);
  ASSERT_TRUE(store.Ping().ok());
  StoreHealth health(store, clock, {});
  health.ProbeOnce();
  EXPECT_NE(health.Ready().message().find("OOM"), std::string::npos);
}

TEST(StoreHealth, StartProbesAtOnceThenEveryIntervalOfTheClock) {
  ManualClock clock;
  FakeStore store(clock);
  StoreHealth health(store, clock, {.interval = seconds(1), .stale_after = seconds(3)});
  health.Start();
  EXPECT_EQ(store.calls(), 1u) << "the first probe is made before Start returns";
  EXPECT_TRUE(health.Ready().ok());
  for (uint64_t wait = 1; wait <= 3; ++wait) {
    // The thread waits one interval of the clock, however long that takes in real time.
    ASSERT_TRUE(clock.AwaitWaits(wait));
    EXPECT_EQ(clock.deadlines(), std::vector<Nanos>{clock.Monotonic() + seconds(1)});
    EXPECT_EQ(store.calls(), wait);
    clock.Advance(seconds(1));
  }
  ASSERT_TRUE(clock.AwaitWaits(4));
  EXPECT_EQ(store.calls(), 4u);
}

TEST(StoreHealth, ProbesStopWhenTheStoreStopsAnsweringAndReadinessGoesStale) {
  ManualClock clock;
  FakeStore store(clock);
  StoreHealth health(store, clock, {.interval = seconds(1), .stale_after = seconds(3)});
  health.Start();
  ASSERT_TRUE(clock.AwaitWaits(1));
  store.Hold();
  for (uint64_t wait = 2; wait <= 5; ++wait) {
    clock.Advance(seconds(1));
    ASSERT_TRUE(clock.AwaitWaits(wait));
  }
  EXPECT_EQ(store.calls(), 2u) << "one probe in flight, not one per interval";
  EXPECT_EQ(health.Ready().code(), StatusCode::kUnavailable) << "4 s without an answer";
  store.ReleaseHeld();
  EXPECT_TRUE(health.Ready().ok());
}

}  // namespace
}  // namespace caudal
