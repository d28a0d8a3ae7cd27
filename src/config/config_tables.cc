// The top level, store, server, envoy and logging: the rows of caudal's config file.
#include "config/config_tables.h"

#include "caudal/redis/redis_store.h"
#include "config/lease_rows.h"
#include "config/rlqs_rows.h"
#include "config/security_config.h"
#include "config/store_registry.h"

namespace caudal::config_internal {
namespace {

constexpr DescriptorMode kDescriptorModes[] = {DescriptorMode::kAllOrNothing,
                                               DescriptorMode::kConsumeEach};
constexpr envoy::DenyAs kDenyAs[] = {envoy::DenyAs::kOverLimit, envoy::DenyAs::kUnavailable};
constexpr envoy::HeaderMode kHeaderModes[] = {envoy::HeaderMode::kNone, envoy::HeaderMode::kIetf,
                                              envoy::HeaderMode::kIetfAndXRateLimit};
constexpr LogLevel kLogLevels[] = {LogLevel::kDebug, LogLevel::kInfo, LogLevel::kWarning,
                                   LogLevel::kError};
constexpr LogFormat kLogFormats[] = {LogFormat::kText, LogFormat::kJson};
constexpr HttpIo kHttpIos[] = {HttpIo::kEpoll, HttpIo::kIoUring};
constexpr IdentityDisplay kIdentityDisplays[] = {IdentityDisplay::kHash, IdentityDisplay::kValue};

constexpr int64_t kMaxConnections = 1'000'000;
constexpr size_t kMaxTrustedProxies = 256;

Status ValidHostPort(std::string_view text) { return ParseHostPort(text).status(); }

bool IsTlsUrl(std::string_view url) {
  return url.starts_with("rediss://") || url.find("tls=true") != std::string_view::npos;
}

bool IsHeaderName(std::string_view h) {
  if (h.empty() || h.size() > 64) return false;
  for (char c : h) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '-' || c == '_';
    if (!ok) return false;
  }
  return true;
}

// server.descriptor_headers: descriptor name → request header, replacing the defaults.
Status ReadHeaders(const YamlReader& r, const YAML::Node& n, const std::string& field,
                   ServerConfig& out) {
  if (!n.IsMap()) return r.Error(n, field, "expected a map of descriptor name to header name");
  out.descriptor_headers.clear();
  for (const auto& kv : n) {
    const std::string name = kv.first.IsScalar() ? kv.first.Scalar() : std::string();
    const std::string where = Cat(field, '.', name);
    if (!IsValidName(name) || name == "ip") {
      return r.Error(kv.first, where,
                     "expected a descriptor name of [A-Za-z0-9_.-] other than ip (the client "
                     "address is always the ip descriptor)");
    }
    auto header = r.String(kv.second, where);
    if (!header.ok()) return header.status();
    if (!IsHeaderName(*header)) {
      return r.Error(kv.second, where, "expected a header name of [A-Za-z0-9_-], up to 64");
    }
    for (const HeaderDescriptor& h : out.descriptor_headers) {
      if (h.descriptor == name) return r.Error(kv.first, where, "given twice");
    }
    out.descriptor_headers.push_back({name, *header});
  }
  return Status::Ok();
}

std::string ShowHeaders(const ServerConfig& server) {
  std::string text;
  for (const HeaderDescriptor& h : server.descriptor_headers) {
    text += Cat(text.empty() ? "" : ", ", h.descriptor, ": ", h.header);
  }
  return Cat('{', text, '}');
}

bool IsClusterOrSentinelUrl(const StoreConfig& store) {
  return store.url.starts_with("redis-cluster://") || store.url.starts_with("redis-sentinel://");
}

// store.address_map: "host:port" → "host:port" as the Redis stores read them (each with a
// port), none named twice.
Status ReadAddressMap(const YamlReader& r, const YAML::Node& n, const std::string& field,
                      StoreConfig& out) {
  if (!n.IsMap()) return r.Error(n, field, "expected a map of host:port to host:port");
  if (n.size() > kMaxRedisAddressMap) {
    return r.Error(n, field, Cat("at most ", kMaxRedisAddressMap, " entries"));
  }
  out.address_map.clear();
  for (const auto& kv : n) {
    const std::string named = kv.first.IsScalar() ? kv.first.Scalar() : std::string();
    const std::string where = Cat(field, '.', named);
    if (!kv.second.IsScalar()) return r.Error(kv.second, where, "expected host:port");
    const std::string dial = kv.second.Scalar();
    if (Status s = ValidateRedisAddressMap({{named, dial}}); !s.ok()) {
      return r.Error(kv.first, where, s.message());
    }
    for (const auto& [earlier, unused] : out.address_map) {
      if (earlier == named) return r.Error(kv.first, where, "given twice");
    }
    out.address_map.emplace_back(named, dial);
  }
  return Status::Ok();
}

std::string ShowAddressMap(const StoreConfig& store) {
  std::string text;
  for (const auto& [named, dial] : store.address_map) {
    text.append(text.empty() ? "" : ", ").append(named).append(": ").append(dial);
  }
  return Cat('{', text, '}');
}

const Table<StoreConfig>& StoreTable() {
  using R = Rows<StoreConfig>;
  using std::chrono::milliseconds;
  static const Table<StoreConfig> table({
      {.name = "url",
       .value = R::Text(&StoreConfig::url, "store URL (stores.md)", ValidateStoreUrl),
       .doc = "where limit state lives: memory://, redis://host:6379[/db], rediss:// for TLS"},
      {.name = "password_file",
       .value = R::Path(&StoreConfig::password_file),
       .doc = "the store's password from a file (a mounted secret), read at each connection"},
      {.name = "timeout",
       .value = R::Duration(&StoreConfig::timeout, milliseconds(1), std::chrono::seconds(10)),
       .doc = "the store's deadline per decision, and per Idempotency-Key or admin record call"},
      {.name = "on_failure",
       .value =
           R::Choice(&StoreConfig::on_failure, ParseFailureMode, FailureModeName, kFailureModes),
       .doc = "what a decision does when the store cannot answer (reliability.md)"},
      {.name = "instances",
       .value = R::Integer(&StoreConfig::instances, 1, kMaxInstances),
       .doc = "how many caudal instances share the store; `local` divides the limits by it"},
      {.name = "max_keys",
       .value = R::Integer(&StoreConfig::max_keys, 1, int64_t{1} << 32),
       .doc = "the memory store's and the local fallback's bounded key table"},
      {.name = "max_record_calls",
       .value = R::Integer(&StoreConfig::max_record_calls, 1, 1'000'000),
       .doc = "remote stores: Idempotency-Key and runtime override calls waiting or in flight; "
              "beyond them a call fails at once, as when the store fails"},
      {.name = "over_limit_cache",
       .value = R::Bool(&StoreConfig::over_limit_cache),
       .doc = "remote stores: refuse a flooding key without asking the store again"},
      {.name = "on_eviction_risk",
       .value = R::Choice(
           &StoreConfig::on_eviction_risk,
           {{"warn", EvictionRiskAction::kWarn}, {"refuse", EvictionRiskAction::kRefuse}}),
       .doc = "Redis: when a server's maxmemory-policy may evict caudal's keys (stores.md), "
              "warn, or refuse: stay unready"},
      {.name = "module",
       .value = R::Bool(&StoreConfig::module),
       .doc = "Redis: decide plain consumes in the caudal module where a server has loaded "
              "this build's (stores.md), else in the script"},
      {.name = "lease",
       .value = LeaseValue<StoreConfig>(&StoreConfig::lease),
       .doc = "remote stores: exact leases of hot keys, for every policy and Envoy rule that "
              "sets none"},
      {.name = "tls",
       // A plaintext URL would silently ignore store.tls.
       .value = R::Only([](const StoreConfig& store) { return IsTlsUrl(store.url); },
                        "needs a TLS store.url: rediss://, or ?tls=true for redis-cluster:// and "
                        "redis-sentinel://",
                        R::Map(&StoreConfig::tls, StoreTlsTable())),
       .doc = "TLS towards Redis"},
      {.name = "address_map",
       // A redis:// URL names the address to dial; the map would be silently ignored.
       .value = R::Only(IsClusterOrSentinelUrl,
                        "needs a redis-cluster:// or redis-sentinel:// store.url",
                        R::Custom("map of host:port to host:port", ReadAddressMap, ShowAddressMap)),
       .doc = "cluster, Sentinel: addresses the group names, dialled at another (a proxy, NAT)"},
  });
  return table;
}

const Table<IdempotencyConfig>& IdempotencyTable() {
  using R = Rows<IdempotencyConfig>;
  using std::chrono::hours;
  using std::chrono::milliseconds;
  using std::chrono::minutes;
  using std::chrono::seconds;
  static const Table<IdempotencyConfig> table(
      {
          {.name = "window",
           .value = R::Duration(&IdempotencyConfig::window, seconds(1), hours(24)),
           .doc = "how long a key's first answer is replayed (each record: one Redis key this "
                  "long)"},
          {.name = "in_progress",
           .value = R::Duration(&IdempotencyConfig::in_progress, milliseconds(100), minutes(10)),
           .doc = "how long a request deciding holds its key (a duplicate meanwhile: 409)"},
          {.name = "max_keys",
           .value = R::Integer(&IdempotencyConfig::max_keys, 1, int64_t{1} << 32),
           .doc = "memory store: records held at most (then the done one ending soonest goes)"},
          {.name = "max_bytes",
           .value = R::Integer(&IdempotencyConfig::max_bytes, int64_t{1} << 20, int64_t{1} << 40),
           .doc = "memory store: bytes the records take at most, answers included (then as "
                  "max_keys)"},
      },
      {.doc = "Idempotency-Key on POST /v1/check (http-api.md): a retried request is answered "
              "its first answer, charged once, from any instance sharing the store.",
       .check = [](const YamlReader& r, const YAML::Node& n, const std::string& path,
                   IdempotencyConfig& out) -> Status {
         if (out.in_progress > out.window) {
           return r.Error(n["in_progress"] ? n["in_progress"] : n, JoinPath(path, "in_progress"),
                          "must not be longer than window");
         }
         return Status::Ok();
       }});
  return table;
}

const Table<ServerConfig>& ServerTable() {
  using R = Rows<ServerConfig>;
  using std::chrono::hours;
  using std::chrono::milliseconds;
  static const Table<ServerConfig> table(
      {
          {.name = "http",
           .value = R::Text(&ServerConfig::http, "host:port", ValidHostPort),
           .doc = "the HTTP API's address; host is an IP address or localhost"},
          {.name = "trusted_proxies",
           .value = R::List(&ServerConfig::trusted_proxies, kMaxTrustedProxies,
                            ParsedItem<CidrBlock>("CIDR blocks", CidrBlock::Parse,
                                                  [](const CidrBlock& b) { return b.ToString(); })),
           .doc = "the peers that may set X-Forwarded-For"},
          {.name = "descriptor_headers",
           .value = R::Custom("map of descriptor name to header name", ReadHeaders, ShowHeaders),
           .doc = "forward-auth (/v1/auth): the descriptors read from request headers"},
          {.name = "max_connections",
           .value = R::Integer(&ServerConfig::max_connections, 1, kMaxConnections),
           .doc = "open connections at most; lowered to what the file-descriptor limit leaves"},
          {.name = "max_connections_per_client",
           .value = R::Integer(&ServerConfig::max_connections_per_client, 1, kMaxConnections),
           .doc = "one client's share (trusted_proxies exempt); a client is its client_prefix",
           .default_note = "a quarter of max_connections"},
          {.name = "client_prefix",
           .value = R::Map(&ServerConfig::client_prefix, IpPrefixTable()),
           .doc = "the network a client is, for max_connections_per_client"},
          {.name = "header_timeout",
           .value = R::Duration(&ServerConfig::header_timeout, milliseconds(10), hours(1)),
           .doc = "the whole request header, however slowly it trickles in: from accept (a TLS "
                  "handshake included), or on keep-alive from its first byte"},
          {.name = "body_timeout",
           .value = R::Duration(&ServerConfig::body_timeout, milliseconds(10), hours(1)),
           .doc = "the whole request body"},
          {.name = "idle_timeout",
           .value = R::Duration(&ServerConfig::idle_timeout, milliseconds(10), hours(1)),
           .doc = "keep-alive: the wait for the first byte of a connection's next request"},
          {.name = "threads",
           .value = R::Integer(&ServerConfig::threads, 0, 256),
           .doc = "I/O threads; 0: one per core"},
          {.name = "http_io",
           .value = R::Choice(&ServerConfig::http_io, ParseHttpIo, HttpIoName, kHttpIos),
           .doc = "the HTTP listener's I/O: epoll, or io_uring (epoll where the kernel refuses "
                  "a ring); benchmarks.md"},
          {.name = "shutdown_timeout",
           .value = R::Duration(&ServerConfig::shutdown_timeout, milliseconds(0), hours(1)),
           .doc = "on SIGTERM, how long requests in flight have to be answered (operations.md)"},
          {.name = "grpc",
           .value = R::Text(&ServerConfig::grpc, "host:port", ValidHostPort),
           .doc = "Envoy's rate limit service (envoy.md); not served unless set"},
          {.name = "tls",
           .value = R::Map(&ServerConfig::tls, ServerTlsTable()),
           .doc = "TLS on the listeners"},
          {.name = "auth",
           .value = R::Map(&ServerConfig::auth, CallerAuthTable()),
           .doc = "who may call the decision APIs"},
          {.name = "admin",
           .value = R::Map(&ServerConfig::admin, AdminTable()),
           .doc = "the admin API under /v1/admin/ (http-api.md); off without a token"},
          {.name = "idempotency",
           .value = R::Map(&ServerConfig::idempotency, IdempotencyTable()),
           .doc = "Idempotency-Key: replays of a decision's first answer"},
          {.name = "status_page",
           .value = R::Bool(&ServerConfig::status_page),
           .doc = "the status page at / and its JSON at /v1/status (operations.md)"},
      },
      {.doc = "Listeners are loopback by default.",
       .check = [](const YamlReader& r, const YAML::Node& n, const std::string&,
                   ServerConfig& out) {
         return CheckServerSecurity(r, n["auth"] ? n["auth"] : n, out);
       }});
  return table;
}

const Table<EnvoyConfig>& EnvoyTable() {
  using R = Rows<EnvoyConfig>;
  static const Table<EnvoyConfig> table(
      {
          {.name = "descriptor_mode",
           .value = R::Choice(&EnvoyConfig::descriptor_mode, ParseDescriptorMode,
                              DescriptorModeName, kDescriptorModes),
           .doc = "consume_each: a request's descriptors are counted as the reference counts them"},
          {.name = "deny_as",
           .value =
               R::Choice(&EnvoyConfig::deny_as, envoy::ParseDenyAs, envoy::DenyAsName, kDenyAs),
           .doc = "how on_failure: deny answers Envoy (unavailable: Envoy's failure_mode_deny)"},
          {.name = "headers",
           .value = R::Choice(&EnvoyConfig::headers, envoy::ParseHeaderMode, envoy::HeaderModeName,
                              kHeaderModes),
           .doc = "the rate-limit headers Envoy is asked to add to responses"},
          {.name = "max_concurrent_calls",
           .value = R::Integer(&EnvoyConfig::max_concurrent_calls, 1, kMaxConnections),
           .doc = "ShouldRateLimit calls in flight at most"},
          {.name = "response_dynamic_metadata",
           .value = R::Bool(&EnvoyConfig::response_dynamic_metadata),
           .doc =
               "replies carry the request and the passed rules' metadata, for Envoy to route by"},
      },
      {.doc = "The rate limit service for Envoy, on server.grpc (envoy.md)."});
  return table;
}

const Table<LoggingConfig>& LoggingTable() {
  using R = Rows<LoggingConfig>;
  static const Table<LoggingConfig> table({
      {.name = "level",
       .value = R::Choice(&LoggingConfig::level, ParseLogLevel, LogLevelName, kLogLevels),
       .doc = "the least severe level written"},
      {.name = "format",
       .value = R::Choice(&LoggingConfig::format, ParseLogFormat, LogFormatName, kLogFormats),
       .doc = "json: one object per line"},
      {.name = "refusals",
       .value = R::Bool(&LoggingConfig::refusals),
       .doc = "a line per refused identity, throttled (operations.md)"},
      {.name = "identities",
       .value = R::Choice(&LoggingConfig::identities, ParseIdentityDisplay, IdentityDisplayName,
                          kIdentityDisplays),
       .doc = "how logs and /v1/top-refused show identities"},
  });
  return table;
}

// The policies become a PolicySet once the options they depend on (store.on_failure,
// store.instances, descriptor_mode) are read; each is validated where it is written.
Status CheckDocument(const YamlReader& r, const YAML::Node& root, const std::string&,
                     Document& doc) {
  Config& config = doc.config;
  const YAML::Node policies = root["policies"];
  if (!policies && config.envoy.config.empty()) {
    return r.Error(root, "policies", "missing (expected a list of policies, or envoy_config)");
  }
  const PolicySetOptions options{.on_failure = config.store.on_failure,
                                 .instances = config.store.instances,
                                 .mode = doc.descriptor_mode,
                                 .lease = config.store.lease};
  for (size_t i = 0; i < doc.policies.size(); ++i) {
    const PolicySpec& spec = doc.policies[i];
    const std::string field = Cat("policies[", i, ']');
    // A tier's limits are required without share (with it, ValidatePolicy refuses them).
    for (size_t t = 0; t < spec.overrides.size() && !spec.share; ++t) {
      const YAML::Node tier = policies[i]["overrides"][t];
      if (!tier["limits"])
        return r.Error(tier, Cat(field, ".overrides[", t, ']'), "missing limits");
    }
    if (auto e = ValidatePolicy(spec, options)) {
      return r.Error(NodeForField(policies[i], e->field), Cat(field, '.', e->field),
                     e->status.message());
    }
    for (size_t j = 0; j < i; ++j) {
      if (doc.policies[j].name == spec.name) {
        return r.Error(policies[i]["name"], field + ".name",
                       Cat(Quoted(spec.name), " is already the name of policies[", j, ']'));
      }
    }
  }
  auto set = PolicySet::Create(std::move(doc.policies), options);
  if (!set.ok()) return r.Error(policies ? policies : root, "policies", set.status().message());
  config.policies = *set;
  if (!config.rlqs.domains.empty()) return CheckRlqs(r, root["rlqs"], config);
  return Status::Ok();
}

}  // namespace

const Table<Document>& DocumentTable() {
  using R = Rows<Document>;
  static const Table<Document> table(
      {
          {.name = "store",
           .value = R::Map(
               [](auto& d) -> auto& { return d.config.store; }, StoreTable()),
           .doc = "where limit state lives, and what happens when it cannot answer"},
          {.name = "server",
           .value = R::Map(
               [](auto& d) -> auto& { return d.config.server; }, ServerTable()),
           .doc = "the listeners and who may call them"},
          {.name = "policies",
           .value = R::List(&Document::policies, kMaxPolicies, MapItem(PolicyTable())),
           .doc = "the policies of the HTTP API and `caudal check`",
           .default_note = "required, unless envoy_config is set"},
          {.name = "descriptor_mode",
           .value = R::Choice(&Document::descriptor_mode, ParseDescriptorMode, DescriptorModeName,
                              kDescriptorModes),
           .doc = "how a request's policies share a decision: consume_each decides each alone"},
          {.name = "envoy_config",
           .value = R::Path([](auto& d) -> auto& { return d.config.envoy.config; }),
           .doc = "envoyproxy/ratelimit's files: one, or a directory of them (envoy.md)"},
          {.name = "envoy",
           .value = R::Map(
               [](auto& d) -> auto& { return d.config.envoy; }, EnvoyTable()),
           .doc = "the Envoy rate limit service"},
          {.name = "rlqs",
           .value = R::Map(
               [](auto& d) -> auto& { return d.config.rlqs; }, RlqsTable()),
           .doc = "Envoy's rate limit quota service (RLQS); not served unless set"},
          {.name = "logging",
           .value = R::Map(
               [](auto& d) -> auto& { return d.config.logging; }, LoggingTable()),
           .doc = "what caudal logs, and how"},
      },
      {.check = CheckDocument});
  return table;
}

}  // namespace caudal::config_internal
