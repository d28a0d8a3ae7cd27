#include "service/service.h"

#include <algorithm>
#include <utility>

#include "admin/admin.h"
#include "common/cat.h"
#include "config/ratelimit_config_yaml.h"
#include "config/store_registry.h"
#include "decorators/background_store.h"
#include "decorators/breaker_store.h"
#include "decorators/lease_store.h"
#include "decorators/store_health.h"
#include "envoy/grpc_server.h"
#include "envoy/rlqs_service.h"
#include "envoy/rls_handler.h"
#include "observe/refusals.h"
#include "redis/eviction_check.h"
#include "redis/redis_tls.h"
#include "server/idempotency.h"
#include "server/server.h"
#include "server/status_page.h"
#include "server/tls_context.h"
#include "service/prepared_config.h"
#include "store/idempotency_store.h"
#include "store/override_store.h"

namespace caudal {
namespace {

constexpr size_t kOverLimitCacheKeys = 65'536;
// Ended leases are given back this often (each ended lease waits at most this long).
constexpr Nanos kLeaseReturnInterval = std::chrono::milliseconds(50);
// Service::Stop waits this long at most for the store to take the leases back.

LoggerOptions LoggerOptionsFrom(const Config& config) {
  return {.level = config.logging.level, .format = config.logging.format};
}

RefusalsOptions RefusalsOptionsFrom(const Config& config) {
  return {.identities = config.logging.identities, .log = config.logging.refusals};
}

envoy::RlsOptions RlsOptionsFrom(const Config& config) {
  return {.headers = config.envoy.headers,
          .deny_as = config.envoy.deny_as,
          .dynamic_metadata = config.envoy.response_dynamic_metadata};
}

std::unique_ptr<Logger> MakeLogger(const ServiceEnv& env, const Config& config) {
  if (env.log_sink) return std::make_unique<Logger>(env.log_sink, LoggerOptionsFrom(config));
  return std::make_unique<Logger>(LoggerOptionsFrom(config), env.clock);
}

}  // namespace

// Declared in the order they are built; destroyed in reverse, so each part outlives every part
// that uses it, but for the stores: a call still held at one (a Redis that stopped answering
// past server.shutdown_timeout) is answered as the store ends, and that answer runs through the
// parts above it (the breaker, the engine, the listeners' requests; a claim's answer may decide
// through the engine): each store ends while they are all still there, once the threads that
// call it have ended.
struct Service::Parts {
  explicit Parts(ServiceEnv e, Config c)
      : env(std::move(e)),
        config(std::move(c)),
        log(MakeLogger(env, config)),
        refusals(env.clock, log.get(), RefusalsOptionsFrom(config)),
        node_breakers(env.clock, log.get(), &metrics),
        eviction({.refuse = config.store.on_eviction_risk == EvictionRiskAction::kRefuse,
                  .log = log.get(),
                  .metrics = &metrics}) {}
  ~Parts() {
    health.reset();  // its probe thread calls the store
    admin.reset();   // its sync thread calls the overrides and the engine
    overrides.reset();
    once.reset();
    idempotency.reset();  // a claim answered now may still decide: through the leases, the store
    leases.reset();       // its thread calls the store; its calls answer into state of their own
    store.reset();
  }
  Parts(const Parts&) = delete;
  Parts& operator=(const Parts&) = delete;

  ServiceEnv env;
  Config config;
  std::unique_ptr<Logger> log;
  Metrics metrics;
  Refusals refusals;
  // Told of each Redis Cluster primary's breaker (the log, /metrics); outlives the store.
  BreakerReporter node_breakers;
  // A Redis store over TLS registers here; Reload hands it renewed files.
  RedisTlsReload redis_tls;
  // What a Redis store's servers' maxmemory-policy means for its keys; outlives the store.
  redis::RedisEvictionWatch eviction;
  std::unique_ptr<Store> store;
  std::unique_ptr<Store> local;
  std::unique_ptr<StoreHealth> health;
  std::unique_ptr<BreakerStore> breaker;
  std::unique_ptr<LeaseStore> leases;  // above the breaker
  std::unique_ptr<Engine> engine;
  std::unique_ptr<OverrideStore> overrides;  // with the admin API only
  std::unique_ptr<Admin> admin;
  std::unique_ptr<IdempotencyStore> idempotency;  // Idempotency-Key's records, beside the state
  std::unique_ptr<Idempotency> once;              // keyed decisions, over those records
  std::unique_ptr<StatusPage> status;
  std::unique_ptr<HttpServer> http;
  std::unique_ptr<envoy::RlsHandler> rls;
  std::unique_ptr<envoy::RlqsService> rlqs;  // outlives the gRPC server that serves it
  std::unique_ptr<envoy::RlsGrpcServer> grpc;
  bool stopped = false;

  Status OpenStores();
  Status BuildEngine(const service_internal::PreparedConfig& prepared);
  Status StartAdmin();
  Status OpenIdempotency();
  Status StartListeners(const service_internal::PreparedConfig& prepared);
  void GiveBack(Nanos deadline);
};

// The shared store. A bad URL, password or database is a mistake to fix: refuse to start. An
// unreachable remote store is an outage: serve by failure mode, not ready, and connect in the
// background once it is back.
Status Service::Parts::OpenStores() {
  const StoreOpenOptions options{.decide_on_clock = env.stores_use_clock,
                                 .node_breakers = &node_breakers,
                                 .metrics = &metrics,
                                 .redis_tls_reload = &redis_tls,
                                 .eviction_watch = &eviction};
  const StoreKind& kind = **FindStoreKind(config.store.url);
  auto opened = OpenStore(config.store, env.clock, options);
  if (!opened.ok() && opened.status().code() != StatusCode::kInvalidArgument && kind.remote) {
    log->Warning(Cat("store unreachable at start (", opened.status().message(),
                     "): serving by failure mode, not ready, connecting in the background"));
    opened = std::unique_ptr<Store>(std::make_unique<BackgroundStore>(
        [store = config.store, &clock = env.clock, options] {
          return OpenStore(store, clock, options);
        },
        env.clock, BackgroundStoreOptions{.name = std::string(kind.scheme), .log = log.get()}));
  }
  if (!opened.ok()) {
    if (opened.status().code() == StatusCode::kInvalidArgument) return opened.status();
    return Status(opened.status().code(),
                  Cat("cannot open the store: ", opened.status().ToString()));
  }
  store = std::move(*opened);
  if (env.wrap_store) store = env.wrap_store(std::move(store));
  local = OpenLocalFallback(config.store, env.clock);
  return Status::Ok();
}

// Readiness probes the store itself; decisions go through a circuit breaker, so that a failing
// store costs no waiting and is logged once per outage (Redis Cluster keeps its own, one per
// primary, so that one failed primary fails only its slots).
Status Service::Parts::BuildEngine(const service_internal::PreparedConfig& prepared) {
  health = std::make_unique<StoreHealth>(
      *store, env.clock, StoreHealthOptions{.also = [this] { return eviction.Ready(); }});
  health->Start();
  breaker = std::make_unique<BreakerStore>(*store, env.clock,
                                           BreakerOptions{.log = log.get(), .metrics = &metrics});
  const StoreKind& kind = **FindStoreKind(config.store.url);
  Store* decider = kind.breaker_per_node ? store.get() : breaker.get();
  // Leases sit above the breaker, so that live ones keep being spent while the store is down.
  // Built for every store: a policy or rule may turn leases on by a reload (a remote store's), or
  // share a capacity among its identities (any store's: its shares are taken there).
  leases = std::make_unique<LeaseStore>(
      *decider, env.clock,
      LeaseStoreOptions{.ttl = config.store.lease.ttl,
                        .max_share_ppm = config.store.lease.max_share_ppm,
                        .lease_by_default = false,
                        .leases = kind.remote,
                        .instances = config.store.instances,
                        .return_interval = kLeaseReturnInterval,
                        .metrics = &metrics});
  decider = leases.get();
  engine = std::make_unique<Engine>(
      *decider, env.clock,
      EngineOptions{.local_store = local.get(),
                    .metrics = &metrics,
                    .log = log.get(),
                    .over_limit_cache_keys =
                        kind.remote && config.store.over_limit_cache ? kOverLimitCacheKeys : 0,
                    .refusals = &refusals});
  if (Status s = engine->SetPolicies(config.policies); !s.ok()) return s;
  if (prepared.domains != nullptr) {
    return engine->SetDomains(prepared.domains, service_internal::DomainOptionsFrom(config));
  }
  return Status::Ok();
}

// The admin API, when it has a token: its runtime overrides live beside the store's state.
Status Service::Parts::StartAdmin() {
  if (config.server.admin.token.empty()) return Status::Ok();
  auto opened = OpenOverrideStore(config.store, env.clock);
  if (!opened.ok() && opened.status().code() != StatusCode::kNotFound) return opened.status();
  if (!opened.ok()) {
    log->Warning(Cat("admin: ", opened.status().message(),
                     ": runtime overrides are kept in this process only; state and resets are "
                     "shared"));
    opened = MakeMemoryOverrideStore(env.clock);
  }
  overrides = std::move(*opened);
  admin = std::make_unique<Admin>(
      *engine, *overrides, env.clock,
      AdminOptions{
          .log = log.get(),
          .metrics = &metrics,
          .refusals = &refusals,
          .max_overrides = static_cast<size_t>(config.server.admin.max_overrides),
          .on_change =
              [this] {
                if (leases != nullptr) leases->ReturnAll(Nanos(0));
              },
          .held_share = [this](std::string_view key,
                               std::string_view identity) -> std::optional<HeldShare> {
            if (leases == nullptr) return std::nullopt;
            const auto held = leases->HeldShare(key, identity);
            if (!held) return std::nullopt;
            return HeldShare{.allocation = held->allocation, .held = held->held};
          },
          .held_rlqs = [this](std::string_view policy,
                              const std::vector<std::pair<std::string, std::string>>& identity)
              -> std::optional<HeldRlqs> {
            if (rlqs == nullptr) return std::nullopt;
            const auto held = rlqs->HeldBy(policy, identity);
            if (!held) return std::nullopt;
            return HeldRlqs{.buckets = held->buckets,
                            .assigned_per_second = held->assigned_per_second,
                            .allowed = held->allowed,
                            .denied = held->denied};
          }});
  admin->Start();
  return Status::Ok();
}

// Idempotency-Key's records live where the state does, so that a retry through any instance
// finds the first answer; a store kind without them keeps them in this process.
Status Service::Parts::OpenIdempotency() {
  const MemoryIdempotencyLimits limits{
      .max_records = static_cast<size_t>(config.server.idempotency.max_keys),
      .max_bytes = static_cast<size_t>(config.server.idempotency.max_bytes)};
  auto opened = OpenIdempotencyStore(config.store, env.clock, limits);
  if (!opened.ok() && opened.status().code() != StatusCode::kNotFound) return opened.status();
  if (!opened.ok()) {
    log->Warning(Cat("idempotency: ", opened.status().message(),
                     ": Idempotency-Key records are kept in this process only"));
    opened = MakeMemoryIdempotencyStore(env.clock, limits);
  }
  idempotency = std::move(*opened);
  once = std::make_unique<Idempotency>(*idempotency, metrics, idempotency::Replayable);
  return Status::Ok();
}

Status Service::Parts::StartListeners(const service_internal::PreparedConfig& prepared) {
  status = std::make_unique<StatusPage>(StatusPageDeps{.engine = *engine,
                                                       .metrics = metrics,
                                                       .health = *health,
                                                       .refusals = &refusals,
                                                       .store_url = config.store.url},
                                        config.server.status_page);
  auto started = HttpServer::Start({.engine = *engine,
                                    .metrics = metrics,
                                    .log = *log,
                                    .health = *health,
                                    .refusals = &refusals,
                                    .status = status.get(),
                                    .admin = admin.get(),
                                    .idempotency = once.get(),
                                    .clock = env.clock},
                                   ServerOptionsFrom(config.server), ForwardAuthFrom(config.server),
                                   prepared.http_tls);
  if (!started.ok()) return started.status();
  http = std::move(*started);

  // Envoy's rate limit service, on the same engine as the HTTP API.
  rls = std::make_unique<envoy::RlsHandler>(*engine, RlsOptionsFrom(config));
  if (config.server.grpc.empty()) return Status::Ok();
  // Envoy's rate limit quota service, beside it on the same listener.
  if (!config.rlqs.domains.empty()) {
    rlqs = std::make_unique<envoy::RlqsService>(
        *engine, std::make_shared<const envoy::RlqsBuckets>(config.rlqs),
        envoy::RlqsServiceOptions{.clock = &env.clock, .metrics = &metrics});
  }
  // gRPC health answers as /readyz does: from the store's probe (a cached value).
  auto grpc_started = envoy::RlsGrpcServer::Start(
      *rls, {.address = config.server.grpc,
             .clock = &env.clock,
             .max_concurrent_calls = static_cast<size_t>(config.envoy.max_concurrent_calls),
             .ready = [h = health.get()] { return h->Ready().ok(); },
             .tls = config.server.tls,
             .caller = CallerAuthFrom(config.server.auth),
             .shutdown_timeout = config.server.shutdown_timeout,
             .rlqs = rlqs.get()});
  if (!grpc_started.ok()) {
    http->Stop();
    return grpc_started.status();
  }
  grpc = std::move(*grpc_started);
  return Status::Ok();
}

Result<std::unique_ptr<Service>> Service::Start(Config config, ServiceEnv env) {
  auto prepared = service_internal::Prepare(std::move(config), {.redis_tls = false});
  if (!prepared.ok()) return prepared.status();
  auto parts = std::make_unique<Parts>(std::move(env), std::move(prepared->config));
  if (Status s = parts->OpenStores(); !s.ok()) return s;
  if (Status s = parts->BuildEngine(*prepared); !s.ok()) return s;
  if (Status s = parts->StartAdmin(); !s.ok()) return s;
  if (Status s = parts->OpenIdempotency(); !s.ok()) return s;
  if (Status s = parts->StartListeners(*prepared); !s.ok()) return s;
  return std::unique_ptr<Service>(new Service(std::move(parts)));
}

Status Service::Check(const Config& config) {
  const StoreTlsConfig& files = config.store.tls;
  const bool redis_tls =
      !files.ca_file.empty() || !files.cert_file.empty() || !files.key_file.empty();
  return service_internal::Prepare(config, {.redis_tls = redis_tls}).status();
}

std::vector<std::string> Service::RestartOnlyChanges(const Config& running, const Config& next) {
  return service_internal::RestartOnlyChanges(running, next);
}

Service::Service(std::unique_ptr<Parts> parts) : parts_(std::move(parts)) {}

Service::~Service() { Stop(); }

// Graceful shutdown, in order: readiness off (load balancers and Envoy's health checks stop
// sending), the listeners closed, what is in flight answered, what the store holds given back.
// Every step shares one deadline, server.shutdown_timeout from the start.
void Service::Stop() {
  Parts& p = *parts_;
  if (p.stopped) return;
  p.stopped = true;
  const Micros timeout = p.config.server.shutdown_timeout;
  const Nanos deadline = p.env.clock.Monotonic() + timeout;
  p.log->Info(Cat("stopping: answering what is in flight for up to ", FormatDuration(timeout)));
  if (p.health != nullptr) p.health->Stop();  // readiness is off from here on
  if (p.grpc != nullptr) p.grpc->StopServingHealth();
  p.http->StopAccepting();
  if (p.grpc != nullptr) p.grpc->Shutdown(deadline);
  p.http->Stop(deadline);
  p.GiveBack(deadline);
  p.log->Info("stopped");
}

// Store capacity this instance holds for later decisions (its leases) is handed back here, once
// nothing is in flight, so that the other instances can use it at once rather than when it
// expires; the store's answers are awaited until `deadline` at the latest.
void Service::Parts::GiveBack(Nanos deadline) {
  if (leases == nullptr) return;
  leases->ReturnAll(std::max(Nanos(0), deadline - env.clock.Monotonic()));
}

ReloadResult Service::Reload(Result<Config> next) {
  Parts& p = *parts_;
  auto prepared = next.ok() ? service_internal::Prepare(std::move(*next),
                                                        {.redis_tls = p.redis_tls.stores() > 0})
                            : Result<service_internal::PreparedConfig>(next.status());
  Status s = prepared.status();
  if (s.ok()) s = p.engine->SetPolicies(prepared->config.policies);
  if (s.ok() && prepared->domains != nullptr) {
    s = p.engine->SetDomains(prepared->domains,
                             service_internal::DomainOptionsFrom(prepared->config));
  }
  if (!s.ok()) {
    p.metrics.CountReload(false);
    p.log->Error(Cat("reload refused, the previous ", p.config.policies->policies().size(),
                     " policies keep serving: ", s.message()));
    return {.status = s, .applied = {}, .restart_only = {}};
  }
  Config& now = prepared->config;
  ReloadResult result;
  result.applied = {"policies",
                    "logging",
                    "server.trusted_proxies",
                    "server.descriptor_headers",
                    "server.auth",
                    "server.status_page",
                    "server.idempotency.window",
                    "server.idempotency.in_progress",
                    "server.shutdown_timeout"};
  p.http->SetForwardAuth(ForwardAuthFrom(now.server));
  p.http->SetTls(prepared->http_tls);
  if (prepared->http_tls != nullptr) result.applied.push_back("server.tls (HTTP certificate)");
  // New connections to Redis present the renewed files; open ones keep theirs.
  if (prepared->redis_tls != nullptr) {
    p.redis_tls.Use(prepared->redis_tls);
    result.applied.push_back("store.tls");
  }
  if (p.grpc != nullptr) {
    p.grpc->SetCallerAuth(CallerAuthFrom(now.server.auth));
    if (Status t = p.grpc->ReloadTls(now.server.tls); !t.ok()) {
      p.log->Error(Cat("reload: gRPC keeps its previous certificate: ", t.message()));
    } else if (now.server.tls.enabled() && now.server.tls.grpc) {
      result.applied.push_back("server.tls (gRPC certificate)");
    }
  }
  if (prepared->domains != nullptr) result.applied.push_back("envoy_config");
  if (p.rlqs != nullptr && !now.rlqs.domains.empty()) {
    p.rlqs->SetBuckets(std::make_shared<const envoy::RlqsBuckets>(now.rlqs));
    result.applied.push_back("rlqs (streams opened from now on)");
  }
  // A changed limit or lease term applies at once: the leases taken under the old ones end
  // and go back (new ones are taken as the keys are seen again).
  if (p.leases != nullptr) p.leases->ReturnAll(Nanos(0));
  p.log->SetOptions(LoggerOptionsFrom(now));
  p.refusals.SetOptions(RefusalsOptionsFrom(now));
  p.status->SetEnabled(now.server.status_page);
  result.restart_only = RestartOnlyChanges(p.config, now);
  if (!result.restart_only.empty()) {
    std::string fields;
    for (const std::string& f : result.restart_only) fields += (fields.empty() ? "" : ", ") + f;
    p.log->Warning(Cat("reload: ", fields, " take effect on restart only"));
  }
  p.metrics.CountReload(true);
  p.log->Info(Cat("reloaded ", now.path, ": ", now.policies->policies().size(), " policies",
                  prepared->domains != nullptr
                      ? Cat(", ", prepared->domains->DomainCount(), " Envoy domains")
                      : ""));
  // What needs a restart keeps its running value, so that config() says what is in force.
  service_internal::KeepRestartOnly(p.config, now);
  p.config = std::move(now);
  return result;
}

uint16_t Service::http_port() const { return parts_->http->port(); }
bool Service::http_tls() const { return parts_->http->tls(); }
HttpIo Service::http_io() const { return parts_->http->io(); }
std::optional<uint16_t> Service::grpc_port() const {
  if (parts_->grpc == nullptr) return std::nullopt;
  return static_cast<uint16_t>(parts_->grpc->port());
}
const Config& Service::config() const { return parts_->config; }
Engine& Service::engine() { return *parts_->engine; }
const Metrics& Service::metrics() const { return parts_->metrics; }
const Logger& Service::log() const { return *parts_->log; }

}  // namespace caudal
