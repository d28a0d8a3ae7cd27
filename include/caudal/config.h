// Config: caudal's YAML configuration file, parsed and validated in full before use.
//
// Every error names the file, line and column, the field ("policies[1].limits[0].refill") and
// what was expected, e.g.
//   caudal.yaml:14:21: policies[1].limits[0].refill: expected "<count>/<duration>" such as
//   "100/1m" (got "fast")
// Unknown fields are errors too (a typo must not silently change nothing). See docs/configuration.md for the
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
#include "caudal/log.h"
#include "caudal/refusals.h"
#include "caudal/policy.h"
#include "caudal/status.h"

namespace caudal {

namespace envoy {

// Which rate-limit headers the Envoy service asks Envoy to add to responses.
enum class HeaderMode : uint8_t {
  kNone,
  kIetf,               // RateLimit and RateLimit-Policy (draft-ietf-httpapi-ratelimit-headers-10)
  kIetfAndXRateLimit,  // also x-ratelimit-limit / -remaining / -reset
};
std::string_view HeaderModeName(HeaderMode m);
Result<HeaderMode> ParseHeaderMode(std::string_view text);  // none|ietf|ietf_and_x_ratelimit

// How a `deny` failure mode answers Envoy.
enum class DenyAs : uint8_t {
  kOverLimit,    // OVER_LIMIT, with the Caudal-Degraded header
  kUnavailable,  // the RPC fails with UNAVAILABLE, so Envoy applies its failure_mode_deny
};
std::string_view DenyAsName(DenyAs d);
Result<DenyAs> ParseDenyAs(std::string_view text);  // over_limit|unavailable

}  // namespace envoy

struct StoreConfig {
  std::string url = "memory://";  // a URL of a registered store kind (see store_registry.h)
  // The store's password read from this file (a mounted secret), instead of the URL; relative to
  // the config file's directory. Read when the store is opened.
  std::string password_file;
  // The password itself, from password_file or the CAUDAL_STORE_PASSWORD environment variable;
  // never printed. Empty: the URL's own, if any.
  std::string password;
  Micros timeout = std::chrono::milliseconds(5);  // per decision
  FailureMode on_failure = FailureMode::kDeny;
  int64_t instances = 1;  // how many caudal instances share the store (divides `local`)
  int64_t max_keys = 1'000'000;  // memory store and local fallback: bounded key table
  // A remote store's refusals are remembered until they run out, so a flooding key costs it
  // nothing more (see src/engine/over_limit_cache.h).
  bool over_limit_cache = true;
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
  // The status page at `/` and its JSON at /v1/status (see status_page.h); on by default, since
  // the listener is loopback by default and the page shows nothing secret.
  bool status_page = true;
};

// The Envoy rate limit service (see docs/envoy.md).
struct EnvoyConfig {
  // envoy_config: an envoyproxy/ratelimit YAML file or a directory of them; relative paths are
  // relative to the config file's directory. Empty: none.
  std::string config;
  DescriptorMode descriptor_mode = DescriptorMode::kAllOrNothing;
  envoy::DenyAs deny_as = envoy::DenyAs::kOverLimit;  // how store.on_failure: deny answers
  envoy::HeaderMode headers = envoy::HeaderMode::kIetf;
  int64_t max_concurrent_calls = 10'000;
};

// What caudal logs, and how (see docs/operations.md).
struct LoggingConfig {
  LogLevel level = LogLevel::kInfo;
  LogFormat format = LogFormat::kText;
  bool refusals = true;                               // a throttled line per refused identity
  IdentityDisplay identities = IdentityDisplay::kHash;  // in logs and /v1/top-refused
};

struct Config {
  std::string path;
  LoggingConfig logging;
  StoreConfig store;
  ServerConfig server;
  EnvoyConfig envoy;
  // The policies, with their options (failure mode, instances, descriptor_mode). Empty when the
  // file serves Envoy only.
  std::shared_ptr<const PolicySet> policies;
};

// Parses `yaml`, naming `filename` in errors. kInvalidArgument on any error.
Result<Config> ParseConfig(std::string_view yaml, std::string_view filename);
// Reads and parses a file (kNotFound / kInvalidArgument).
Result<Config> LoadConfigFile(const std::string& path);

// "127.0.0.1:8080" / "[::1]:80" / "localhost:0" → host, port. kInvalidArgument otherwise.
Result<std::pair<std::string, uint16_t>> ParseHostPort(std::string_view text);

}  // namespace caudal
