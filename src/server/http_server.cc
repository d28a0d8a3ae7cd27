#include "caudal/server.h"

#include <atomic>
#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <thread>

#include "limiter/cat.h"
#include "server/http_api.h"
#include "server/routes.h"

namespace caudal {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = net::ip::tcp;

namespace {
constexpr size_t kMaxHeaderBytes = 16 * 1024;
using Strand = net::strand<net::io_context::executor_type>;
std::string_view Sv(beast::string_view s) { return {s.data(), s.size()}; }
}  // namespace

struct HttpServer::Impl {
  Deps deps;
  HttpServerOptions options;
  std::atomic<std::shared_ptr<const ForwardAuthOptions>> auth;
  std::atomic<int64_t> connections{0};
  std::atomic<int64_t> in_flight{0};
  std::atomic<bool> stopped{false};
  bool cap_logged = false;  // only touched by the accept loop, which never runs concurrently
  // Declared last so they go first: sessions still queued in `ioc` die before the counters.
  net::io_context ioc;
  tcp::acceptor acceptor{ioc};
  std::vector<std::thread> threads;

  Impl(Deps d, HttpServerOptions o) : deps(std::move(d)), options(std::move(o)) {}
  void Accept();
};

namespace {

// One connection: reads one request at a time, answers it, and loops while keep-alive.
class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(tcp::socket socket, HttpServer::Impl& server)
      : stream_(std::move(socket)), server_(server) {
    server_.connections.fetch_add(1, std::memory_order_relaxed);
    beast::error_code ec;
    const auto ep = stream_.socket().remote_endpoint(ec);
    if (!ec) {
      auto a = IpAddress::Parse(ep.address().to_string());
      if (a.ok()) peer_ = *a;
    }
  }
  ~Session() { server_.connections.fetch_sub(1, std::memory_order_relaxed); }

  void Start() {
    net::dispatch(stream_.get_executor(), [self = shared_from_this()] { self->ReadHeader(); });
  }

 private:
  void ReadHeader() {
    parser_.emplace();
    parser_->header_limit(kMaxHeaderBytes);
    parser_->body_limit(http_api::kMaxBodyBytes);
    stream_.expires_after(first_ ? server_.options.header_timeout : server_.options.idle_timeout);
    http::async_read_header(stream_, buffer_, *parser_,
                            [self = shared_from_this()](beast::error_code ec, size_t) {
                              self->OnHeader(ec);
                            });
  }

  void OnHeader(beast::error_code ec) {
    if (ec) return OnReadError(ec);
    if (parser_->is_done()) return Handle();
    const auto length = parser_->content_length();
    if (length && *length > http_api::kMaxBodyBytes) return TooLarge();
    stream_.expires_after(server_.options.body_timeout);
    http::async_read(stream_, buffer_, *parser_,
                     [self = shared_from_this()](beast::error_code e, size_t) {
                       if (e) return self->OnReadError(e);
                       self->Handle();
                     });
  }

  void OnReadError(beast::error_code ec) {
    if (ec == http::error::body_limit) return TooLarge();
    if (ec == http::error::header_limit) {
      return Send(http_api::ErrorReply({.status = 431, .code = "header_too_large",
                                        .message = "request header: larger than 16 KiB"}),
                  /*close=*/true);
    }
    if (ec == http::error::end_of_stream || ec == beast::error::timeout ||
        ec == net::error::connection_reset || ec == net::error::eof) {
      return Close();
    }
    if (ec.category() == http::make_error_code(http::error::bad_method).category()) {
      return Send(http_api::ErrorReply({.status = 400, .code = "bad_request",
                                        .message = Cat("request: malformed HTTP (", ec.message(),
                                                       ')')}),
                  /*close=*/true);
    }
    Close();
  }

  void TooLarge() {
    Send(http_api::ErrorReply({.status = 413, .code = "body_too_large",
                               .message = "body: larger than 64 KiB"}),
         /*close=*/true);
  }

  void Handle() {
    const auto& req = parser_->get();
    keep_alive_ = req.keep_alive();
    routes::Request r{.method = Sv(req.method_string()),
                      .target = Sv(req.target()),
                      .body = req.body(),
                      .peer = peer_,
                      .header = [&req](std::string_view name) -> std::string_view {
                        auto it = req.find(name);
                        return it == req.end() ? std::string_view() : Sv(it->value());
                      },
                      .forwarded_for = ForwardedFor(req)};
    server_.in_flight.fetch_add(1, std::memory_order_relaxed);
    routes::Context ctx{.limiter = server_.deps.limiter,
                        .metrics = server_.deps.metrics,
                        .auth = *server_.auth.load(std::memory_order_acquire),
                        .debug = server_.deps.debug};
    routes::Dispatch(ctx, r, [self = shared_from_this()](http_api::Reply reply) {
      // Decisions may complete on a store thread: get back onto this connection's strand.
      auto ex = self->stream_.get_executor();
      const Strand* strand = ex.target<Strand>();
      if (strand != nullptr && strand->running_in_this_thread()) {
        self->Finish(std::move(reply));
      } else {
        net::post(ex, [self, reply = std::move(reply)]() mutable { self->Finish(std::move(reply)); });
      }
    });
  }

  static std::string ForwardedFor(const http::request<http::string_body>& req) {
    std::string out;
    for (auto [it, end] = req.equal_range("X-Forwarded-For"); it != end; ++it) {
      if (!out.empty()) out += ',';
      out.append(it->value().data(), it->value().size());
    }
    return out;
  }

  void Finish(http_api::Reply reply) {
    server_.in_flight.fetch_sub(1, std::memory_order_relaxed);
    Send(std::move(reply), !keep_alive_);
  }

  void Send(http_api::Reply reply, bool close) {
    server_.deps.metrics.CountHttpResponse(reply.status);
    res_ = {};
    res_.version(11);
    res_.result(static_cast<unsigned>(reply.status));
    for (auto& [name, value] : reply.headers) res_.set(name, value);
    if (!reply.content_type.empty()) res_.set(http::field::content_type, reply.content_type);
    res_.body() = std::move(reply.body);
    res_.keep_alive(!close);
    res_.prepare_payload();
    close_after_write_ = close;
    stream_.expires_after(server_.options.body_timeout);
    http::async_write(stream_, res_, [self = shared_from_this()](beast::error_code ec, size_t) {
      if (ec || self->close_after_write_) return self->Close();
      self->first_ = false;
      self->ReadHeader();
    });
  }

  void Close() {
    beast::error_code ec;
    stream_.socket().shutdown(tcp::socket::shutdown_send, ec);
    stream_.socket().close(ec);
  }

  beast::tcp_stream stream_;
  HttpServer::Impl& server_;
  beast::flat_buffer buffer_{kMaxHeaderBytes + http_api::kMaxBodyBytes + 4096};
  std::optional<http::request_parser<http::string_body>> parser_;
  http::response<http::string_body> res_;
  IpAddress peer_;
  bool first_ = true;
  bool keep_alive_ = true;
  bool close_after_write_ = false;
};

}  // namespace

void HttpServer::Impl::Accept() {
  acceptor.async_accept(net::make_strand(ioc), [this](beast::error_code ec, tcp::socket socket) {
    if (stopped.load()) return;
    if (ec) {
      // Out of descriptors or similar: log, pause briefly so the loop does not spin, go on.
      deps.log.Warning(Cat("accept failed: ", ec.message()));
      auto timer = std::make_shared<net::steady_timer>(ioc, std::chrono::milliseconds(50));
      timer->async_wait([this, timer](beast::error_code) { Accept(); });
      return;
    }
    if (connections.load(std::memory_order_relaxed) >= options.max_connections) {
      if (!cap_logged) {
        deps.log.Warning(Cat("connection cap (", options.max_connections,
                             ") reached: closing new connections until some end"));
        cap_logged = true;
      }
      beast::error_code ignored;
      socket.close(ignored);
    } else {
      cap_logged = false;
      socket.set_option(tcp::no_delay(true), ec);
      std::make_shared<Session>(std::move(socket), *this)->Start();
    }
    Accept();
  });
}

HttpServer::HttpServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

HttpServer::~HttpServer() { Stop(); }

Result<std::unique_ptr<HttpServer>> HttpServer::Start(Deps deps, HttpServerOptions options,
                                                      ForwardAuthOptions auth) {
  auto impl = std::make_unique<Impl>(std::move(deps), options);
  impl->auth.store(std::make_shared<const ForwardAuthOptions>(std::move(auth)));
  beast::error_code ec;
  const std::string host = options.host == "localhost" ? "127.0.0.1" : options.host;
  const auto address = net::ip::make_address(host, ec);
  if (ec) return Status::InvalidArgument(Cat("http: bad address ", Quoted(options.host)));
  const tcp::endpoint ep(address, options.port);
  impl->acceptor.open(ep.protocol(), ec);
  if (!ec) impl->acceptor.set_option(net::socket_base::reuse_address(true), ec);
  if (!ec) impl->acceptor.bind(ep, ec);
  if (!ec) impl->acceptor.listen(net::socket_base::max_listen_connections, ec);
  if (ec) {
    return Status::Unavailable(Cat("cannot listen on ", host, ':', options.port, ": ",
                                   ec.message()));
  }
  impl->Accept();
  int64_t n = options.threads > 0 ? options.threads
                                  : static_cast<int64_t>(std::thread::hardware_concurrency());
  if (n < 1) n = 1;
  for (int64_t i = 0; i < n; ++i) {
    impl->threads.emplace_back([io = &impl->ioc] { io->run(); });
  }
  return std::unique_ptr<HttpServer>(new HttpServer(std::move(impl)));
}

uint16_t HttpServer::port() const {
  beast::error_code ec;
  return impl_->acceptor.local_endpoint(ec).port();
}

void HttpServer::SetForwardAuth(ForwardAuthOptions auth) {
  impl_->auth.store(std::make_shared<const ForwardAuthOptions>(std::move(auth)));
}

void HttpServer::Stop() {
  if (impl_->stopped.exchange(true)) return;
  net::post(impl_->acceptor.get_executor(), [this] {
    beast::error_code ec;
    impl_->acceptor.close(ec);
  });
  // Decisions still at the store hold sessions bound to this io_context: let them land first.
  for (int i = 0; i < 200 && impl_->in_flight.load() > 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  impl_->ioc.stop();
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
  o.header_timeout = c.header_timeout;
  o.body_timeout = c.body_timeout;
  o.idle_timeout = c.idle_timeout;
  o.threads = c.threads;
  return o;
}

ForwardAuthOptions ForwardAuthFrom(const ServerConfig& c) {
  return {.trusted_proxies = c.trusted_proxies, .descriptor_headers = c.descriptor_headers};
}

}  // namespace caudal
