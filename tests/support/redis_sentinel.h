// RedisSentinels: a throwaway primary, replica and sentinels for integration tests: RedisServers
// on free loopback ports (the sentinels run redis-server --sentinel with a config file of their
// own), stopped and removed when the object goes away.
//
// Thread-safety: for the test's main thread.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "caudal/common/status.h"
#include "support/redis_server.h"

namespace caudal::testing {

struct RedisSentinelOptions {
  int sentinels = 3;
  std::string master_name = "mymaster";
  // How long the primary must be silent before the sentinels act.
  std::chrono::milliseconds down_after{1000};
  // The servers and the sentinels serve TLS (one CA for all) and talk to each other over it,
  // each keeping a plaintext port for the fixture's own commands; url() names the TLS ports.
  bool tls = false;
};

class RedisSentinels {
 public:
  // Starts a primary, its replica and the sentinels (quorum 2), and waits until every sentinel
  // knows the replica and the other sentinels and the replica is in sync.
  static Result<std::unique_ptr<RedisSentinels>> Start(RedisSentinelOptions options = {});
  ~RedisSentinels();

  // "redis-sentinel://127.0.0.1:<s1>,...,127.0.0.1:<sN>/<master name>" (and "?tls=true", the TLS
  // ports, for a TLS set)
  std::string url() const;
  // The two data servers (0 starts as the primary, 1 as its replica).
  RedisServer& server(size_t i) { return *servers_.at(i); }
  RedisServer& sentinel(size_t i) { return *sentinels_.at(i); }
  // The index of the server the first live sentinel names as primary.
  Result<size_t> PrimaryIndex() const;

  // Waits until the live sentinels agree that server `i` is the primary, and (if `replica_too`)
  // the other server is its replica, in sync.
  Status WaitPrimary(size_t i, std::chrono::milliseconds timeout, bool replica_too = true) const;

 private:
  RedisSentinels() = default;
  Status WaitReady(std::chrono::milliseconds timeout) const;

  RedisSentinelOptions options_;
  std::vector<std::unique_ptr<RedisServer>> servers_;
  std::vector<std::unique_ptr<RedisServer>> sentinels_;
};

}  // namespace caudal::testing
