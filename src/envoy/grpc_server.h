// RlsGrpcServer: envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit over gRPC, with
// grpc.health.v1.Health beside it, and Envoy's rate limit quota service when given one
// (rlqs_service.h).
//
// A thin transport over RlsHandler using gRPC's callback API: a call is decided as the store
// answers, with no thread held while it waits. Bounded: at most `max_concurrent_calls` in flight
// (more are refused with RESOURCE_EXHAUSTED at once), messages above `max_receive_bytes` are
// refused by gRPC itself (RESOURCE_EXHAUSTED), and requests above the handler's
// max_request_bytes get INVALID_ARGUMENT. Handler errors map to gRPC codes: kInvalidArgument ->
// INVALID_ARGUMENT, kUnavailable -> UNAVAILABLE, kResourceExhausted -> RESOURCE_EXHAUSTED.
// Bytes that are not a RateLimitRequest get INVALID_ARGUMENT saying so (counted by the engine's
// Metrics), and a request whose domain or descriptor entries are not valid UTF-8 gets
// INVALID_ARGUMENT naming the field, before the handler sees it (Envoy's schema says `string`, but
// Envoy forwards header bytes as they came; caudal's copy of the schema reads them as bytes, see
// proto/).
//
// Health (gRPC's health-checking protocol, for Kubernetes' grpc probes and Envoy's gRPC health
// checks): Check, List and Watch on "" and "envoy.service.ratelimit.v3.RateLimitService", both
// SERVING while `ready` says so, NOT_SERVING otherwise and from Shutdown on. Watch streams see a
// change within health_poll_interval, at once after NotifyReadinessChanged().
//
// Callers are checked before anything else when options.caller says so: no credentials or a
// wrong token is UNAUTHENTICATED, a client certificate whose identity is not allowed
// PERMISSION_DENIED (see caller_auth.h).
//
// Thread-safety: Start, port and Shutdown from one thread; calls are served on gRPC's threads.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <string>

#include "caudal/common/clock.h"
#include "caudal/common/status.h"
#include "caudal/config/config.h"
#include "common/caller_auth.h"
#include "envoy/rls_handler.h"

namespace grpc {
class Server;
}

namespace caudal::envoy {

class RlqsService;

namespace internal {
class GrpcTlsFiles;
class HealthService;
}  // namespace internal

struct GrpcServerOptions {
  std::string address = "127.0.0.1:8081";  // host:port; port 0 picks a free one
  // Required (Start refuses none): health's poller waits health_poll_interval on its monotonic
  // time.
  const Clock* clock = nullptr;
  size_t max_concurrent_calls = 10'000;
  size_t max_receive_bytes = 1 << 20;
  // Readiness for the health service: true when the server can decide (the serve command passes
  // the store's readiness, as /readyz reads it). Unset: always ready. It is called on gRPC's
  // threads and on the health poller, so it must not block: return a cached value.
  std::function<bool()> ready = nullptr;
  // How often open Watch streams re-read `ready`.
  std::chrono::milliseconds health_poll_interval{1000};
  // Watch streams open at once; more are refused with RESOURCE_EXHAUSTED.
  size_t max_health_watchers = 100;
  // TLS when tls.enabled() (and tls.grpc), by gRPC's own TLS stack. It reads in-memory copies of
  // the files, which ReloadTls() replaces; gRPC takes them up within tls_refresh. The files
  // should be checked first (server_tls::MakeServerContext): gRPC's own errors say little.
  ServerTlsConfig tls = {};
  std::chrono::seconds tls_refresh{1};
  // Who may call ShouldRateLimit (health stays open): a token in the `authorization` metadata
  // ("Bearer <token>"), or an allowed client certificate identity.
  CallerAuth caller = {};
  // Shutdown(): how long calls in flight have to be answered.
  Micros shutdown_timeout = std::chrono::seconds(10);
  // Envoy's rate limit quota service, served beside RLS when set (its callers checked as RLS's);
  // it must outlive the server. Shutdown() expires and ends its streams first.
  RlqsService* rlqs = nullptr;
};

class RlsGrpcServer {
 public:
  // Listens and serves; kUnavailable when the address cannot be bound. `handler` must outlive
  // the server.
  static Result<std::unique_ptr<RlsGrpcServer>> Start(RlsHandler& handler,
                                                      const GrpcServerOptions& options);
  ~RlsGrpcServer();

  int port() const { return port_; }
  // Tells Watch streams now that `ready` may have changed, rather than at the next poll.
  void NotifyReadinessChanged();
  // Who may call from now on (a reloaded token or allow-list). Any thread.
  void SetCallerAuth(CallerAuth caller);
  // Serves `tls`'s certificate, key and client CAs to new connections from the next refresh on
  // (within tls_refresh); connections already open keep theirs. Check the files first: gRPC
  // stops completing handshakes on a pair that does not load. No-op without TLS; on an error
  // the previous files stay.
  Status ReloadTls(const ServerTlsConfig& tls);
  // Readiness off: health reports NOT_SERVING from now on and the Watch streams are told and
  // ended. Calls are still served. Idempotent.
  void StopServingHealth();
  // StopServingHealth(), then stops accepting calls and answers those in flight until
  // `deadline` (on options.clock's Monotonic()); gRPC cancels any still open then. Idempotent.
  void Shutdown(Nanos deadline);
  // Shutdown(options.shutdown_timeout from now).
  void Shutdown();

  class Service;  // the generated service's implementation, in grpc_server.cc

 private:
  RlsGrpcServer() = default;
  std::unique_ptr<Service> service_;
  std::unique_ptr<internal::HealthService> health_;
  std::unique_ptr<internal::GrpcTlsFiles> tls_files_;  // outlives server_
  std::unique_ptr<grpc::Server> server_;               // last: destroyed before the services
  RlqsService* rlqs_ = nullptr;
  const Clock* clock_ = nullptr;
  Micros shutdown_timeout_{0};
  int port_ = 0;
  bool health_stopped_ = false;
  bool shut_down_ = false;
};

}  // namespace caudal::envoy
