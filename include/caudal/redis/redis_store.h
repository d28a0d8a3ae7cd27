// RedisStore: the Store shared by any number of caudal instances, kept in one Redis server; and
// the same on Redis Cluster and under Sentinel (RedisClusterStore, RedisSentinelStore, below).
//
// Every batch of decisions is one call of one Lua script (src/redis/lua/): each request is
// decided all-or-nothing without interleaving, at Redis's own TIME, so instances whose clocks
// disagree decide alike. A key's TTL covers its time until fresh, so idle identities cost
// nothing. While calls are in flight new requests wait and leave together in the next call
// (src/redis/pipeline.h); no lock is held across a round trip.
//
// Failures: a decision with no answer within `deadline` completes with kUnavailable saying so
// (Stats().timeouts); with no connection up it fails at once with kUnavailable naming the
// cause. Connections are re-established in the background with backoff; a script Redis lost
// (SCRIPT FLUSH, a restart) is loaded again and the call sent again.
//
// Thread-safety: every member is safe to call from any thread. Callbacks run on the store's io
// thread and must not block (nor call the blocking Decide()).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "caudal/common/circuit_breaker.h"
#include "caudal/common/clock.h"
#include "caudal/store/store.h"

namespace caudal {

class Metrics;  // observe/metrics.h

// A Redis server's own circuit breaker (Redis Cluster: one per primary) changed state, or the
// server left the store's topology.
struct NodeBreakerEvent {
  std::string node{};  // "host:port" ("[::1]:7000")
  BreakerState from = BreakerState::kClosed;
  BreakerState to = BreakerState::kClosed;
  bool removed = false;  // the node left the topology (its series ends)
  uint64_t opens = 0;    // times this node's breaker opened, this one included
  std::string why{};     // the failure that last counted
  BreakerRules rules{};
};

class RedisTlsReload;
namespace redis {
class RedisEvictionWatch;
}

// Options for every Redis flavour: RedisStore (one server), RedisClusterStore and
// RedisSentinelStore (below); the URL's scheme names it.
// The most entries RedisStoreOptions::address_map may hold.
inline constexpr size_t kMaxRedisAddressMap = 1024;

// Ok when every entry of an address map is "host:port" to "host:port" (a port each, the host a
// name or an IP address, IPv6 in brackets), none named twice, at most kMaxRedisAddressMap;
// otherwise kInvalidArgument naming the first that is not.
Status ValidateRedisAddressMap(const std::vector<std::pair<std::string, std::string>>& map);

struct RedisStoreOptions {
  // redis://[[user]:password@]host[:port][/db] or rediss://... (TLS); for the other stores,
  // redis-cluster://... and redis-sentinel://... (see their headers).
  std::string url = "redis://127.0.0.1:6379";
  // Where the store's counters (Stats()) are rows of /metrics (caudal_redis_*); null: nowhere.
  // Must outlive the store.
  Metrics* metrics = nullptr;
  // Prepended to every key; each store key is also wrapped in a hash tag ("caudal:{key}").
  std::string key_prefix = "caudal:";
  // Per decision: Redis's round trip, from when its call is written (a request queued behind
  // calls that are on time first waits its turn; src/redis/pipeline.h).
  std::chrono::microseconds deadline = std::chrono::milliseconds(10);
  // For connecting (resolve, TCP, TLS, AUTH, SELECT, SCRIPT LOAD), and for Ping().
  std::chrono::milliseconds connect_timeout = std::chrono::seconds(2);
  // A connection whose oldest command has waited this long is dropped and reconnected.
  std::chrono::milliseconds stall_timeout = std::chrono::seconds(2);
  // Backoff between reconnection attempts: doubles from min to max.
  std::chrono::milliseconds reconnect_min = std::chrono::milliseconds(10);
  std::chrono::milliseconds reconnect_max = std::chrono::milliseconds(500);
  // Per server (for a cluster: per primary).
  size_t connections = 2;
  // Script calls in flight per connection; requests beyond wait and are batched.
  size_t max_calls_in_flight = 2;
  // The same for a cluster node. More than on one server: each primary has its own circuit
  // breaker, which counts late calls, and a stalled primary must hold enough of them in flight
  // for it to open (docs/scaling.md).
  size_t cluster_calls_in_flight = 32;
  // Requests carried by one script call; at most 4080, so that its reply fits the reply
  // parser's bound (ReplyLimits in resp.h).
  size_t max_batch = 128;
  // Calls waiting or in flight; beyond it a call fails with kResourceExhausted.
  size_t max_outstanding = 100'000;
  // The calls of the records that are not decisions (Idempotency-Key, runtime overrides) waiting
  // or in flight, per store; beyond it a call fails at once with kResourceExhausted (a call that
  // ends an idempotent request already decided may take as many again): src/redis/routed_call.h.
  size_t max_record_calls = 1024;
  // rediss://: the CA certificates (PEM) that sign the server's certificate; empty uses the
  // system's trust store. The server's name (or IP) is always verified.
  std::string tls_ca_file{};
  // A client certificate chain and its key (PEM), for servers that require one
  // (tls-auth-clients yes); both or neither.
  std::string tls_cert_file{};
  std::string tls_key_file{};
  // The name sent as SNI and verified in the server's certificate; empty: the URL's host (for a
  // cluster or Sentinel: each node's address as announced).
  std::string tls_server_name{};
  // Cluster and Sentinel: "host:port" as the group names it → "host:port" to dial instead
  // (store.address_map): for instances that reach the group through proxies or NAT of their own.
  std::vector<std::pair<std::string, std::string>> address_map{};
  // Where renewed TLS files come from (redis/redis_tls.h); null: the files read at start
  // serve for the store's life. Must outlive the store.
  RedisTlsReload* tls_reload = nullptr;
  // Cluster: MOVED, ASK and TRYAGAIN answers followed for one request before it fails.
  int max_redirects = 5;
  // Cluster: how often the slot map is read again when nothing prompted it (a MOVED, a lost
  // node, CLUSTERDOWN prompt it at once). Sentinel: how often the sentinels are asked again.
  std::chrono::milliseconds topology_refresh = std::chrono::seconds(5);
  // Send the fast script's calls (plain consumes, no calendar window) to the caudal Redis module
  // where the server has loaded this build's (CAUDAL.CONSUME, docs/stores.md): the same
  // decisions on the same state, natively. Off: always the script.
  bool module = true;
  // Decide at this clock's time instead of Redis's TIME. Null (the default) uses TIME, which
  // every instance shares; set it only where one clock drives every instance (replaying
  // recorded traffic, scripted time). Keys then get an hour of extra TTL, since Redis expires
  // them on its own clock. Must outlive the store.
  const Clock* decision_clock = nullptr;
  // Told what each primary's maxmemory-policy means for caudal's keys, at start and every
  // `eviction_check_interval` (redis/eviction_check.h); null: nothing is read. Must outlive the
  // store.
  redis::RedisEvictionWatch* eviction_watch = nullptr;
  std::chrono::milliseconds eviction_check_interval = std::chrono::seconds(1);
  // Cluster: told of every change of a node's circuit breaker and of each node that leaves, on
  // the store's io thread (it must not block); unset: nothing is told. Must outlive the store.
  std::function<void(const NodeBreakerEvent&)> on_node_breaker{};
};

struct RedisStoreStats {
  uint64_t calls = 0;           // script calls sent (batches), retries included
  uint64_t requests = 0;        // requests decided by Redis (a split one: once per slot group)
  uint64_t script_reloads = 0;  // NOSCRIPT replies answered by reloading the script
  uint64_t module_calls = 0;    // calls sent to the caudal module (RedisStoreOptions::module)
  uint64_t reconnects = 0;      // connections re-established after a loss
  uint64_t timeouts = 0;        // decisions completed at their deadline
  uint64_t oom = 0;             // calls Redis refused with OOM (over maxmemory): failures
  // Cluster and Sentinel only.
  uint64_t split_requests = 0;  // requests whose keys span slots (reserve, then commit or undo)
  uint64_t undos = 0;           // undo calls for split requests that were refused or failed
  uint64_t undo_failures = 0;   // undos that did not reach their node (the units stay consumed)
  uint64_t moved = 0;           // MOVED redirects followed
  uint64_t asked = 0;           // ASK redirects followed
  uint64_t tryagain = 0;        // TRYAGAIN answers retried
  // Requests a node did not serve in a call spanning slots (the map was behind), sent again
  // with their keys declared.
  uint64_t not_served = 0;
  uint64_t topology_refreshes = 0;  // slot maps read, or sentinels asked for the primary
  uint64_t primary_switches = 0;    // Sentinel: the primary changed
  uint64_t node_breaker_opens = 0;  // Cluster: a primary's circuit breaker opened
};

class RedisStore final : public Store {
 public:
  // Parses the URL and connects every connection before returning. kInvalidArgument for a bad
  // URL or option, or when Redis refuses the URL's credentials or database (a mistake no retry
  // fixes); kUnavailable when Redis cannot be reached or fails otherwise; each with a message
  // naming the cause. Deadlines, latencies and the waits of Open() and Ping() use `clock`'s
  // Monotonic(); a calendar window's boundaries are computed around its Now() (or the
  // decision_clock's), which must be within a day of Redis's TIME; it must outlive the store.
  static Result<std::unique_ptr<RedisStore>> Open(const Clock& clock, RedisStoreOptions options);
  ~RedisStore() override;

  // PING through the store's own connections.
  Status Ping() override;
  std::string_view Name() const override { return "redis"; }

  RedisStoreStats Stats() const;

 protected:
  void DecideBatchAsync(std::span<const EntryRef> entries, DecideCallback done) override;

 private:
  struct Impl;
  explicit RedisStore(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

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
