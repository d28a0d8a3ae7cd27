#include "caudal/store_factory.h"

#include "caudal/memory_store.h"
#include "caudal/redis_cluster_store.h"
#include "caudal/redis_store.h"
#include "common/cat.h"

namespace caudal {

namespace {

// Redis Cluster, in one place: the same options as redis://, the URL's scheme naming the store.
Result<std::unique_ptr<Store>> OpenRedisClusterOrSentinel(const StoreConfig& config,
                                                          const OpenStoreOptions& options) {
  RedisStoreOptions redis;
  redis.url = config.url;
  redis.deadline = config.timeout;
  redis.test_clock = options.test_clock;
  Result<std::unique_ptr<RedisClusterStore>> cluster = RedisClusterStore::Open(std::move(redis));
  if (!cluster.ok()) return cluster.status();
  return std::unique_ptr<Store>(std::move(cluster).value());
}

}  // namespace

bool IsRedisClusterOrSentinelUrl(std::string_view url) {
  return url.starts_with("redis-cluster://");
}

Result<std::unique_ptr<Store>> OpenStore(const StoreConfig& config, const Clock& clock,
                                         OpenStoreOptions options) {
  const Clock& c = options.test_clock != nullptr ? *options.test_clock : clock;
  if (config.url == "memory://") {
    return std::unique_ptr<Store>(std::make_unique<MemoryStore>(
        c, MemoryStoreOptions{.max_keys = static_cast<size_t>(config.max_keys), .shards = 64}));
  }
  if (config.url.rfind("redis://", 0) == 0 || config.url.rfind("rediss://", 0) == 0) {
    RedisStoreOptions redis;
    redis.url = config.url;
    redis.deadline = config.timeout;
    redis.test_clock = options.test_clock;
    auto store = RedisStore::Open(std::move(redis));
    if (!store.ok()) return store.status();
    return std::unique_ptr<Store>(std::move(store).value());
  }
  if (IsRedisClusterOrSentinelUrl(config.url)) return OpenRedisClusterOrSentinel(config, options);
  return Status::InvalidArgument(
      Cat("store.url: ", Quoted(config.url),
          " is not a store URL (memory://, redis://host:port or redis-cluster://host:port,...)"));
}

std::unique_ptr<Store> OpenLocalFallback(const StoreConfig& config, const Clock& clock) {
  return std::make_unique<MemoryStore>(
      clock, MemoryStoreOptions{.max_keys = static_cast<size_t>(config.max_keys), .shards = 64});
}

}  // namespace caudal
