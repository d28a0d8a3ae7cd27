// RedisSentinelStore: the Store on a primary with replicas under Redis Sentinel, for high
// availability without Redis Cluster.
//
// It decides exactly as RedisStore does, on the primary the sentinels name, once ROLE has said
// it is one: it never decides on a replica. It follows a failover as soon as a sentinel
// announces it, asks again whenever the primary's connections fail, and every
// `topology_refresh` in any case (docs/scaling.md). During a failover decisions fail with
// kUnavailable (the caller's failure mode applies) until the replica being promoted answers as
// a primary, then resume there without a restart; what the old primary had admitted but not
// replicated is lost with it.
//
// Thread-safety: every member is safe to call from any thread. Callbacks run on the store's io
// thread and must not block.
#pragma once

#include <memory>

#include "caudal/redis/redis_store.h"
#include "caudal/store/store.h"

namespace caudal {

class RedisSentinelStore final : public Store {
 public:
  // `options.url` is redis-sentinel://... (see RedisStoreOptions). Asks the sentinels for the
  // primary and connects to it before returning. kInvalidArgument for a bad URL or option, a
  // master name no sentinel knows, or credentials refused; kUnavailable when no sentinel answers
  // or the primary cannot be reached.
  // `clock` as for RedisStore::Open.
  static Result<std::unique_ptr<RedisSentinelStore>> Open(const Clock& clock,
                                                          RedisStoreOptions options);
  ~RedisSentinelStore() override;

  // PING on the current primary.
  Status Ping() override;
  std::string_view Name() const override { return "redis-sentinel"; }

  RedisStoreStats Stats() const;

 protected:
  void DecideBatchAsync(std::span<const EntryRef> entries, DecideCallback done) override;

 private:
  struct Impl;
  explicit RedisSentinelStore(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace caudal
