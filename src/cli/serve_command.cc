// `caudal serve`: the HTTP service over the configured policies and store.
// SIGHUP reloads the config (a bad file is refused and the old policies keep serving);
// SIGINT / SIGTERM stop it.
#include <csignal>
#include <memory>
#include <optional>
#include <pthread.h>
#include <string>

#include "caudal/config.h"
#include "caudal/envoy/grpc_server.h"
#include "caudal/limiter.h"
#include "caudal/log.h"
#include "caudal/metrics.h"
#include "caudal/server.h"
#include "caudal/store_factory.h"
#include "cli/command.h"
#include "cli/serve_test_hooks.h"
#include "engine/background_store.h"
#include "common/cat.h"
#include "support/manual_clock.h"
#include "caudal/envoy/ratelimit_config_yaml.h"

namespace caudal::cli {
namespace {

constexpr std::string_view kName = "serve";

bool IsRemote(const StoreConfig& store) { return store.url.rfind("redis", 0) == 0; }

class ServeCommand final : public Command {
 public:
  void AddOptions(CLI::App& app) override {
    app.add_option("--config", config_path_, "the YAML config file")
        ->type_name("FILE")
        ->required();
    app.add_option("--http", http_, "listen address, overriding server.http")
        ->type_name("HOST:PORT");
    app.add_option("--store", store_, "store URL, overriding store.url")->type_name("URL");
    app.add_option("--grpc", grpc_, "Envoy rate limit service (gRPC) address, overriding "
                                    "server.grpc")
        ->type_name("HOST:PORT");
    app.add_option("--envoy-config", envoy_config_,
                   "envoyproxy/ratelimit YAML file or directory, overriding envoy_config")
        ->type_name("PATH");
    app.add_flag("--test-hooks", test_hooks_,
                 "TESTS ONLY: a manual clock and a failing store driven over POST /debug/");
  }

  int Run(Env& env) override {
    // Signals are taken synchronously by this thread; block them before any thread starts.
    sigset_t signals;
    sigemptyset(&signals);
    for (int s : {SIGHUP, SIGINT, SIGTERM}) sigaddset(&signals, s);
    pthread_sigmask(SIG_BLOCK, &signals, nullptr);

    auto config = Load();
    if (!config.ok()) return UsageError(env, kName, config.status().message());

    const Clock* clock = &env.clock;
    std::optional<ManualClock> manual;
    if (test_hooks_) clock = &manual.emplace(env.clock.Now());
    Logger log;
    auto opened = OpenStore(config->store, env.clock, {.test_clock = manual ? &*manual : nullptr});
    if (!opened.ok()) {
      // A bad URL, password or database is a mistake to fix: refuse to start. An unreachable
      // store is an outage: serve by failure mode, not ready, and connect once it is back.
      if (opened.status().code() == StatusCode::kInvalidArgument) {
        return UsageError(env, kName, opened.status().message());
      }
      if (!IsRemote(config->store)) {
        env.err << "caudal serve: cannot open the store: " << opened.status().ToString() << "\n";
        return kExitFailure;
      }
      log.Warning(Cat("store unreachable at start (", opened.status().message(),
                      "): serving by failure mode, not ready, connecting in the background"));
      opened = std::unique_ptr<Store>(std::make_unique<BackgroundStore>(
          [store = config->store, &clock = env.clock, test_clock = manual ? &*manual : nullptr] {
            return OpenStore(store, clock, {.test_clock = test_clock});
          },
          BackgroundStoreOptions{.name = "redis", .log = &log}));
    }
    auto faulty = std::make_unique<FaultInjectingStore>(std::move(opened).value());
    const std::unique_ptr<Store> local = OpenLocalFallback(config->store, *clock);
    Metrics metrics;
    Limiter limiter(*faulty, *clock, {.local_store = local.get(), .metrics = &metrics, .log = &log});
    if (Status s = limiter.SetPolicies(config->policies); !s.ok()) {
      return UsageError(env, kName, s.message());
    }
    std::unique_ptr<envoy::RlsHandler> rls;
    if (!config->server.grpc.empty()) {
      auto envoy_config = LoadEnvoyConfig(*config);
      if (!envoy_config.ok()) return UsageError(env, kName, envoy_config.status().message());
      auto options = RlsOptionsFrom(*config, local.get());
      if (!options.ok()) return UsageError(env, kName, options.status().message());
      rls = std::make_unique<envoy::RlsHandler>(*faulty, *clock, std::move(*envoy_config),
                                                *options);
    }
    DebugHandler debug;
    if (test_hooks_) {
      debug = MakeDebugHandler(*manual, *faulty);
      log.Warning("--test-hooks: POST /debug/ moves the clock and fails the store; tests only");
    }
    auto server = HttpServer::Start({.limiter = limiter, .metrics = metrics, .log = log,
                                     .debug = std::move(debug)},
                                    ServerOptionsFrom(config->server),
                                    ForwardAuthFrom(config->server));
    if (!server.ok()) {
      env.err << "caudal serve: " << server.status().message() << "\n";
      return kExitFailure;
    }
    const auto opts = ServerOptionsFrom(config->server);
    const std::string host = opts.host.find(':') != std::string::npos ? "[" + opts.host + "]"
                                                                     : opts.host;
    env.out << "caudal serve: listening on http://" << host << ':' << (*server)->port()
            << " (store " << config->store.url << ", "
            << config->policies->policies().size() << " policies)" << std::endl;

    // Envoy's rate limit service, on the same store, clock and failure mode as the HTTP API.
    std::unique_ptr<envoy::RlsGrpcServer> grpc;
    if (rls != nullptr) {
      auto started = envoy::RlsGrpcServer::Start(
          *rls, {.address = config->server.grpc,
                 .max_concurrent_calls = static_cast<size_t>(config->envoy.max_concurrent_calls)});
      if (!started.ok()) {
        env.err << "caudal serve: " << started.status().message() << "\n";
        (*server)->Stop();
        return kExitFailure;
      }
      grpc = std::move(*started);
      const auto hp = ParseHostPort(config->server.grpc);
      const std::string grpc_host =
          hp->first.find(':') != std::string::npos ? "[" + hp->first + "]" : hp->first;
      env.out << "caudal serve: Envoy rate limit service (gRPC) on " << grpc_host << ':'
              << grpc->port() << " (" << rls->config()->DomainCount() << " domains from "
              << config->envoy.config << ")" << std::endl;
    }

    for (;;) {
      int sig = 0;
      if (sigwait(&signals, &sig) != 0) continue;
      if (sig != SIGHUP) break;
      Reload(*config, limiter, **server, metrics, log);
      if (rls != nullptr) ReloadEnvoy(*config, *rls, log);
    }
    log.Info("stopping");
    if (grpc != nullptr) grpc->Shutdown();
    (*server)->Stop();
    return kExitOk;
  }

 private:
  Result<Config> Load() const {
    auto config = LoadConfigFile(config_path_);
    if (!config.ok()) return config;
    if (!http_.empty()) {
      if (auto hp = ParseHostPort(http_); !hp.ok()) {
        return Status::InvalidArgument(Cat("--http: ", hp.status().message()));
      }
      config->server.http = http_;
    }
    if (!store_.empty()) config->store.url = store_;
    if (!grpc_.empty()) {
      if (auto hp = ParseHostPort(grpc_); !hp.ok()) {
        return Status::InvalidArgument(Cat("--grpc: ", hp.status().message()));
      }
      config->server.grpc = grpc_;
    }
    if (!envoy_config_.empty()) {
      config->envoy.config = envoy_config_;
    } else if (!config->envoy.config.empty() && config->envoy.config.front() != '/') {
      // envoy_config in the file is relative to the file's directory.
      const auto slash = config_path_.rfind('/');
      if (slash != std::string::npos) {
        config->envoy.config = config_path_.substr(0, slash + 1) + config->envoy.config;
      }
    }
    if (config->server.grpc.empty() != config->envoy.config.empty()) {
      return Status::InvalidArgument(
          config->server.grpc.empty()
              ? "envoy_config (--envoy-config) needs server.grpc (--grpc) to be served"
              : "server.grpc (--grpc) needs envoy_config (--envoy-config): the domains to serve");
    }
    return config;
  }

  static Result<std::shared_ptr<const envoy::RateLimitConfig>> LoadEnvoyConfig(
      const Config& config) {
    auto loaded = envoy::LoadRateLimitConfig(config.envoy.config);
    if (!loaded.ok()) return Status::InvalidArgument(Cat("envoy_config: ", loaded.status().message()));
    return std::shared_ptr<const envoy::RateLimitConfig>(
        std::make_shared<envoy::RateLimitConfig>(std::move(*loaded)));
  }

  // store.on_failure applies to the gRPC service as to HTTP: allow, deny (as envoy.deny_as
  // says), local (the same local fallback store).
  static Result<envoy::RlsOptions> RlsOptionsFrom(const Config& config, Store* local) {
    envoy::RlsOptions o;
    auto mode = envoy::ParseDescriptorMode(config.envoy.descriptor_mode);
    if (!mode.ok()) return mode.status();
    o.descriptor_mode = *mode;
    auto headers = envoy::ParseHeaderMode(config.envoy.headers);
    if (!headers.ok()) return headers.status();
    o.headers = *headers;
    switch (config.store.on_failure) {
      case FailureMode::kAllow: o.failure_mode = envoy::FailureMode::kAllow; break;
      case FailureMode::kDeny:
        o.failure_mode = config.envoy.deny_as == "unavailable"
                             ? envoy::FailureMode::kDenyUnavailable
                             : envoy::FailureMode::kDenyOverLimit;
        break;
      case FailureMode::kLocal: o.failure_mode = envoy::FailureMode::kLocal; break;
    }
    o.local_store = local;
    o.instances = config.store.instances;
    return o;
  }

  // SIGHUP: the Envoy files are read again; a bad one is refused and the old ones keep serving.
  void ReloadEnvoy(const Config& current, envoy::RlsHandler& rls, const Logger& log) const {
    auto next = LoadEnvoyConfig(current);
    if (!next.ok()) {
      log.Error(Cat("envoy reload refused, the previous domains keep serving: ",
                    next.status().message()));
      return;
    }
    log.Info(Cat("reloaded ", current.envoy.config, ": ", (*next)->DomainCount(), " domains"));
    rls.SetConfig(std::move(*next));
  }

  void Reload(Config& current, Limiter& limiter, HttpServer& server, Metrics& metrics,
              const Logger& log) const {
    auto next = Load();
    if (!next.ok()) {
      metrics.CountReload(false);
      log.Error(Cat("reload refused, the previous ", current.policies->policies().size(),
                    " policies keep serving: ", next.status().message()));
      return;
    }
    if (Status s = limiter.SetPolicies(next->policies); !s.ok()) {
      metrics.CountReload(false);
      log.Error(Cat("reload refused, the previous policies keep serving: ", s.message()));
      return;
    }
    server.SetForwardAuth(ForwardAuthFrom(next->server));
    if (next->store.url != current.store.url || next->server.http != current.server.http ||
        next->store.timeout != current.store.timeout) {
      log.Warning("reload: store.url, store.timeout and server.http take effect on restart only");
    }
    metrics.CountReload(true);
    log.Info(Cat("reloaded ", config_path_, ": ", next->policies->policies().size(), " policies"));
    current = std::move(next).value();
  }

  std::string config_path_;
  std::string http_;
  std::string store_;
  std::string grpc_;
  std::string envoy_config_;
  bool test_hooks_ = false;
};

}  // namespace

CAUDAL_REGISTER_COMMAND(ServeCommand, "serve",
                        "Serve rate-limit decisions over HTTP (and Envoy's RLS over gRPC)");

}  // namespace caudal::cli

