#include "config/store_registry.h"

#include <cctype>
#include <fstream>

#include "caudal/redis/redis_store.h"
#include "caudal/store/memory_store.h"
#include "common/cat.h"
#include "common/redact.h"
#include "decorators/breaker_store.h"
#include "redis/redis_idempotency_store.h"
#include "redis/redis_override_store.h"
#include "redis/redis_url.h"
#include "store/idempotency_store.h"
#include "store/override_store.h"

namespace caudal {
namespace {

MemoryStoreOptions MemoryOptions(const StoreConfig& config) {
  return {.max_keys = static_cast<size_t>(config.max_keys), .shards = 64};
}

Status ValidateMemory(std::string_view url) {
  if (url == "memory://") return Status::Ok();
  return Status::InvalidArgument(
      Cat("expected memory:// with nothing after it (got ", Quoted(RedactUrl(url)), ')'));
}

Result<std::unique_ptr<Store>> OpenMemory(const StoreConfig& config, const Clock& clock,
                                          StoreOpenOptions) {
  return std::unique_ptr<Store>(std::make_unique<MemoryStore>(clock, MemoryOptions(config)));
}

Status ValidateRedis(std::string_view url) {
  auto parsed = redis::ParseRedisUrl(url);
  return parsed.ok() ? Status::Ok() : parsed.status();
}

// `url` with `password` in its user information, percent-encoded.
std::string WithPassword(std::string_view url, std::string_view password) {
  std::string encoded;
  for (char c : password) {
    const auto u = static_cast<unsigned char>(c);
    if (std::isalnum(u) || c == '-' || c == '.' || c == '_' || c == '~') {
      encoded += c;
    } else {
      static constexpr char kHex[] = "0123456789ABCDEF";
      encoded += '%';
      encoded += kHex[u >> 4];
      encoded += kHex[u & 15];
    }
  }
  const size_t start = url.find("://") + 3;
  const size_t at = url.find('@', start);
  const size_t authority_end = url.find('/', start);
  if (at != std::string_view::npos && at < authority_end) {  // a user name, maybe a password
    const std::string_view user = url.substr(start, at - start);
    return Cat(url.substr(0, start), user.substr(0, user.find(':')), ':', encoded, url.substr(at));
  }
  return Cat(url.substr(0, start), ':', encoded, '@', url.substr(start));
}

// The options every Redis store takes from the config: URL (with the password), deadline, TLS.
RedisStoreOptions RedisOptionsFrom(const StoreConfig& config, const Clock& clock,
                                   StoreOpenOptions options) {
  RedisStoreOptions redis;
  redis.url = config.password.empty() ? config.url : WithPassword(config.url, config.password);
  redis.deadline = config.timeout;
  redis.tls_ca_file = config.tls.ca_file;
  redis.tls_cert_file = config.tls.cert_file;
  redis.tls_key_file = config.tls.key_file;
  redis.tls_server_name = config.tls.server_name;
  redis.address_map = config.address_map;
  redis.max_record_calls = static_cast<size_t>(config.max_record_calls);
  redis.module = config.module;
  redis.tls_reload = options.redis_tls_reload;
  redis.eviction_watch = options.eviction_watch;
  if (options.decide_on_clock) redis.decision_clock = &clock;
  redis.metrics = options.metrics;
  return redis;
}

Result<std::unique_ptr<Store>> OpenRedis(const StoreConfig& config, const Clock& clock,
                                         StoreOpenOptions options) {
  RedisStoreOptions redis = RedisOptionsFrom(config, clock, options);
  auto store = RedisStore::Open(clock, std::move(redis));
  if (!store.ok()) return store.status();
  return std::unique_ptr<Store>(std::move(store).value());
}

// Redis Cluster: the same options (and password) as redis://, the URL naming the seed nodes.
Status ValidateRedisCluster(std::string_view url) {
  auto parsed = redis::ParseClusterUrl(url);
  return parsed.ok() ? Status::Ok() : parsed.status();
}

Result<std::unique_ptr<Store>> OpenRedisCluster(const StoreConfig& config, const Clock& clock,
                                                StoreOpenOptions options) {
  RedisStoreOptions redis = RedisOptionsFrom(config, clock, options);
  if (BreakerReporter* report = options.node_breakers) {
    redis.on_node_breaker = [report](const NodeBreakerEvent& e) {
      if (e.removed) return report->NodeRemoved(e.node);
      report->NodeMoved("redis-cluster", e.node, e.from, e.to, e.opens, e.why, e.rules);
    };
  }
  auto store = RedisClusterStore::Open(clock, std::move(redis));
  if (!store.ok()) return store.status();
  return std::unique_ptr<Store>(std::move(store).value());
}

// Redis Sentinel: the same options as redis://, the URL naming the sentinels and the primary;
// the password is the primary's (a Sentinel's own goes in the URL's sentinel_password).
Status ValidateRedisSentinel(std::string_view url) {
  auto parsed = redis::ParseSentinelUrl(url);
  return parsed.ok() ? Status::Ok() : parsed.status();
}

Result<std::unique_ptr<Store>> OpenRedisSentinel(const StoreConfig& config, const Clock& clock,
                                                 StoreOpenOptions options) {
  RedisStoreOptions redis = RedisOptionsFrom(config, clock, options);
  auto store = RedisSentinelStore::Open(clock, std::move(redis));
  if (!store.ok()) return store.status();
  return std::unique_ptr<Store>(std::move(store).value());
}

constexpr StoreKind kKinds[] = {
    {.scheme = "memory",
     .example = "memory://",
     .remote = false,
     .tls = false,
     .validate = ValidateMemory,
     .open = OpenMemory},
    {.scheme = "redis",
     .example = "redis://[user:password@]host:port[/db]",
     .remote = true,
     .tls = false,
     .validate = ValidateRedis,
     .open = OpenRedis},
    {.scheme = "rediss",
     .example = "rediss://[user:password@]host:port[/db]",
     .remote = true,
     .tls = true,
     .validate = ValidateRedis,
     .open = OpenRedis},
    {.scheme = "redis-cluster",
     .example = "redis-cluster://[user:password@]host:port[,host:port...][?tls=true]",
     .remote = true,
     .tls = false,
     .breaker_per_node = true,
     .validate = ValidateRedisCluster,
     .open = OpenRedisCluster},
    {.scheme = "redis-sentinel",
     .example = "redis-sentinel://[user:password@]host:port[,host:port...]/master-name[/db]",
     .remote = true,
     .tls = false,
     .validate = ValidateRedisSentinel,
     .open = OpenRedisSentinel},
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
  return Status::InvalidArgument(
      Cat(Quoted(RedactUrl(url.substr(0, 64))), " is not a store URL (expected ", known, ')'));
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
  if (config.password_file.empty() || !config.password.empty()) {
    return (*kind)->open(config, clock, options);
  }
  StoreConfig with_password = config;
  auto password = ReadPasswordFile(config.password_file);
  if (!password.ok()) return password.status();
  with_password.password = std::move(*password);
  return (*kind)->open(with_password, clock, options);
}

Result<std::string> ReadPasswordFile(const std::string& path) {
  static_assert(kMaxPasswordBytes == kMaxSecretBytes);
  return ReadSecretFile(path, "store.password_file");
}

Result<std::unique_ptr<OverrideStore>> OpenOverrideStore(const StoreConfig& config,
                                                         const Clock& clock) {
  auto kind = FindStoreKind(config.url);
  if (!kind.ok()) return Status::InvalidArgument(Cat("store.url: ", kind.status().message()));
  const std::string_view scheme = (*kind)->scheme;
  if (scheme == "memory") return MakeMemoryOverrideStore(clock);
  if (!(*kind)->remote) {
    return Status::NotFound(Cat(scheme, ":// keeps no runtime overrides yet"));
  }
  StoreConfig with_password = config;
  if (!config.password_file.empty() && config.password.empty()) {
    auto password = ReadPasswordFile(config.password_file);
    if (!password.ok()) return password.status();
    with_password.password = std::move(*password);
  }
  return OpenRedisOverrideStore(clock, RedisOptionsFrom(with_password, clock, {}));
}

Result<std::unique_ptr<IdempotencyStore>> OpenIdempotencyStore(const StoreConfig& config,
                                                               const Clock& clock,
                                                               MemoryIdempotencyLimits limits) {
  auto kind = FindStoreKind(config.url);
  if (!kind.ok()) return Status::InvalidArgument(Cat("store.url: ", kind.status().message()));
  const std::string_view scheme = (*kind)->scheme;
  if (scheme == "memory") return MakeMemoryIdempotencyStore(clock, limits);
  if (!(*kind)->remote) {
    return Status::NotFound(Cat(scheme, ":// keeps no idempotency records yet"));
  }
  StoreConfig with_password = config;
  if (!config.password_file.empty() && config.password.empty()) {
    auto password = ReadPasswordFile(config.password_file);
    if (!password.ok()) return password.status();
    with_password.password = std::move(*password);
  }
  return OpenRedisIdempotencyStore(clock, RedisOptionsFrom(with_password, clock, {}));
}

std::unique_ptr<Store> OpenLocalFallback(const StoreConfig& config, const Clock& clock) {
  return std::make_unique<MemoryStore>(clock, MemoryOptions(config));
}

}  // namespace caudal
