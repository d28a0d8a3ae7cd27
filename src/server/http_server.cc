#include <algorithm>
#include <atomic>
#include <boost/asio/ssl/context.hpp>
#include <thread>

#include "common/cat.h"
#include "server/epoll_transport.h"
#include "server/listen_socket.h"
#include "server/server.h"
#include "server/server_core.h"
#include "server/transport.h"
#include "server/uring_transport.h"

namespace caudal {

// The core, and the transport serving it: declared after the core, so that it goes first (its
// connections hold the core).
struct HttpServer::Impl {
  std::unique_ptr<http_server::ServerCore> core;
  std::unique_ptr<http_server::Transport> transport;
  HttpIo io = HttpIo::kEpoll;  // in force
  uint16_t port = 0;
  std::atomic<bool> stopped{false};
};

HttpServer::HttpServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

HttpServer::~HttpServer() { Stop(); }

Result<std::unique_ptr<HttpServer>> HttpServer::Start(
    Deps deps, HttpServerOptions options, ForwardAuthOptions auth,
    std::shared_ptr<boost::asio::ssl::context> tls) {
  // Every connection is a descriptor: past the limit, accept() fails with EMFILE before the
  // connection cap ever applies.
  const http_server::FileLimit files = http_server::RaiseFileLimit();
  const int64_t open = http_server::OpenDescriptors();
  const int64_t budget = http_server::ConnectionBudget(options.max_connections, files.soft, open);
  if (budget < options.max_connections) {
    deps.log.Warning(Cat("max_connections lowered from ", options.max_connections, " to ", budget,
                         ": the file-descriptor limit is ", files.soft, " (hard ", files.hard,
                         "), with ", open, " open and ", http_server::kReservedDescriptors,
                         " kept for the store and gRPC; raise it (ulimit -n, LimitNOFILE=)"));
    options.max_connections = budget;
  }
  if (options.max_connections_per_client <= 0) {
    options.max_connections_per_client = std::max<int64_t>(1, options.max_connections / 4);
  }
  auto listener = http_server::ListenSocket::Open(options.host, options.port);
  if (!listener.ok()) return listener.status();
  int64_t n = options.threads > 0 ? options.threads
                                  : static_cast<int64_t>(std::thread::hardware_concurrency());
  if (n < 1) n = 1;
  auto impl = std::make_unique<Impl>();
  impl->port = listener->port();
  impl->core = std::make_unique<http_server::ServerCore>(std::move(deps), options, std::move(auth),
                                                         std::move(tls));
  if (options.io == HttpIo::kIoUring) {
    auto uring = http_server::StartUring(*impl->core, *listener, static_cast<int>(n));
    if (uring.ok()) {
      impl->transport = std::move(*uring);
      impl->io = HttpIo::kIoUring;
      return std::unique_ptr<HttpServer>(new HttpServer(std::move(impl)));
    }
    impl->core->deps().log.Warning(Cat("server.http_io: io_uring refused (",
                                       uring.status().message(), "): HTTP runs on epoll"));
  }
  auto epoll = http_server::StartEpoll(*impl->core, std::move(*listener), static_cast<int>(n));
  if (!epoll.ok()) return epoll.status();
  impl->transport = std::move(*epoll);
  return std::unique_ptr<HttpServer>(new HttpServer(std::move(impl)));
}

const HttpServerOptions& HttpServer::options() const { return impl_->core->options(); }

uint16_t HttpServer::port() const { return impl_->port; }

void HttpServer::SetForwardAuth(ForwardAuthOptions auth) {
  impl_->core->SetForwardAuth(std::move(auth));
}

bool HttpServer::tls() const { return impl_->core->tls() != nullptr; }

void HttpServer::SetTls(std::shared_ptr<boost::asio::ssl::context> tls) {
  impl_->core->SetTls(std::move(tls));
}

HttpIo HttpServer::io() const { return impl_->io; }

void HttpServer::StopAccepting() {
  if (impl_->core->BeginDraining()) impl_->transport->StopAccepting();
}

void HttpServer::Stop() {
  Stop(impl_->core->deps().clock.Monotonic() + impl_->core->options().shutdown_timeout);
}

void HttpServer::Stop(Nanos deadline) {
  if (impl_->stopped.exchange(true)) return;
  StopAccepting();
  // Decisions still at the store hold connections of the transport: let them land first.
  impl_->core->WaitDrained(deadline);
  impl_->transport->Stop();
}

HttpServerOptions ServerOptionsFrom(const ServerConfig& c) {
  auto hp = ParseHostPort(c.http);
  HttpServerOptions o;
  if (hp.ok()) {
    o.host = hp->first;
    o.port = hp->second;
  }
  o.max_connections = c.max_connections;
  o.max_connections_per_client = c.max_connections_per_client;
  o.client_prefix = c.client_prefix;
  o.header_timeout = c.header_timeout;
  o.body_timeout = c.body_timeout;
  o.idle_timeout = c.idle_timeout;
  o.threads = c.threads;
  o.io = c.http_io;
  o.shutdown_timeout = c.shutdown_timeout;
  return o;
}

ForwardAuthOptions ForwardAuthFrom(const ServerConfig& c) {
  return {
      .trusted_proxies = c.trusted_proxies,
      .descriptor_headers = c.descriptor_headers,
      .caller = CallerAuthFrom(c.auth),
      .admin_token = c.admin.token,
      .idempotency = {.window = c.idempotency.window, .in_progress = c.idempotency.in_progress}};
}

CallerAuth CallerAuthFrom(const CallerAuthConfig& c) {
  return {.token = c.token, .allowed = c.allowed_clients, .protect_metrics = c.protect_metrics};
}

}  // namespace caudal
