// Redis Cluster changing under load: slots resharded, then a primary killed. One cluster of 3
// primaries and 3 replicas for the binary (CTest runs it as one test); the tests run in order.
// The cluster does not require full coverage (cluster-require-full-coverage no), which is what
// lets the other slots serve while a dead primary's are down.
//
// Each prints what the docs quote (docs/scaling.md): how long decisions for the moved or dead
// slots failed, what was admitted meanwhile, and what the failover lost.
#include <gtest/gtest.h>

#include <atomic>
#include <iostream>
#include <map>
#include <mutex>
#include <thread>

#include "caudal/redis/redis_store.h"
#include "common/cat.h"
#include "redis/hash_slot.h"
#include "redis/load_threads.h"
#include "redis/lua_protocol.h"
#include "redis/redis_test_util.h"
#include "support/redis_cluster.h"

namespace caudal {
namespace {

using load::Load;
using load::Outcome;
using std::chrono::milliseconds;
using std::chrono::seconds;
using testing::RedisCluster;
using SteadyClock = std::chrono::steady_clock;

std::unique_ptr<RedisCluster>& ClusterSlot() {
  static std::unique_ptr<RedisCluster> cluster;
  return cluster;
}

RedisCluster* Cluster() {
  std::unique_ptr<RedisCluster>& slot = ClusterSlot();
  if (!slot) {
    // Full coverage not required: a dead primary's slots stop, the others keep serving (with
    // Redis's default every slot answers CLUSTERDOWN until the replica takes over).
    Result<std::unique_ptr<RedisCluster>> c = RedisCluster::Start(
        {.primaries = 3, .replicas_per_primary = 1, .require_full_coverage = false});
    if (!c.ok()) ADD_FAILURE() << c.status().ToString();
    if (c.ok()) slot = std::move(*c);
  }
  return slot.get();
}

class ClusterEnvironment : public ::testing::Environment {
 public:
  void TearDown() override { ClusterSlot().reset(); }
};
const auto* const kEnvironment = ::testing::AddGlobalTestEnvironment(new ClusterEnvironment);

int SlotOf(const std::string& key, Algorithm a) {
  return redis::HashSlot(redis::StateKey("caudal:", key, a));
}

// Keys whose slots `want` accepts.
std::vector<std::string> Keys(const std::string& base, int count, Algorithm a,
                              const std::function<bool(int slot)>& want) {
  std::vector<std::string> out;
  for (int i = 0; static_cast<int>(out.size()) < count; ++i) {
    std::string key = Cat(base, i);
    if (want(SlotOf(key, a))) out.push_back(std::move(key));
  }
  return out;
}

// redis-cli --cluster reshard moves 300 slots from the first primary to the second while 4
// threads decide on keys of those slots (one key, or two in different slots). Nothing fails
// but through kUnavailable, and no key admits more than B + r·t.
TEST(ClusterUnderLoad, ReshardingMovesSlotsWithoutDoubleSpend) {
  RedisCluster* cluster = Cluster();
  ASSERT_NE(cluster, nullptr);
  auto store = RedisClusterStore::Open(SystemClock::Instance(),
                                       {.url = cluster->url(), .deadline = seconds(1)});
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  const Limit limit = Bucket(Algorithm::kTokenBucket, 10, {20, seconds(1)});
  // redis-cli takes the source's lowest slots first: keys in the first 300 of node 0's.
  Result<size_t> first_owner = cluster->PrimaryOf(0);
  ASSERT_TRUE(first_owner.ok());
  const size_t from = *first_owner;
  const size_t to = (from + 1) % 3;
  const std::vector<std::string> keys =
      Keys("reshard:", 60, limit.algorithm(), [](int slot) { return slot < 300; });
  std::vector<std::vector<size_t>> requests;
  for (size_t k = 0; k < keys.size(); ++k) {
    requests.push_back({k});
    requests.push_back({k, (k + 7) % keys.size()});  // two slots: reserve, commit or undo
  }
  const auto start = SteadyClock::now();
  Load load(**store, keys, limit, requests, 4);
  std::this_thread::sleep_for(milliseconds(300));  // load before the move (no decision timing)
  const Status resharded = cluster->Reshard(from, to, 300);
  std::this_thread::sleep_for(milliseconds(300));  // and after it
  const std::vector<Outcome> outcomes = load.Stop();
  const double secs = std::chrono::duration<double>(SteadyClock::now() - start).count();
  ASSERT_TRUE(resharded.ok()) << resharded.ToString();
  Result<size_t> owner = cluster->PrimaryOf(SlotOf(keys[0], limit.algorithm()));
  ASSERT_TRUE(owner.ok());
  EXPECT_EQ(*owner, to);

  std::map<size_t, int64_t> admitted;  // per key, split requests counted for both keys
  int64_t errors = 0, other_errors = 0;
  for (const Outcome& o : outcomes) {
    if (!o.ok) {
      ++errors;
      if (o.code != StatusCode::kUnavailable) ++other_errors;
    }
  }
  for (const Outcome& o : outcomes) {
    if (o.allowed) ++admitted[o.key];
  }
  EXPECT_EQ(other_errors, 0);
  EXPECT_LE(errors * 100, static_cast<int64_t>(outcomes.size()))
      << "at most 1% through kUnavailable";
  // A key's own admissions (requests it leads) never pass B + r·t; the split requests it
  // joins as the second key only lower that.
  const auto bound = static_cast<int64_t>(10 + 20 * secs);
  for (const auto& [k, n] : admitted) EXPECT_LE(n, bound) << keys[k];
  const RedisStoreStats stats = (*store)->Stats();
  EXPECT_GT(stats.moved + stats.asked + stats.not_served, 0u);
  std::cout << "resharding: " << outcomes.size() << " requests in " << secs << " s, " << errors
            << " unavailable, moved " << stats.moved << ", asked " << stats.asked << ", not served "
            << stats.not_served << ", tryagain " << stats.tryagain << ", split "
            << stats.split_requests << ", undos " << stats.undos << ", map reads "
            << stats.topology_refreshes << "\n";
}

// A primary is killed (SIGKILL) while 4 threads decide on keys of every primary. Until its
// replica takes over, decisions for its slots fail at once with kUnavailable (the caller's
// failure mode decides them) and nothing is admitted for them; the other slots never fail; then
// decisions resume on the promoted replica, same store. Keys are counters (a bucket of 10^6 that
// refills one unit per 30 minutes): what the replica holds after the failover, against what the
// dead primary had acknowledged, is what the failover lost.
TEST(ClusterUnderLoad, FailoverOfAKilledPrimaryFailsOnlyItsSlotsThenResumes) {
  RedisCluster* cluster = Cluster();
  ASSERT_NE(cluster, nullptr);
  ASSERT_TRUE(cluster->WaitHealthy(seconds(20)).ok());
  constexpr auto kDeadline = milliseconds(100);
  auto store = RedisClusterStore::Open(SystemClock::Instance(),
                                       {.url = cluster->url(), .deadline = kDeadline});
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  const Limit counter = Bucket(Algorithm::kTokenBucket, 1'000'000, {1, std::chrono::minutes(30)});
  Result<size_t> victim_node = cluster->PrimaryOf(SlotOf("victim:0", counter.algorithm()));
  ASSERT_TRUE(victim_node.ok());
  const size_t victim = *victim_node;
  std::vector<size_t> owner_of(16384);
  for (int s = 0; s < 16384; s += 64) {
    Result<size_t> o = cluster->PrimaryOf(s);
    ASSERT_TRUE(o.ok());
    for (int i = s; i < s + 64; ++i) owner_of[static_cast<size_t>(i)] = *o;
  }
  std::vector<std::string> keys = Keys("victim:", 20, counter.algorithm(), [&](int slot) {
    return owner_of[static_cast<size_t>(slot)] == victim;
  });
  const std::vector<std::string> others = Keys("bystander:", 20, counter.algorithm(), [&](int s) {
    return owner_of[static_cast<size_t>(s)] != victim;
  });
  keys.insert(keys.end(), others.begin(), others.end());
  const auto is_victim = [](size_t k) { return k < 20; };
  std::vector<std::vector<size_t>> requests;
  for (size_t k = 0; k < keys.size(); ++k) requests.push_back({k});

  load::StallProbe stalls;
  Load load(**store, keys, counter, requests, 4);
  std::this_thread::sleep_for(milliseconds(500));  // steady load first (no decision timing)
  const auto killed_at = SteadyClock::now();
  cluster->node(victim).Kill();
  // Wait (bounded) until decisions for the victim's slots succeed again.
  const auto until = killed_at + seconds(20);
  bool resumed = false;
  const ConsumeEntry probe{.key = keys[0], .limit = &counter, .cost = 0};
  while (!resumed && SteadyClock::now() < until) {
    resumed = (*store)->Decide({.consumes = {&probe, 1}}).ok();
    if (!resumed) std::this_thread::sleep_for(milliseconds(20));
  }
  std::this_thread::sleep_for(milliseconds(500));  // steady load after
  const std::vector<Outcome> outcomes = load.Stop();
  ASSERT_TRUE(resumed) << "decisions for the dead primary's slots never resumed";

  std::map<size_t, int64_t> acked_before;
  SteadyClock::time_point first_back = SteadyClock::time_point::max();
  int64_t victim_failures = 0, admitted_in_gap = 0, bystander_errors = 0, slow_failures = 0;
  int64_t bystanders = 0, bystander_other_errors = 0;
  // What the machine's load adds to any wait: a failure is slow past the deadline, 400 ms and
  // the worst scheduling stall seen; a bystander's decision may time out only in a stall that
  // outlasts half its deadline.
  const SteadyClock::duration stall = stalls.worst();
  for (const Outcome& o : outcomes) {
    if (is_victim(o.key) && o.ok && o.sent > killed_at) first_back = std::min(first_back, o.sent);
  }
  for (const Outcome& o : outcomes) {
    if (!is_victim(o.key)) {
      ++bystanders;
      bystander_errors += o.ok ? 0 : 1;
      bystander_other_errors += !o.ok && o.code != StatusCode::kUnavailable;
      continue;
    }
    if (o.allowed && o.answered < killed_at) ++acked_before[o.key];
    if (o.sent > killed_at && o.sent < first_back) {
      if (o.allowed) ++admitted_in_gap;
      if (!o.ok) {
        ++victim_failures;
        EXPECT_EQ(o.code, StatusCode::kUnavailable);
        if (o.answered - o.sent > kDeadline + milliseconds(400) + stall) ++slow_failures;
      }
    }
  }
  EXPECT_EQ(bystander_other_errors, 0);
  if (stall < kDeadline / 2) {
    EXPECT_EQ(bystander_errors, 0) << "other primaries' slots are unaffected";
  } else {  // a loaded machine: only the odd timeout of a stall, never the victim's failure
    EXPECT_LE(bystander_errors * 100, bystanders)
        << "other primaries' slots are unaffected (worst stall " << load::Ms(stall) << " ms)";
  }
  EXPECT_GT(victim_failures, 0);
  EXPECT_EQ(admitted_in_gap, 0);
  EXPECT_EQ(slow_failures, 0) << "failures come within the deadline (worst stall "
                              << load::Ms(stall) << " ms)";
  // What the promoted replica holds against what the dead primary acknowledged.
  int64_t lost = 0, acked = 0;
  for (const auto& [k, n] : acked_before) {
    const ConsumeEntry peek{.key = keys[k], .limit = &counter, .cost = 0};
    const Result<DecideResponse> now = (*store)->Decide({.consumes = {&peek, 1}});
    ASSERT_TRUE(now.ok());
    const int64_t consumed = 1'000'000 - now->decisions[0].remaining;
    int64_t after_kill = 0;  // admitted once the replica took over
    for (const Outcome& o : outcomes) after_kill += o.key == k && o.allowed && o.sent > killed_at;
    lost += std::max<int64_t>(0, n - (consumed - after_kill));
    acked += n;
  }
  const RedisStoreStats stats = (*store)->Stats();
  std::cout << "failover: gap " << load::Ms(first_back - killed_at) << " ms, " << victim_failures
            << " decisions failed (kUnavailable) for the dead primary's slots, " << admitted_in_gap
            << " admitted for them meanwhile, " << bystander_errors << " failures elsewhere; lost "
            << lost << " of " << acked << " acknowledged admissions; map reads "
            << stats.topology_refreshes << "\n";
  // Bring the old primary back: it rejoins as a replica.
  ASSERT_TRUE(cluster->node(victim).Restart().ok());
  EXPECT_TRUE(cluster->WaitHealthy(seconds(20)).ok());
}

}  // namespace
}  // namespace caudal
