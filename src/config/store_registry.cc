#include "caudal/store_registry.h"

#include "caudal/memory_store.h"
#include "caudal/redis_store.h"
#include "common/cat.h"
#include "redis/redis_url.h"

namespace caudal {
namespace {

MemoryStoreOptions MemoryOptions(const StoreConfig& config) {
  return {.max_keys = static_cast<size_t>(config.max_keys), .shards = 64};
}

Status ValidateMemory(std::string_view url) {
  if (url == "memory://") return Status::Ok();
  return Status::InvalidArgument(Cat("expected memory:// with nothing after it (got ", Quoted(url), ')'));
}

Result<std::unique_ptr<Store>> OpenMemory(const StoreConfig& config, const Clock& clock,
                                          StoreOpenOptions) {
  return std::unique_ptr<Store>(std::make_unique<MemoryStore>(clock, MemoryOptions(config)));
}

Status ValidateRedis(std::string_view url) {
  auto parsed = redis::ParseRedisUrl(url);
  return parsed.ok() ? Status::Ok() : parsed.status();
}

Result<std::unique_ptr<Store>> OpenRedis(const StoreConfig& config, const Clock& clock,
                                         StoreOpenOptions options) {
  RedisStoreOptions redis;
  redis.url = config.url;
  redis.deadline = config.timeout;
  if (options.decide_on_clock) redis.decision_clock = &clock;
  auto store = RedisStore::Open(std::move(redis));
  if (!store.ok()) return store.status();
  return std::unique_ptr<Store>(std::move(store).value());
}

constexpr StoreKind kKinds[] = {
    {.scheme = "memory", .example = "memory://", .remote = false, .tls = false,
     .validate = ValidateMemory, .open = OpenMemory},
    {.scheme = "redis", .example = "redis://[user:password@]host:port[/db]", .remote = true,
     .tls = false, .validate = ValidateRedis, .open = OpenRedis},
    {.scheme = "rediss", .example = "rediss://[user:password@]host:port[/db]", .remote = true,
     .tls = true, .validate = ValidateRedis, .open = OpenRedis},
};

}  // namespace

std::span<const StoreKind> StoreKinds() { return kKinds; }

Result<const StoreKind*> FindStoreKind(std::string_view url) {
  const size_t sep = url.find("://");
  if (sep != std::string_view::npos) {
    for (const StoreKind& k : kKinds) {
      if (url.substr(0, sep) == k.scheme) return &k;
    }
  }
  std::string known;
  for (const StoreKind& k : kKinds) known += Cat(known.empty() ? "" : ", ", k.example);
  return Status::InvalidArgument(Cat(Quoted(url.substr(0, 64)), " is not a store URL (expected ", known, ')'));
}

Status ValidateStoreUrl(std::string_view url) {
  auto kind = FindStoreKind(url);
  if (!kind.ok()) return kind.status();
  return (*kind)->validate(url);
}

Result<std::unique_ptr<Store>> OpenStore(const StoreConfig& config, const Clock& clock,
                                         StoreOpenOptions options) {
  auto kind = FindStoreKind(config.url);
  if (!kind.ok()) return Status::InvalidArgument(Cat("store.url: ", kind.status().message()));
  return (*kind)->open(config, clock, options);
}

std::unique_ptr<Store> OpenLocalFallback(const StoreConfig& config, const Clock& clock) {
  return std::make_unique<MemoryStore>(clock, MemoryOptions(config));
}

}  // namespace caudal
