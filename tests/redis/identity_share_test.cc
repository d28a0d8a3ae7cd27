// A policy with `share` across processes (docs/algorithms.md, "Shares among identities"): three
// processes, each an Engine behind its own LeaseStore on one real redis-server (and on a Redis
// Cluster, and behind Redis Sentinel), share one capacity among three tenants. "flood" offers 4.5×
// the capacity from the start, "calm" a fifth of it, "late" floods too from 2 s on. Every
// admission is reported to the parent as it happens, so that the parent counts across processes:
//   - calm, under its fair share, is never refused;
//   - everything admitted together stays within B + r·(t + window) over any interval;
//   - late has its fair part of what calm leaves within two windows of its first request.
#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <iostream>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "algorithms/exact_math.h"
#include "caudal/engine/engine.h"
#include "caudal/redis/redis_store.h"
#include "decorators/breaker_store.h"
#include "decorators/lease_store.h"
#include "redis/lease_processes.h"
#include "redis/redis_test_util.h"
#include "support/redis_cluster.h"
#include "support/redis_sentinel.h"
#include "support/redis_server.h"

namespace caudal {
namespace {

using exact::Int128;
using std::chrono::milliseconds;
using std::chrono::seconds;
using SteadyClock = std::chrono::steady_clock;

using lease_processes::Child;
using lease_processes::Collect;
using lease_processes::ForkAll;
using lease_processes::Reported;
using lease_processes::Reporter;
using lease_processes::WallMicros;
using lease_processes::WorstExcess;

constexpr int kProcesses = 3;
constexpr int64_t kRate = 1'000;  // a bucket of 1,000 refilling 1,000 a second
constexpr Micros kWindow = seconds(1);
constexpr auto kRun = seconds(6);
constexpr auto kLateFrom = seconds(2);
constexpr auto kMeasureFrom = seconds(4);  // two windows after late's first request

Limit Capacity() {
  return *Limit::Create(LimitSpec::Bucket(Algorithm::kTokenBucket, kRate, {kRate, seconds(1)}));
}

PolicySpec SharedPolicy() {
  PolicySpec s;
  s.name = "provider-tokens";
  s.identity = {"tenant"};
  s.limits = {Capacity()};
  s.share = ShareTerms{.fairness = Fairness::kMaxMin, .window = kWindow};
  return s;
}

using OpenStore = std::function<Result<std::unique_ptr<Store>>()>;

// One process: an engine with the shared policy behind its own lease decorator; per second,
// `flood` requests of tenant flood, `calm` of calm, and `flood` of late from kLateFrom on, evenly
// spaced, for kRun.
void Drive(const OpenStore& open, int64_t flood, int64_t calm, Reporter& report) {
  auto store = open();
  if (!store.ok()) {
    report.Note("open_failed", 1);
    return;
  }
  LeaseStore leases(**store, SystemClock::Instance(),
                    {.lease_by_default = false, .return_interval = milliseconds(50)});
  Engine engine(leases, SystemClock::Instance(), {});
  auto set = PolicySet::Create({SharedPolicy()}, {.on_failure = FailureMode::kDeny});
  if (!set.ok() || !engine.SetPolicies(*set).ok()) {
    report.Note("policy_failed", 1);
    return;
  }
  struct Tenant {
    std::string name;
    int64_t per_second;
    SteadyClock::duration from;
    int64_t next = 0;  // its next request's index
    int64_t admitted = 0, refused = 0, failed = 0, measured = 0;
  };
  std::vector<Tenant> tenants = {
      {"flood", flood, {}}, {"calm", calm, {}}, {"late", flood, kLateFrom}};
  const auto start = SteadyClock::now();
  while (SteadyClock::now() - start < kRun) {
    // The tenant whose next request is due first.
    Tenant* due = nullptr;
    SteadyClock::time_point at{};
    for (Tenant& t : tenants) {
      const auto when =
          start + t.from +
          t.next * (std::chrono::duration_cast<SteadyClock::duration>(seconds(1)) / t.per_second);
      if (due == nullptr || when < at) {
        due = &t;
        at = when;
      }
    }
    std::this_thread::sleep_until(at);
    ++due->next;
    const Result<CheckResult> r = engine.Check({.descriptors = {{"tenant", due->name}}, .cost = 1});
    report.Offered(WallMicros(), 1);
    if (!r.ok() || r->degraded) {
      ++due->failed;
    } else if (r->allowed()) {
      report.Admitted(WallMicros(), 1);
      ++due->admitted;
      if (SteadyClock::now() - start >= kMeasureFrom) ++due->measured;
    } else {
      ++due->refused;
    }
  }
  for (const Tenant& t : tenants) {
    report.Note(t.name + "_admitted", t.admitted);
    report.Note(t.name + "_refused", t.refused);
    report.Note(t.name + "_failed", t.failed);
    report.Note(t.name + "_measured", t.measured);
  }
  leases.ReturnAll(seconds(2));
}

int64_t Sum(const Reported& run, const std::string& name) {
  int64_t n = 0;
  for (const auto& [pid, notes] : run.notes) {
    const auto it = notes.find(name);
    if (it != notes.end()) n += it->second;
  }
  return n;
}

// Each process offers flood 1,500 a second and calm 60: 4,500 and 180 in all.
void Check(const OpenStore& open, const std::string& where) {
  const std::vector<Child> children =
      ForkAll(kProcesses, [&](int, Reporter& r) { Drive(open, 1'500, 60, r); });
  const Reported run = Collect(children);
  ASSERT_EQ(Sum(run, "open_failed") + Sum(run, "policy_failed"), 0);
  for (const char* t : {"flood", "calm", "late"}) {
    EXPECT_EQ(Sum(run, std::string(t) + "_failed"), 0) << where << ": " << t;
  }
  EXPECT_EQ(Sum(run, "calm_refused"), 0) << where << ": an identity under its fair share";
  EXPECT_GE(Sum(run, "calm_admitted"), 180 * 6 * 95 / 100) << where;
  const Limit limit = Capacity();
  const Int128 excess = WorstExcess(run.admitted, limit);
  EXPECT_LE(excess, Int128{limit.refill_count()} * kWindow.count())
      << where << ": B + r·(t + window)";
  // What calm leaves (it asks a tenth more than it spends, and a unit per process), halved:
  // late's part, over the 2 s measured, at 85% or more.
  const int64_t fair = (kRate - 180 * 11 / 10 - kProcesses) / 2;
  EXPECT_GE(Sum(run, "late_measured"), fair * 2 * 85 / 100) << where;
  EXPECT_GE(Sum(run, "flood_measured"), fair * 2 * 85 / 100) << where;
  std::cout << where << ": admitted flood " << Sum(run, "flood_admitted") << " (refused "
            << Sum(run, "flood_refused") << "), calm " << Sum(run, "calm_admitted") << " (refused "
            << Sum(run, "calm_refused") << "), late " << Sum(run, "late_admitted") << " (refused "
            << Sum(run, "late_refused") << "); from 4 s: flood " << Sum(run, "flood_measured")
            << ", late " << Sum(run, "late_measured") << " (fair " << fair * 2
            << "); worst interval "
            << static_cast<double>(excess) / static_cast<double>(limit.refill_period_us())
            << " units past B + r·t\n";
}

// Opens a `StoreType` (RedisStore, RedisClusterStore or RedisSentinelStore) on `url` in each
// process.
template <typename StoreType>
OpenStore Opener(const std::string& url) {
  return [url]() -> Result<std::unique_ptr<Store>> {
    auto s = StoreType::Open(SystemClock::Instance(), {.url = url, .deadline = seconds(2)});
    if (!s.ok()) return s.status();
    return std::unique_ptr<Store>(std::move(*s));
  };
}

TEST(IdentityShares, ThreeProcessesOnOneRedisServer) {
  auto server = StartServer();
  ASSERT_NE(server, nullptr);
  Check(Opener<RedisStore>(server->url()), "one redis-server");
}

TEST(IdentityShares, ThreeProcessesOnARedisCluster) {
  Result<std::unique_ptr<testing::RedisCluster>> cluster = testing::RedisCluster::Start({});
  ASSERT_TRUE(cluster.ok()) << cluster.status().ToString();
  Check(Opener<RedisClusterStore>((*cluster)->url()), "Redis Cluster");
}

TEST(IdentityShares, ThreeProcessesBehindRedisSentinel) {
  Result<std::unique_ptr<testing::RedisSentinels>> set = testing::RedisSentinels::Start({});
  ASSERT_TRUE(set.ok()) << set.status().ToString();
  Check(Opener<RedisSentinelStore>((*set)->url()), "Redis Sentinel");
}

// Redis killed: the identity's grants held here are spent, exactly, and not one unit more; then,
// once its renewal fails, the policy's failure mode.
TEST(IdentityShares, WhileRedisIsDownTheSharesHeldAreSpentExactlyThenTheFailureModeApplies) {
  auto server = StartServer();
  ASSERT_NE(server, nullptr);
  auto redis = MustOpen({.url = server->url(), .deadline = milliseconds(200)});
  BreakerStore breaker(*redis, SystemClock::Instance(), {});
  LeaseStore leases(breaker, SystemClock::Instance(), {.lease_by_default = false});
  Engine engine(leases, SystemClock::Instance(), {});
  PolicySpec spec = SharedPolicy();
  spec.share->window = seconds(2);
  ASSERT_TRUE(
      engine.SetPolicies(*PolicySet::Create({spec}, {.on_failure = FailureMode::kDeny})).ok());
  const CheckRequest request{.descriptors = {{"tenant", "t"}}, .cost = 1};
  for (int i = 0; i < 20; ++i) ASSERT_TRUE(engine.Check(request)->allowed());
  server->Kill();
  ASSERT_TRUE(lease_processes::NoAskInFlight(leases));
  const int64_t held = leases.UnitsHeld();
  ASSERT_GT(held, 0);
  for (int64_t i = 0; i < held; ++i) {
    const Result<CheckResult> r = engine.Check(request);
    ASSERT_TRUE(r.ok());
    ASSERT_EQ(r->outcome, Outcome::kAllowed) << "unit " << i << " of " << held;
    EXPECT_FALSE(r->degraded) << "decided from a grant the store made";
  }
  // Beyond them, nothing is admitted: refused as beyond the share until a renewal fails (at most
  // half a window on), then the failure mode.
  const auto until = SteadyClock::now() + seconds(5);
  int64_t refused = 0;
  Outcome last = Outcome::kAllowed;
  while (SteadyClock::now() < until) {
    const Result<CheckResult> r = engine.Check(request);
    ASSERT_TRUE(r.ok());
    ASSERT_NE(r->outcome, Outcome::kAllowed) << "admitted beyond the grants held";
    last = r->outcome;
    if (last == Outcome::kUnavailable) break;
    ++refused;
    std::this_thread::sleep_for(milliseconds(5));
  }
  EXPECT_EQ(last, Outcome::kUnavailable) << "the failure mode, once the renewal failed";
  std::cout << "Redis down: " << held << " decisions from the share held, " << refused
            << " refused beyond it, then the failure mode\n";
}

}  // namespace
}  // namespace caudal
