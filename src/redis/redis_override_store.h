// The OverrideStore of Redis (redis://, rediss://, redis-cluster://, redis-sentinel://): runtime
// overrides kept in Redis beside the rate-limit state, so that every instance pointing at it
// reads the same ones and none is lost when they restart.
//
// Three keys, in one Cluster slot by their hash tag: <prefix>{overrides}:records (a hash, id →
// body), :ends (a hash, id → end in µs of Redis's TIME) and :version (a counter). Every call is
// one EVALSHA of a short script (atomic: a put counts, writes and raises the version at once),
// pipelined on the store's two connections per server (src/redis/routed_call.h), answered within
// the store's deadline (store.timeout, as a decision); at most max_record_calls in flight. On Redis
// Cluster the call goes to the node last found serving the keys' slot, following MOVED; with
// Sentinel, to the primary the sentinels name, asked again when it is lost or read-only. Ended
// records are dropped by the next list, put or delete, which then raises the version.
// Every raise of the version is PUBLISHed on <prefix>{overrides}:changes, which Watch subscribes
// to on a connection of its own, on the store's io thread (src/redis/change_feed.h).
//
// Thread-safety: every method may be called from any thread, never from a store callback.
#pragma once

#include <memory>

#include "caudal/common/clock.h"
#include "caudal/redis/redis_store.h"
#include "store/override_store.h"

namespace caudal {

// kInvalidArgument for a bad URL or TLS file; nothing is connected until the first call.
Result<std::unique_ptr<OverrideStore>> OpenRedisOverrideStore(const Clock& clock,
                                                              RedisStoreOptions options);

}  // namespace caudal
