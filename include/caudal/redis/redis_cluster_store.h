// RedisClusterStore: the Store on Redis Cluster (self-hosted, or a managed service's cluster
// mode), for when one primary is not enough.
//
// A request's entries are grouped by the hash slot of their Redis key, and each group is one
// script call on its slot's primary, atomic there as on one server; a primary's requests share
// a call whatever their slots. A request whose keys share a slot (one identity's limits share
// its hash tag) is decided all-or-nothing as on one server; one spanning slots by reserve, then
// commit or undo: a refused request holds, on each group that admitted it, that group's costs
// until its undo ran, at most until the slowest group answered plus one round trip, and the
// undo gives back only what still counts (docs/scaling.md). MOVED, ASK and TRYAGAIN are
// followed, at most `max_redirects` per request within its deadline; decisions go to primaries
// only.
//
// Failover: while a primary is down or its circuit breaker open, decisions for its slots fail
// with kUnavailable (the caller's failure mode applies) and other slots are unaffected; they
// resume on the promoted replica without a restart. What the dead primary had admitted but not
// replicated is lost with it (docs/scaling.md says how much).
//
// Thread-safety: every member is safe to call from any thread. Callbacks run on the store's io
// thread and must not block.
#pragma once

#include <memory>

#include "caudal/redis/redis_store.h"
#include "caudal/store/store.h"

namespace caudal {

class RedisClusterStore final : public Store {
 public:
  // `options.url` is redis-cluster://... (see RedisStoreOptions). Reads the slot map from a seed
  // and connects to every primary before returning. kInvalidArgument for a bad URL or option, or
  // credentials a node refuses; kUnavailable when no seed answers with a map or no primary can
  // be reached. A primary that cannot be reached while others can is retried in the background.
  // `clock` as for RedisStore::Open.
  static Result<std::unique_ptr<RedisClusterStore>> Open(const Clock& clock,
                                                         RedisStoreOptions options);
  ~RedisClusterStore() override;

  // Ok when every slot has a primary and every primary answers PING.
  Status Ping() override;
  std::string_view Name() const override { return "redis-cluster"; }

  RedisStoreStats Stats() const;

 protected:
  void DecideBatchAsync(std::span<const EntryRef> entries, DecideCallback done) override;

 private:
  struct Impl;
  explicit RedisClusterStore(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace caudal
