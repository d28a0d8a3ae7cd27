// The cluster store's circuit breaker per primary, against a real Redis Cluster of 3 primaries:
// one primary stops answering (SIGSTOP: its connections stay open, its calls time out) and only
// its slots go to the failure mode, at once once its breaker is open; the other primaries' slots
// never fail; when it answers again, a probe closes its breaker.
#include <gtest/gtest.h>
#include <signal.h>

#include <thread>

#include "caudal/redis_cluster_store.h"
#include "common/cat.h"
#include "redis/hash_slot.h"
#include "redis/lua_protocol.h"
#include "redis/redis_test_util.h"
#include "support/redis_cluster.h"

namespace caudal {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using testing::RedisCluster;
using SteadyClock = std::chrono::steady_clock;

// A store key whose Redis key lives on node `node`.
std::string KeyOn(RedisCluster& c, size_t node, const std::string& base) {
  for (int i = 0;; ++i) {
    const std::string key = Cat(base, i);
    const int slot = redis::HashSlot(redis::StateKey("caudal:", key, Algorithm::kTokenBucket));
    Result<size_t> owner = c.PrimaryOf(slot);
    if (owner.ok() && *owner == node) return key;
  }
}

// SIGSTOP on a process, undone (SIGCONT) when it goes out of scope, failed test or not.
class Stopped {
 public:
  explicit Stopped(pid_t pid) : pid_(pid) { ::kill(pid_, SIGSTOP); }
  ~Stopped() { Continue(); }
  void Continue() {
    if (pid_ > 0) ::kill(pid_, SIGCONT);
    pid_ = -1;
  }

 private:
  pid_t pid_;
};

TEST(ClusterBreaker, AStalledPrimaryFailsOnlyItsSlotsAndFastOnceItsBreakerOpens) {
  // Full coverage not required and a long node timeout: the stalled primary is neither failed
  // over nor takes the other slots down with it during the test.
  Result<std::unique_ptr<RedisCluster>> cluster = RedisCluster::Start(
      {.primaries = 3, .node_timeout = seconds(60), .require_full_coverage = false});
  ASSERT_TRUE(cluster.ok()) << cluster.status().ToString();
  constexpr auto kDeadline = milliseconds(50);
  auto store = RedisClusterStore::Open({.url = (*cluster)->url(), .deadline = kDeadline});
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  const Limit limit = Bucket(Algorithm::kTokenBucket, 1'000'000, {1'000'000, seconds(1)});
  const std::string victim = KeyOn(**cluster, 0, "victim:");
  const std::vector<std::string> others = {KeyOn(**cluster, 1, "a:"), KeyOn(**cluster, 2, "b:")};
  auto decide = [&](const std::string& key) {
    const EntryRef e{.key = key, .limit = &limit, .cost = 1};
    return (*store)->Decide({&e, 1});
  };
  ASSERT_TRUE(decide(victim).ok());
  for (const std::string& k : others) ASSERT_TRUE(decide(k).ok());

  Stopped stopped((*cluster)->node(0).pid());
  int victim_failures = 0, fast_circuit_open = 0, other_failures = 0, other_ok = 0;
  const auto end = SteadyClock::now() + milliseconds(1200);
  while (SteadyClock::now() < end) {
    const auto start = SteadyClock::now();
    Result<StoreResponse> r = decide(victim);
    const auto took = SteadyClock::now() - start;
    ASSERT_FALSE(r.ok()) << "a stopped primary decided";
    EXPECT_EQ(r.status().code(), StatusCode::kUnavailable);
    ++victim_failures;
    if (r.status().message().find("circuit open") != std::string::npos) {
      EXPECT_LT(took, kDeadline) << "an open breaker fails at once";
      ++fast_circuit_open;
    }
    for (const std::string& k : others) {
      Result<StoreResponse> o = decide(k);
      if (o.ok()) {
        ++other_ok;
        continue;
      }
      ++other_failures;
      EXPECT_EQ(o.status().message().find("circuit open"), std::string::npos)
          << "a healthy primary's slot refused by a breaker: " << o.status().ToString();
    }
  }
  // A healthy primary's decision may still miss the deadline on a loaded machine (a rare
  // scheduling stall); what must never happen is its slots failing with the stalled one's.
  EXPECT_LE(other_failures * 100, other_ok) << "the other primaries' slots are unaffected";
  EXPECT_GT(other_ok, 10);
  EXPECT_GT(fast_circuit_open, 10) << "of " << victim_failures << " failures";
  EXPECT_GE((*store)->Stats().node_breaker_opens, 1u);

  stopped.Continue();
  const auto resumed_by = SteadyClock::now() + seconds(5);
  bool resumed = false;
  while (!resumed && SteadyClock::now() < resumed_by) {
    resumed = decide(victim).ok();
    if (!resumed) std::this_thread::sleep_for(milliseconds(20));
  }
  EXPECT_TRUE(resumed) << "the probe after open_for closes the breaker";
  for (const std::string& k : others) EXPECT_TRUE(decide(k).ok());
  std::cout << "stalled primary: " << victim_failures << " decisions failed for its slot ("
            << fast_circuit_open << " at once by its open breaker), " << other_ok
            << " on the other primaries, " << other_failures << " failed\n";
}

}  // namespace
}  // namespace caudal
