// RedisSentinelStore: the Store on a primary with replicas under Redis Sentinel, for high
// availability without Redis Cluster.
//
// The sentinels say which server is the primary (SENTINEL GET-MASTER-ADDR-BY-NAME); the store
// decides there exactly as RedisStore does on one server (one script call per batch, Redis's
// TIME, all-or-nothing), after checking with ROLE that the server really is a primary: it never
// decides on a replica. It follows a failover as soon as a sentinel announces it (a subscription
// to +switch-master on one sentinel, moved to another if that one goes), asks again whenever the
// primary's connections fail and every `topology_refresh` in any case.
//
// During a failover, decisions fail with kUnavailable (the caller's failure mode applies) from
// the moment the primary stops answering until the promoted replica is announced; then they
// resume there without a restart. Replication is asynchronous: what the old primary admitted but
// had not replicated is lost with it (docs/scaling.md says how much).
//
// Thread-safety: every member is safe to call from any thread. Callbacks run on the store's io
// thread and must not block.
#pragma once

#include <memory>

#include "caudal/redis_store.h"
#include "caudal/store.h"

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

  void DecideAsync(std::span<const EntryRef> entries, DecideCallback done) override;
  // PING on the current primary.
  Status Ping() override;
  std::string_view Name() const override { return "redis-sentinel"; }

  RedisStoreStats Stats() const;

 private:
  struct Impl;
  explicit RedisSentinelStore(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace caudal
