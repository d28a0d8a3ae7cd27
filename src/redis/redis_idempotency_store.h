// The IdempotencyStore of Redis (redis://, rediss://, redis-cluster://, redis-sentinel://): the
// Idempotency-Key records kept in Redis beside the rate-limit state, so that a request retried
// through any instance pointing at it finds the first one's claim or result.
//
// One string key per record, <prefix>idempotency:<key>, whose value is the record's state
// (in progress or done), fingerprint, claim id and result, and whose PX is the record's ttl:
// Redis ends it on its own clock, and holds no record past its window. Every call is one EVALSHA
// of a short script on that key alone (atomic; on Redis Cluster it goes to the key's slot),
// pipelined on the store's two connections per server (src/redis/routed_call.h), answered within
// the store's deadline (store.timeout, as a decision), on the store's io thread. At most
// max_record_calls claims are in flight; past it a claim fails at once with kResourceExhausted
// (complete and release, which end a claim already made, may take as many again).
//
// Thread-safety: every method may be called from any thread, and never blocks.
#pragma once

#include <memory>

#include "caudal/common/clock.h"
#include "caudal/redis/redis_store.h"
#include "store/idempotency_store.h"

namespace caudal {

// kInvalidArgument for a bad URL or TLS file; nothing is connected until the first call.
Result<std::unique_ptr<IdempotencyStore>> OpenRedisIdempotencyStore(const Clock& clock,
                                                                    RedisStoreOptions options);

}  // namespace caudal
