#include <atomic>
#include <boost/asio.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <thread>

#include "common/cat.h"
#include "server/http_api.h"
#include "server/http_server_impl.h"
#include "server/response_writer.h"
#include "server/server.h"
#include "server/tls_context.h"
#include "server/uring_server.h"

namespace caudal {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = net::ip::tcp;
using TlsStream = net::ssl::stream<tcp::socket&>;

namespace {
using http_server::Connection;
using http_server::kMaxBufferedBytes;
using http_server::kReadBytes;
using http_server::ResponseFraming;
using http_server::WriteResponse;
}  // namespace

void http_server::StartParser(std::optional<RequestParser>& parser, ParsedRequest& request) {
  parser.emplace(request);
  parser->header_limit(kMaxHeaderBytes);
  parser->body_limit(http_api::kMaxBodyBytes);
  parser->eager(true);
}

http_server::Parsed http_server::ParseBuffered(beast::flat_buffer& buffer, RequestParser& parser,
                                               bool& in_body, beast::error_code& ec) {
  while (buffer.size() > 0 && !parser.is_done()) {
    const size_t used = parser.Put(buffer.data(), ec);
    buffer.consume(used);
    if (ec == http::error::need_more) break;
    if (ec) return Parsed::kError;
    if (used == 0) break;
  }
  ec = {};
  if (parser.is_done()) return Parsed::kRequest;
  if (!parser.is_header_done() || in_body) return Parsed::kNeedMore;
  in_body = true;
  const auto length = parser.content_length();
  if (length && *length > http_api::kMaxBodyBytes) {
    ec = http::error::body_limit;
    return Parsed::kError;
  }
  return Parsed::kBodyStarted;
}

routes::Request http_server::RoutesRequest(const ParsedRequest& request, std::string& forwarded_for,
                                           const IpAddress& peer,
                                           std::span<const std::string> identities) {
  request.JoinFields("X-Forwarded-For", forwarded_for);
  return {.method = request.method(),
          .target = request.target(),
          .body = request.body(),
          .peer = peer,
          .header = [&request](std::string_view name) { return request.Field(name); },
          .header_count = [&request](std::string_view name) { return request.FieldCount(name); },
          .forwarded_for = forwarded_for,
          .identities = identities};
}

HttpServer::Impl::Impl(Deps d, HttpServerOptions o)
    : deps(std::move(d)),
      options(std::move(o)),
      handshake_log(deps.clock, {.interval = std::chrono::minutes(1), .max_keys = 1}) {
  const Micros shortest =
      std::min({options.header_timeout, options.body_timeout, options.idle_timeout});
  tick = std::min<Micros>(shortest, std::max<Micros>(shortest / 2, std::chrono::milliseconds(5)));
}

HttpServer::Impl::~Impl() = default;

void HttpServer::Impl::Decide(const routes::Request& r, routes::Responder& responder) {
  in_flight.fetch_add(1, std::memory_order_relaxed);
  // Held for the call: a reload may swap the options meanwhile.
  const std::shared_ptr<const ForwardAuthOptions> a = auth.load(std::memory_order_acquire);
  routes::Context ctx{.engine = deps.engine,
                      .metrics = deps.metrics,
                      .health = deps.health,
                      .refusals = deps.refusals,
                      .status = deps.status,
                      .auth = *a,
                      .admin = deps.admin,
                      .idempotency = deps.idempotency,
                      .draining = draining.load(std::memory_order_acquire)};
  routes::Dispatch(ctx, r, responder);
}

void HttpServer::Impl::HandshakeFailed(const IpAddress& peer, const beast::error_code& ec) {
  if (auto suppressed = handshake_log.Admit("tls")) {
    deps.log.Warning(Cat("TLS handshake with ", peer.ToString(), " failed: ", ec.message(),
                         " (logged once a minute at most",
                         *suppressed > 0 ? Cat("; ", *suppressed, " more since") : "", ')'));
  }
  deps.metrics.CountTlsHandshakeFailure(server_tls::HandshakeFailure(ec));
}

bool HttpServer::Impl::EndDecision() {
  const bool d = draining.load(std::memory_order_acquire);
  if (in_flight.fetch_sub(1, std::memory_order_acq_rel) == 1 && d) {
    std::lock_guard lock(drain_mu);
    drained.notify_all();
  }
  return d;
}

namespace {

// One connection: reads one request at a time, answers it, and loops while keep-alive.
//
// Timeouts cost nothing per request: each phase (header, body, write, keep-alive wait) only
// records its deadline (http_server::ConnectionDeadline), and the session's timer, which fires
// every `tick` and at the deadline itself when it falls within one, closes the connection once
// the deadline has passed. A deadline is a total for its phase, so a client that trickles a
// header byte by byte is cut off at header_timeout all the same.
//
// Reading goes straight to async_read_some (an async_wait would re-arm the descriptor with
// epoll_ctl on every request), started a round after the response (see Written). The request
// is parsed into storage the session keeps, and the response is built into one reused buffer
// and written with one call.
class Session final : public std::enable_shared_from_this<Session>, public routes::Responder {
 public:
  // `counted`: the connection counts towards its client's cap (ClientConnections::Admit).
  // `tls`: the listener's TLS context when it terminates TLS (the session keeps it alive).
  Session(tcp::socket socket, HttpServer::Impl& server, IpAddress peer, bool counted,
          std::shared_ptr<net::ssl::context> tls)
      : socket_(std::move(socket)),
        tls_context_(std::move(tls)),
        timer_(socket_.get_executor()),
        server_(server),
        deadline_(server.NewDeadline()),
        peer_(peer),
        counted_(counted) {
    server_.connections.fetch_add(1, std::memory_order_relaxed);
    if (tls_context_ != nullptr) tls_.emplace(socket_, *tls_context_);
  }
  ~Session() {
    if (counted_) server_.clients->Release(peer_);
    server_.connections.fetch_sub(1, std::memory_order_relaxed);
  }

  void Start() {
    beast::error_code ec;
    socket_.non_blocking(true, ec);  // Send() writes directly and must never block
    if (ec) return;                  // dropping the last reference closes the socket
    net::dispatch(socket_.get_executor(), [self = shared_from_this()] {
      self->deadline_.Accepted();  // the first request's header, a TLS handshake included
      self->Tick(self->Now());
      if (self->tls_) return self->Handshake();
      self->NextRequest();
    });
  }

 private:
  Nanos Now() const { return server_.deps.clock.MonotonicCoarse(); }

  void Tick(Nanos now) {
    timer_.expires_after(deadline_.Wait(now, server_.tick));
    timer_.async_wait([self = shared_from_this()](beast::error_code ec) {
      if (ec || self->closed_) return;
      const Nanos at = self->Now();
      if (self->deadline_.Expired(at)) {
        if (self->handshaking_) {
          self->server_.deps.metrics.CountTlsHandshakeFailure(TlsFailure::kTimeout);
        }
        return self->Close();
      }
      self->Tick(at);
    });
  }

  // The handshake counts as part of the first request's header: a client that connects and says
  // nothing is cut at header_timeout from accept, TLS or not.
  void Handshake() {
    handshaking_ = true;
    tls_->async_handshake(
        net::ssl::stream_base::server, [self = shared_from_this()](beast::error_code ec) {
          if (self->closed_) return;  // cut at the deadline (counted there) or stopped
          self->handshaking_ = false;
          if (ec) return self->HandshakeFailed(ec);
          self->identities_ = server_tls::PeerIdentities(self->tls_->native_handle());
          self->NextRequest();
        });
  }

  void HandshakeFailed(beast::error_code ec) {
    server_.HandshakeFailed(peer_, ec);
    Close();
  }

  void NextRequest() {
    http_server::StartParser(parser_, request_);
    in_body_ = false;
    if (!first_) deadline_.AwaitNext();      // the first one's runs from accept
    if (buffer_.size() > 0) return Parse();  // a pipelined request is already here
    Read();
  }

  void Read() {
    if (buffer_.size() >= buffer_.max_size()) return OnReadError(http::error::buffer_overflow);
    const size_t room = std::min(kReadBytes, buffer_.max_size() - buffer_.size());
    auto done = [self = shared_from_this()](beast::error_code ec, size_t n) {
      self->OnRead(ec, n);
    };
    if (tls_) return tls_->async_read_some(buffer_.prepare(room), std::move(done));
    socket_.async_read_some(buffer_.prepare(room), std::move(done));
  }

  void OnRead(beast::error_code ec, size_t n) {
    // A TLS peer that closes without close_notify ends the stream as plain TCP's EOF does.
    if (ec == net::ssl::error::stream_truncated) ec = net::error::eof;
    if (ec == net::error::eof && parser_->got_some()) {
      parser_->put_eof(ec);  // the peer ended mid-request (or a body that runs to EOF)
      if (!ec) return Handle();
      return OnReadError(ec);
    }
    if (ec == net::error::eof) return OnReadError(http::error::end_of_stream);
    if (ec) return OnReadError(ec);
    buffer_.commit(n);
    Parse();
  }

  // Feeds what is buffered to the parser; reads more until the request is complete.
  void Parse() {
    beast::error_code ec;
    switch (http_server::ParseBuffered(buffer_, *parser_, in_body_, ec)) {
      case http_server::Parsed::kRequest:
        return Handle();
      case http_server::Parsed::kError:
        return OnReadError(ec);
      case http_server::Parsed::kBodyStarted:
        deadline_.BodyStarted();
        break;
      case http_server::Parsed::kNeedMore:
        if (buffer_.size() > 0 || parser_->got_some()) deadline_.RequestStarted();
        break;
    }
    Read();
  }

  // Every refusal closes: once framing has failed, where the next request would start is
  // unknown, and bytes after a refused request must never be read as one (RFC 9112 §6.3).
  void OnReadError(beast::error_code ec) {
    if (closed_) return;
    if (auto refusal = http_server::RefusalFor(ec)) {
      return Send(http_api::ErrorReply(*refusal), Connection::kClose);
    }
    Close();
  }

  void Handle() {
    keep_alive_ = parser_->keep_alive();
    framing_ = {.version = request_.version() == 10 ? 10 : 11,
                .head = request_.verb() == http::verb::head};
    const routes::Request r =
        http_server::RoutesRequest(request_, forwarded_for_, peer_, identities_);
    deadline_.Deciding();                  // the store's own deadline bounds the decision
    in_flight_self_ = shared_from_this();  // routes hold the session by reference meanwhile
    server_.Decide(r, *this);
  }

  // The decision's reply, exactly once per request; possibly on a store thread (which may touch
  // in_flight_self_: the I/O thread leaves it alone until Finish).
  void Reply(http_api::Reply reply) override {
    std::shared_ptr<Session> self = std::move(in_flight_self_);
    const auto ex = socket_.get_executor();
    const auto* io = ex.target<net::io_context::executor_type>();
    if (io != nullptr && io->running_in_this_thread()) return Finish(std::move(reply));
    // Back onto this connection's context. The handler alone keeps the session now, so a
    // context destroyed before running it frees the session too.
    net::post(ex, [self = std::move(self), reply = std::move(reply)]() mutable {
      self->Finish(std::move(reply));
    });
  }

  // While draining, the reply closes the connection: its client's next request goes to a server
  // that stays.
  void Finish(http_api::Reply reply) {
    const bool draining = server_.EndDecision();
    Send(std::move(reply), keep_alive_ && !draining ? Connection::kKeepAlive : Connection::kClose);
  }

  // The socket is non-blocking, so the response, small and whole, is first tried with one send()
  // right here: it nearly always fits the socket buffer, which skips a trip through the
  // scheduler. What does not fit is written asynchronously, under the body timeout.
  void Send(const http_api::Reply& reply, Connection connection) {
    if (closed_) return;
    server_.deps.metrics.CountHttpResponse(reply.status);
    framing_.connection = connection;
    WriteResponse(reply, framing_, out_);
    if (tls_) return WriteRest(0);  // TLS records go through the stream, never a raw send()
    beast::error_code ec;
    size_t sent = socket_.write_some(net::buffer(out_), ec);
    if (ec == net::error::would_block || ec == net::error::try_again) {
      sent = 0;
      ec = {};
    }
    if (ec) return Close();
    if (sent == out_.size()) return Written();
    WriteRest(sent);
  }

  void WriteRest(size_t sent) {
    deadline_.Sending();
    auto done = [self = shared_from_this()](beast::error_code e, size_t) {
      if (e) return self->Close();
      self->Written();
    };
    const auto rest = net::buffer(out_.data() + sent, out_.size() - sent);
    if (tls_) return net::async_write(*tls_, rest, std::move(done));
    net::async_write(socket_, rest, std::move(done));
  }

  void Written() {
    if (framing_.connection == Connection::kClose) return Close();
    first_ = false;
    // The next read is started from a fresh handler, queued behind the other connections'
    // completions of this round. Asio tries every read with a recv() first, which right after a
    // response would nearly always find nothing (the client has not answered yet) and cost a
    // wasted syscall; a round later the client's next request is often there already. It also
    // keeps a long pipeline from nesting one request's handling inside the previous one's.
    net::post(socket_.get_executor(), [self = shared_from_this()] { self->NextRequest(); });
  }

  void Close() {
    if (closed_) return;
    closed_ = true;
    beast::error_code ec;
    socket_.shutdown(tcp::socket::shutdown_send, ec);
    socket_.close(ec);
    timer_.cancel();
  }

  tcp::socket socket_;
  const std::shared_ptr<net::ssl::context> tls_context_;  // outlives tls_, which uses it
  std::optional<TlsStream> tls_;  // over socket_, when the listener terminates TLS
  net::steady_timer timer_;
  HttpServer::Impl& server_;
  http_server::ConnectionDeadline deadline_;
  beast::flat_buffer buffer_{kMaxBufferedBytes};
  http_server::ParsedRequest request_;  // reused: its storage outlives each request
  std::optional<http_server::RequestParser> parser_;
  std::string forwarded_for_;
  std::string out_;                          // the response being written
  std::shared_ptr<Session> in_flight_self_;  // from Dispatch to Reply: the routes hold *this
  const IpAddress peer_;
  const bool counted_;
  std::vector<std::string> identities_;  // the verified client certificate's CN and SANs
  ResponseFraming framing_;
  bool first_ = true;
  bool keep_alive_ = true;
  bool in_body_ = false;
  bool closed_ = false;
  bool handshaking_ = false;  // a TLS handshake is under way
};

}  // namespace

void HttpServer::Impl::Accept() {
  net::io_context& target = *contexts[next_context];
  next_context = (next_context + 1) % contexts.size();
  acceptor->async_accept(target, [this](beast::error_code ec, tcp::socket socket) {
    if (draining.load()) return;
    if (ec) return AcceptFailed(ec);
    AcceptSucceeded();
    Admit(std::move(socket));
    Accept();
  });
}

void HttpServer::Impl::AcceptFailed(beast::error_code ec) {
  accept_timer->expires_after(AcceptFailure(ec));
  accept_timer->async_wait([this](beast::error_code) {
    if (!draining.load()) Accept();
  });
}

// Out of descriptors (EMFILE, ENFILE) or similar. The connection stays queued in the backlog and
// a new accept would fail again at once, so the loop pauses, 10 ms doubling up to 1 s, and says
// so once per episode rather than once per attempt.
std::chrono::milliseconds HttpServer::Impl::AcceptFailure(const beast::error_code& ec) {
  using std::chrono::milliseconds;
  if (accept_failures++ == 0) {
    deps.log.Warning(Cat("accept failed: ", ec.message(), " (", ec.value(),
                         "); new connections wait in the backlog, retrying with backoff "
                         "(logged once until an accept succeeds)"));
    accept_pause = milliseconds(10);
  } else {
    accept_pause = std::min<milliseconds>(accept_pause * 2, milliseconds(1000));
  }
  return accept_pause;
}

void HttpServer::Impl::AcceptSucceeded() {
  if (accept_failures == 0) return;
  deps.log.Info(Cat("accepting connections again, after ", accept_failures, " failed accepts"));
  accept_failures = 0;
}

bool HttpServer::Impl::Trusted(const IpAddress& peer) const {
  const std::shared_ptr<const ForwardAuthOptions> a = auth.load(std::memory_order_acquire);
  for (const CidrBlock& b : a->trusted_proxies) {
    if (b.Contains(peer)) return true;
  }
  return false;
}

// Past max_connections, or past its client's share, a new connection is closed at once: the
// clients already in keep their connections, and other clients still get in.
std::optional<bool> HttpServer::Impl::AdmitPeer(const IpAddress& peer) {
  if (connections.load(std::memory_order_relaxed) >= options.max_connections) {
    if (!cap_logged) {
      deps.log.Warning(Cat("connection cap (", options.max_connections,
                           ") reached: closing new connections until some end"));
      cap_logged = true;
    }
    return std::nullopt;
  }
  cap_logged = false;
  // Trusted proxies carry every client's connections: only the global cap applies to them.
  if (Trusted(peer)) return false;
  const auto admission = clients->Admit(peer);
  if (admission == http_server::ClientConnections::Admission::kRefusedFirst) {
    deps.log.Warning(Cat("per-client connection cap (", clients->per_client(), ") reached by ",
                         clients->Group(peer).ToString(),
                         ": closing its new connections (logged once until it holds none)"));
  }
  if (admission != http_server::ClientConnections::Admission::kAdmitted) return std::nullopt;
  return true;
}

void HttpServer::Impl::Admit(tcp::socket socket) {
  beast::error_code ec;
  const auto ep = socket.remote_endpoint(ec);
  const auto peer = ec ? Result<IpAddress>(Status::InvalidArgument("no peer"))
                       : IpAddress::Parse(ep.address().to_string());
  const std::optional<bool> counted = peer.ok() ? AdmitPeer(*peer) : std::nullopt;
  if (!counted) {  // refused, or already gone
    socket.close(ec);
    return;
  }
  socket.set_option(tcp::no_delay(true), ec);
  std::make_shared<Session>(std::move(socket), *this, *peer, *counted,
                            tls.load(std::memory_order_acquire))
      ->Start();
}

HttpServer::HttpServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

HttpServer::~HttpServer() { Stop(); }

Result<std::unique_ptr<HttpServer>> HttpServer::Start(Deps deps, HttpServerOptions options,
                                                      ForwardAuthOptions auth,
                                                      std::shared_ptr<net::ssl::context> tls) {
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
  auto impl = std::make_unique<Impl>(std::move(deps), options);
  impl->clients = std::make_unique<http_server::ClientConnections>(
      options.max_connections_per_client, options.client_prefix);
  impl->auth.store(std::make_shared<const ForwardAuthOptions>(std::move(auth)));
  impl->tls.store(std::move(tls));
  int64_t n = options.threads > 0 ? options.threads
                                  : static_cast<int64_t>(std::thread::hardware_concurrency());
  if (n < 1) n = 1;
  for (int64_t i = 0; i < n; ++i) impl->contexts.push_back(std::make_unique<net::io_context>(1));
  impl->acceptor = std::make_unique<tcp::acceptor>(*impl->contexts[0]);
  impl->accept_timer = std::make_unique<net::steady_timer>(*impl->contexts[0]);
  beast::error_code ec;
  const std::string host = options.host == "localhost" ? "127.0.0.1" : options.host;
  const auto address = net::ip::make_address(host, ec);
  if (ec) return Status::InvalidArgument(Cat("http: bad address ", Quoted(options.host)));
  const tcp::endpoint ep(address, options.port);
  tcp::acceptor& acceptor = *impl->acceptor;
  acceptor.open(ep.protocol(), ec);
  if (!ec) acceptor.set_option(net::socket_base::reuse_address(true), ec);
  if (!ec) acceptor.bind(ep, ec);
  if (!ec) acceptor.listen(net::socket_base::max_listen_connections, ec);
  if (ec) {
    return Status::Unavailable(
        Cat("cannot listen on ", host, ':', options.port, ": ", ec.message()));
  }
  if (options.io == HttpIo::kIoUring) {
    auto uring =
        http_server::UringServer::Start(*impl, acceptor.native_handle(), static_cast<int>(n));
    if (uring.ok()) {
      impl->uring = std::move(*uring);
      impl->io = HttpIo::kIoUring;
      return std::unique_ptr<HttpServer>(new HttpServer(std::move(impl)));
    }
    impl->deps.log.Warning(Cat("server.http_io: io_uring refused (", uring.status().message(),
                               "): HTTP runs on epoll"));
  }
  impl->Accept();
  for (auto& io : impl->contexts) {
    impl->threads.emplace_back([io = io.get()] {
      auto work = net::make_work_guard(*io);  // idle contexts keep running until Stop()
      io->run();
    });
  }
  return std::unique_ptr<HttpServer>(new HttpServer(std::move(impl)));
}

const HttpServerOptions& HttpServer::options() const { return impl_->options; }

uint16_t HttpServer::port() const {
  beast::error_code ec;
  return impl_->acceptor->local_endpoint(ec).port();
}

void HttpServer::SetForwardAuth(ForwardAuthOptions auth) {
  impl_->auth.store(std::make_shared<const ForwardAuthOptions>(std::move(auth)));
}

bool HttpServer::tls() const { return impl_->tls.load() != nullptr; }

void HttpServer::SetTls(std::shared_ptr<net::ssl::context> tls) {
  if (tls == nullptr || impl_->tls.load() == nullptr) return;
  impl_->tls.store(std::move(tls), std::memory_order_release);
}

HttpIo HttpServer::io() const { return impl_->io; }

void HttpServer::StopAccepting() {
  if (impl_->draining.exchange(true)) return;
  if (impl_->uring != nullptr) return impl_->uring->StopAccepting();
  // Closed on its own thread, and waited for: once this returns, nothing listens on the port
  // (a close merely posted could be dropped by the contexts' stop in Stop()).
  std::promise<void> closed;
  net::post(impl_->acceptor->get_executor(), [this, &closed] {
    beast::error_code ec;
    impl_->accept_timer->cancel();
    impl_->acceptor->close(ec);
    closed.set_value();
  });
  closed.get_future().wait();
}

void HttpServer::Stop() { Stop(impl_->deps.clock.Monotonic() + impl_->options.shutdown_timeout); }

void HttpServer::Stop(Nanos deadline) {
  if (impl_->stopped.exchange(true)) return;
  StopAccepting();
  // Decisions still at the store hold sessions bound to this io_context: let them land first.
  {
    const Clock& clock = impl_->deps.clock;
    std::unique_lock lock(impl_->drain_mu);
    clock.WaitUntil(impl_->drained, lock, deadline,
                    [this] { return impl_->in_flight.load(std::memory_order_acquire) == 0; });
  }
  if (impl_->uring != nullptr) impl_->uring->Stop();
  for (auto& io : impl_->contexts) io->stop();
  for (std::thread& t : impl_->threads) t.join();
  impl_->threads.clear();
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
