// Config: caudal's YAML configuration file, parsed and validated in full before use.
//
// Every error names the file, line and column, the field ("policies[1].limits[0].refill") and
// what was expected, e.g.
//   caudal.yaml:14:21: policies[1].limits[0].refill: expected "<count>/<duration>" such as
//   "100/1m" (got "fast")
// Unknown fields are errors too (a typo must not silently change nothing). Each field is one row
// of a table in src/config (its name, range, default and doc); docs/configuration.md's
// reference is generated from those tables, and examples/caudal.yaml is a complete example.
//
// Thread-safety: values.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "caudal/common/clock.h"
#include "caudal/common/status.h"
#include "caudal/engine/ip.h"
#include "caudal/engine/policy.h"
#include "caudal/engine/runtime_overrides.h"
#include "caudal/observe/log.h"

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

// TLS towards a Redis store (rediss://, or ?tls=true on redis-cluster:// and redis-sentinel://).
// Paths are relative to the config file's directory.
struct StoreTlsConfig {
  std::string ca_file;    // CAs (PEM) that sign the server's certificate; empty: the system's
  std::string cert_file;  // a client certificate (PEM chain), for --tls-auth-clients yes
  std::string key_file;   // its private key (PEM); given with cert_file
  // The name sent as SNI and verified against the server's certificate; empty: the URL's host.
  std::string server_name;
};

// What a Redis store whose maxmemory-policy may evict caudal's keys does (redis/eviction_check.h).
enum class EvictionRiskAction : uint8_t {
  kWarn,    // logs it once, and /metrics shows it (caudal_redis_eviction_risk)
  kRefuse,  // the same, and the instance stays unready while it lasts
};

struct StoreConfig {
  std::string url = "memory://";  // a URL of a registered store kind (see store_registry.h)
  // The store's password read from this file (a mounted secret), instead of the URL; relative to
  // the config file's directory. Read when the store is opened.
  std::string password_file;
  // The password itself, from password_file or the CAUDAL_STORE_PASSWORD environment variable;
  // never printed. Empty: the URL's own, if any.
  std::string password;
  Micros timeout = std::chrono::milliseconds(10);  // per decision
  FailureMode on_failure = FailureMode::kDeny;
  int64_t instances = 1;         // how many caudal instances share the store (divides `local`)
  int64_t max_keys = 1'000'000;  // memory store and local fallback: bounded key table
  // Remote stores: the calls of the records that are not decisions (Idempotency-Key, runtime
  // overrides) waiting or in flight (RedisStoreOptions::max_record_calls).
  int64_t max_record_calls = 1024;
  StoreTlsConfig tls;
  // Cluster and Sentinel: "host:port" as the group names it → "host:port" to dial instead, for
  // instances behind proxies or NAT of their own (RedisStoreOptions::address_map).
  std::vector<std::pair<std::string, std::string>> address_map;
  // A remote store's refusals are remembered until they run out, so a flooding key costs it
  // nothing more (see src/engine/over_limit_cache.h).
  bool over_limit_cache = true;
  EvictionRiskAction on_eviction_risk = EvictionRiskAction::kWarn;
  // Redis: send plain consumes to the caudal module where a server has loaded this build's
  // (RedisStoreOptions::module; docs/stores.md).
  bool module = true;
  // Exact leases for the policies and Envoy rules that set no `lease` of their own (off unless
  // given); a remote store only: the memory store decides in memory already.
  LeaseTerms lease;
};

// How the HTTP listener does its I/O (docs/benchmarks.md measures both: io_uring is the faster).
enum class HttpIo : uint8_t {
  kEpoll,    // Asio's reactor: readiness from epoll, then one recv() and one send() per request
  kIoUring,  // io_uring: every connection's receives and sends submitted and reaped in one call
             // per round; epoll, with a warning, where the kernel refuses a ring
};
std::string_view HttpIoName(HttpIo io);
Result<HttpIo> ParseHttpIo(std::string_view text);  // epoll|io_uring

struct HeaderDescriptor {
  std::string descriptor;  // e.g. "api_key"
  std::string header;      // e.g. "X-API-Key"
};

// Whether a listener asks its callers for a certificate (mTLS), verified against client_ca_file.
enum class ClientCertMode : uint8_t {
  kNone,      // no client certificate asked for
  kOptional,  // asked for and verified if sent; callers without one still connect
  kRequire,   // a connection without a valid client certificate fails its handshake
};
std::string_view ClientCertModeName(ClientCertMode m);
Result<ClientCertMode> ParseClientCertMode(std::string_view text);  // none|optional|require

// Server TLS (see docs/operations.md, Security). Paths are relative to the config file's
// directory; the files are read at start and again on SIGHUP.
struct ServerTlsConfig {
  std::string cert_file;       // the server's certificate chain (PEM); empty: plaintext
  std::string key_file;        // its private key (PEM)
  std::string client_ca_file;  // CAs (PEM) that sign client certificates; empty: no mTLS
  ClientCertMode client_cert = ClientCertMode::kNone;  // require when client_ca_file is given
  bool http = true;                                    // terminate TLS on server.http
  bool grpc = true;                                    // and on server.grpc
  bool enabled() const { return !cert_file.empty(); }
};

// Who may call the decision APIs (/v1/check, /v1/auth, ShouldRateLimit). Health endpoints stay
// open. With both a token and identities, a caller passes with either.
struct CallerAuthConfig {
  std::string token_file;  // the bearer token, from this file (relative to the config's folder)
  // The token itself, from token_file or CAUDAL_AUTH_TOKEN; never printed. Empty: no token.
  std::string token;
  // mTLS client identities allowed: a certificate's subject CN or one of its DNS, URI or email
  // SANs, compared exactly. Needs server.tls.client_ca_file.
  std::vector<std::string> allowed_clients;
  bool protect_metrics = false;  // /metrics, /v1/top-refused, /v1/status need them too
  bool enabled() const { return !token.empty() || !token_file.empty() || !allowed_clients.empty(); }
};

// The admin API (/v1/admin/: runtime overrides, an identity's state): off without a token.
struct AdminConfig {
  std::string token_file;  // the admin's bearer token (relative to the config's folder)
  // The token itself, from token_file or CAUDAL_ADMIN_TOKEN; never printed. Empty: no admin API.
  std::string token;
  // Runtime overrides held at most, across all policies and instances of one store (an override
  // beyond is refused with 409).
  int64_t max_overrides = static_cast<int64_t>(kMaxRuntimeOverrides);
  bool enabled() const { return !token.empty() || !token_file.empty(); }
};

// Idempotency-Key on POST /v1/check (docs/http-api.md): how long a key's first answer is
// replayed, how long a request deciding holds its key, and the memory store's bound.
struct IdempotencyConfig {
  // A key's first answer is replayed this long after it was given. An hour covers a client's
  // retries with backoff, a restart or a failover; a decision says little of the limit's state
  // much later, and Redis holds one record per keyed request for the whole window.
  Micros window = std::chrono::hours(1);
  // A request deciding holds its key this long at most (a duplicate meanwhile: 409); longer than
  // any decision, short enough that a retry after an instance died waits little.
  Micros in_progress = std::chrono::seconds(10);
  int64_t max_keys = 100'000;  // memory store: records held at most (Redis: bounded by window)
  // Memory store: the bytes those records take at most, answers included (RecordBytes).
  int64_t max_bytes = int64_t{64} << 20;
};

struct ServerConfig {
  std::string http = "127.0.0.1:8080";     // host:port; host is an IP address or "localhost"
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
  HttpIo http_io = HttpIo::kIoUring;
  // On SIGTERM: how long requests in flight may take to be answered before caudal exits.
  Micros shutdown_timeout = std::chrono::seconds(10);
  // Envoy's rate limit service (gRPC) listens here; empty: not served. Needs envoy_config.
  std::string grpc;
  ServerTlsConfig tls;
  CallerAuthConfig auth;
  AdminConfig admin;
  IdempotencyConfig idempotency;
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
  // The reference's RESPONSE_DYNAMIC_METADATA: replies carry the request and the metadata of
  // the rules that passed, for Envoy to route by.
  bool response_dynamic_metadata = false;
};

// rlqs: Envoy's rate limit quota service (envoy.md, "RLQS"), on server.grpc beside RLS. Each
// report's bucket (its domain and BucketId) is mapped to a policy and an identity; the Envoys
// reporting it share that identity's limits by demand (docs/algorithms.md, "RLQS").
enum class RlqsNoMatch : uint8_t {
  kDenyAll,   // a DENY_ALL assignment
  kAllowAll,  // an ALLOW_ALL assignment
  kNone,      // no assignment: Envoy keeps its no_assignment_behavior
};
std::string_view RlqsNoMatchName(RlqsNoMatch m);
Result<RlqsNoMatch> ParseRlqsNoMatch(std::string_view text);  // deny_all|allow_all|none

struct RlqsBucketRule {
  // Entries a BucketId must all hold (its key and value), in the order written; empty: any.
  std::vector<std::pair<std::string, std::string>> match;
  std::string policy;  // a policy of this config
  // The policy's identity descriptors, each taken from a BucketId key: descriptor <- key.
  std::vector<std::pair<std::string, std::string>> identity;
};

struct RlqsDomainConfig {
  std::string domain;
  std::vector<RlqsBucketRule> buckets;  // the first that matches maps the bucket
  RlqsNoMatch no_match = RlqsNoMatch::kDenyAll;
};

inline constexpr size_t kMaxRlqsDomains = 64;
inline constexpr size_t kMaxRlqsBucketRules = 256;
inline constexpr size_t kMaxRlqsMatchEntries = 16;

struct RlqsConfig {
  std::vector<RlqsDomainConfig> domains;  // empty: the service is not offered
  // How long an assignment lives unless renewed; also the window over which an Envoy's share
  // accrues. Envoy reports every 5 s: it must be well above that (renewals come with reports).
  Micros assignment_ttl = std::chrono::seconds(20);
  // A bucket no report has named for this long is abandoned (AbandonAction).
  Micros abandon_after = std::chrono::seconds(60);
  int64_t max_streams = 1'000;  // StreamRateLimitQuotas streams open at once
  int64_t max_buckets = 1'000;  // buckets per stream
};

// What caudal logs, and how (see docs/operations.md).
struct LoggingConfig {
  LogLevel level = LogLevel::kInfo;
  LogFormat format = LogFormat::kText;
  bool refusals = true;                                 // a throttled line per refused identity
  IdentityDisplay identities = IdentityDisplay::kHash;  // in logs and /v1/top-refused
};

struct Config {
  std::string path;
  LoggingConfig logging;
  StoreConfig store;
  ServerConfig server;
  EnvoyConfig envoy;
  RlqsConfig rlqs;
  // The policies, with their options (failure mode, instances, descriptor_mode). Empty when the
  // file serves Envoy only.
  std::shared_ptr<const PolicySet> policies;
};

// Parses `yaml`, naming `filename` in errors. kInvalidArgument on any error.
Result<Config> ParseConfig(std::string_view yaml, std::string_view filename);
// Reads and parses a file (kNotFound / kInvalidArgument); the paths it names are made relative
// to its directory.
Result<Config> LoadConfigFile(const std::string& path);

inline constexpr size_t kMaxSecretBytes = 4096;
// A secret file's content (a password, a token) without its trailing newline; `field` names the
// setting in errors. kInvalidArgument when it cannot be read, is empty or is longer than
// kMaxSecretBytes. The content is never part of a message.
Result<std::string> ReadSecretFile(const std::string& path, std::string_view field);
// Sets server.auth.token from server.auth.token_file, unless the token is set already (by
// CAUDAL_AUTH_TOKEN). ReadSecretFile's errors.
Status LoadCallerToken(Config& config);
// Sets server.admin.token from server.admin.token_file, unless set already (by
// CAUDAL_ADMIN_TOKEN). ReadSecretFile's errors, and kInvalidArgument when the admin token equals
// the callers' (server.auth): the two must not open each other's doors.
Status LoadAdminToken(Config& config);

// "127.0.0.1:8080" / "[::1]:80" / "localhost:0" → host, port. kInvalidArgument otherwise.
Result<std::pair<std::string, uint16_t>> ParseHostPort(std::string_view text);

}  // namespace caudal
