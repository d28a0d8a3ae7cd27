#include "service/prepared_config.h"

#include <utility>

#include "common/cat.h"
#include "config/ratelimit_config_yaml.h"
#include "server/tls_context.h"

namespace caudal::service_internal {
namespace {

// One field a running service cannot change: whether it differs, and how to keep the running
// value.
struct RestartRule {
  const char* path;
  bool (*differs)(const Config& running, const Config& next);
  void (*keep)(const Config& running, Config& next);
};

template <auto Section, auto Member>
constexpr RestartRule Field(const char* path) {
  return {path,
          [](const Config& a, const Config& b) { return a.*Section.*Member != b.*Section.*Member; },
          [](const Config& a, Config& b) { b.*Section.*Member = a.*Section.*Member; }};
}

bool HttpTlsOn(const Config& c) { return c.server.tls.enabled() && c.server.tls.http; }

// gRPC's TLS stack is configured once, at start: its certificate files are read again on a
// reload, but not whether it has TLS, which listener has it, or whether it asks for client
// certificates.
bool GrpcTlsShapeDiffers(const Config& a, const Config& b) {
  if (a.server.grpc.empty()) return false;
  const ServerTlsConfig& x = a.server.tls;
  const ServerTlsConfig& y = b.server.tls;
  return x.enabled() != y.enabled() || x.grpc != y.grpc || x.client_cert != y.client_cert ||
         x.client_ca_file.empty() != y.client_ca_file.empty();
}

void KeepTlsShape(const Config& a, Config& b) {
  ServerTlsConfig& y = b.server.tls;
  const ServerTlsConfig& x = a.server.tls;
  if (x.enabled() != y.enabled()) {
    y = x;
    return;
  }
  y.http = x.http;
  y.grpc = x.grpc;
  y.client_cert = x.client_cert;
  if (x.client_ca_file.empty() != y.client_ca_file.empty()) y.client_ca_file = x.client_ca_file;
}

using C = Config;
using S = StoreConfig;
using V = ServerConfig;
using E = EnvoyConfig;

const RestartRule kRestartRules[] = {
    Field<&C::store, &S::url>("store.url"),
    Field<&C::store, &S::password_file>("store.password_file"),
    Field<&C::store, &S::password>("store.password"),
    Field<&C::store, &S::timeout>("store.timeout"),
    Field<&C::store, &S::max_keys>("store.max_keys"),
    Field<&C::store, &S::over_limit_cache>("store.over_limit_cache"),
    Field<&C::store, &S::on_eviction_risk>("store.on_eviction_risk"),
    Field<&C::store, &S::module>("store.module"),
    {"store.tls.server_name",
     [](const C& a, const C& b) { return a.store.tls.server_name != b.store.tls.server_name; },
     [](const C& a, C& b) { b.store.tls.server_name = a.store.tls.server_name; }},
    Field<&C::server, &V::http>("server.http"),
    Field<&C::server, &V::grpc>("server.grpc"),
    Field<&C::server, &V::max_connections>("server.max_connections"),
    Field<&C::server, &V::max_connections_per_client>("server.max_connections_per_client"),
    {"server.client_prefix",
     [](const C& a, const C& b) {
       return a.server.client_prefix.v4 != b.server.client_prefix.v4 ||
              a.server.client_prefix.v6 != b.server.client_prefix.v6;
     },
     [](const C& a, C& b) { b.server.client_prefix = a.server.client_prefix; }},
    {"server.admin.max_overrides",
     [](const C& a, const C& b) {
       return a.server.admin.max_overrides != b.server.admin.max_overrides;
     },
     [](const C& a, C& b) { b.server.admin.max_overrides = a.server.admin.max_overrides; }},
    {"server.idempotency.max_keys",
     [](const C& a, const C& b) {
       return a.server.idempotency.max_keys != b.server.idempotency.max_keys;
     },
     [](const C& a, C& b) { b.server.idempotency.max_keys = a.server.idempotency.max_keys; }},
    {"server.idempotency.max_bytes",
     [](const C& a, const C& b) {
       return a.server.idempotency.max_bytes != b.server.idempotency.max_bytes;
     },
     [](const C& a, C& b) { b.server.idempotency.max_bytes = a.server.idempotency.max_bytes; }},
    Field<&C::server, &V::header_timeout>("server.header_timeout"),
    Field<&C::server, &V::body_timeout>("server.body_timeout"),
    Field<&C::server, &V::idle_timeout>("server.idle_timeout"),
    Field<&C::server, &V::threads>("server.threads"),
    Field<&C::server, &V::http_io>("server.http_io"),
    {"server.tls (turning TLS on or off for HTTP)",
     [](const C& a, const C& b) { return HttpTlsOn(a) != HttpTlsOn(b); }, KeepTlsShape},
    {"server.tls (gRPC's listeners and client_cert)", GrpcTlsShapeDiffers, KeepTlsShape},
    Field<&C::envoy, &E::headers>("envoy.headers"),
    Field<&C::envoy, &E::deny_as>("envoy.deny_as"),
    Field<&C::envoy, &E::response_dynamic_metadata>("envoy.response_dynamic_metadata"),
    Field<&C::envoy, &E::max_concurrent_calls>("envoy.max_concurrent_calls"),
    {"rlqs (serving it or not)",
     [](const C& a, const C& b) { return a.rlqs.domains.empty() != b.rlqs.domains.empty(); },
     [](const C& running, C& next) { next.rlqs = running.rlqs; }},
    {"rlqs.max_streams",
     [](const C& a, const C& b) { return a.rlqs.max_streams != b.rlqs.max_streams; },
     [](const C& running, C& next) { next.rlqs.max_streams = running.rlqs.max_streams; }},
};

Result<std::shared_ptr<boost::asio::ssl::context>> HttpTls(const Config& config) {
  if (!config.server.tls.enabled()) return std::shared_ptr<boost::asio::ssl::context>();
  // The files are checked whenever server.tls is set, for gRPC's sake too: its own errors say
  // little.
  auto context = server_tls::MakeServerContext(config.server.tls);
  if (!context.ok() || config.server.tls.http) return context;
  return std::shared_ptr<boost::asio::ssl::context>();
}

}  // namespace

Result<PreparedConfig> Prepare(Config config, PrepareOptions options) {
  if (config.server.grpc.empty() && !config.envoy.config.empty()) {
    return Status::InvalidArgument(
        "envoy_config (--envoy-config) needs server.grpc (--grpc) to be served");
  }
  if (config.server.grpc.empty() && !config.rlqs.domains.empty()) {
    return Status::InvalidArgument("rlqs needs server.grpc (--grpc) to be served");
  }
  if (!config.server.grpc.empty() && config.envoy.config.empty() && config.rlqs.domains.empty()) {
    return Status::InvalidArgument(
        "server.grpc (--grpc) needs envoy_config (--envoy-config) or rlqs: something to serve");
  }
  if (Status s = LoadCallerToken(config); !s.ok()) return s;
  if (Status s = LoadAdminToken(config); !s.ok()) return s;
  PreparedConfig out;
  auto tls = HttpTls(config);
  if (!tls.ok()) return tls.status();
  out.http_tls = std::move(*tls);
  if (options.redis_tls) {
    RedisStoreOptions files;
    files.tls_ca_file = config.store.tls.ca_file;
    files.tls_cert_file = config.store.tls.cert_file;
    files.tls_key_file = config.store.tls.key_file;
    auto loaded = RedisTlsReload::Load(files);
    if (!loaded.ok()) {
      return Status::InvalidArgument(Cat("store.tls: ", loaded.status().message()));
    }
    out.redis_tls = std::move(*loaded);
  }
  if (!config.envoy.config.empty()) {
    auto loaded = envoy::LoadRateLimitConfig(config.envoy.config);
    if (!loaded.ok()) {
      return Status::InvalidArgument(Cat("envoy_config: ", loaded.status().message()));
    }
    out.domains = std::make_shared<const envoy::RateLimitConfig>(std::move(*loaded));
  }
  out.config = std::move(config);
  return out;
}

DomainOptions DomainOptionsFrom(const Config& config) {
  return {.mode = config.envoy.descriptor_mode,
          .on_failure = config.store.on_failure,
          .instances = config.store.instances,
          .lease = config.store.lease};
}

std::vector<std::string> RestartOnlyChanges(const Config& running, const Config& next) {
  std::vector<std::string> out;
  for (const RestartRule& rule : kRestartRules) {
    if (rule.differs(running, next)) out.emplace_back(rule.path);
  }
  return out;
}

void KeepRestartOnly(const Config& running, Config& next) {
  for (const RestartRule& rule : kRestartRules) {
    if (rule.differs(running, next)) rule.keep(running, next);
  }
}

}  // namespace caudal::service_internal
