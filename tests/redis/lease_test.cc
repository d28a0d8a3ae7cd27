// Leases across processes on a real redis-server (docs/algorithms.md, Leases): three processes,
// each with its own RedisStore and LeaseStore, on one hot key. Every admission is reported to the
// parent as it happens (time and units), so that the parent counts exactly, even for a process
// killed mid-run:
//   - steady load under the limit: everything admitted, at most 0.05 Redis calls per decision;
//   - load above the limit: never above B + r·(t + ttl) over any interval, at least 95% of what
//     the limit allows (B + r·T);
//   - one process killed (SIGKILL): nothing admitted twice; the units the store counts beyond
//     those admitted are at most what the killed one owed the store (LeaseOwed: held, asked,
//     ending) when it last said, and what the request it was deciding may have added;
//   - Redis killed: live leases keep being spent, exactly what they hold, then the failure mode.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "algorithms/algorithm.h"
#include "algorithms/exact_math.h"
#include "caudal/engine/engine.h"
#include "caudal/redis/redis_store.h"
#include "decorators/breaker_store.h"
#include "decorators/lease_store.h"
#include "redis/lease_processes.h"
#include "redis/redis_test_util.h"
#include "support/redis_server.h"

namespace caudal {
namespace {

using exact::Int128;
using std::chrono::milliseconds;
using std::chrono::seconds;
using SteadyClock = std::chrono::steady_clock;

constexpr int kProcesses = 3;
constexpr Nanos kTtl = milliseconds(250);

using lease_processes::Child;
using lease_processes::Collect;
using lease_processes::ForkAll;
using lease_processes::Ideal;
using lease_processes::Reported;
using lease_processes::Reporter;
using lease_processes::ScriptCalls;
using lease_processes::WallMicros;
using lease_processes::WorstExcess;

LeaseStoreOptions Leases(bool shares = false) {
  return {.ttl = kTtl, .instances = kProcesses, .return_interval = kTtl / 4, .shares = shares};
}

// One process: its own store and leases, `rate` requests a second of `cost` for `run_for`.
void Drive(const std::string& url, const Limit& limit, int64_t rate, SteadyClock::duration run_for,
           Reporter& report, std::string_view key = "hot", bool shares = false) {
  auto store = RedisStore::Open(SystemClock::Instance(), {.url = url, .deadline = seconds(2)});
  if (!store.ok()) return;
  LeaseStore leases(**store, SystemClock::Instance(), Leases(shares));
  const auto start = SteadyClock::now();
  const auto step = std::chrono::duration_cast<SteadyClock::duration>(seconds(1)) / rate;
  for (int64_t i = 0; SteadyClock::now() - start < run_for; ++i) {
    std::this_thread::sleep_until(start + i * step);
    const ConsumeEntry e{.key = key, .limit = &limit, .cost = 1};
    report.Offered(WallMicros(), 1);
    const Result<DecideResponse> r = leases.Decide({.consumes = {&e, 1}});
    if (r.ok() && r->allowed) report.Admitted(WallMicros(), 1);
    report.Owes(leases.Owed());
  }
  leases.ReturnAll(seconds(2));
  report.Unreturned(static_cast<int64_t>(leases.counters().units_lost) + leases.Owed().total());
}

TEST(Leases, ThreeProcessesUnderTheLimitAdmitEverythingAtFewRedisCallsPerDecision) {
  auto server = StartServer();
  // 10,000 a second with a burst of a second; the three offer 9,000 a second between them.
  const Limit limit = Bucket(Algorithm::kTokenBucket, 10'000, {10'000, seconds(1)});
  const int64_t before = ScriptCalls(*server);
  const std::vector<Child> children = ForkAll(
      kProcesses, [&](int, Reporter& r) { Drive(server->url(), limit, 3'000, seconds(2), r); });
  const Reported run = Collect(children);
  const int64_t calls = ScriptCalls(*server) - before;
  ASSERT_GT(run.decisions, 5'000);
  EXPECT_LE(WorstExcess(run.admitted, limit), 0) << "within B + r·t: the bucket never ran dry";
  EXPECT_GE(run.admitted_units * 100, run.offered * 95);
  const double per_decision = static_cast<double>(calls) / static_cast<double>(run.decisions);
  EXPECT_LE(per_decision, 0.05) << calls << " calls for " << run.decisions << " decisions";
  std::cout << "under the limit: " << run.admitted_units << " of " << run.offered << " admitted, "
            << calls << " script calls for " << run.decisions << " decisions (" << per_decision
            << " per decision)\n";
}

TEST(Leases, ThreeProcessesAboveTheLimitStayWithinBPlusRTimesTPlusTtl) {
  auto server = StartServer();
  // 2,000 a second with a burst of 500 (a tenth of it in leases); the three offer 3,600.
  const Limit limit = Bucket(Algorithm::kGcra, 500, {2'000, seconds(1)});
  const int64_t before = ScriptCalls(*server);
  const std::vector<Child> children = ForkAll(
      kProcesses, [&](int, Reporter& r) { Drive(server->url(), limit, 1'200, seconds(2), r); });
  const Reported run = Collect(children);
  const int64_t calls = ScriptCalls(*server) - before;
  const Int128 excess = WorstExcess(run.admitted, limit);
  const Int128 allowed = Int128{limit.refill_count()} * (kTtl.count() / 1000);
  EXPECT_LE(excess, allowed) << "admitted past B + r·(t + ttl)";
  // What one exact limiter would have admitted of the same requests, against what was.
  const int64_t ideal = Ideal(run.offers, limit);
  EXPECT_GE(run.admitted_units * 100, ideal * 95) << run.admitted_units << " of " << ideal;
  std::cout << "above the limit: " << run.admitted_units << " admitted of " << run.offered
            << " offered, " << ideal << " by an exact limiter without leases; worst interval "
            << static_cast<double>(excess) / static_cast<double>(limit.refill_period_us())
            << " units past B + r·t (bound: r·ttl = "
            << static_cast<double>(allowed) / static_cast<double>(limit.refill_period_us()) << "); "
            << calls << " script calls for " << run.decisions << " decisions\n";
}

// The same load, once leasing units and once taking shares (LeaseStoreOptions::shares): both
// within B + r·(t + ttl) and at 95% of the ideal; shares at half the script calls or fewer.
TEST(Leases, ThreeProcessesAboveTheLimitTakingSharesStayWithinTheBoundAtFewerCalls) {
  auto server = StartServer();
  const Limit limit = Bucket(Algorithm::kGcra, 500, {2'000, seconds(1)});
  int64_t calls[2] = {0, 0};
  for (bool shares : {false, true}) {
    const std::string key = shares ? "hot-shares" : "hot-leases";
    const int64_t before = ScriptCalls(*server);
    const std::vector<Child> children = ForkAll(kProcesses, [&](int, Reporter& r) {
      Drive(server->url(), limit, 1'200, seconds(2), r, key, shares);
    });
    const Reported run = Collect(children);
    calls[shares] = ScriptCalls(*server) - before;
    const Int128 excess = WorstExcess(run.admitted, limit);
    EXPECT_LE(excess, Int128{limit.refill_count()} * (kTtl.count() / 1000)) << shares;
    const int64_t ideal = Ideal(run.offers, limit);
    EXPECT_GE(run.admitted_units * 100, ideal * 95) << shares << ": " << run.admitted_units;
    std::cout << (shares ? "shares" : "leases") << ": " << run.admitted_units << " admitted of "
              << run.offered << " offered (" << ideal << " ideal), " << calls[shares]
              << " script calls for " << run.decisions << " decisions\n";
  }
  EXPECT_LE(calls[1] * 2, calls[0]) << calls[1] << " with shares, " << calls[0] << " without";
}

TEST(Leases, AKilledProcessLosesAtMostItsLeasesAndNothingIsAdmittedTwice) {
  auto server = StartServer();
  // One window of an hour, started at least 20 s before its end.
  while (WallMicros() % 3'600'000'000 > 3'580'000'000) std::this_thread::sleep_for(seconds(1));
  // An instance holds at most a tenth of 20,000 over 3: 666 units.
  const Limit limit = Window(Algorithm::kFixedWindow, 20'000, std::chrono::hours(1));
  const std::vector<Child> children = ForkAll(kProcesses, [&](int p, Reporter& r) {
    Drive(server->url(), limit, 2'000, p == 0 ? seconds(60) : seconds(2), r);
  });
  std::this_thread::sleep_for(seconds(1));
  ASSERT_EQ(::kill(children[0].pid, SIGKILL), 0);
  const Reported run = Collect(children, {children[0].pid});
  auto store = MustOpen({.url = server->url()});
  const Decision d = DecideOne(*store, "hot", limit, 0);
  const int64_t counted = d.limit - d.remaining;
  const int64_t most_held = limit.capacity() / 10 / kProcesses;
  // What the killed process owed the store when it last said, and what the request it was
  // deciding may have added: its own unit, and an ask for up to `most_held` less what it held,
  // unless one was in flight already (one key: one ask at a time).
  const LeaseOwed last = run.last_owed.at(children[0].pid);
  const int64_t killed_owed = 1 + (last.asked > 0 ? last.total() : most_held + last.ending);
  // The survivors gave back what they held: what the store counts beyond the admitted units is
  // what the killed process owed, and whatever a survivor's give-back could not return.
  EXPECT_GE(counted, run.admitted_units) << "every admitted unit was consumed in the store";
  EXPECT_LE(counted - run.admitted_units, killed_owed + run.unreturned);
  EXPECT_LE(last.held + last.asked, most_held) << "a process holds at most its share";
  std::cout << "killed: it owed " << last.total() << " units when it last said (" << last.held
            << " held, " << last.asked << " asked, " << last.ending << " ending); "
            << run.admitted_units << " admitted, " << counted
            << " counted by the store: " << counted - run.admitted_units << " lost (at most "
            << killed_owed << " with the killed process, " << run.unreturned
            << " the others could not give back)\n";
}

TEST(Leases, WhileRedisIsDownLiveLeasesAreSpentExactlyThenTheFailureModeApplies) {
  auto server = StartServer();
  auto redis = MustOpen({.url = server->url(), .deadline = milliseconds(200)});
  BreakerStore breaker(*redis, SystemClock::Instance(), {});
  // A long ttl: the leases outlive the outage's first seconds.
  LeaseStore leases(breaker, SystemClock::Instance(),
                    {.ttl = seconds(30), .max_share_ppm = 500'000, .instances = 1});
  Engine engine(leases, SystemClock::Instance(), {});
  const Limit limit = Window(Algorithm::kFixedWindow, 1'000, std::chrono::hours(1));
  PolicySpec spec;
  spec.name = "api";
  spec.identity = {"key"};
  spec.limits = {limit};
  // The policy's terms (store.lease's, as the config gives them) are what the engine sends.
  const PolicySetOptions options{
      .on_failure = FailureMode::kDeny,
      .lease = {.enabled = true, .ttl = seconds(30), .max_share_ppm = 500'000}};
  ASSERT_TRUE(engine.SetPolicies(*PolicySet::Create({spec}, options)).ok());
  CheckRequest request;
  request.descriptors = {{"key", "k"}};
  for (int i = 0; i < 50; ++i) ASSERT_TRUE(engine.Check(request)->allowed());
  server->Kill();
  ASSERT_TRUE(lease_processes::NoAskInFlight(leases));
  const int64_t held = leases.UnitsHeld();
  ASSERT_GT(held, 0);
  for (int64_t i = 0; i < held; ++i) {
    const Result<CheckResult> r = engine.Check(request);
    ASSERT_TRUE(r.ok());
    ASSERT_EQ(r->outcome, Outcome::kAllowed) << "unit " << i << " of " << held;
    EXPECT_FALSE(r->degraded) << "decided from a lease the store granted";
  }
  const Result<CheckResult> dry = engine.Check(request);
  ASSERT_TRUE(dry.ok());
  EXPECT_EQ(dry->outcome, Outcome::kUnavailable) << "the leases ran out: deny";
  EXPECT_TRUE(dry->degraded);
  std::cout << "Redis down: " << held << " decisions from live leases, then the failure mode\n";
}

}  // namespace
}  // namespace caudal
