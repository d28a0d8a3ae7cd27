// RedisClusterStore: the Store on Redis Cluster (self-hosted, or a managed service's cluster
// mode), for when one primary is not enough.
//
// Redis Cluster spreads keys over 16384 hash slots, each served by one primary, and runs a script
// only when all its keys share a slot. So the store groups a request's entries by the slot of
// their Redis key, and each group is one script call on its slot's primary, atomic there as on
// one Redis:
//   * a request whose keys share a slot (keys with one hash tag, such as one identity's limits)
//     is one call, decided all-or-nothing exactly as on one server;
//   * a request spanning slots is decided by reserve, then commit or undo: every group decides at
//     once; if all admit, it is admitted; if one refuses (or fails), the groups that admitted are
//     undone before the answer comes back. A refused request thus holds, on each group that
//     admitted it, that group's costs from the moment its script ran until its undo ran: at most
//     until the slowest group answered, plus one round trip. An undo gives back only what still
//     counts (see src/redis/lua/undo.lua), so the limits hold as on one server. An undo that
//     cannot reach its node (it failed meanwhile) leaves the units consumed.
// A primary's requests travel together in one call whatever their slots (batching, as on one
// server; the script checks that the node serves each request's keys, see lua_protocol.h), and
// a connection keeps `cluster_calls_in_flight` calls in flight.
//
// Topology: the slot map comes from CLUSTER SLOTS (asked of a connected node, or of the URL's
// seeds), read again every `topology_refresh` and soon after a MOVED, a lost node or CLUSTERDOWN.
// MOVED updates the map and retries on the new primary; ASK retries once on the importing node,
// after ASKING; TRYAGAIN (a slot being migrated) retries shortly; at most `max_redirects` of
// these per request, within its deadline. Each node loads the script when it connects, and again
// when it answers NOSCRIPT. Decisions go to primaries only.
//
// Failover: while a primary is down, decisions for its slots fail at once (kUnavailable: the
// caller's failure mode applies); other slots are unaffected. The map is read again every few
// hundred milliseconds until the replica's promotion shows, and decisions resume there without a
// restart. Replication is asynchronous: what the dead primary admitted but had not replicated is
// lost with it (docs/scaling.md says how much).
//
// Thread-safety: every member is safe to call from any thread. Callbacks run on the store's io
// thread and must not block.
#pragma once

#include <memory>

#include "caudal/redis_store.h"
#include "caudal/store.h"

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

  void DecideAsync(std::span<const EntryRef> entries, DecideCallback done) override;
  // Ok when every slot has a primary and every primary answers PING.
  Status Ping() override;
  std::string_view Name() const override { return "redis-cluster"; }

  RedisStoreStats Stats() const;

 private:
  struct Impl;
  explicit RedisClusterStore(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace caudal
