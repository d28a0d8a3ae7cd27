// Config: caudal's YAML configuration file, parsed and validated in full before use.
//
// Every error names the file, line and column, the field ("policies[1].limits[0].refill") and
// what was expected, e.g.
//   caudal.yaml:14:21: policies[1].limits[0].refill: expected "<count>/<duration>" such as
//   "100/1m" (got "fast")
// Unknown fields are errors too (a typo must not silently change nothing). See README for the
// reference; examples/caudal.yaml is a complete example.
//
// Thread-safety: values.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "caudal/clock.h"
#include "caudal/ip.h"
#include "caudal/policy.h"
#include "caudal/status.h"

namespace caudal {

struct StoreConfig {
  std::string url = "memory://";  // memory:// or redis://host:port[/db]
  Micros timeout = std::chrono::milliseconds(5);  // per decision
  FailureMode on_failure = FailureMode::kDeny;
  int64_t instances = 1;  // how many caudal instances share the store (divides `local`)
  int64_t max_keys = 1'000'000;  // memory store and local fallback: bounded key table
};

struct HeaderDescriptor {
  std::string descriptor;  // e.g. "api_key"
  std::string header;      // e.g. "X-API-Key"
};

struct ServerConfig {
  std::string http = "127.0.0.1:8080";  // host:port; host is an IP address or "localhost"
  std::vector<CidrBlock> trusted_proxies;  // only these peers may set X-Forwarded-For
  // Forward-auth: descriptors read from request headers (the client IP is always `ip`).
  std::vector<HeaderDescriptor> descriptor_headers = {
      {"api_key", "X-API-Key"}, {"tenant", "X-Tenant"}, {"account", "X-Account"}};
  int64_t max_connections = 10'000;
  // A client's share of max_connections (0: a quarter of it); a client is its address under
  // client_prefix. Peers in trusted_proxies are exempt.
  int64_t max_connections_per_client = 0;
  IpPrefix client_prefix{.v4 = 32, .v6 = 64};
  Micros header_timeout = std::chrono::seconds(10);  // whole header, however slowly it trickles
  Micros body_timeout = std::chrono::seconds(10);
  Micros idle_timeout = std::chrono::seconds(60);  // keep-alive between requests
  int64_t threads = 0;                             // 0: one per core
  // Envoy's rate limit service (gRPC) listens here; empty: not served. Needs envoy_config.
  std::string grpc;
};

// The Envoy rate limit service (see README, "Envoy"). Spellings are checked here; the envoy layer
// gives them meaning.
struct EnvoyConfig {
  // envoy_config: an envoyproxy/ratelimit YAML file or a directory of them; relative paths are
  // relative to the config file's directory. Empty: none.
  std::string config;
  std::string descriptor_mode = "all_or_nothing";  // or consume_each (the reference's behaviour)
  std::string deny_as = "over_limit";  // store.on_failure: deny answers OVER_LIMIT, or unavailable
  std::string headers = "ietf";        // none, ietf, ietf_and_x_ratelimit
  int64_t max_concurrent_calls = 10'000;
};

struct Config {
  std::string path;
  StoreConfig store;
  ServerConfig server;
  EnvoyConfig envoy;
  std::shared_ptr<const PolicySet> policies;
};

// Parses `yaml`, naming `filename` in errors. kInvalidArgument on any error.
Result<Config> ParseConfig(std::string_view yaml, std::string_view filename);
// Reads and parses a file (kNotFound / kInvalidArgument).
Result<Config> LoadConfigFile(const std::string& path);

// "127.0.0.1:8080" / "[::1]:80" / "localhost:0" → host, port. kInvalidArgument otherwise.
Result<std::pair<std::string, uint16_t>> ParseHostPort(std::string_view text);

}  // namespace caudal
