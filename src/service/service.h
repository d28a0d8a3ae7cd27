// Service: caudal as one object. Built from a Config and the process's clock, it owns the store
// stack (the store, its circuit breaker, readiness probe and local fallback), the engine, the
// HTTP listener, Envoy's rate limit service over gRPC, and their background tasks.
//
//   auto service = Service::Start(std::move(config), {.clock = clock});
//   ReloadResult r = service->Reload(LoadConfigFile(path));  // SIGHUP, a changed file
//   service->Stop();
//
// Start refuses a config it cannot serve: kInvalidArgument for a mistake in it or in a file it
// names (a policy that needs a local store, an Envoy file that does not parse, a certificate
// that does not load), kUnavailable when a listener cannot bind or the store cannot be opened.
// A remote store that is only unreachable is an outage, not a mistake: the service starts, not
// ready, decides by failure mode and connects in the background.
//
// Reload prepares the whole new config (every file it names read and checked) before anything
// changes: either every live change takes effect, or the reload is refused and the running
// config keeps serving. Fields that a running service cannot change (the listeners' addresses,
// the store) are reported as needing a restart and keep their running values.
//
// Thread-safety: Start, Reload, Stop and config() from one thread (the serve loop); decisions
// are served on the listeners' threads; the other accessors from any thread.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "caudal/common/clock.h"
#include "caudal/common/status.h"
#include "caudal/config/config.h"
#include "caudal/engine/engine.h"
#include "caudal/observe/log.h"
#include "caudal/store/store.h"
#include "observe/metrics.h"

namespace caudal {

struct ServiceEnv {
  // Decision time for the memory store (and every store when stores_use_clock), deadlines and
  // log timestamps. Must outlive the service.
  const Clock& clock;
  // Stores decide at `clock`'s time rather than their own (Redis's TIME): for a scripted clock.
  bool stores_use_clock = false;
  // When set, the shared store passes through it once opened (tests wrap it to fail or hold).
  std::function<std::unique_ptr<Store>(std::unique_ptr<Store>)> wrap_store = nullptr;
  // Log lines go here rather than to stderr (tests).
  Logger::Sink log_sink = nullptr;
};

// What a reload did.
struct ReloadResult {
  // Ok when it took effect; otherwise why it was refused (nothing changed).
  Status status;
  // What took effect, by config path ("policies", "logging", "server.auth", ...).
  std::vector<std::string> applied;
  // Fields whose new value differs from the running one but takes effect on restart only.
  std::vector<std::string> restart_only;
  bool ok() const { return status.ok(); }
};

class Service {
 public:
  static Result<std::unique_ptr<Service>> Start(Config config, ServiceEnv env);
  // What Start would refuse in `config` (every file it names read and checked), without
  // opening the store or any listener: `caudal validate`.
  static Status Check(const Config& config);
  // The fields `next` changes against `running` that a running service cannot take: what
  // Reload would report as restart_only.
  static std::vector<std::string> RestartOnlyChanges(const Config& running, const Config& next);

  ~Service();  // Stop()
  Service(const Service&) = delete;
  Service& operator=(const Service&) = delete;

  // Applies `next` (or refuses it, or the error that loading it gave); logged and counted in
  // caudal_config_reloads_total either way.
  ReloadResult Reload(Result<Config> next);

  // Graceful shutdown within server.shutdown_timeout: /readyz and gRPC health turn NOT_SERVING,
  // the listeners close, the requests in flight are answered as the store decides them (those
  // still undecided at the deadline are cut), and what the store holds is given back.
  // Idempotent.
  void Stop();

  uint16_t http_port() const;
  bool http_tls() const;
  HttpIo http_io() const;  // server.http_io, or epoll where io_uring was refused
  // Set when server.grpc is.
  std::optional<uint16_t> grpc_port() const;
  // The config in force: the one started with, or the last reload that took effect.
  const Config& config() const;
  Engine& engine();
  const Metrics& metrics() const;
  const Logger& log() const;

  struct Parts;

 private:
  explicit Service(std::unique_ptr<Parts> parts);
  std::unique_ptr<Parts> parts_;
};

}  // namespace caudal
