// `caudal serve`: the HTTP service (and Envoy's rate limit service over gRPC) over one engine.
// SIGHUP reloads the config, the TLS certificate, the caller token and the Redis store's TLS files
// (a bad file or certificate is refused and the old ones keep serving);
// SIGINT / SIGTERM stop it.
#include <pthread.h>
#include <unistd.h>

#include <csignal>
#include <cstdlib>
#include <memory>
#include <string>

#include "caudal/breaker_store.h"
#include "caudal/config.h"
#include "caudal/engine.h"
#include "caudal/envoy/grpc_server.h"
#include "caudal/envoy/ratelimit_config_yaml.h"
#include "caudal/envoy/rls_handler.h"
#include "caudal/log.h"
#include "caudal/metrics.h"
#include "caudal/redis_tls.h"
#include "caudal/refusals.h"
#include "caudal/server.h"
#include "caudal/status_page.h"
#include "caudal/store_health.h"
#include "caudal/store_registry.h"
#include "cli/command.h"
#include "cli/overrides.h"
#include "common/cat.h"
#include "common/redact.h"
#include "config/file_watcher.h"
#include "engine/background_store.h"
#include "server/tls_context.h"

namespace caudal::cli {
namespace {

constexpr std::string_view kName = "serve";
constexpr size_t kOverLimitCacheKeys = 65'536;

std::string Bracketed(const std::string& host) {
  return host.find(':') != std::string::npos ? "[" + host + "]" : host;
}

class ServeCommand final : public Command {
 public:
  void AddOptions(CLI::App& app) override {
    app.add_option("--config", config_path_, "the YAML config file")->type_name("FILE")->required();
    app.add_option("--http", http_, "listen address, overriding server.http")
        ->type_name("HOST:PORT");
    app.add_option("--store", store_, "store URL, overriding store.url")->type_name("URL");
    app.add_option("--grpc", grpc_,
                   "Envoy rate limit service (gRPC) address, overriding "
                   "server.grpc")
        ->type_name("HOST:PORT");
    app.add_option("--envoy-config", envoy_config_,
                   "envoyproxy/ratelimit YAML file or directory, overriding envoy_config")
        ->type_name("PATH");
    app.add_option("--log-level", log_level_,
                   "debug, info, warning or error, overriding "
                   "logging.level")
        ->type_name("LEVEL");
    app.add_option("--log-format", log_format_, "text or json, overriding logging.format")
        ->type_name("FORMAT");
  }

  int Run(Env& env) override {
    // Signals are taken synchronously by this thread; block them before any thread starts.
    sigset_t signals;
    sigemptyset(&signals);
    for (int s : {SIGHUP, SIGINT, SIGTERM}) sigaddset(&signals, s);
    pthread_sigmask(SIG_BLOCK, &signals, nullptr);

    auto config = Load();
    if (!config.ok()) return UsageError(env, kName, config.status().message());
    Logger log(LoggerOptionsFrom(*config), env.clock);
    Refusals refusals(env.clock, &log, RefusalsOptionsFrom(*config));
    // A change to the config file or the Envoy files reloads as SIGHUP does: the watcher raises
    // SIGHUP, so every reload runs in the loop below, one at a time (a ConfigMap update sends no
    // signal). Watching before anything is built: a change from here on is never missed, and the
    // watcher's descriptors are open before the HTTP server sizes its connection cap.
    std::vector<std::string> watched;
    if (!config_path_.empty()) watched.push_back(config_path_);
    if (!config->envoy.config.empty()) watched.push_back(config->envoy.config);
    std::unique_ptr<FileWatcher> watcher;
    if (!watched.empty()) {
      auto w =
          FileWatcher::Start(watched, [] { ::kill(::getpid(), SIGHUP); }, {.clock = &env.clock});
      if (w.ok()) {
        watcher = std::move(*w);
      } else {
        log.Warning(
            Cat("not watching the config files (reload with SIGHUP): ", w.status().message()));
      }
    }

    Metrics metrics;
    // Told of each Redis Cluster primary's breaker (the log, /metrics); outlives the store.
    BreakerReporter node_breakers(env.clock, &log, &metrics);
    auto store = OpenSharedStore(env, *config, log, &node_breakers, &redis_tls_);
    if (!store.ok()) {
      if (store.status().code() == StatusCode::kInvalidArgument) {
        return UsageError(env, kName, store.status().message());
      }
      env.err << "caudal serve: cannot open the store: " << store.status().ToString() << "\n";
      return kExitFailure;
    }
    const std::unique_ptr<Store> local = OpenLocalFallback(config->store, env.clock);
    // Readiness probes the store itself; decisions go through a circuit breaker, so that a
    // failing store costs no waiting and is logged once per outage (Redis Cluster keeps its own,
    // one per primary, so that one failed primary fails only its slots).
    StoreHealth health(**store, env.clock, {});
    health.Start();
    BreakerStore breaker(**store, env.clock, {.log = &log, .metrics = &metrics});
    const StoreKind& kind = **FindStoreKind(config->store.url);
    const bool remote = kind.remote;
    Store& decider = kind.breaker_per_node ? **store : static_cast<Store&>(breaker);
    Engine engine(decider, env.clock,
                  {.local_store = local.get(),
                   .metrics = &metrics,
                   .log = &log,
                   .over_limit_cache_keys =
                       remote && config->store.over_limit_cache ? kOverLimitCacheKeys : 0,
                   .refusals = &refusals});
    if (Status s = engine.SetPolicies(config->policies); !s.ok()) {
      return UsageError(env, kName, s.message());
    }
    if (!config->envoy.config.empty()) {
      auto domains = LoadDomains(*config);
      if (!domains.ok()) return UsageError(env, kName, domains.status().message());
      if (Status s = engine.SetDomains(std::move(*domains), DomainOptionsFrom(*config)); !s.ok()) {
        return UsageError(env, kName, s.message());
      }
    }

    auto tls = HttpTls(*config);
    if (!tls.ok()) return UsageError(env, kName, tls.status().message());
    StatusPage status({.engine = engine,
                       .metrics = metrics,
                       .health = health,
                       .refusals = &refusals,
                       .store_url = config->store.url},
                      config->server.status_page);
    auto server =
        HttpServer::Start({.engine = engine,
                           .metrics = metrics,
                           .log = log,
                           .health = health,
                           .refusals = &refusals,
                           .status = &status},
                          ServerOptionsFrom(config->server), ForwardAuthFrom(config->server), *tls);
    if (!server.ok()) {
      env.err << "caudal serve: " << server.status().message() << "\n";
      return kExitFailure;
    }
    const auto opts = ServerOptionsFrom(config->server);
    const std::string url =
        Cat(*tls != nullptr ? "https://" : "http://", Bracketed(opts.host), ':', (*server)->port());
    env.out << log.Banner(
                   Cat("caudal serve: listening on ", url, " (store ", RedactUrl(config->store.url),
                       ", ", config->policies->policies().size(), " policies)"),
                   {{"url", url},
                    {"store", RedactUrl(config->store.url)},
                    {"policies", config->policies->policies().size()}})
            << std::endl;

    // Envoy's rate limit service, on the same engine as the HTTP API.
    envoy::RlsHandler rls(engine, {.headers = config->envoy.headers,
                                   .deny_as = config->envoy.deny_as,
                                   .dynamic_metadata = config->envoy.response_dynamic_metadata});
    std::unique_ptr<envoy::RlsGrpcServer> grpc;
    if (!config->server.grpc.empty()) {
      // gRPC health answers as /readyz does: from the store's probe (a cached value).
      auto started = envoy::RlsGrpcServer::Start(
          rls, {.address = config->server.grpc,
                .max_concurrent_calls = static_cast<size_t>(config->envoy.max_concurrent_calls),
                .ready = [&health] { return health.Ready().ok(); },
                .tls = config->server.tls,
                .caller = CallerAuthFrom(config->server.auth)});
      if (!started.ok()) {
        env.err << "caudal serve: " << started.status().message() << "\n";
        (*server)->Stop();
        return kExitFailure;
      }
      grpc = std::move(*started);
      const auto hp = ParseHostPort(config->server.grpc);
      const std::string address = Cat(Bracketed(hp->first), ':', grpc->port());
      env.out << log.Banner(
                     Cat("caudal serve: Envoy rate limit service (gRPC",
                         config->server.tls.enabled() && config->server.tls.grpc ? " over TLS" : "",
                         ") on ", address, " (", engine.domains()->DomainCount(), " domains from ",
                         config->envoy.config, ")"),
                     {{"grpc", address},
                      {"domains", engine.domains()->DomainCount()},
                      {"envoy_config", config->envoy.config}})
              << std::endl;
    }

    for (;;) {
      int sig = 0;
      if (sigwait(&signals, &sig) != 0) continue;
      if (sig != SIGHUP) break;
      Reload(*config, engine, **server, grpc.get(), metrics, log, refusals, status);
    }
    watcher.reset();
    log.Info("stopping");
    if (grpc != nullptr) grpc->Shutdown();
    (*server)->Stop();
    return kExitOk;
  }

 private:
  Result<Config> Load() const {
    auto config = LoadConfigFile(config_path_);
    if (!config.ok()) return config;
    if (Status s = ApplyOverrides(*config, {.store_url = store_, .http = http_, .grpc = grpc_},
                                  std::getenv);
        !s.ok()) {
      return s;
    }
    if (Status s = LoadCallerToken(*config); !s.ok()) return s;
    if (!envoy_config_.empty()) {
      config->envoy.config = envoy_config_;
    } else if (!config->envoy.config.empty() && config->envoy.config.front() != '/') {
      // envoy_config in the file is relative to the file's directory.
      const auto slash = config_path_.rfind('/');
      if (slash != std::string::npos) {
        config->envoy.config = config_path_.substr(0, slash + 1) + config->envoy.config;
      }
    }
    if (!log_level_.empty()) {
      auto level = ParseLogLevel(log_level_);
      if (!level.ok())
        return Status::InvalidArgument(Cat("--log-level: ", level.status().message()));
      config->logging.level = *level;
    }
    if (!log_format_.empty()) {
      auto format = ParseLogFormat(log_format_);
      if (!format.ok())
        return Status::InvalidArgument(Cat("--log-format: ", format.status().message()));
      config->logging.format = *format;
    }
    if (config->server.grpc.empty() != config->envoy.config.empty()) {
      return Status::InvalidArgument(
          config->server.grpc.empty()
              ? "envoy_config (--envoy-config) needs server.grpc (--grpc) to be served"
              : "server.grpc (--grpc) needs envoy_config (--envoy-config): the domains to serve");
    }
    return config;
  }

  // The HTTP listener's TLS context; null when it serves plaintext. The files are checked
  // whenever server.tls is set, for gRPC's sake too: its own errors say little.
  static Result<std::shared_ptr<boost::asio::ssl::context>> HttpTls(const Config& config) {
    if (!config.server.tls.enabled()) return std::shared_ptr<boost::asio::ssl::context>();
    auto context = server_tls::MakeServerContext(config.server.tls);
    if (!context.ok() || config.server.tls.http) return context;
    return std::shared_ptr<boost::asio::ssl::context>();
  }

  static LoggerOptions LoggerOptionsFrom(const Config& config) {
    return {.level = config.logging.level, .format = config.logging.format};
  }

  static RefusalsOptions RefusalsOptionsFrom(const Config& config) {
    return {.identities = config.logging.identities, .log = config.logging.refusals};
  }

  // The shared store. A bad URL, password or database is a mistake to fix: refuse to start. An
  // unreachable remote store is an outage: serve by failure mode, not ready, and connect in the
  // background once it is back.
  static Result<std::unique_ptr<Store>> OpenSharedStore(Env& env, const Config& config,
                                                        const Logger& log,
                                                        BreakerReporter* node_breakers,
                                                        RedisTlsReload* redis_tls) {
    const StoreOpenOptions options{.decide_on_clock = env.stores_use_clock,
                                   .node_breakers = node_breakers,
                                   .redis_tls_reload = redis_tls};
    auto opened = OpenStore(config.store, env.clock, options);
    if (!opened.ok() && opened.status().code() != StatusCode::kInvalidArgument &&
        (*FindStoreKind(config.store.url))->remote) {
      log.Warning(Cat("store unreachable at start (", opened.status().message(),
                      "): serving by failure mode, not ready, connecting in the background"));
      opened = std::unique_ptr<Store>(std::make_unique<BackgroundStore>(
          [store = config.store, &clock = env.clock, options] {
            return OpenStore(store, clock, options);
          },
          BackgroundStoreOptions{.name = std::string((*FindStoreKind(config.store.url))->scheme),
                                 .log = &log}));
    }
    if (opened.ok() && env.wrap_store) opened = env.wrap_store(std::move(*opened));
    return opened;
  }

  static Result<std::shared_ptr<const envoy::RateLimitConfig>> LoadDomains(const Config& config) {
    auto loaded = envoy::LoadRateLimitConfig(config.envoy.config);
    if (!loaded.ok())
      return Status::InvalidArgument(Cat("envoy_config: ", loaded.status().message()));
    return std::shared_ptr<const envoy::RateLimitConfig>(
        std::make_shared<envoy::RateLimitConfig>(std::move(*loaded)));
  }

  // store.on_failure and store.instances apply to Envoy's domains as to the policies.
  static DomainOptions DomainOptionsFrom(const Config& config) {
    return {.mode = config.envoy.descriptor_mode,
            .on_failure = config.store.on_failure,
            .instances = config.store.instances};
  }

  // SIGHUP: the config and the Envoy files are read again; a bad one is refused and the old
  // config keeps serving.
  void Reload(Config& current, Engine& engine, HttpServer& server, envoy::RlsGrpcServer* grpc,
              Metrics& metrics, Logger& log, Refusals& refusals, StatusPage& status) const {
    auto next = Load();
    // The certificate first: a bad one refuses the whole reload, and the old one keeps serving.
    std::shared_ptr<boost::asio::ssl::context> tls;
    if (next.ok()) {
      auto made = HttpTls(*next);
      if (made.ok()) {
        tls = std::move(*made);
      } else {
        next = made.status();
      }
    }
    // The Redis store's CA, client certificate and key, read again and checked with the rest.
    RedisTlsContext redis_tls;
    if (next.ok() && redis_tls_.stores() > 0) {
      RedisStoreOptions files;
      files.tls_ca_file = next->store.tls.ca_file;
      files.tls_cert_file = next->store.tls.cert_file;
      files.tls_key_file = next->store.tls.key_file;
      auto loaded = RedisTlsReload::Load(files);
      if (loaded.ok()) {
        redis_tls = std::move(*loaded);
      } else {
        next = Status::InvalidArgument(Cat("store.tls: ", loaded.status().message()));
      }
    }
    std::shared_ptr<const envoy::RateLimitConfig> domains;
    if (next.ok() && !next->envoy.config.empty()) {
      auto loaded = LoadDomains(*next);
      if (!loaded.ok()) {
        next = loaded.status();
      } else {
        domains = std::move(*loaded);
      }
    }
    Status s = next.ok() ? engine.SetPolicies(next->policies) : next.status();
    if (s.ok() && domains != nullptr) s = engine.SetDomains(domains, DomainOptionsFrom(*next));
    if (!s.ok()) {
      metrics.CountReload(false);
      log.Error(Cat("reload refused, the previous ", current.policies->policies().size(),
                    " policies keep serving: ", s.message()));
      return;
    }
    server.SetForwardAuth(ForwardAuthFrom(next->server));
    server.SetTls(tls);
    // New connections to Redis present the renewed files; open ones keep theirs.
    if (redis_tls != nullptr) redis_tls_.Use(redis_tls);
    if (grpc != nullptr) {
      grpc->SetCallerAuth(CallerAuthFrom(next->server.auth));
      if (Status t = grpc->ReloadTls(next->server.tls); !t.ok()) {
        log.Error(Cat("reload: gRPC keeps its previous certificate: ", t.message()));
      }
    }
    const ServerTlsConfig& was = current.server.tls;
    const ServerTlsConfig& now = next->server.tls;
    const bool grpc_tls_changed =
        grpc != nullptr && (now.enabled() != was.enabled() || now.grpc != was.grpc ||
                            now.client_cert != was.client_cert ||
                            now.client_ca_file.empty() != was.client_ca_file.empty());
    if ((tls != nullptr) != server.tls() || grpc_tls_changed) {
      log.Warning(
          "reload: turning TLS on or off, and gRPC's server.tls.listeners and "
          "client_cert, take effect on restart only");
    }
    log.SetOptions(LoggerOptionsFrom(*next));
    refusals.SetOptions(RefusalsOptionsFrom(*next));
    status.SetEnabled(next->server.status_page);
    if (next->store.url != current.store.url || next->server.http != current.server.http ||
        next->store.timeout != current.store.timeout || next->server.grpc != current.server.grpc) {
      log.Warning(
          "reload: store.url, store.timeout, server.http and server.grpc take effect on restart "
          "only");
    }
    metrics.CountReload(true);
    log.Info(Cat("reloaded ", config_path_, ": ", next->policies->policies().size(), " policies",
                 domains != nullptr ? Cat(", ", domains->DomainCount(), " Envoy domains") : ""));
    current = std::move(next).value();
  }

  std::string config_path_;
  std::string http_;
  std::string store_;
  std::string grpc_;
  std::string envoy_config_;
  std::string log_level_;
  std::string log_format_;
  // The Redis store over TLS registers here; outlives it. Reload() hands it renewed files.
  mutable RedisTlsReload redis_tls_;
};

}  // namespace

CAUDAL_REGISTER_COMMAND(ServeCommand, "serve",
                        "Serve rate-limit decisions over HTTP (and Envoy's RLS over gRPC)");

}  // namespace caudal::cli
