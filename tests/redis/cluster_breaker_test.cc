// The cluster store's circuit breaker per primary, against a real Redis Cluster of 3 primaries:
// one primary stops answering (SIGSTOP: its connections stay open, its calls time out) and only
// its slots go to the failure mode, at once once its breaker is open; the other primaries' slots
// never fail; when it answers again, a probe closes its breaker. A killed primary's breaker
// shows in /metrics and in one log line, and closes once it is back.
#include <gtest/gtest.h>
#include <signal.h>

#include <mutex>
#include <thread>

#include "caudal/redis/redis_store.h"
#include "common/cat.h"
#include "config/store_registry.h"
#include "decorators/breaker_store.h"
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

// A key on each primary but node 0, the one the tests break.
std::vector<std::string> OtherKeys(RedisCluster& c) {
  return {KeyOn(c, 1, "a:"), KeyOn(c, 2, "b:")};
}

// One decision of cost 1 on a bucket that always admits: it fails only when the store does.
Result<DecideResponse> DecideOne(Store& store, const std::string& key) {
  static const Limit kLimit =
      Bucket(Algorithm::kTokenBucket, 1'000'000, {1'000'000, std::chrono::seconds(1)});
  const ConsumeEntry e{.key = key, .limit = &kLimit, .cost = 1};
  return store.Decide({.consumes = {&e, 1}});
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
  auto store = RedisClusterStore::Open(SystemClock::Instance(),
                                       {.url = (*cluster)->url(), .deadline = kDeadline});
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  const std::string victim = KeyOn(**cluster, 0, "victim:");
  const std::vector<std::string> others = OtherKeys(**cluster);
  auto decide = [&](const std::string& key) { return DecideOne(**store, key); };
  ASSERT_TRUE(decide(victim).ok());
  for (const std::string& k : others) ASSERT_TRUE(decide(k).ok());

  Stopped stopped((*cluster)->node(0).pid());
  int victim_failures = 0, fast_circuit_open = 0, other_failures = 0, other_ok = 0;
  const auto end = SteadyClock::now() + milliseconds(1200);
  while (SteadyClock::now() < end) {
    const auto start = SteadyClock::now();
    Result<DecideResponse> r = decide(victim);
    const auto took = SteadyClock::now() - start;
    ASSERT_FALSE(r.ok()) << "a stopped primary decided";
    EXPECT_EQ(r.status().code(), StatusCode::kUnavailable);
    ++victim_failures;
    if (r.status().message().find("circuit open") != std::string::npos) {
      EXPECT_LT(took, kDeadline) << "an open breaker fails at once";
      ++fast_circuit_open;
    }
    for (const std::string& k : others) {
      Result<DecideResponse> o = decide(k);
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

// The log lines written so far, from any thread.
class Lines {
 public:
  Logger MakeLogger() {
    return Logger([this](LogLevel, std::string_view m) {
      std::lock_guard lock(mu_);
      lines_.emplace_back(m);
    });
  }
  std::vector<std::string> Get() const {
    std::lock_guard lock(mu_);
    return lines_;
  }

 private:
  mutable std::mutex mu_;
  std::vector<std::string> lines_;
};

std::string NodeState(const Metrics& m, uint16_t port) {
  const std::string text = m.RenderPrometheus();
  const std::string series = Cat("caudal_store_node_breaker_state{node=\"127.0.0.1:", port, "\"} ");
  const size_t at = text.find(series);
  return at == std::string::npos ? "absent" : text.substr(at + series.size(), 1);
}

TEST(ClusterBreaker, AKilledPrimaryShowsInMetricsAndOneLogLineAndClosesWhenBack) {
  Result<std::unique_ptr<RedisCluster>> cluster = RedisCluster::Start(
      {.primaries = 3, .node_timeout = seconds(60), .require_full_coverage = false});
  ASSERT_TRUE(cluster.ok()) << cluster.status().ToString();
  Lines lines;
  const Logger log = lines.MakeLogger();
  Metrics metrics;
  BreakerReporter reporter(SystemClock::Instance(), &log, &metrics);
  // Opened as `caudal serve` opens it: through the registry, the reporter told of each node.
  StoreConfig config;
  config.url = (*cluster)->url();
  config.timeout = milliseconds(200);
  Result<std::unique_ptr<Store>> store =
      OpenStore(config, SystemClock::Instance(), {.node_breakers = &reporter});
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  const std::array<uint16_t, 3> ports = {(*cluster)->node(0).port(), (*cluster)->node(1).port(),
                                         (*cluster)->node(2).port()};
  for (uint16_t p : ports) EXPECT_EQ(NodeState(metrics, p), "0") << "every primary's series";
  const std::string victim = KeyOn(**cluster, 0, "victim:");
  const std::vector<std::string> others = OtherKeys(**cluster);
  auto decide = [&](const std::string& key) { return DecideOne(**store, key); };
  ASSERT_TRUE(decide(victim).ok());

  (*cluster)->node(0).Kill();
  // Decisions for its slot fail at once (no connection); five in a row open its breaker.
  const auto open_by = SteadyClock::now() + seconds(10);
  while (NodeState(metrics, ports[0]) != "1" && SteadyClock::now() < open_by) {
    EXPECT_FALSE(decide(victim).ok());
    std::this_thread::sleep_for(milliseconds(5));
  }
  ASSERT_EQ(NodeState(metrics, ports[0]), "1") << metrics.RenderPrometheus();
  EXPECT_NE(metrics.RenderPrometheus().find("caudal_store_breaker_state 1\n"), std::string::npos);
  // Down for a while longer: its probes keep failing, each reopening it, and log nothing more.
  // While it is open its decisions are refused by the breaker; one that fails for want of a
  // connection went out as the probe.
  int probes = 0;
  const auto probed_by = SteadyClock::now() + seconds(20);
  while (probes < 2 && SteadyClock::now() < probed_by) {
    const auto r = decide(victim);
    EXPECT_FALSE(r.ok());
    if (!r.ok() && r.status().message().find("no connection") != std::string::npos) ++probes;
    for (const std::string& k : others) EXPECT_TRUE(decide(k).ok()) << k;
    std::this_thread::sleep_for(milliseconds(10));
  }
  ASSERT_EQ(probes, 2) << "two probes failed, reopening it";
  EXPECT_EQ(NodeState(metrics, ports[1]), "0");
  EXPECT_EQ(NodeState(metrics, ports[2]), "0");
  std::vector<std::string> logged = lines.Get();
  ASSERT_EQ(logged.size(), 1u) << "one line for the outage, whatever its probes did";
  EXPECT_NE(logged[0].find(Cat("node 127.0.0.1:", ports[0], " failed 5 times in a row")),
            std::string::npos)
      << logged[0];
  EXPECT_NE(logged[0].find("circuit open"), std::string::npos) << logged[0];

  ASSERT_TRUE((*cluster)->node(0).Restart().ok());
  const auto back_by = SteadyClock::now() + seconds(10);
  bool back = false;
  while (!back && SteadyClock::now() < back_by) {
    back = decide(victim).ok();
    if (!back) std::this_thread::sleep_for(milliseconds(20));
  }
  ASSERT_TRUE(back) << "a probe after open_for closes the breaker once the primary is back";
  EXPECT_EQ(NodeState(metrics, ports[0]), "0");
  EXPECT_NE(metrics.RenderPrometheus().find(Cat(
                "caudal_store_node_breaker_opens_total{node=\"127.0.0.1:", ports[0], "\"} 1\n")),
            std::string::npos)
      << metrics.RenderPrometheus();
  logged = lines.Get();
  ASSERT_EQ(logged.size(), 2u);
  EXPECT_NE(logged[1].find(Cat("node 127.0.0.1:", ports[0], " answers again: circuit closed")),
            std::string::npos)
      << logged[1];
}

}  // namespace
}  // namespace caudal
