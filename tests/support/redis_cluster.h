// RedisCluster: a throwaway Redis Cluster for integration tests: primaries and replicas, each a
// RedisServer (--cluster-enabled) on a free loopback port whose bus port (+10000) is free too,
// joined by `redis-cli --cluster create`, stopped and removed when the object goes away.
//
// Also what the tests do to a cluster: move slots (`redis-cli --cluster reshard`), kill a
// primary and wait for its replica's promotion, ask who serves a slot.
//
// Thread-safety: Reshard() may run on another thread while the test drives load; the rest is
// for the test's main thread.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "caudal/common/status.h"
#include "support/redis_server.h"

namespace caudal::testing {

struct RedisClusterOptions {
  int primaries = 3;
  int replicas_per_primary = 0;
  // cluster-node-timeout: how long a silent primary takes to be declared failed (failover).
  std::chrono::milliseconds node_timeout{1000};
  // cluster-require-full-coverage: Redis's default (yes) stops every slot while one is not
  // served (a dead primary before its replica's promotion); no keeps the others serving.
  bool require_full_coverage = true;
  // Every node serves TLS (one CA for all), talks to the others over TLS too, and keeps a
  // plaintext port for the fixture's own commands; url() names the TLS ports.
  bool tls = false;
  // Further arguments for every node (e.g. {"--loadmodule", path}).
  std::vector<std::string> extra_args{};
};

class RedisCluster {
 public:
  // Starts the nodes, creates the cluster and waits until every node agrees that every slot is
  // served and every replica is in sync. kUnavailable with the tool's output when it fails.
  static Result<std::unique_ptr<RedisCluster>> Start(RedisClusterOptions options = {});
  ~RedisCluster();

  // "redis-cluster://127.0.0.1:<p1>,127.0.0.1:<p2>" (the primaries as created), with "?tls=true"
  // and the TLS ports for a TLS cluster.
  std::string url() const;
  size_t size() const { return nodes_.size(); }
  RedisServer& node(size_t i) { return *nodes_.at(i); }

  // The index of the node serving `slot`, as the first live node asked says.
  Result<size_t> PrimaryOf(int slot) const;
  // The node's cluster id (CLUSTER MYID).
  Result<std::string> NodeId(size_t i) const;

  // Moves `slots` slots from node `from` to node `to` with redis-cli --cluster reshard.
  Status Reshard(size_t from, size_t to, int slots) const;

  // Moves one slot by hand, a step at a time, as redis-cli does for each slot:
  //   kOpen      the target IMPORTING, the source MIGRATING (new keys: ASK to the target)
  //   kMoveKeys  MIGRATE the slot's keys to the target (their requests: ASK too)
  //   kFinish    CLUSTER SETSLOT NODE everywhere (MOVED from then on)
  // Each step includes the ones before it that have not run yet.
  enum class MigrationStep { kOpen, kMoveKeys, kFinish };
  Status MigrateSlot(int slot, size_t to, MigrationStep up_to);
  // Waits until every live node sees every slot served by a live, connected primary and
  // cluster_state:ok (after a kill, a replica's promotion).
  Status WaitHealthy(std::chrono::milliseconds timeout) const;

 private:
  RedisCluster() = default;
  Status Create(const RedisClusterOptions& options);
  Status RunTool(const std::vector<std::string>& args, const std::string& log) const;

  std::string dir_;
  std::vector<std::unique_ptr<RedisServer>> nodes_;
  size_t primaries_ = 0;
  bool tls_ = false;
};

}  // namespace caudal::testing
