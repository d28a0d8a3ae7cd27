#include "server/epoll_transport.h"

#include <boost/asio.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <future>
#include <thread>
#include <vector>

#include "common/cat.h"
#include "server/http_api.h"
#include "server/response_writer.h"
#include "server/tls_context.h"

namespace caudal::http_server {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = net::ip::tcp;
using TlsStream = net::ssl::stream<tcp::socket&>;

namespace {

// One connection: reads one request at a time, answers it, and loops while keep-alive.
//
// Timeouts cost nothing per request: each phase (header, body, write, keep-alive wait) only
// records its deadline (ConnectionDeadline), and the session's timer, which fires every `tick`
// and at the deadline itself when it falls within one, closes the connection once the deadline
// has passed. A deadline is a total for its phase, so a client that trickles a header byte by
// byte is cut off at header_timeout all the same.
//
// Reading goes straight to async_read_some (an async_wait would re-arm the descriptor with
// epoll_ctl on every request), started a round after the response (see Written). The request
// is parsed into storage the session keeps, and the response is built into one reused buffer
// and written with one call.
class Session final : public std::enable_shared_from_this<Session>, public routes::Responder {
 public:
  // `tls`: the listener's TLS context when it terminates TLS (the session keeps it alive).
  Session(tcp::socket socket, ServerCore& core, AdmittedPeer peer,
          std::shared_ptr<net::ssl::context> tls)
      : socket_(std::move(socket)),
        tls_context_(std::move(tls)),
        timer_(socket_.get_executor()),
        core_(core),
        deadline_(core.NewDeadline()),
        admitted_(std::move(peer)),
        peer_(admitted_.address()) {
    if (tls_context_ != nullptr) tls_.emplace(socket_, *tls_context_);
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
  Nanos Now() const { return core_.Now(); }

  void Tick(Nanos now) {
    timer_.expires_after(deadline_.Wait(now, core_.tick()));
    timer_.async_wait([self = shared_from_this()](beast::error_code ec) {
      if (ec || self->closed_) return;
      const Nanos at = self->Now();
      if (self->deadline_.Expired(at)) {
        if (self->handshaking_) {
          self->core_.HandshakeTimedOut();
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
    core_.HandshakeFailed(peer_, ec);
    Close();
  }

  void NextRequest() {
    StartParser(parser_, request_);
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
    switch (ParseBuffered(buffer_, *parser_, in_body_, deadline_, ec)) {
      case Parsed::kRequest:
        return Handle();
      case Parsed::kError:
        return OnReadError(ec);
      case Parsed::kNeedMore:
        break;
    }
    Read();
  }

  // Every refusal closes: once framing has failed, where the next request would start is
  // unknown, and bytes after a refused request must never be read as one (RFC 9112 §6.3).
  void OnReadError(beast::error_code ec) {
    if (closed_) return;
    if (auto refusal = RefusalFor(ec)) {
      return Send(http_api::ErrorReply(*refusal), Connection::kClose);
    }
    Close();
  }

  void Handle() {
    keep_alive_ = parser_->keep_alive();
    framing_ = {.version = request_.version() == 10 ? 10 : 11,
                .head = request_.verb() == http::verb::head};
    const routes::Request r = RoutesRequest(request_, forwarded_for_, peer_, identities_);
    deadline_.Deciding();                  // the store's own deadline bounds the decision
    in_flight_self_ = shared_from_this();  // routes hold the session by reference meanwhile
    core_.Decide(r, *this);
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
    const bool draining = core_.EndDecision();
    Send(std::move(reply), keep_alive_ && !draining ? Connection::kKeepAlive : Connection::kClose);
  }

  // The socket is non-blocking, so the response, small and whole, is first tried with one send()
  // right here: it nearly always fits the socket buffer, which skips a trip through the
  // scheduler. What does not fit is written asynchronously, under the body timeout.
  void Send(const http_api::Reply& reply, Connection connection) {
    if (closed_) return;
    core_.Responding(reply.status);
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
  ServerCore& core_;
  ConnectionDeadline deadline_;
  beast::flat_buffer buffer_{kMaxBufferedBytes};
  ParsedRequest request_;  // reused: its storage outlives each request
  std::optional<RequestParser> parser_;
  std::string forwarded_for_;
  std::string out_;                          // the response being written
  std::shared_ptr<Session> in_flight_self_;  // from Dispatch to Reply: the routes hold *this
  const AdmittedPeer admitted_;              // counted towards the caps while the session lives
  const IpAddress& peer_;
  std::vector<std::string> identities_;  // the verified client certificate's CN and SANs
  ResponseFraming framing_;
  bool first_ = true;
  bool keep_alive_ = true;
  bool in_body_ = false;
  bool closed_ = false;
  bool handshaking_ = false;  // a TLS handshake is under way
};

class EpollTransport final : public Transport {
 public:
  EpollTransport(ServerCore& core, int threads) : core_(core) {
    for (int i = 0; i < threads; ++i) contexts_.push_back(std::make_unique<net::io_context>(1));
    acceptor_ = std::make_unique<tcp::acceptor>(*contexts_[0]);
    accept_timer_ = std::make_unique<net::steady_timer>(*contexts_[0]);
  }
  ~EpollTransport() override { Stop(); }

  // Takes `listener`, starts accepting and runs the threads.
  Status Start(ListenSocket listener) {
    beast::error_code ec;
    const tcp protocol = listener.family() == IpFamily::kV4 ? tcp::v4() : tcp::v6();
    acceptor_->assign(protocol, listener.fd(), ec);
    if (ec) return Status::Unavailable(Cat("http: cannot serve the listener: ", ec.message()));
    listener.Release();  // the acceptor's now
    Accept();
    for (auto& io : contexts_) {
      threads_.emplace_back([io = io.get()] {
        auto work = net::make_work_guard(*io);  // idle contexts keep running until Stop()
        io->run();
      });
    }
    return Status::Ok();
  }

  void StopAccepting() override {
    // Closed on its own thread, and waited for: once this returns, nothing listens on the port
    // (a close merely posted could be dropped by the contexts' stop in Stop()).
    std::promise<void> closed;
    net::post(acceptor_->get_executor(), [this, &closed] {
      beast::error_code ec;
      accept_timer_->cancel();
      acceptor_->close(ec);
      closed.set_value();
    });
    closed.get_future().wait();
  }

  void Stop() override {
    for (auto& io : contexts_) io->stop();
    for (std::thread& t : threads_) t.join();
    threads_.clear();
  }

 private:
  void Accept();
  void AcceptFailed(beast::error_code ec);
  void Admit(tcp::socket socket);

  ServerCore& core_;
  size_t next_context_ = 0;  // only touched by the accepting thread
  // Declared first so they go last: the acceptor and the timer before their context, and
  // sessions still queued in a context with it.
  std::vector<std::unique_ptr<net::io_context>> contexts_;
  std::unique_ptr<tcp::acceptor> acceptor_;
  // The pause after a failed accept, made once at start: out of descriptors, nothing new is made.
  std::unique_ptr<net::steady_timer> accept_timer_;
  std::vector<std::thread> threads_;
};

void EpollTransport::Accept() {
  net::io_context& target = *contexts_[next_context_];
  next_context_ = (next_context_ + 1) % contexts_.size();
  acceptor_->async_accept(target, [this](beast::error_code ec, tcp::socket socket) {
    if (core_.draining()) return;
    if (ec) return AcceptFailed(ec);
    core_.AcceptSucceeded();
    Admit(std::move(socket));
    Accept();
  });
}

// The connection stays in the backlog: accepting resumes after the core's pause.
void EpollTransport::AcceptFailed(beast::error_code ec) {
  accept_timer_->expires_after(core_.AcceptFailure(ec));
  accept_timer_->async_wait([this](beast::error_code) {
    if (!core_.draining()) Accept();
  });
}

void EpollTransport::Admit(tcp::socket socket) {
  beast::error_code ec;
  const auto ep = socket.remote_endpoint(ec);
  const auto peer = ec ? Result<IpAddress>(Status::InvalidArgument("no peer"))
                       : IpAddress::Parse(ep.address().to_string());
  std::optional<AdmittedPeer> admitted = peer.ok() ? core_.AdmitPeer(*peer) : std::nullopt;
  if (!admitted) {  // refused, or already gone
    socket.close(ec);
    return;
  }
  socket.set_option(tcp::no_delay(true), ec);
  std::make_shared<Session>(std::move(socket), core_, std::move(*admitted), core_.tls())->Start();
}

}  // namespace

Result<std::unique_ptr<Transport>> StartEpoll(ServerCore& core, ListenSocket listener,
                                              int threads) {
  auto transport = std::make_unique<EpollTransport>(core, threads);
  if (Status st = transport->Start(std::move(listener)); !st.ok()) return st;
  return std::unique_ptr<Transport>(std::move(transport));
}

}  // namespace caudal::http_server
