// The Redis OverrideStore against real servers: one redis-server, a three-primary Redis Cluster
// reached through a seed that does not serve the keys' slot (MOVED followed), and Sentinel. Records
// put, replaced, bounded, listed and deleted; the version raised by every change; an end kept
// in Redis's TIME and the ended record dropped.
#include "store/override_store.h"

#include <gtest/gtest.h>
#include <signal.h>

#include <functional>
#include <thread>

#include "config/store_registry.h"
#include "redis/hash_slot.h"
#include "support/redis_cluster.h"
#include "support/redis_sentinel.h"
#include "support/redis_server.h"

namespace caudal {
namespace {

using testing::RedisCluster;
using testing::RedisSentinels;
using testing::RedisServer;

// store.timeout: room for a loaded machine's first connections, a Cluster's MOVED and a
// Sentinel's answer (the deadline's own test sets it short).
constexpr auto kDeadline = std::chrono::seconds(2);

void ExerciseStore(OverrideStore& s) {
  auto v0 = s.Version();
  ASSERT_TRUE(v0.ok()) << v0.status().ToString();
  auto put = s.Put("p|a|1:x", "body-1", std::nullopt, 2);
  ASSERT_TRUE(put.ok()) << put.status().ToString();
  EXPECT_TRUE(*put) << "new";
  EXPECT_FALSE(*s.Put("p|a|1:x", "body-2", std::nullopt, 2)) << "replaced";
  ASSERT_TRUE(*s.Put("p|a|1:y", "body-3", std::chrono::hours(1), 2));
  auto full = s.Put("p|a|1:z", "body-4", std::nullopt, 2);
  EXPECT_EQ(full.status().code(), StatusCode::kResourceExhausted);
  EXPECT_FALSE(s.Put("", "b", std::nullopt, 2).ok());

  auto list = s.List();
  ASSERT_TRUE(list.ok()) << list.status().ToString();
  EXPECT_EQ(list->version, *v0 + 3);
  ASSERT_EQ(list->records.size(), 2u);
  for (const OverrideRecord& r : list->records) {
    if (r.id == "p|a|1:x") {
      EXPECT_EQ(r.body, "body-2");
      EXPECT_FALSE(r.expires_at.has_value());
    } else {
      EXPECT_EQ(r.id, "p|a|1:y");
      ASSERT_TRUE(r.expires_at.has_value());
      const Micros left = *r.expires_at - list->now;  // in Redis's own time
      EXPECT_LE(left, std::chrono::hours(1));
      EXPECT_GT(left, std::chrono::hours(1) - std::chrono::seconds(5));
    }
  }

  auto removed = s.Delete("p|a|1:x");
  ASSERT_TRUE(removed.ok());
  ASSERT_TRUE(removed->has_value());
  EXPECT_EQ((*removed)->body, "body-2");
  EXPECT_FALSE(s.Delete("p|a|1:x")->has_value()) << "nothing to delete";
  ASSERT_TRUE(s.Touch().ok());
  EXPECT_EQ(*s.Version(), *v0 + 5);

  // An end 5 ms away, on Redis's clock: once Redis's time passes it, the record is gone and the
  // version raised (polled: real servers, real time).
  ASSERT_TRUE(*s.Put("p|a|1:w", "body-5", std::chrono::milliseconds(5), 3));
  for (int i = 0; i < 400; ++i) {
    list = s.List();
    ASSERT_TRUE(list.ok());
    if (list->records.size() == 1) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ASSERT_EQ(list->records.size(), 1u);
  EXPECT_EQ(list->records[0].id, "p|a|1:y");
  EXPECT_EQ(list->version, *v0 + 7) << "the put, then the drop of the ended record";
}

TEST(RedisOverrideStore, KeepsRecordsInOneServer) {
  auto server = RedisServer::Start();
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  StoreConfig config;
  config.timeout = kDeadline;
  config.url = (*server)->url();
  auto store = OpenOverrideStore(config, SystemClock::Instance());
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  ExerciseStore(**store);
  auto keys = (*server)->Keys("caudal:{overrides}:*");
  ASSERT_TRUE(keys.ok());
  EXPECT_EQ(keys->size(), 3u) << "records, ends, version: the three keys, one hash tag";
}

TEST(RedisOverrideStore, FollowsMovedOnRedisCluster) {
  auto cluster = RedisCluster::Start();
  ASSERT_TRUE(cluster.ok()) << cluster.status().ToString();
  const int slot = redis::HashSlot("caudal:{overrides}:records");
  auto owner = (*cluster)->PrimaryOf(slot);
  ASSERT_TRUE(owner.ok());
  const size_t other = (*owner + 1) % (*cluster)->size();
  StoreConfig config;
  config.timeout = kDeadline;
  config.url = "redis-cluster://127.0.0.1:" + std::to_string((*cluster)->node(other).port());
  auto store = OpenOverrideStore(config, SystemClock::Instance());
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  ExerciseStore(**store);
}

TEST(RedisOverrideStore, KeepsRecordsOnTheSentinelsPrimary) {
  auto sentinels = RedisSentinels::Start();
  ASSERT_TRUE(sentinels.ok()) << sentinels.status().ToString();
  StoreConfig config;
  config.timeout = kDeadline;
  config.url = (*sentinels)->url();
  auto store = OpenOverrideStore(config, SystemClock::Instance());
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  ExerciseStore(**store);
  auto primary = (*sentinels)->PrimaryIndex();
  ASSERT_TRUE(primary.ok());
  auto keys = (*sentinels)->server(*primary).Keys("caudal:{overrides}:*");
  ASSERT_TRUE(keys.ok());
  EXPECT_EQ(keys->size(), 3u) << "written on the primary";
}

// Every call answers within the store's deadline (store.timeout), never the 2 s connect timeout:
// a stalled Redis (SIGSTOP) fails it at the deadline, a killed one at once.
TEST(RedisOverrideStore, CallsAnswerWithinTheStoresDeadlineWhenRedisStallsOrDies) {
  auto server = RedisServer::Start();
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  StoreConfig config;
  config.url = (*server)->url();
  config.timeout = std::chrono::milliseconds(50);
  // Far below the connect timeout (2 s), with room for a loaded machine.
  constexpr auto kLate = std::chrono::milliseconds(300);
  auto warm = OpenOverrideStore(config, SystemClock::Instance());
  ASSERT_TRUE(warm.ok()) << warm.status().ToString();
  ASSERT_TRUE((*warm)->Version().ok());
  auto cold = OpenOverrideStore(config, SystemClock::Instance());  // connects during the stall
  ASSERT_TRUE(cold.ok()) << cold.status().ToString();
  const auto timed = [](const std::function<Status()>& call) {
    const auto start = std::chrono::steady_clock::now();
    const Status s = call();
    EXPECT_EQ(s.code(), StatusCode::kUnavailable) << s.ToString();
    return std::chrono::steady_clock::now() - start;
  };
  ASSERT_EQ(kill((*server)->pid(), SIGSTOP), 0);
  for (OverrideStore* s : {warm->get(), cold->get()}) {
    const auto version = timed([s] { return s->Version().status(); });
    EXPECT_GE(version, config.timeout);
    EXPECT_LT(version, kLate);
    EXPECT_LT(timed([s] { return s->List().status(); }), kLate);
    EXPECT_LT(timed([s] { return s->Put("p|a|1:x", "b", std::nullopt, 10).status(); }), kLate);
    EXPECT_LT(timed([s] { return s->Delete("p|a|1:x").status(); }), kLate);
    EXPECT_LT(timed([s] { return s->Touch(); }), kLate);
  }
  ASSERT_EQ(kill((*server)->pid(), SIGCONT), 0);
  (*server)->Kill();
  for (OverrideStore* s : {warm->get(), cold->get()}) {
    EXPECT_LT(timed([s] { return s->Version().status(); }), kLate);
  }
}

}  // namespace
}  // namespace caudal
