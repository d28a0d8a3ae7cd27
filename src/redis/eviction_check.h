// Eviction: whether the Redis servers a store decides on may evict caudal's keys.
//
// Every key caudal writes carries a TTL, so under `maxmemory` any policy but `noeviction`
// (allkeys-* and volatile-* alike) may evict a limit's state, and that limit silently starts
// fresh: it admits up to its whole limit again, with no error. Only `noeviction` is safe; a full
// Redis then refuses the scripts' writes with OOM, which the stores answer as a failure (the
// policy's failure mode), never as "over limit". `maxmemory 0` (no limit) evicts nothing,
// whatever the policy.
//
// EvictionCheck reads, on the store's own connections and io thread, every primary's
// `maxmemory` and `maxmemory-policy` (CONFIG GET maxmemory*; INFO memory where CONFIG is renamed
// or refused, as on managed services) and its INFO stats `evicted_keys`: when the store starts,
// then every `interval` (a round still unanswered is not doubled; each command is answered or
// failed within the connection's stall_timeout). Each round goes to the RedisEvictionWatch, which
// logs a server that may evict once (and once more when that ends), sets
// caudal_redis_eviction_risk, counts the evictions seen in caudal_redis_evicted_keys_total and,
// under store.on_eviction_risk: refuse, holds readiness back while any server may evict or has
// not been read.
//
// Thread-safety: RedisEvictionWatch, any thread; EvictionCheck, the store's io thread only.
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "caudal/common/status.h"
#include "caudal/observe/log.h"
#include "observe/metrics.h"

struct redisReply;

namespace caudal::redis {

class Node;

// Whether a server with this `maxmemory` (bytes; 0: none) and `maxmemory-policy` may evict a key
// that has a TTL: any policy but noeviction, once maxmemory is set.
bool MayEvict(uint64_t maxmemory, std::string_view policy);

// The value of `field` in an INFO reply's text ("maxmemory_policy" in "...\r\nmaxmemory_policy:
// allkeys-lru\r\n..."); nullopt when absent.
std::optional<std::string_view> InfoField(std::string_view info, std::string_view field);

// What one primary said in one round.
struct ServerEviction {
  std::string server;                    // "host:port"
  bool answered = false;                 // false: no connection, or it was lost: nothing read
  std::optional<uint64_t> maxmemory;     // bytes
  std::string policy;                    // empty: not read
  std::optional<uint64_t> evicted_keys;  // INFO stats, since the server started
  std::string error;                     // why maxmemory or the policy could not be read
};

// Reads CONFIG GET maxmemory*'s reply (name, value pairs) into `out`; false when it is an error
// or lacks either value.
bool ReadConfigReply(const redisReply& reply, ServerEviction& out);
// Reads INFO memory's text into `out` (maxmemory, maxmemory_policy); false when it lacks either.
bool ReadInfoMemory(std::string_view info, ServerEviction& out);

struct EvictionWatchOptions {
  // store.on_eviction_risk: refuse: not ready while a server may evict or was never read.
  bool refuse = false;
  const Logger* log = nullptr;  // optional; must outlive the watch
  Metrics* metrics = nullptr;   // optional; must outlive the watch
};

class RedisEvictionWatch {
 public:
  explicit RedisEvictionWatch(EvictionWatchOptions options) : options_(options) {}

  // A store starts checking: under refuse, not ready until it has reported.
  void Begin();
  // One round over every primary of store `store` ("redis", ...): replaces the last. A server
  // not answered keeps what was known of it; a server absent left the store's topology.
  void Report(std::string_view store, std::span<const ServerEviction> servers);
  // Ok; under refuse, kUnavailable naming a server that may evict or that was never read.
  Status Ready() const;
  // Servers that may evict, in the last round; evictions seen since the watch began.
  size_t AtRisk() const;
  uint64_t Evicted() const;

 private:
  struct Known {
    uint64_t maxmemory = 0;
    std::string policy;  // empty: never read
    std::string error;   // why it was not read
    std::optional<uint64_t> evicted_keys;
    bool warned = false;  // the risk (or the failure to read) was logged
  };
  std::string Why(const std::string& server, const Known& k) const;

  const EvictionWatchOptions options_;
  mutable std::mutex mu_;
  bool begun_ = false;                    // guarded by mu_
  bool reported_ = false;                 // guarded by mu_
  std::map<std::string, Known> servers_;  // guarded by mu_: the last round's, at most its size
  std::string not_ready_;                 // guarded by mu_: empty when none is at risk
  size_t at_risk_ = 0;                    // guarded by mu_
  uint64_t evicted_ = 0;                  // guarded by mu_
};

class EvictionCheck {
 public:
  // `watch` (optional: null checks nothing) must outlive the check's rounds; `nodes` lists the
  // store's primaries now (io thread).
  EvictionCheck(boost::asio::io_context& io, RedisEvictionWatch* watch, std::string store,
                std::chrono::milliseconds interval, std::function<std::vector<Node*>()> nodes);
  ~EvictionCheck();
  EvictionCheck(const EvictionCheck&) = delete;
  EvictionCheck& operator=(const EvictionCheck&) = delete;

  // A round now, then one every interval. io thread.
  void Start();
  // No round after this, and a round in flight reports nothing. io thread.
  void Stop();

 private:
  struct Round;
  void RunRound();
  void Arm();

  RedisEvictionWatch* const watch_;
  const std::string store_;
  const std::chrono::milliseconds interval_;
  const std::function<std::vector<Node*>()> nodes_;
  boost::asio::steady_timer timer_;
  // Shared with the round in flight: whether one is, and whether the check stopped.
  struct Shared {
    bool in_flight = false;
    bool stopped = false;
  };
  std::shared_ptr<Shared> shared_ = std::make_shared<Shared>();
};

}  // namespace caudal::redis
