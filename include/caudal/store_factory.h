// OpenStore: the Store a config's `store.url` names.
//
//   memory://             the embedded MemoryStore (one process; state lost on exit)
//   redis://host:port/db  a RedisStore shared by every instance pointing at it (rediss:// for
//                         TLS); store.timeout is its per-decision deadline
//   redis-cluster://host:port[,host:port...]  a RedisClusterStore (Redis Cluster)
//
// Thread-safety: the returned store is thread-safe (see store.h).
#pragma once

#include <memory>
#include <string_view>

#include "caudal/clock.h"
#include "caudal/config.h"
#include "caudal/store.h"

namespace caudal {

struct OpenStoreOptions {
  // Tests only: a store that decides by its own clock (memory) uses it; Redis uses it instead
  // of Redis's TIME. Null: the process clock given to OpenStore.
  const Clock* test_clock = nullptr;
};

// kInvalidArgument for an unknown scheme; the store's own errors when it cannot be opened.
Result<std::unique_ptr<Store>> OpenStore(const StoreConfig& config, const Clock& clock,
                                         OpenStoreOptions options);

// True for redis-cluster:// URLs (store.url's check).
bool IsRedisClusterOrSentinelUrl(std::string_view url);

// The in-process store `local` failure mode falls back to, bounded like the memory store.
std::unique_ptr<Store> OpenLocalFallback(const StoreConfig& config, const Clock& clock);

}  // namespace caudal
