// `caudal serve`: the HTTP service over the configured policies and store.
// SIGHUP reloads the config (a bad file is refused and the old policies keep serving);
// SIGINT / SIGTERM stop it.
#include <csignal>
#include <memory>
#include <optional>
#include <pthread.h>
#include <string>

#include "caudal/config.h"
#include "caudal/limiter.h"
#include "caudal/log.h"
#include "caudal/metrics.h"
#include "caudal/server.h"
#include "caudal/store_factory.h"
#include "cli/command.h"
#include "cli/serve_test_hooks.h"
#include "limiter/cat.h"

namespace caudal::cli {
namespace {

constexpr std::string_view kName = "serve";

class ServeCommand final : public Command {
 public:
  void AddOptions(CLI::App& app) override {
    app.add_option("--config", config_path_, "the YAML config file")
        ->type_name("FILE")
        ->required();
    app.add_option("--http", http_, "listen address, overriding server.http")
        ->type_name("HOST:PORT");
    app.add_option("--store", store_, "store URL, overriding store.url")->type_name("URL");
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
    auto opened = OpenStore(config->store, env.clock, {.test_clock = manual ? &*manual : nullptr});
    if (!opened.ok()) {
      if (opened.status().code() == StatusCode::kInvalidArgument) {
        return UsageError(env, kName, opened.status().message());
      }
      env.err << "caudal serve: cannot open the store: " << opened.status().ToString() << "\n";
      return kExitFailure;
    }
    auto faulty = std::make_unique<FaultInjectingStore>(std::move(opened).value());
    const std::unique_ptr<Store> local = OpenLocalFallback(config->store, *clock);
    Logger log;
    Metrics metrics;
    Limiter limiter(*faulty, *clock, {.local_store = local.get(), .metrics = &metrics, .log = &log});
    if (Status s = limiter.SetPolicies(config->policies); !s.ok()) {
      return UsageError(env, kName, s.message());
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

    for (;;) {
      int sig = 0;
      if (sigwait(&signals, &sig) != 0) continue;
      if (sig != SIGHUP) break;
      Reload(*config, limiter, **server, metrics, log);
    }
    log.Info("stopping");
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
    return config;
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
  bool test_hooks_ = false;
};

}  // namespace

CAUDAL_REGISTER_COMMAND(ServeCommand, "serve", "Serve rate-limit decisions over HTTP");

}  // namespace caudal::cli

