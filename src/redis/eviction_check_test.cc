#include "redis/eviction_check.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace caudal::redis {
namespace {

TEST(EvictionCheck, EveryPolicyButNoevictionMayEvictOnceMaxmemoryIsSet) {
  for (const char* p : {"allkeys-lru", "allkeys-lfu", "allkeys-random", "volatile-lru",
                        "volatile-lfu", "volatile-random", "volatile-ttl"}) {
    EXPECT_TRUE(MayEvict(1 << 20, p)) << p;
    EXPECT_FALSE(MayEvict(0, p)) << p;  // no limit: nothing is evicted
  }
  EXPECT_FALSE(MayEvict(1 << 20, "noeviction"));
}

TEST(EvictionCheck, ReadsInfoFields) {
  const std::string info =
      "# Memory\r\nused_memory:1000\r\nmaxmemory:2097152\r\nmaxmemory_human:2.00M\r\n"
      "maxmemory_policy:allkeys-lru\r\n";
  EXPECT_EQ(InfoField(info, "maxmemory"), "2097152");
  EXPECT_EQ(InfoField(info, "maxmemory_policy"), "allkeys-lru");
  EXPECT_EQ(InfoField(info, "maxmemory_h"), std::nullopt);  // a prefix of a field is not it
  EXPECT_EQ(InfoField(info, "evicted_keys"), std::nullopt);
  ServerEviction s;
  ASSERT_TRUE(ReadInfoMemory(info, s));
  EXPECT_EQ(s.maxmemory, 2097152u);
  EXPECT_EQ(s.policy, "allkeys-lru");
  ServerEviction t;
  EXPECT_FALSE(ReadInfoMemory("maxmemory:x\r\nmaxmemory_policy:noeviction\r\n", t));
  EXPECT_FALSE(ReadInfoMemory("maxmemory:0\r\n", t));
}

ServerEviction Server(std::string name, uint64_t maxmemory, std::string policy, uint64_t evicted) {
  return {.server = std::move(name),
          .answered = true,
          .maxmemory = maxmemory,
          .policy = std::move(policy),
          .evicted_keys = evicted,
          .error = {}};
}

struct Logged {
  std::vector<std::string> lines;
  Logger log{[this](LogLevel, std::string_view line) { lines.emplace_back(line); }};
};

TEST(EvictionWatch, WarnsOnceCountsEvictionsAndKeepsWhatAnUnansweredServerSaid) {
  Logged logged;
  Metrics metrics;
  RedisEvictionWatch watch({.refuse = false, .log = &logged.log, .metrics = &metrics});
  watch.Begin();
  EXPECT_TRUE(watch.Ready().ok());  // warn: always ready
  const std::vector<ServerEviction> first = {Server("a:1", 1 << 20, "allkeys-lru", 100),
                                             Server("b:1", 1 << 20, "noeviction", 5)};
  watch.Report("redis-cluster", first);
  EXPECT_EQ(watch.AtRisk(), 1u);
  EXPECT_EQ(metrics.Value(MetricId::kRedisEvictionRisk), 1u);
  EXPECT_EQ(watch.Evicted(), 0u);  // what the servers evicted before is not counted
  ASSERT_EQ(logged.lines.size(), 1u);
  EXPECT_NE(logged.lines[0].find("a:1 may evict caudal's keys"), std::string::npos);

  // a:1 evicted 7 more, b:1 restarted and evicted 2 since: 9 seen; nothing logged again.
  watch.Report("redis-cluster",
               std::vector<ServerEviction>{Server("a:1", 1 << 20, "allkeys-lru", 107),
                                           Server("b:1", 1 << 20, "noeviction", 2)});
  EXPECT_EQ(watch.Evicted(), 9u);
  EXPECT_EQ(metrics.Total(MetricId::kRedisEvictedKeys), 9u);
  EXPECT_EQ(logged.lines.size(), 1u);

  // a:1 unanswered: what it said stands; b:1 left the topology.
  ServerEviction lost;
  lost.server = "a:1";
  watch.Report("redis-cluster", std::vector<ServerEviction>{lost});
  EXPECT_EQ(watch.AtRisk(), 1u);
  EXPECT_EQ(logged.lines.size(), 1u);
}

TEST(EvictionWatch, RefuseIsUnreadyUntilReadAndWhileAnyServerMayEvict) {
  RedisEvictionWatch watch({.refuse = true});
  EXPECT_TRUE(watch.Ready().ok());  // no Redis store: nothing to read
  watch.Begin();
  EXPECT_EQ(watch.Ready().code(), StatusCode::kUnavailable);
  watch.Report("redis", std::vector<ServerEviction>{});  // no primary known yet
  EXPECT_EQ(watch.Ready().code(), StatusCode::kUnavailable);
  watch.Report("redis", std::vector<ServerEviction>{Server("a:1", 0, "allkeys-lru", 0)});
  EXPECT_TRUE(watch.Ready().ok()) << watch.Ready().ToString();
  watch.Report("redis", std::vector<ServerEviction>{Server("a:1", 10, "volatile-lfu", 0)});
  EXPECT_NE(watch.Ready().message().find("volatile-lfu"), std::string::npos);
  // Neither CONFIG nor INFO answered: unknown, so not ready.
  RedisEvictionWatch unread({.refuse = true});
  unread.Begin();
  ServerEviction refused;
  refused.server = "c:1";
  refused.answered = true;
  refused.error = "CONFIG GET: NOPERM";
  unread.Report("redis", std::vector<ServerEviction>{refused});
  EXPECT_NE(unread.Ready().message().find("NOPERM"), std::string::npos);
  EXPECT_EQ(unread.AtRisk(), 0u);
}

}  // namespace
}  // namespace caudal::redis
