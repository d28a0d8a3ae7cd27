// The Redis IdempotencyStore against real servers: one redis-server, a three-primary Redis
// Cluster reached through one seed (records land on every primary, each call on its key's node:
// MOVED followed and remembered), and Sentinel's primary. The contract every implementation keeps
// (tests/support/idempotency_contract.h), each record one key whose PTTL is its window in Redis.
#include "caudal/store/idempotency_store.h"

#include <gtest/gtest.h>

#include <set>

#include "caudal/config/store_registry.h"
#include "support/idempotency_contract.h"
#include "support/redis_cluster.h"
#include "support/redis_sentinel.h"
#include "support/redis_server.h"

namespace caudal {
namespace {

using std::chrono::seconds;
using testing::ClaimOf;
using testing::CompleteOf;
using testing::OutcomeOf;
using testing::RedisCluster;
using testing::RedisSentinels;
using testing::RedisServer;

Result<std::unique_ptr<IdempotencyStore>> Open(const std::string& url) {
  StoreConfig config;
  config.url = url;
  return OpenIdempotencyStore(config, SystemClock::Instance(), 1);
}

TEST(RedisIdempotencyStore, KeepsTheContractOnOneServer) {
  auto server = RedisServer::Start();
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  auto store = Open((*server)->url());
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  testing::ExpectIdempotencyContract(**store, "t-");
  // max_records is the memory store's bound alone: Redis holds what its TTLs keep.
  auto keys = (*server)->Keys("caudal:idempotency:*");
  ASSERT_TRUE(keys.ok());
  EXPECT_EQ(keys->size(), 4u) << "t-k1, t-k2, t-k3, t-k4: one key per record";
}

TEST(RedisIdempotencyStore, ARecordLastsItsTtlInRedis) {
  auto server = RedisServer::Start();
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  auto store = Open((*server)->url());
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  ASSERT_EQ(OutcomeOf(ClaimOf(**store, "k", "fp", "c", seconds(10))), ClaimOutcome::kClaimed);
  auto pttl = (*server)->Command({"PTTL", "caudal:idempotency:k"});
  ASSERT_TRUE(pttl.ok()) << pttl.status().ToString();
  EXPECT_LE(std::stoll(*pttl), 10'000);
  EXPECT_GT(std::stoll(*pttl), 5'000);
  // The result's window replaces the claim's, counted from the result.
  ASSERT_EQ(testing::Changed(CompleteOf(**store, "k", "fp", "c", "r", std::chrono::hours(1))),
            true);
  pttl = (*server)->Command({"PTTL", "caudal:idempotency:k"});
  ASSERT_TRUE(pttl.ok());
  EXPECT_GT(std::stoll(*pttl), 3'590'000);
  EXPECT_LE(std::stoll(*pttl), 3'600'000);
}

TEST(RedisIdempotencyStore, RefusesAKeyThatIsNotARecord) {
  auto server = RedisServer::Start();
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  auto store = Open((*server)->url());
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  ASSERT_TRUE((*server)->Command({"SET", "caudal:idempotency:k", "junk"}).ok());
  EXPECT_EQ(ClaimOf(**store, "k", "fp", "c").status().code(), StatusCode::kUnavailable);
}

TEST(RedisIdempotencyStore, KeepsTheContractOnRedisClusterEachKeyOnItsNode) {
  auto cluster = RedisCluster::Start();
  ASSERT_TRUE(cluster.ok()) << cluster.status().ToString();
  // One seed: every other primary is found by MOVED.
  auto store = Open("redis-cluster://127.0.0.1:" + std::to_string((*cluster)->node(0).port()));
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  testing::ExpectIdempotencyContract(**store, "t-");
  for (int i = 0; i < 30; ++i) {
    ASSERT_EQ(OutcomeOf(ClaimOf(**store, "many-" + std::to_string(i), "fp", "c")),
              ClaimOutcome::kClaimed);
  }
  std::set<size_t> holders;
  for (size_t n = 0; n < (*cluster)->size(); ++n) {
    auto keys = (*cluster)->node(n).Keys("caudal:idempotency:many-*");
    ASSERT_TRUE(keys.ok());
    if (!keys->empty()) holders.insert(n);
  }
  EXPECT_EQ(holders.size(), (*cluster)->size()) << "records spread over every primary";
  for (int i = 0; i < 30; ++i) {
    EXPECT_EQ(OutcomeOf(ClaimOf(**store, "many-" + std::to_string(i), "fp", "d")),
              ClaimOutcome::kInProgress);
  }
}

TEST(RedisIdempotencyStore, KeepsTheContractOnTheSentinelsPrimary) {
  auto sentinels = RedisSentinels::Start();
  ASSERT_TRUE(sentinels.ok()) << sentinels.status().ToString();
  auto store = Open((*sentinels)->url());
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  testing::ExpectIdempotencyContract(**store, "t-");
  auto primary = (*sentinels)->PrimaryIndex();
  ASSERT_TRUE(primary.ok());
  auto keys = (*sentinels)->server(*primary).Keys("caudal:idempotency:*");
  ASSERT_TRUE(keys.ok());
  EXPECT_EQ(keys->size(), 4u) << "written on the primary";
}

TEST(RedisIdempotencyStore, AnUnreachableServerIsUnavailable) {
  auto server = RedisServer::Start();
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  const std::string url = (*server)->url();
  server->reset();
  auto store = Open(url);
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  EXPECT_EQ(ClaimOf(**store, "k", "fp", "c").status().code(), StatusCode::kUnavailable);
}

}  // namespace
}  // namespace caudal
