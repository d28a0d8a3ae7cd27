// RedisServer: a real redis-server for integration tests, started on a free loopback port in its
// own temporary directory and stopped (and the directory removed) when the object goes away.
//
// Tests never share a server and never use a system-wide one. The helper also offers a small
// blocking client (hiredis) so tests can inspect and disturb the server: SCAN, PTTL,
// SCRIPT FLUSH, DEBUG SLEEP, MEMORY USAGE...
//
// Thread-safety: Command() may be called from any thread (each call opens its own connection);
// Start/Stop/Restart/Kill are for the test's main thread.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "caudal/common/status.h"

namespace caudal::testing {

// The server the tests start, and its command-line client: redis-server and redis-cli, or with
// CAUDAL_TEST_REDIS=valkey in the environment valkey-server and valkey-cli (docs/stores.md).
std::string RedisServerBinary();
std::string RedisCliBinary();

struct RedisServerOptions {
  // requirepass for the default user; empty means no password.
  std::string password{};
  // Extra "user ..." ACL rules, e.g. {"alice on >secret ~* &* +@all"}.
  std::vector<std::string> acl_users{};
  // Serve TLS only (plain port disabled), with a throwaway CA and server certificate generated
  // by the `openssl` command in the server's directory (see tls_ca_file()).
  bool tls = false;
  // With tls: keep a plaintext port too (port(), for Command() and redis-cli) and serve TLS on
  // tls_port(); a cluster node then also talks to the others over TLS (--tls-cluster yes, its
  // bus on port() + 10000) and a replica or Sentinel to its primary (--tls-replication yes).
  bool tls_admin_port = false;
  // With tls: the directory whose ca.crt, server.crt and server.key to use instead of making
  // new ones, so that servers that talk to each other trust each other (a cluster, sentinels).
  std::string tls_files_from{};
  // Further redis-server arguments, e.g. {"--maxmemory", "10mb"}.
  std::vector<std::string> extra_args{};
  // A port whose cluster bus port (port + 10000) is free too, both below the kernel's ephemeral
  // range (so no outgoing connection takes them meanwhile); for Redis Cluster nodes.
  bool cluster_bus_port = false;
  // Written to redis.conf in the server's directory and passed first (a Sentinel needs a config
  // file it can rewrite); empty: no file.
  std::vector<std::string> config_lines{};
  // Run as a Sentinel (--sentinel): needs config_lines with its "sentinel monitor" line.
  bool sentinel = false;
};

class RedisServer {
 public:
  // Starts RedisServerBinary() (found on PATH) and waits until it answers PING.
  // kUnavailable with the server's own log when it does not come up.
  static Result<std::unique_ptr<RedisServer>> Start(RedisServerOptions options = {});
  ~RedisServer();

  RedisServer(const RedisServer&) = delete;
  RedisServer& operator=(const RedisServer&) = delete;

  uint16_t port() const { return port_; }
  // The port clients use: tls_port() with tls_admin_port, port() otherwise.
  uint16_t client_port() const { return tls_port_ != 0 ? tls_port_ : port_; }
  uint16_t tls_port() const { return tls_port_; }
  // The redis-server process, while running(); -1 otherwise.
  pid_t pid() const { return pid_; }
  // "redis://127.0.0.1:<port>" (or rediss://127.0.0.1:<client_port> with TLS), without
  // credentials.
  std::string url() const;
  const std::string& dir() const { return dir_; }
  // The CA certificate that signed the server's certificate (TLS servers only).
  std::string tls_ca_file() const { return dir_ + "/ca.crt"; }

  // Stops the server gracefully (SIGTERM) and waits for it to exit.
  void Stop();
  // SIGKILL: the server vanishes without closing connections cleanly.
  void Kill();
  // Starts the server again on the same port and directory (after Stop or Kill).
  Status Restart();
  bool running() const { return pid_ > 0; }

  // Runs one command on a fresh blocking connection (authenticated as the default user when a
  // password is set) and returns the reply flattened to text: integers and strings as-is, arrays
  // as their elements joined by '\n', nil as "(nil)". An error reply is kUnavailable carrying
  // Redis's message. Not available for TLS servers without tls_admin_port.
  Result<std::string> Command(const std::vector<std::string>& argv) const;
  // Every key matching `pattern`, via SCAN.
  Result<std::vector<std::string>> Keys(const std::string& pattern = "*") const;

 private:
  explicit RedisServer(RedisServerOptions options) : options_(std::move(options)) {}
  Status Launch();
  Status WaitReady(std::chrono::milliseconds timeout);
  Status WriteTlsFiles();

  RedisServerOptions options_;
  std::string dir_;
  uint16_t port_ = 0;
  uint16_t tls_port_ = 0;  // with tls_admin_port
  pid_t pid_ = -1;
};

}  // namespace caudal::testing
