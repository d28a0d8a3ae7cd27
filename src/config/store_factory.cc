#include "caudal/store_factory.h"

#include "caudal/memory_store.h"
#include "caudal/redis_store.h"
#include "common/cat.h"

namespace caudal {

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
  return Status::InvalidArgument(Cat("store.url: ", Quoted(config.url),
                                     " is not a store URL (memory:// or redis://host:port)"));
}

std::unique_ptr<Store> OpenLocalFallback(const StoreConfig& config, const Clock& clock) {
  return std::make_unique<MemoryStore>(
      clock, MemoryStoreOptions{.max_keys = static_cast<size_t>(config.max_keys), .shards = 64});
}

}  // namespace caudal
