// HttpServer: caudal's HTTP/1.1 API (Boost.Beast's parser) over the Engine, on epoll (Asio) or
// io_uring.
//
// What it serves is the route table, kRoutes in src/server/routes.cc (docs/http-api.md).
//
// Every connection is bounded: the whole request header must arrive within header_timeout
// of the accept (a TLS handshake included), or of its first byte on keep-alive (a slow-drip
// client is cut off however it paces its bytes), the body within body_timeout, the next
// keep-alive request's first byte within idle_timeout; headers are capped at 16 KiB, bodies at 64
// KiB (413); past max_connections new connections are closed at once, and so are a client's past
// max_connections_per_client (a client: its address under client_prefix; trusted proxies are
// exempt), so that one client holding connections cannot lock the others out. Start() raises the
// soft file-descriptor limit to the hard one and lowers max_connections to what it leaves.
//
// Thread-safety: Start() runs `threads` I/O threads; SetForwardAuth() may be called from any
// thread (a config reload) and takes effect for the next request.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "caudal/common/clock.h"
#include "caudal/config/config.h"
#include "caudal/engine/engine.h"
#include "caudal/observe/log.h"
#include "common/caller_auth.h"
#include "decorators/store_health.h"
#include "engine/idempotency.h"
#include "observe/metrics.h"
#include "observe/refusals.h"
#include "server/status_page.h"

namespace boost::asio::ssl {
class context;
}

namespace caudal {

class Admin;  // admin/admin.h

struct HttpServerOptions {
  std::string host = "127.0.0.1";
  uint16_t port = 8080;                    // 0: any free port (see HttpServer::port())
  int64_t max_connections = 10'000;        // lowered to what the descriptor limit leaves
  int64_t max_connections_per_client = 0;  // 0: a quarter of max_connections
  IpPrefix client_prefix{.v4 = 32, .v6 = 64};
  Micros header_timeout = std::chrono::seconds(10);
  Micros body_timeout = std::chrono::seconds(10);
  Micros idle_timeout = std::chrono::seconds(60);
  int64_t threads = 0;  // 0: one per core
  // kIoUring: one io_uring per I/O thread (server/uring_transport.h); epoll, with a warning, where
  // the kernel refuses a ring. io() says which is in force.
  HttpIo io = HttpIo::kIoUring;
  // Stop(): how long decisions in flight have to finish.
  Micros shutdown_timeout = std::chrono::seconds(10);
};

// The part of the server's behaviour a config reload may change.
struct ForwardAuthOptions {
  std::vector<CidrBlock> trusted_proxies;
  std::vector<HeaderDescriptor> descriptor_headers;
  CallerAuth caller{};  // who may call /v1/check and /v1/auth (and /metrics, if protected)
  // The admin API's bearer token (/v1/admin/, see docs/http-api.md); empty: the API is 404.
  std::string admin_token;
  IdempotencyOptions idempotency{};
};

class HttpServer {
 public:
  struct Deps {
    Engine& engine;
    Metrics& metrics;
    const Logger& log;
    const StoreHealth& health;           // /readyz reads it; never waits on the store
    const Refusals* refusals = nullptr;  // GET /v1/top-refused; null: 404
    StatusPage* status = nullptr;        // GET /, /v1/status; null: 404
    Admin* admin = nullptr;              // /v1/admin/ (with ForwardAuthOptions::admin_token)
    // Idempotency-Key's decisions (server/idempotency.h); null: the field is ignored (and
    // nothing replayed).
    const Idempotency* idempotency = nullptr;
    // Connection deadlines read its MonotonicCoarse(); tests give a manual clock.
    const Clock& clock;
  };

  // Binds and starts serving; over TLS when `tls` is given (server_tls::MakeServerContext).
  // kUnavailable when the address cannot be bound.
  static Result<std::unique_ptr<HttpServer>> Start(
      Deps deps, HttpServerOptions options, ForwardAuthOptions auth,
      std::shared_ptr<boost::asio::ssl::context> tls = nullptr);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  uint16_t port() const;
  // The options in force: max_connections as lowered, max_connections_per_client resolved.
  const HttpServerOptions& options() const;
  void SetForwardAuth(ForwardAuthOptions auth);
  // Whether the listener terminates TLS (fixed at Start).
  bool tls() const;
  // The I/O in force: options.io, or kEpoll where io_uring was asked for and refused.
  HttpIo io() const;
  // New connections handshake with `tls` (a reloaded certificate); open ones keep theirs. Ignored
  // on a plaintext listener: turning TLS on or off takes a restart.
  void SetTls(std::shared_ptr<boost::asio::ssl::context> tls);
  // Readiness off (/readyz answers 503 "shutting down"), the listener closed (once it returns,
  // nothing listens on the port), and from then on each reply closes its connection, so that
  // keep-alive clients go elsewhere. Idempotent.
  void StopAccepting();
  // StopAccepting(), then answers the decisions in flight as they land until `deadline` (on the
  // clock's Monotonic()), then stops the I/O threads: a connection still open then is closed
  // unanswered. Idempotent.
  void Stop(Nanos deadline);
  // Stop(options.shutdown_timeout from now).
  void Stop();

  struct Impl;

 private:
  explicit HttpServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Server options from a config's server section (host:port parsed; the config is valid).
HttpServerOptions ServerOptionsFrom(const ServerConfig& c);
ForwardAuthOptions ForwardAuthFrom(const ServerConfig& c);
CallerAuth CallerAuthFrom(const CallerAuthConfig& c);

}  // namespace caudal
