// ServerCore: what HttpServer does whatever moves its bytes, once for both transports (the epoll
// one, epoll_transport.h, and the io_uring one, uring_transport.h): which connections may stay
// (the global and per-client caps), their deadlines' timeouts, the pause after a failed accept,
// what a parsed request is routed with (the routes' context, counted in flight), the drain, the
// TLS context new connections take, and the log lines and counters of all that. A transport only
// does I/O: it accepts, reads, parses with the helpers below, hands each request to Decide(), and
// sends the reply.
//
// Thread-safety: the accepting thread alone calls AdmitPeer, AcceptFailure and AcceptSucceeded;
// everything else is safe from any thread (the options in force are swapped whole, the counters
// are atomics).
#pragma once

#include <atomic>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/system/error_code.hpp>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>

#include "observe/log_throttle.h"
#include "server/connection_limits.h"
#include "server/request_parser.h"
#include "server/routes.h"
#include "server/server.h"

namespace caudal::http_server {

inline constexpr size_t kMaxHeaderBytes = 16 * 1024;
// Per read: far above a typical request, so a read that fills less says the socket is drained.
inline constexpr size_t kReadBytes = 16 * 1024;
// A connection's read buffer holds at most one request whole, and the start of the next.
inline constexpr size_t kMaxBufferedBytes = kMaxHeaderBytes + http_api::kMaxBodyBytes + 4096;

// A fresh parser for the next request on a connection, with the server's limits.
void StartParser(std::optional<RequestParser>& parser, ParsedRequest& request);

// What the bytes buffered so far make of the request being parsed (they are consumed as parsed).
enum class Parsed : uint8_t {
  kRequest,   // complete: route it
  kNeedMore,  // read more
  kError,     // `ec` says why (RefusalFor answers it, or the connection just closes)
};
// Also moves the connection's `deadline` on as the request's parts arrive: its first byte starts
// the header's, the header's end the body's. `in_body`: the header is done (this request's body's
// deadline runs).
Parsed ParseBuffered(boost::beast::flat_buffer& buffer, RequestParser& parser, bool& in_body,
                     ConnectionDeadline& deadline, boost::system::error_code& ec);

// The routes' view of a parsed request from `peer`; its X-Forwarded-For fields are joined into
// `forwarded_for`. Borrows `request` and `forwarded_for`, which must outlive it.
routes::Request RoutesRequest(const ParsedRequest& request, std::string& forwarded_for,
                              const IpAddress& peer, std::span<const std::string> identities);

class ServerCore;

// A connection ServerCore::Admit let in: it counts towards the caps until this is destroyed.
class AdmittedPeer {
 public:
  AdmittedPeer(AdmittedPeer&& other) noexcept;
  AdmittedPeer& operator=(AdmittedPeer&&) = delete;
  ~AdmittedPeer();

  const IpAddress& address() const { return address_; }

 private:
  friend class ServerCore;
  AdmittedPeer(ServerCore& core, IpAddress address, bool counted);

  ServerCore* core_;  // null once moved from
  IpAddress address_;
  bool counted_;  // towards its client's share (trusted proxies are not)
};

class ServerCore {
 public:
  // `options` as in force: max_connections lowered to the descriptors, the per-client cap
  // resolved (≥ 1). `tls` null: plaintext.
  ServerCore(HttpServer::Deps deps, HttpServerOptions options, ForwardAuthOptions auth,
             std::shared_ptr<boost::asio::ssl::context> tls);
  ServerCore(const ServerCore&) = delete;
  ServerCore& operator=(const ServerCore&) = delete;

  const HttpServer::Deps& deps() const { return deps_; }  // as HttpServer::Start was given
  const Logger& log() const { return deps_.log; }
  // What connection deadlines are read against: the clock's MonotonicCoarse().
  Nanos Now() const { return deps_.clock.MonotonicCoarse(); }
  const HttpServerOptions& options() const { return options_; }
  // How often deadlines are looked at (ConnectionDeadline::Wait, DeadlineSweep): half the
  // shortest timeout, at least 5 ms, at most the shortest.
  Nanos tick() const { return tick_; }
  // A new connection's deadline, with the server's timeouts. Deadlines read the clock's
  // MonotonicCoarse(): a few ms behind at most, and several times cheaper, which counts at two
  // readings per request.
  ConnectionDeadline NewDeadline() const {
    return {deps_.clock,
            {.header = options_.header_timeout,
             .body = options_.body_timeout,
             .idle = options_.idle_timeout}};
  }

  // Take effect for the next request (auth) or the next connection (tls, ignored on a plaintext
  // listener: turning TLS on or off takes a restart).
  void SetForwardAuth(ForwardAuthOptions auth);
  void SetTls(std::shared_ptr<boost::asio::ssl::context> tls);
  // What a new connection handshakes with; null: plaintext.
  std::shared_ptr<boost::asio::ssl::context> tls() const {
    return tls_.load(std::memory_order_acquire);
  }

  // Whether a new connection from `peer` may stay: nullopt when the global cap or its client's
  // share is reached (said once per episode in the log). On the accepting thread.
  std::optional<AdmittedPeer> AdmitPeer(const IpAddress& peer);
  // The backoff after a failed accept: the pause before the next (10 ms doubling up to 1 s),
  // logged once per episode. AcceptSucceeded() ends an episode. On the accepting thread.
  std::chrono::milliseconds AcceptFailure(const boost::system::error_code& ec);
  void AcceptSucceeded();
  // A TLS handshake with `peer` failed with `ec`: logged once a minute at most, then counted by
  // reason (so that whoever sees the count sees the line, or its being held back, done).
  void HandshakeFailed(const IpAddress& peer, const boost::system::error_code& ec);
  // A TLS handshake cut at its deadline: counted, not logged (the pace is the client's).
  void HandshakeTimedOut() { deps_.metrics.CountTlsHandshakeFailure(TlsFailure::kTimeout); }
  // A response is being sent: counted by status.
  void Responding(int status) { deps_.metrics.CountHttpResponse(status); }

  // Routes a parsed request, counted in flight until EndDecision(); `responder` gets its reply
  // exactly once, inline or on a store thread. EndDecision returns whether the server is
  // draining: then the reply closes its connection.
  void Decide(const routes::Request& r, routes::Responder& responder);
  bool EndDecision();

  // Readiness off and replies closing their connections from now on; true the first time.
  bool BeginDraining() { return !draining_.exchange(true); }
  bool draining() const { return draining_.load(std::memory_order_acquire); }
  // Until no decision is in flight, or `deadline` (on the clock's Monotonic()). Once draining.
  void WaitDrained(Nanos deadline);

 private:
  friend class AdmittedPeer;
  bool Trusted(const IpAddress& peer) const;
  void Release(const IpAddress& peer, bool counted);

  const HttpServer::Deps deps_;
  const HttpServerOptions options_;
  const Nanos tick_;
  std::atomic<std::shared_ptr<const ForwardAuthOptions>> auth_;
  std::atomic<std::shared_ptr<boost::asio::ssl::context>> tls_;  // fixed null when plaintext
  // Failed TLS handshakes are logged once a minute at most, with the count since the last line.
  LogThrottle handshake_log_;
  ClientConnections clients_;  // connections per client
  std::atomic<int64_t> connections_{0};
  std::atomic<int64_t> in_flight_{0};
  std::atomic<bool> draining_{false};
  // WaitDrained() waits on `drained_` for in_flight_ to reach 0; EndDecision notifies it once
  // draining.
  std::mutex drain_mu_;
  std::condition_variable drained_;
  // Only touched by the accepting thread, which never runs concurrently with itself:
  bool cap_logged_ = false;
  int64_t accept_failures_ = 0;  // in a row: an episode of accept() failing (EMFILE, ...)
  std::chrono::milliseconds accept_pause_{0};
};

}  // namespace caudal::http_server
