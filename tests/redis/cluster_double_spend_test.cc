// No double spend on Redis Cluster: 3 processes × 8 threads, each process with its own
// RedisClusterStore, hammer the same five keys (one per algorithm, each its own slot, spread over
// the 3 primaries). Every other request also charges the next limit, so it spans two slots and is
// decided by reserve, then commit or undo; refused ones are undone while others race them. Over
// the run the total admitted stays within what the limits allow (double_spend.h).
#include <gtest/gtest.h>

#include <iostream>
#include <mutex>

#include "caudal/redis/redis_store.h"
#include "decorators/lease_store.h"
#include "redis/double_spend.h"
#include "support/redis_cluster.h"

namespace caudal {
namespace {

using double_spend::Limits;
using double_spend::SteadyClock;
using double_spend::Tally;
using std::chrono::milliseconds;
using std::chrono::seconds;

constexpr int kProcesses = 3;
constexpr int kThreads = 8;
constexpr auto kRunFor = milliseconds(1500);

// Runs in each process: requests of one limit, or of one limit and the next (two slots).
// `through` is `store` or leases over it.
void HammerPairs(Tally& tally, const Limits& l, RedisClusterStore& store, Store& through) {
  const std::pair<std::string, const Limit*> all[] = {{"token_bucket", &l.token_bucket},
                                                      {"gcra", &l.gcra},
                                                      {"sliding_window_log", &l.log},
                                                      {"sliding_window_counter", &l.counter},
                                                      {"fixed_window", &l.fixed}};
  std::mutex mu;
  std::vector<std::thread> workers;
  const auto until = SteadyClock::now() + kRunFor;
  for (int t = 0; t < kThreads; ++t) {
    workers.emplace_back([&, t] {
      for (int round = t; SteadyClock::now() < until; ++round) {
        for (size_t i = 0; i < 5; ++i) {
          const auto& [name, limit] = all[i];
          const auto& [next_name, next_limit] = all[(i + 1) % 5];
          const ConsumeEntry pair[] = {{.key = name, .limit = limit, .cost = 1},
                                       {.key = next_name, .limit = next_limit, .cost = 1}};
          const size_t n = round % 2 == 0 ? 1 : 2;
          const Result<DecideResponse> r =
              through.Decide({.consumes = std::span<const ConsumeEntry>(pair, n)});
          std::lock_guard lock(mu);
          if (!r.ok()) {
            ++tally.errors;
            continue;
          }
          if (!r->allowed) continue;
          tally.Add(*limit, name, r->decisions[0]);
          if (n == 2) tally.Add(*next_limit, next_name, r->decisions[1]);
        }
      }
    });
  }
  for (std::thread& w : workers) w.join();
  const RedisStoreStats stats = store.Stats();
  tally.admitted["~split_requests"] += static_cast<int64_t>(stats.split_requests);
  tally.admitted["~undos"] += static_cast<int64_t>(stats.undos);
}

TEST(ClusterDoubleSpend, ThreeProcessesNeverAdmitMoreThanTheLimits) {
  Result<std::unique_ptr<testing::RedisCluster>> cluster = testing::RedisCluster::Start();
  ASSERT_TRUE(cluster.ok()) << cluster.status().ToString();
  const std::string url = (*cluster)->url();
  const Limits limits;
  const auto start = SteadyClock::now();
  const Tally total = double_spend::RunProcesses(kProcesses, [&](Tally& tally) {
    auto store =
        RedisClusterStore::Open(SystemClock::Instance(), {.url = url, .deadline = seconds(2)});
    if (!store.ok()) {
      tally.errors = 1'000'000;
      return;
    }
    HammerPairs(tally, limits, **store, **store);
  });
  const auto elapsed = SteadyClock::now() - start;
  EXPECT_EQ(total.errors, 0);
  for (const std::string& v : double_spend::Violations(total, limits, elapsed)) ADD_FAILURE() << v;
  // The limits were reached, and the split path was taken and refused (undone) many times.
  EXPECT_GE(total.admitted.at("token_bucket"), 20);
  EXPECT_EQ(total.admitted.at("sliding_window_log"), limits.log.capacity());
  EXPECT_GE(total.admitted.at("sliding_window_counter"), limits.counter.capacity() - 1);
  EXPECT_GE(total.fixed_per_window.size(), 2u);
  EXPECT_GT(total.admitted.at("~split_requests"), 1000);
  EXPECT_GT(total.admitted.at("~undos"), 100);
  for (const auto& [name, n] : total.admitted) std::cout << "cluster: " << name << " " << n << "\n";
}

// The same through leases: a request of two slots asks each of its groups for a lease, granted
// by that slot's primary in the same call (or undone with the group when another refuses).
TEST(ClusterDoubleSpend, ThreeProcessesWithLeasesNeverAdmitMoreThanTheLimitsAllow) {
  Result<std::unique_ptr<testing::RedisCluster>> cluster = testing::RedisCluster::Start();
  ASSERT_TRUE(cluster.ok()) << cluster.status().ToString();
  const std::string url = (*cluster)->url();
  const Limits limits;
  constexpr Nanos kTtl = milliseconds(100);
  const auto start = SteadyClock::now();
  const Tally total = double_spend::RunProcesses(kProcesses, [&](Tally& tally) {
    auto store =
        RedisClusterStore::Open(SystemClock::Instance(), {.url = url, .deadline = seconds(2)});
    if (!store.ok()) {
      tally.errors = 1'000'000;
      return;
    }
    LeaseStore leases(**store, SystemClock::Instance(),
                      {.ttl = kTtl,
                       .max_share_ppm = 1'000'000,
                       .instances = kProcesses,
                       .return_interval = kTtl / 4});
    HammerPairs(tally, limits, **store, leases);
    tally.admitted["~from_leases"] += static_cast<int64_t>(leases.counters().local);
    // Taken in the call deciding a request, and by renewals (which a key at its limit, dry,
    // asks for instead of its refused requests).
    tally.admitted["~grants"] += static_cast<int64_t>(leases.counters().grants);
    tally.admitted["~leases"] +=
        static_cast<int64_t>(leases.counters().grants + leases.counters().renewals);
    leases.ReturnAll(seconds(2));
  });
  const auto elapsed = SteadyClock::now() - start;
  EXPECT_EQ(total.errors, 0);
  for (const std::string& v : double_spend::Violations(total, limits, elapsed, kTtl)) {
    ADD_FAILURE() << v;
  }
  EXPECT_GE(total.admitted.at("token_bucket"), 20);
  EXPECT_EQ(total.admitted.at("sliding_window_log"), limits.log.capacity());
  EXPECT_GT(total.admitted.at("~split_requests"), 1000);
  EXPECT_GT(total.admitted.at("~from_leases"), 20);
  EXPECT_GT(total.admitted.at("~grants"), 0) << "leases taken in the call of a split request";
  EXPECT_GT(total.admitted.at("~leases"), 10);
  for (const auto& [name, n] : total.admitted) std::cout << "leases: " << name << " " << n << "\n";
}

}  // namespace
}  // namespace caudal
