// The store registry: every kind of Store a config's `store.url` can name, by URL scheme.
//
//   memory://              the embedded MemoryStore (one process; state lost on exit)
//   redis://host:port/db   a RedisStore shared by every instance pointing at it
//   rediss://...           the same over TLS
//   redis-cluster://host:port[,host:port...]  a RedisClusterStore (Redis Cluster)
//   redis-sentinel://host:port[,...]/name     a RedisSentinelStore (the primary Sentinel names)
//
// Config validation, `caudal serve` and `caudal check` all ask this table; adding a store is one
// entry in src/config/store_registry.cc (see docs/contributing.md).
//
// Thread-safety: the table is immutable; OpenStore returns a thread-safe store (see store.h).
#pragma once

#include <memory>
#include <span>
#include <string_view>

#include "caudal/common/clock.h"
#include "caudal/config/config.h"
#include "caudal/store/store.h"
#include "decorators/breaker_store.h"
#include "store/idempotency_store.h"

namespace caudal {

class RedisTlsReload;
class OverrideStore;
namespace redis {
class RedisEvictionWatch;
}

struct StoreOpenOptions {
  // Decide at `clock`'s time rather than the store's own (Redis's TIME): for a process whose
  // clock is scripted. The memory store always uses `clock`.
  bool decide_on_clock = false;
  // Told of each change of a server's own circuit breaker (stores with breaker_per_node): the
  // log and /metrics. Optional; must outlive the store.
  BreakerReporter* node_breakers = nullptr;
  // Where a Redis store's own counters are rows (caudal_redis_*). Optional; must outlive the
  // store.
  Metrics* metrics = nullptr;

  // A Redis store over TLS registers here to take renewed TLS files (redis/redis_tls.h);
  // null: it keeps those it started with. Must outlive the store.
  RedisTlsReload* redis_tls_reload = nullptr;
  // A Redis store reports what its servers' maxmemory-policy means here (redis/eviction_check.h);
  // null: it reads nothing. Must outlive the store.
  redis::RedisEvictionWatch* eviction_watch = nullptr;
};

struct StoreKind {
  std::string_view scheme;   // "memory", "redis", ...
  std::string_view example;  // "redis://host:port/db", for messages and docs
  bool remote = false;       // reached over the network and shared by instances: an outage at start
                             // is served by failure mode while it connects in the background
  bool tls = false;          // the scheme is TLS
  // The store keeps a circuit breaker per server (Redis Cluster: per primary), so the caller
  // must not add one for the whole store, which one failed server would open for every key.
  bool breaker_per_node = false;
  // kInvalidArgument naming the part at fault; checked when a config is loaded.
  Status (*validate)(std::string_view url) = nullptr;
  Result<std::unique_ptr<Store>> (*open)(const StoreConfig& config, const Clock& clock,
                                         StoreOpenOptions options) = nullptr;
};

// Every registered kind, in the order the docs list them.
std::span<const StoreKind> StoreKinds();
// The kind of `url`'s scheme, or kInvalidArgument listing the known ones.
Result<const StoreKind*> FindStoreKind(std::string_view url);
// kInvalidArgument for an unknown scheme or a malformed URL.
Status ValidateStoreUrl(std::string_view url);

// The store `config.url` names, with `config.password` (or the one in `config.password_file`).
// kInvalidArgument for a bad URL or password file, or a refusal no retry can fix (a wrong
// password or database); the store's own errors when it cannot be opened. Every store times
// its calls by `clock` (which must outlive it); the memory store also decides at its time.
Result<std::unique_ptr<Store>> OpenStore(const StoreConfig& config, const Clock& clock,
                                         StoreOpenOptions options = {});

inline constexpr size_t kMaxPasswordBytes = 4096;
// A password file's content, without its trailing newline. kInvalidArgument when it cannot be
// read, is empty or is longer than kMaxPasswordBytes.
Result<std::string> ReadPasswordFile(const std::string& path);

// The runtime overrides' records beside `config.url`'s store (store/override_store.h):
// the memory store's in this process, Redis's in Redis (redis://, rediss://, redis-cluster://,
// redis-sentinel://: its primary). kNotFound for a kind that has none; kInvalidArgument as
// OpenStore. Nothing is connected until the first call.
Result<std::unique_ptr<OverrideStore>> OpenOverrideStore(const StoreConfig& config,
                                                         const Clock& clock);

// The Idempotency-Key records beside `config.url`'s store (store/idempotency_store.h):
// the memory store's in this process (within `limits`), Redis's in Redis (every Redis kind).
// kNotFound for a kind that has none; kInvalidArgument as OpenStore. Nothing is connected until
// the first call.
Result<std::unique_ptr<IdempotencyStore>> OpenIdempotencyStore(const StoreConfig& config,
                                                               const Clock& clock,
                                                               MemoryIdempotencyLimits limits);

// The in-process store `local` failure mode falls back to, bounded like the memory store.
std::unique_ptr<Store> OpenLocalFallback(const StoreConfig& config, const Clock& clock);

}  // namespace caudal
