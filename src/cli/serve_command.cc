// `caudal serve`: turns flags, the environment and the config file into a Config and runs a
// Service (see service/service.h) until SIGINT or SIGTERM. SIGHUP, or a change to the config
// file or the Envoy files, reloads: the files are read again and handed to Service::Reload, which
// takes them or refuses them whole. The first SIGINT or SIGTERM stops gracefully, within
// server.shutdown_timeout (Service::Stop); a second one exits at once.
#include <pthread.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <csignal>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "caudal/config/config.h"
#include "cli/command.h"
#include "cli/overrides.h"
#include "cli/stop_guard.h"
#include "common/cat.h"
#include "common/redact.h"
#include "config/file_watcher.h"
#include "service/service.h"

namespace caudal::cli {
namespace {

constexpr std::string_view kServeCommand = "serve";

std::string Bracketed(const std::string& host) {
  return host.find(':') != std::string::npos ? "[" + host + "]" : host;
}

class ServeCommand final : public Command {
 public:
  void AddOptions(CLI::App& app) override {
    app.add_option("--config", config_path_, "the YAML config file")
        ->type_name("FILE")
        ->envname("CAUDAL_CONFIG")
        ->required();
    app.add_option("--http", flags_.http, "listen address, overriding server.http")
        ->type_name("HOST:PORT");
    app.add_option("--http-io", flags_.http_io,
                   "epoll or io_uring: the HTTP listener's I/O, overriding server.http_io")
        ->type_name("IO");
    app.add_option("--store", flags_.store_url, "store URL, overriding store.url")
        ->type_name("URL");
    app.add_option("--grpc", flags_.grpc,
                   "Envoy rate limit service (gRPC) address, overriding server.grpc")
        ->type_name("HOST:PORT");
    app.add_option("--envoy-config", flags_.envoy_config,
                   "envoyproxy/ratelimit YAML file or directory, overriding envoy_config")
        ->type_name("PATH");
    app.add_option("--log-level", flags_.log_level,
                   "debug, info, warning or error, overriding logging.level")
        ->type_name("LEVEL");
    app.add_option("--log-format", flags_.log_format, "text or json, overriding logging.format")
        ->type_name("FORMAT")
        ->envname("CAUDAL_LOG_FORMAT");
  }

  int Run(Env& env) override {
    // Signals are taken synchronously by this thread; block them before any thread starts.
    sigset_t signals;
    sigemptyset(&signals);
    for (int s : {SIGHUP, SIGINT, SIGTERM}) sigaddset(&signals, s);
    pthread_sigmask(SIG_BLOCK, &signals, nullptr);

    auto config = Load();
    if (!config.ok()) return Fail(env, kExitUsage, config.status().message());
    // A change to the config file or the Envoy files reloads as SIGHUP does: the watcher raises
    // SIGHUP, so every reload runs in the loop below, one at a time (a ConfigMap update sends no
    // signal). Watching before anything is built: a change from here on is never missed, and the
    // watcher's descriptors are open before the HTTP server sizes its connection cap.
    std::vector<std::string> watched{config_path_};
    if (!config->envoy.config.empty()) watched.push_back(config->envoy.config);
    auto watcher =
        FileWatcher::Start(watched, [] { ::kill(::getpid(), SIGHUP); }, {.clock = &env.clock});

    auto service = Service::Start(std::move(*config), {.clock = env.clock,
                                                       .stores_use_clock = env.stores_use_clock,
                                                       .wrap_store = env.wrap_store});
    if (!service.ok()) {
      const bool usage = service.status().code() == StatusCode::kInvalidArgument;
      return Fail(env, usage ? kExitUsage : kExitFailure, service.status().message());
    }
    if (!watcher.ok()) {
      (*service)->log().Warning(
          Cat("not watching the config files (reload with SIGHUP): ", watcher.status().message()));
    }
    PrintBanner(env, **service);

    for (;;) {
      int sig = 0;
      if (sigwait(&signals, &sig) != 0) continue;
      if (sig != SIGHUP) break;
      (*service)->Reload(Load());
    }
    if (watcher.ok()) watcher->reset();
    // The drains end at server.shutdown_timeout; a second more is ample to close what is left
    // (the store's connections, the background tasks). The guard's own logger outlives the
    // service's.
    const Config& running = (*service)->config();
    const Logger guard_log(
        LoggerOptions{.level = running.logging.level, .format = running.logging.format}, env.clock);
    const Nanos deadline =
        env.clock.Monotonic() + running.server.shutdown_timeout + std::chrono::seconds(1);
    StopGuard guard(signals, env.clock, deadline, guard_log);
    (*service)->Stop();
    service->reset();
    return kExitOk;
  }

 private:
  // The file, then the environment, then the flags (see overrides.h).
  Result<Config> Load() const {
    auto config = LoadConfigFile(config_path_);
    if (!config.ok()) return config;
    if (Status s = ApplyOverrides(*config, flags_, std::getenv); !s.ok()) return s;
    return config;
  }

  // A start-up failure, in JSON if the flag or else the file (if it can be read) says so.
  int Fail(Env& env, int code, std::string_view message) const {
    auto format = ParseLogFormat(flags_.log_format);
    if (!format.ok()) {
      auto config = LoadConfigFile(config_path_);
      format = config.ok() ? config->logging.format : LogFormat::kText;
    }
    return Failure(env, kServeCommand, code, message, *format);
  }

  // What scripts look for ("listening on http://127.0.0.1:PORT"); in JSON mode, a log line.
  static void PrintBanner(Env& env, Service& service) {
    const Config& config = service.config();
    const Logger& log = service.log();
    const std::string store = RedactUrl(config.store.url);
    const std::string url =
        Cat(service.http_tls() ? "https://" : "http://",
            Bracketed(ParseHostPort(config.server.http)->first), ':', service.http_port());
    const size_t policies = config.policies->policies().size();
    const bool uring = service.http_io() == HttpIo::kIoUring;
    env.out << log.Banner(Cat("caudal serve: listening on ", url, " (store ", store, ", ", policies,
                              " policies", uring ? ", HTTP on io_uring" : "", ')'),
                          {{"url", url},
                           {"store", store},
                           {"policies", policies},
                           {"http_io", std::string(HttpIoName(service.http_io()))}})
            << std::endl;
    if (!service.grpc_port()) return;
    const std::string address =
        Cat(Bracketed(ParseHostPort(config.server.grpc)->first), ':', *service.grpc_port());
    const auto served = service.engine().domains();
    const size_t domains = served == nullptr ? 0 : served->DomainCount();
    std::string what =
        config.envoy.config.empty() ? "" : Cat(domains, " domains from ", config.envoy.config);
    if (!config.rlqs.domains.empty()) {
      what += Cat(what.empty() ? "" : "; ", "quota service (RLQS): ", config.rlqs.domains.size(),
                  " domains");
    }
    env.out << log.Banner(
                   Cat("caudal serve: Envoy rate limit service (gRPC",
                       config.server.tls.enabled() && config.server.tls.grpc ? " over TLS" : "",
                       ") on ", address, " (", what, ")"),
                   {{"grpc", address},
                    {"domains", domains},
                    {"envoy_config", config.envoy.config},
                    {"rlqs_domains", config.rlqs.domains.size()}})
            << std::endl;
  }

  std::string config_path_;
  Overrides flags_;
};

}  // namespace

CAUDAL_REGISTER_COMMAND(ServeCommand, "serve",
                        "Serve rate-limit decisions over HTTP (and Envoy's RLS over gRPC)");

}  // namespace caudal::cli
