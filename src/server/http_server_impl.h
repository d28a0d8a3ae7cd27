// HttpServer's state, shared by its two transports: the epoll one (Asio, in http_server.cc) and
// the io_uring one (server/uring_server.h). What a connection does with a request once it is
// parsed (admission, the routes' context, the count of decisions in flight) is here, once.
#pragma once

#include <atomic>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "observe/log_throttle.h"
#include "server/connection_limits.h"
#include "server/idempotency.h"
#include "server/request_parser.h"
#include "server/routes.h"
#include "server/server.h"

namespace caudal {

namespace http_server {
class UringServer;  // server/uring_server.h

inline constexpr size_t kMaxHeaderBytes = 16 * 1024;
// Per read: far above a typical request, so a read that fills less says the socket is drained.
inline constexpr size_t kReadBytes = 16 * 1024;
// A connection's read buffer holds at most one request whole, and the start of the next.
inline constexpr size_t kMaxBufferedBytes = kMaxHeaderBytes + http_api::kMaxBodyBytes + 4096;

// A fresh parser for the next request on a connection, with the server's limits.
void StartParser(std::optional<RequestParser>& parser, ParsedRequest& request);

// What the bytes buffered so far make of the request being parsed (they are consumed as parsed).
enum class Parsed : uint8_t {
  kRequest,      // complete: route it
  kNeedMore,     // read more
  kBodyStarted,  // read more: the header is done and its body's deadline starts now
  kError,        // `ec` says why (RefusalFor answers it, or the connection just closes)
};
// `in_body`: the header is done (kBodyStarted was returned for this request).
Parsed ParseBuffered(boost::beast::flat_buffer& buffer, RequestParser& parser, bool& in_body,
                     boost::system::error_code& ec);

// The routes' view of a parsed request from `peer`; its X-Forwarded-For fields are joined into
// `forwarded_for`. Borrows `request` and `forwarded_for`, which must outlive it.
routes::Request RoutesRequest(const ParsedRequest& request, std::string& forwarded_for,
                              const IpAddress& peer, std::span<const std::string> identities);
}  // namespace http_server

// With epoll, one io_context per I/O thread, each run by that thread alone: a connection lives
// on one of them for its whole life, so its handlers never run concurrently and need no strand.
// With io_uring, `uring` holds one ring per thread, on the same terms.
struct HttpServer::Impl {
  Deps deps;
  HttpServerOptions options;
  HttpIo io = HttpIo::kEpoll;  // in force
  // How often deadlines are looked at (ConnectionDeadline, DeadlineSweep): half the shortest
  // timeout, at least 5 ms, at most the shortest.
  Nanos tick;
  std::atomic<std::shared_ptr<const ForwardAuthOptions>> auth;
  // Null: plaintext. New connections take the current one; SetTls() swaps it.
  std::atomic<std::shared_ptr<boost::asio::ssl::context>> tls;
  // Failed TLS handshakes are logged once a minute at most, with the count since the last line.
  LogThrottle handshake_log;
  std::atomic<int64_t> connections{0};
  std::atomic<int64_t> in_flight{0};
  // Set by StopAccepting(): readiness off, replies close their connections.
  std::atomic<bool> draining{false};
  std::atomic<bool> stopped{false};
  // Stop() waits on `drained` for in_flight to reach 0; EndDecision notifies it once draining.
  std::mutex drain_mu;
  std::condition_variable drained;
  std::unique_ptr<http_server::ClientConnections> clients;  // connections per client
  // Only touched by the accepting thread, which never runs concurrently with itself:
  bool cap_logged = false;
  size_t next_context = 0;
  int64_t accept_failures = 0;  // in a row: an episode of accept() failing (EMFILE, ...)
  std::chrono::milliseconds accept_pause{0};
  // Declared last so they go first: sessions still queued in a context die before the counters.
  std::vector<std::unique_ptr<boost::asio::io_context>> contexts;
  std::unique_ptr<boost::asio::ip::tcp::acceptor> acceptor;
  // The pause after a failed accept, made once at start: out of descriptors, nothing new is made.
  std::unique_ptr<boost::asio::steady_timer> accept_timer;
  std::vector<std::thread> threads;
  std::unique_ptr<http_server::UringServer> uring;  // with io kIoUring

  Impl(Deps d, HttpServerOptions o);
  ~Impl();
  void Accept();
  void AcceptFailed(boost::system::error_code ec);
  void Admit(boost::asio::ip::tcp::socket socket);
  bool Trusted(const IpAddress& peer) const;
  // A new connection's deadline, with the server's timeouts. Deadlines read the clock's
  // MonotonicCoarse(): a few ms behind at most, and several times cheaper, which counts at two
  // readings per request.
  http_server::ConnectionDeadline NewDeadline() const {
    return {deps.clock,
            {.header = options.header_timeout,
             .body = options.body_timeout,
             .idle = options.idle_timeout}};
  }

  // Whether a new connection from `peer` may stay: nullopt when the global cap or its client's
  // share is reached (said once per episode in the log); otherwise whether it counts towards its
  // client's share (trusted proxies do not). On the accepting thread.
  std::optional<bool> AdmitPeer(const IpAddress& peer);
  // The backoff after a failed accept: the pause before the next (10 ms doubling up to 1 s),
  // logged once per episode. AcceptSucceeded() ends an episode. On the accepting thread.
  std::chrono::milliseconds AcceptFailure(const boost::system::error_code& ec);
  void AcceptSucceeded();
  // A TLS handshake with `peer` failed with `ec`: logged once a minute at most, then counted by
  // reason (so that whoever sees the count sees the line, or its being held back, done).
  void HandshakeFailed(const IpAddress& peer, const boost::system::error_code& ec);
  // Routes a parsed request, counted in flight until EndDecision(); `responder` gets its reply
  // exactly once, inline or on a store thread. EndDecision returns whether the server is
  // draining: then the reply closes its connection.
  void Decide(const routes::Request& r, routes::Responder& responder);
  bool EndDecision();
};

}  // namespace caudal
