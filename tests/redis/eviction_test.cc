// Eviction on a real redis-server with a tiny maxmemory: what allkeys-lru costs (limits evicted
// start fresh: over-admission, measured here), what noeviction does instead (a full Redis
// refuses with OOM: failures decided by the failure mode, nothing over-admitted), and how the
// store's eviction check reports each (redis/eviction_check.h).
#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "caudal/engine/engine.h"
#include "caudal/redis/redis_store.h"
#include "redis/eviction_check.h"
#include "redis/redis_test_util.h"
#include "support/redis_cluster.h"
#include "support/redis_sentinel.h"
#include "support/redis_server.h"

namespace caudal {
namespace {

using std::chrono::hours;
using std::chrono::milliseconds;
using std::chrono::seconds;

// The measurement's shape (docs/stores.md quotes its result): kIdentities limits of
// kLimit per hour (fixed_window), offered kRounds hits each, round-robin (one hit per identity
// per round, always in the same order), with maxmemory kHeadroom above what the server used
// before the first decision. At most kIdentities * kLimit may be admitted.
constexpr int kIdentities = 20'000;
constexpr int kLimit = 3;
constexpr int kRounds = 5;
constexpr uint64_t kHeadroom = 1 << 20;

// Waits (up to 10 s) for `done`, looking every 10 ms: for an event that must come.
bool WaitFor(const std::function<bool()>& done) {
  const auto until = std::chrono::steady_clock::now() + seconds(10);
  while (!done()) {
    if (std::chrono::steady_clock::now() > until) return false;
    std::this_thread::sleep_for(milliseconds(10));
  }
  return true;
}

uint64_t InfoNumber(const testing::RedisServer& server, const std::string& section,
                    const std::string& field) {
  const Result<std::string> info = server.Command({"INFO", section});
  EXPECT_TRUE(info.ok()) << info.status().ToString();
  if (!info.ok()) return 0;
  const std::optional<std::string_view> v = redis::InfoField(*info, field);
  EXPECT_TRUE(v.has_value()) << field;
  return v ? std::stoull(std::string(*v)) : 0;
}

// Sets maxmemory kHeadroom above what the server uses now, and `policy`.
void TinyMaxmemory(const testing::RedisServer& server, const std::string& policy) {
  const uint64_t used = InfoNumber(server, "memory", "used_memory");
  ASSERT_TRUE(server.Command({"CONFIG", "SET", "maxmemory-policy", policy}).ok());
  ASSERT_TRUE(
      server.Command({"CONFIG", "SET", "maxmemory", std::to_string(used + kHeadroom)}).ok());
}

struct Tally {
  std::atomic<int64_t> admitted{0};
  std::atomic<int64_t> denied{0};
  std::atomic<int64_t> failed{0};
  std::atomic<int64_t> oom_failures{0};   // failed, quoting Redis's OOM
  std::atomic<int64_t> early_denials{0};  // denied before the identity had its kLimit
  std::vector<std::atomic<int>> per_key = std::vector<std::atomic<int>>(kIdentities);
};

// The rounds, each hit of a round in flight at once; the store's own deadline bounds each.
void Offer(Store& store, Tally& tally) {
  const Limit limit = Window(Algorithm::kFixedWindow, kLimit, hours(1));
  std::vector<std::string> keys;
  for (int i = 0; i < kIdentities; ++i) keys.push_back("eviction:" + std::to_string(i));
  for (int round = 0; round < kRounds; ++round) {
    std::mutex mu;
    std::condition_variable cv;
    int left = kIdentities;
    for (int i = 0; i < kIdentities; ++i) {
      const ConsumeEntry e{.key = keys[i], .limit = &limit, .cost = 1};
      store.DecideAsync({.consumes = {&e, 1}}, [&, i](Result<DecideResponse> r) {
        if (!r.ok()) {
          tally.failed.fetch_add(1);
          if (r.status().message().find("OOM") != std::string::npos)
            tally.oom_failures.fetch_add(1);
          EXPECT_EQ(r.status().code(), StatusCode::kUnavailable) << r.status().ToString();
        } else if (r->allowed) {
          tally.admitted.fetch_add(1);
          tally.per_key[i].fetch_add(1);
        } else {
          tally.denied.fetch_add(1);
          if (tally.per_key[i].load() < kLimit) tally.early_denials.fetch_add(1);
        }
        std::lock_guard lock(mu);
        if (--left == 0) cv.notify_all();
      });
    }
    std::unique_lock lock(mu);
    cv.wait(lock, [&] { return left == 0; });
  }
}

struct Watched {
  std::unique_ptr<testing::RedisServer> server;
  std::mutex mu;
  std::vector<std::string> lines;  // guarded by mu
  Metrics metrics;
  Logger log{[this](LogLevel, std::string_view line) {
    std::lock_guard lock(mu);
    lines.emplace_back(line);
  }};
  std::unique_ptr<redis::RedisEvictionWatch> watch;
  std::unique_ptr<RedisStore> store;

  // `url`: the store's URL for the server; unset: server->url().
  Watched(testing::RedisServerOptions o, bool refuse,
          const std::function<std::string(const testing::RedisServer&)>& url = nullptr) {
    server = StartServer(std::move(o));
    watch = std::make_unique<redis::RedisEvictionWatch>(
        redis::EvictionWatchOptions{.refuse = refuse, .log = &log, .metrics = &metrics});
    if (server == nullptr) return;
    store = MustOpen({.url = url ? url(*server) : server->url(),
                      .metrics = &metrics,
                      .deadline = seconds(5),
                      .eviction_watch = watch.get(),
                      .eviction_check_interval = milliseconds(50)});
  }
  size_t LinesWith(std::string_view text) {
    std::lock_guard lock(mu);
    size_t n = 0;
    for (const std::string& l : lines) n += l.find(text) != std::string::npos;
    return n;
  }
};

TEST(Eviction, AllkeysLruIsReportedAndOverAdmitsByEvictedLimits) {
  Watched w({}, /*refuse=*/false);
  ASSERT_NE(w.store, nullptr);
  TinyMaxmemory(*w.server, "allkeys-lru");
  ASSERT_TRUE(WaitFor([&] { return w.watch->AtRisk() == 1; }));
  EXPECT_EQ(w.metrics.Value(MetricId::kRedisEvictionRisk), 1u);
  ASSERT_TRUE(WaitFor([&] { return w.LinesWith("may evict caudal's keys") == 1; }));
  EXPECT_EQ(w.LinesWith("allkeys-lru"), 1u);

  Tally tally;
  Offer(*w.store, tally);
  const int64_t bound = int64_t{kIdentities} * kLimit;
  const uint64_t evicted = InfoNumber(*w.server, "stats", "evicted_keys");
  std::printf(
      "allkeys-lru, maxmemory used+%llu B: %d identities x %d/hour, %d offered each: "
      "admitted %lld (bound %lld, +%.1f%%), denied %lld, failed %lld, evicted %llu\n",
      static_cast<unsigned long long>(kHeadroom), kIdentities, kLimit, kRounds,
      static_cast<long long>(tally.admitted.load()), static_cast<long long>(bound),
      100.0 * static_cast<double>(tally.admitted.load() - bound) / static_cast<double>(bound),
      static_cast<long long>(tally.denied.load()), static_cast<long long>(tally.failed.load()),
      static_cast<unsigned long long>(evicted));
  EXPECT_EQ(tally.failed.load(), 0);
  EXPECT_GT(evicted, 0u);
  EXPECT_GT(tally.admitted.load(), bound);  // the silent over-admission stores.md documents
  // The evictions reach /metrics at the next round, and the warning is not repeated.
  ASSERT_TRUE(WaitFor([&] { return w.watch->Evicted() >= evicted; }));
  EXPECT_EQ(w.metrics.Total(MetricId::kRedisEvictedKeys), w.watch->Evicted());
  EXPECT_EQ(w.LinesWith("may evict caudal's keys"), 1u);
}

TEST(Eviction, NoevictionFullRefusesWithOomAndOverAdmitsNothing) {
  Watched w({}, /*refuse=*/true);
  ASSERT_NE(w.store, nullptr);
  TinyMaxmemory(*w.server, "noeviction");
  ASSERT_TRUE(WaitFor([&] { return w.watch->Ready().ok(); }));
  EXPECT_EQ(w.watch->AtRisk(), 0u);

  Tally tally;
  Offer(*w.store, tally);
  const int64_t bound = int64_t{kIdentities} * kLimit;
  std::printf(
      "noeviction, maxmemory used+%llu B: admitted %lld (bound %lld), denied %lld, "
      "failed %lld (OOM %lld)\n",
      static_cast<unsigned long long>(kHeadroom), static_cast<long long>(tally.admitted.load()),
      static_cast<long long>(bound), static_cast<long long>(tally.denied.load()),
      static_cast<long long>(tally.failed.load()),
      static_cast<long long>(tally.oom_failures.load()));
  EXPECT_LE(tally.admitted.load(), bound);
  for (int i = 0; i < kIdentities; ++i) ASSERT_LE(tally.per_key[i].load(), kLimit) << i;
  EXPECT_EQ(tally.early_denials.load(), 0);  // OOM is never "over limit"
  EXPECT_GT(tally.oom_failures.load(), 0);
  EXPECT_EQ(tally.oom_failures.load(), tally.failed.load());
  EXPECT_GT(w.store->Stats().oom, 0u);
  EXPECT_EQ(w.metrics.Total(MetricId::kRedisOom), w.store->Stats().oom);
  EXPECT_EQ(InfoNumber(*w.server, "stats", "evicted_keys"), 0u);

  // The engine answers a full Redis by each policy's failure mode. (The burst's own buffers
  // filled it above; now its data alone does.)
  const uint64_t used = InfoNumber(*w.server, "memory", "used_memory");
  ASSERT_TRUE(w.server->Command({"CONFIG", "SET", "maxmemory", std::to_string(used / 2)}).ok());
  for (const FailureMode mode : {FailureMode::kAllow, FailureMode::kDeny}) {
    Engine engine(*w.store, SystemClock::Instance(), {});
    PolicySpec p;
    p.name = "full";
    p.identity = {"user"};
    p.limits = {Window(Algorithm::kFixedWindow, kLimit, hours(1))};
    ASSERT_TRUE(engine.SetPolicies(*PolicySet::Create({p}, {.on_failure = mode})).ok());
    const Result<CheckResult> r =
        engine.Check(CheckRequest{.descriptors = {{"user", "new"}}, .cost = std::nullopt});
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_TRUE(r->degraded);
    EXPECT_EQ(r->outcome, mode == FailureMode::kAllow ? Outcome::kAllowed : Outcome::kUnavailable);
  }
  EXPECT_EQ(w.LinesWith("may evict"), 0u);
}

TEST(Eviction, RefuseHoldsReadinessUntilThePolicyCannotEvict) {
  Watched w({.extra_args = {"--maxmemory", "100mb", "--maxmemory-policy", "volatile-ttl"}},
            /*refuse=*/true);
  ASSERT_NE(w.store, nullptr);
  ASSERT_TRUE(WaitFor([&] { return w.watch->AtRisk() == 1; }));
  const Status s = w.watch->Ready();
  EXPECT_EQ(s.code(), StatusCode::kUnavailable);
  EXPECT_NE(s.message().find("volatile-ttl"), std::string::npos) << s.ToString();
  // The watch logs after it has counted: the line may come a moment after AtRisk() does.
  ASSERT_TRUE(
      WaitFor([&] { return w.LinesWith("not ready (store.on_eviction_risk: refuse)") == 1; }));

  // maxmemory 0: no limit, nothing evicted whatever the policy.
  ASSERT_TRUE(w.server->Command({"CONFIG", "SET", "maxmemory", "0"}).ok());
  ASSERT_TRUE(WaitFor([&] { return w.watch->Ready().ok(); }));
  EXPECT_EQ(w.watch->AtRisk(), 0u);
  EXPECT_EQ(w.metrics.Value(MetricId::kRedisEvictionRisk), 0u);
  ASSERT_TRUE(WaitFor([&] { return w.LinesWith("no longer evicts") == 1; }));

  // The risk back: unready again, and logged again.
  ASSERT_TRUE(w.server->Command({"CONFIG", "SET", "maxmemory", "100mb"}).ok());
  ASSERT_TRUE(WaitFor([&] { return !w.watch->Ready().ok(); }));
  ASSERT_TRUE(WaitFor([&] { return w.LinesWith("may evict caudal's keys") == 2; }));
  ASSERT_TRUE(w.server->Command({"CONFIG", "SET", "maxmemory-policy", "noeviction"}).ok());
  ASSERT_TRUE(WaitFor([&] { return w.watch->Ready().ok(); }));
}

TEST(Eviction, ReadsInfoWhereConfigIsRefused) {
  Watched w({.acl_users = {"caudal on >secret ~* &* +@all -config"},
             .extra_args = {"--maxmemory", "100mb", "--maxmemory-policy", "allkeys-random"}},
            /*refuse=*/false, [](const testing::RedisServer& server) {
              return "redis://caudal:secret@127.0.0.1:" + std::to_string(server.port());
            });
  ASSERT_NE(w.store, nullptr);
  const Result<std::string> dry =
      w.server->Command({"ACL", "DRYRUN", "caudal", "CONFIG", "GET", "maxmemory*"});
  ASSERT_TRUE(dry.ok()) << dry.status().ToString();
  EXPECT_NE(*dry, "OK");  // the store's user may not CONFIG
  ASSERT_TRUE(WaitFor([&] { return w.watch->AtRisk() == 1; }));
  // Logged after it is counted (a moment after AtRisk() says so), and once.
  ASSERT_TRUE(WaitFor([&] { return w.LinesWith("allkeys-random") == 1; }));
}

TEST(Eviction, ClusterReadsEveryPrimary) {
  Result<std::unique_ptr<testing::RedisCluster>> cluster = testing::RedisCluster::Start({});
  ASSERT_TRUE(cluster.ok()) << cluster.status().ToString();
  testing::RedisCluster& c = **cluster;
  ASSERT_TRUE(c.node(1).Command({"CONFIG", "SET", "maxmemory", "100mb"}).ok());
  ASSERT_TRUE(c.node(1).Command({"CONFIG", "SET", "maxmemory-policy", "allkeys-lfu"}).ok());
  Metrics metrics;
  redis::RedisEvictionWatch watch({.refuse = true, .metrics = &metrics});
  Result<std::unique_ptr<RedisClusterStore>> store = RedisClusterStore::Open(
      SystemClock::Instance(), {.url = c.url(),
                                .deadline = seconds(2),
                                .eviction_watch = &watch,
                                .eviction_check_interval = milliseconds(50)});
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  ASSERT_TRUE(WaitFor([&] { return watch.AtRisk() == 1; }));
  const Status s = watch.Ready();
  EXPECT_NE(s.message().find(":" + std::to_string(c.node(1).port()) + " may evict"),
            std::string::npos)
      << s.ToString();
  for (size_t i : {size_t{0}, size_t{2}}) {
    ASSERT_TRUE(c.node(i).Command({"CONFIG", "SET", "maxmemory", "100mb"}).ok());
    ASSERT_TRUE(c.node(i).Command({"CONFIG", "SET", "maxmemory-policy", "volatile-lru"}).ok());
  }
  ASSERT_TRUE(WaitFor([&] { return watch.AtRisk() == 3; }));
  EXPECT_EQ(metrics.Value(MetricId::kRedisEvictionRisk), 3u);
}

TEST(Eviction, SentinelReadsThePrimaryAgainAfterAFailover) {
  Result<std::unique_ptr<testing::RedisSentinels>> set = testing::RedisSentinels::Start({});
  ASSERT_TRUE(set.ok()) << set.status().ToString();
  testing::RedisSentinels& g = **set;
  // The replica may evict once it is the primary; the primary may not (no maxmemory).
  ASSERT_TRUE(g.server(1).Command({"CONFIG", "SET", "maxmemory", "100mb"}).ok());
  ASSERT_TRUE(g.server(1).Command({"CONFIG", "SET", "maxmemory-policy", "allkeys-lru"}).ok());
  redis::RedisEvictionWatch watch({.refuse = true});
  Result<std::unique_ptr<RedisSentinelStore>> store = RedisSentinelStore::Open(
      SystemClock::Instance(), {.url = g.url(),
                                .deadline = seconds(2),
                                .eviction_watch = &watch,
                                .eviction_check_interval = milliseconds(50)});
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  ASSERT_TRUE(WaitFor([&] { return watch.Ready().ok(); })) << watch.Ready().ToString();
  ASSERT_TRUE(g.sentinel(0).Command({"SENTINEL", "FAILOVER", "mymaster"}).ok());
  ASSERT_TRUE(g.WaitPrimary(1, seconds(30)).ok());
  ASSERT_TRUE(WaitFor([&] { return watch.AtRisk() == 1; }));
  const Status s = watch.Ready();
  EXPECT_NE(s.message().find(":" + std::to_string(g.server(1).port()) + " may evict"),
            std::string::npos)
      << s.ToString();
}

}  // namespace
}  // namespace caudal
