#include "redis/connection.h"

#include <hiredis/hiredis.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include <boost/asio/connect.hpp>
#include <boost/asio/ip/address.hpp>
#include <boost/asio/ssl/host_name_verification.hpp>
#include <boost/asio/write.hpp>
#include <cassert>
#include <vector>

#include "redis/script.h"

namespace caudal::redis {

namespace asio = boost::asio;
using asio::ip::tcp;

Connection::Connection(asio::io_context& io, const RedisUrl& url, asio::ssl::context* tls,
                       const Clock& clock, ConnectionSetup setup)
    : url_(url), clock_(clock), setup_(setup), resolver_(io), socket_(io), connect_timer_(io) {
  if (url_.transport == Transport::kTls) {
    assert(tls != nullptr);
    tls_ = std::make_unique<asio::ssl::stream<tcp::socket&>>(socket_, *tls);
  }
}

Connection::~Connection() = default;

std::string Connection::Where() const {
  const auto host_port = [](const std::string& host, uint16_t port) {
    const bool ipv6 = host.find(':') != std::string::npos;
    return (ipv6 ? "[" + host + "]" : host) + ":" + std::to_string(port);
  };
  std::string where = "redis at " + host_port(url_.host, url_.port);
  if (!url_.dial.host.empty())
    where.append(" (via ").append(host_port(url_.dial.host, url_.dial.port)).append(")");
  return where;
}

void Connection::Start(std::chrono::milliseconds timeout, std::function<void(Status)> done,
                       std::function<void(Status)> on_closed) {
  on_started_ = std::move(done);
  on_closed_ = std::move(on_closed);
  connect_timer_.expires_after(timeout);
  connect_timer_.async_wait(
      [self = shared_from_this(), timeout](const boost::system::error_code& ec) {
        if (ec || self->state_ != State::kConnecting) return;
        self->Fail(Status::Unavailable(self->Where() + " did not complete the connection within " +
                                       std::to_string(timeout.count()) + "ms"));
      });
  const bool mapped = !url_.dial.host.empty();  // store.address_map
  resolver_.async_resolve(
      mapped ? url_.dial.host : url_.host, std::to_string(mapped ? url_.dial.port : url_.port),
      [self = shared_from_this()](const boost::system::error_code& ec,
                                  const tcp::resolver::results_type& endpoints) {
        self->OnResolved(ec, endpoints);
      });
}

void Connection::OnResolved(const boost::system::error_code& ec,
                            const tcp::resolver::results_type& endpoints) {
  if (state_ != State::kConnecting) return;
  if (ec) {
    const std::string& host = url_.dial.host.empty() ? url_.host : url_.dial.host;
    Fail(Status::Unavailable("cannot resolve redis host \"" + host + "\": " + ec.message()));
    return;
  }
  asio::async_connect(socket_, endpoints,
                      [self = shared_from_this()](const boost::system::error_code& e,
                                                  const tcp::endpoint&) { self->OnConnected(e); });
}

void Connection::OnConnected(const boost::system::error_code& ec) {
  if (state_ != State::kConnecting) return;
  if (ec) {
    Fail(
        Status::Unavailable("cannot connect to " + Where() + ": " + ec.message() +
                            (ec == asio::error::connection_refused ? " (is redis running?)" : "")));
    return;
  }
  boost::system::error_code ignored;
  socket_.set_option(tcp::no_delay(true), ignored);
  if (!tls_) {
    Handshake();
    return;
  }
  // store.tls.server_name, when set, stands for the host in SNI and in the certificate check.
  const std::string& name = url_.tls_server_name.empty() ? url_.host : url_.tls_server_name;
  boost::system::error_code not_ip;
  asio::ip::make_address(name, not_ip);
  if (not_ip) {  // SNI (SSL_set_tlsext_host_name, without the macro's C cast)
    SSL_ctrl(tls_->native_handle(), SSL_CTRL_SET_TLSEXT_HOSTNAME, TLSEXT_NAMETYPE_host_name,
             const_cast<char*>(name.c_str()));
  }
  tls_->set_verify_callback(asio::ssl::host_name_verification(name));
  tls_->async_handshake(asio::ssl::stream_base::client,
                        [self = shared_from_this()](const boost::system::error_code& e) {
                          if (self->state_ != State::kConnecting) return;
                          if (e) return self->Fail(self->TlsFailure(e));
                          self->Handshake();
                        });
}

namespace {

// FUNCTION LOAD's reply: the library's name, or "Library '...' already exists" when another
// connection loaded it first; any other error (no FUNCTION command, an ACL) leaves it unloaded.
bool LoadedLibrary(const redisReply& reply) {
  if (!IsError(reply)) return Text(reply) == kConsumeLibraryName;
  return Text(reply).find("already exists") != std::string_view::npos;
}

}  // namespace

void Connection::ReloadConsumeFunction() {
  has_consume_function_ = false;
  std::string command;
  AppendCommand(std::vector<std::string_view>{"FUNCTION", "LOAD", kConsumeLibrary}, command);
  Send(command, [weak = weak_from_this()](Result<Reply> r) {
    std::shared_ptr<Connection> self = weak.lock();
    if (self && r.ok()) self->has_consume_function_ = LoadedLibrary(**r);
  });
}

// AUTH, SELECT, SCRIPT LOAD and ROLE (those the handshake asks for), pipelined. The first error
// reply names the cause; the replies after it (NOAUTH...) add nothing. The last reply makes the
// connection ready.
void Connection::Handshake() {
  StartRead();
  // AUTH or SELECT refused: the URL's credentials or database are wrong, which no retry fixes
  // (kInvalidArgument, so that callers fail fast at start rather than wait for an outage to end).
  auto check = [self = shared_from_this()](std::string what, StatusCode code) {
    return [self, what = std::move(what), code](Result<Reply> r) {
      if (!r.ok()) return false;  // the connection failed; Fail() reported why
      if (!IsError(**r)) return true;
      const std::string_view text = Text(**r);
      std::string hint;
      if (text.starts_with("NOAUTH")) {
        hint = " (redis requires a password: redis://[user]:password@host:port)";
      }
      self->Fail(
          Status(code, self->Where() + " refused " + what + ": " + std::string(text) + hint));
      return false;
    };
  };
  struct Step {
    std::string command;
    std::function<bool(Result<Reply>)> check;  // false: the connection failed
  };
  std::vector<Step> steps;
  auto add = [&steps](std::vector<std::string_view> argv, std::function<bool(Result<Reply>)> f) {
    Step step{.command = {}, .check = std::move(f)};
    AppendCommand(argv, step.command);
    steps.push_back(std::move(step));
  };
  if (!url_.password.empty()) {
    std::vector<std::string_view> auth = {"AUTH"};
    if (!url_.user.empty()) auth.push_back(url_.user);
    auth.push_back(url_.password);
    const std::string who = url_.user.empty() ? "default" : url_.user;
    add(auth, check("the credentials of user \"" + who + "\"", StatusCode::kInvalidArgument));
  }
  const std::string db = std::to_string(url_.db);
  if (setup_.select_db) {
    add({"SELECT", db}, check("database " + db, StatusCode::kInvalidArgument));
  }
  // The decide script comes with its fast script for plain consumes (script.h).
  auto load = [&](std::string_view script, std::string_view sha1) {
    add({"SCRIPT", "LOAD", script}, [self = shared_from_this(), check, sha1](Result<Reply> r) {
      if (!r.ok()) return false;
      if (IsError(**r)) return check("SCRIPT LOAD", StatusCode::kUnavailable)(std::move(r));
      if (Text(**r) != sha1) {
        self->Fail(Status::Internal(self->Where() + " named the script " + std::string(Text(**r)) +
                                    ", expected " + std::string(sha1)));
        return false;
      }
      return true;
    });
  };
  if (setup_.load_script && setup_.script.empty()) {
    load(kDecideScript, kDecideSha1);
    load(kConsumeScript, kConsumeSha1);
    // Never fails the handshake: where the library cannot be loaded, the script serves.
    add({"FUNCTION", "LOAD", kConsumeLibrary}, [self = shared_from_this()](Result<Reply> r) {
      if (!r.ok()) return false;
      self->has_consume_function_ = LoadedLibrary(**r);
      return true;
    });
    // Nor does the module's absence: an unknown command, and the script serves.
    if (setup_.probe_module) {
      add({"CAUDAL.PROTOCOL"}, [self = shared_from_this()](Result<Reply> r) {
        if (!r.ok()) return false;
        self->has_module_ = !IsError(**r) && Text(**r) == kConsumeFunction;
        return true;
      });
    }
  } else if (setup_.load_script) {
    load(setup_.script, setup_.script_sha1);
  }
  if (setup_.require_primary) {
    add({"ROLE"}, [self = shared_from_this(), check](Result<Reply> r) {
      if (!r.ok()) return false;
      if (IsError(**r)) return check("ROLE", StatusCode::kUnavailable)(std::move(r));
      const redisReply& role = **r;
      const std::string_view what =
          role.type == REDIS_REPLY_ARRAY && role.elements > 0 ? Text(*role.element[0]) : "";
      if (what != "master") {
        self->Fail(Status::Unavailable(self->Where() + " is not a primary (ROLE says \"" +
                                       std::string(what) + "\")"));
        return false;
      }
      return true;
    });
  }
  if (steps.empty()) add({"PING"}, check("PING", StatusCode::kUnavailable));
  for (size_t i = 0; i < steps.size(); ++i) {
    const bool last = i + 1 == steps.size();
    SendRaw(steps[i].command,
            [self = shared_from_this(), f = std::move(steps[i].check), last](Result<Reply> r) {
              if (self->state_ != State::kConnecting) return;
              if (!f(std::move(r)) || !last || self->state_ != State::kConnecting) return;
              self->BecomeReady();
            });
  }
}

void Connection::BecomeReady() {
  state_ = State::kReady;
  connect_timer_.cancel();
  on_started_(Status::Ok());
}

void Connection::Send(std::string_view command, ReplyHandler handler) {
  assert(state_ == State::kReady);
  SendRaw(command, std::move(handler));
}

void Connection::SendCall(std::string_view commands, size_t replies, ReplyHandler handler,
                          Answer answer) {
  assert(state_ == State::kReady && replies >= 1);
  Pending p{.handler = std::move(handler),
            .sent = clock_.Monotonic(),
            .skip = replies - 1,
            .gather = answer == Answer::kAll};
  if (p.gather) p.gathered.reserve(replies);
  handlers_.push_back(std::move(p));
  queued_.append(commands);
  if (!write_in_progress_) StartWrite();
}

void Connection::SendRaw(std::string_view command, ReplyHandler handler) {
  handlers_.push_back({.handler = std::move(handler), .sent = clock_.Monotonic()});
  queued_.append(command);
  if (!write_in_progress_) StartWrite();
}

void Connection::StartWrite() {
  writing_.swap(queued_);
  queued_.clear();
  write_in_progress_ = true;
  WithStream([this](auto& stream) {
    asio::async_write(stream, asio::buffer(writing_),
                      [self = shared_from_this()](const boost::system::error_code& ec, size_t) {
                        self->write_in_progress_ = false;
                        self->writing_.clear();
                        if (self->state_ == State::kClosed) return;
                        // Under TLS 1.3 a server that refuses the client certificate sends
                        // its alert and closes; a write racing that close fails with a reset.
                        // The read outstanding since the handshake carries the alert, and the
                        // connect timer bounds the wait for it.
                        if (ec && self->tls_ && self->state_ == State::kConnecting) return;
                        if (ec) {
                          self->Fail(Status::Unavailable("writing to " + self->Where() +
                                                         " failed: " + ec.message()));
                          return;
                        }
                        if (!self->queued_.empty()) self->StartWrite();
                      });
  });
}

void Connection::StartRead() {
  WithStream([this](auto& stream) {
    stream.async_read_some(asio::buffer(read_buf_),
                           [self = shared_from_this()](const boost::system::error_code& ec,
                                                       size_t n) { self->OnRead(ec, n); });
  });
}

// A certificate the CA file does not vouch for, a name it does not carry, or a client certificate
// the server wanted and did not get: mistakes of the config that no retry fixes
// (kInvalidArgument, so that the store fails at start with the reason); anything else is an
// outage (kUnavailable).
Status Connection::TlsFailure(const boost::system::error_code& ec) const {
  const std::string what = "TLS handshake with " + Where() + " failed: " + ec.message();
  if (ec.category() != asio::error::get_ssl_category()) return Status::Unavailable(what);
  switch (ERR_GET_REASON(static_cast<unsigned long>(ec.value()))) {
    case SSL_R_CERTIFICATE_VERIFY_FAILED:
      return Status::InvalidArgument(
          what + " (" +
          X509_verify_cert_error_string(SSL_get_verify_result(tls_->native_handle())) +
          "; check store.tls.ca_file and store.tls.server_name)");
    case SSL_R_TLSV13_ALERT_CERTIFICATE_REQUIRED:
    case SSL_R_SSLV3_ALERT_HANDSHAKE_FAILURE:
    case SSL_R_SSLV3_ALERT_BAD_CERTIFICATE:
    case SSL_R_TLSV1_ALERT_UNKNOWN_CA:
      return Status::InvalidArgument(
          what +
          " (redis refused the client certificate, or wanted one: store.tls.cert_file "
          "and key_file)");
    default:
      return Status::Unavailable(what);
  }
}

void Connection::OnRead(const boost::system::error_code& ec, size_t n) {
  if (state_ == State::kClosed) return;
  // Under TLS 1.3 a server refuses a client certificate after the handshake, on the first read.
  if (ec && tls_ && state_ == State::kConnecting &&
      ec.category() == asio::error::get_ssl_category()) {
    return Fail(TlsFailure(ec));
  }
  if (ec) {
    const bool eof = ec == asio::error::eof || ec == asio::ssl::error::stream_truncated;
    Fail(Status::Unavailable("connection to " + Where() + " lost: " +
                             (eof ? std::string("closed by the server") : ec.message())));
    return;
  }
  parser_.Feed(read_buf_.data(), n);
  for (;;) {
    Result<std::optional<Reply>> next = parser_.Next();
    if (!next.ok()) {
      Fail(Status::Unavailable(Where() + ": " + next.status().message() +
                               (tls_ ? "" : " (a TLS port? use rediss://)")));
      return;
    }
    if (!next->has_value()) break;
    if (handlers_.empty()) {
      if (!on_push_) {
        Fail(Status::Unavailable(Where() + " sent a reply nobody asked for"));
        return;
      }
      on_push_(std::move(**next));
      if (state_ == State::kClosed) return;
      continue;
    }
    Pending& front = handlers_.front();
    if (front.gather) front.gathered.push_back(std::move(**next));
    if (front.skip > 0) {
      --front.skip;
      continue;
    }
    ReplyHandler handler = std::move(front.handler);
    Reply reply = front.gather ? ArrayOf(std::move(front.gathered)) : std::move(**next);
    handlers_.pop_front();
    handler(std::move(reply));
    if (state_ == State::kClosed) return;
  }
  StartRead();
}

void Connection::Close(const Status& why) { Fail(why); }

void Connection::Fail(const Status& why) {
  if (state_ == State::kClosed) return;
  const State was = state_;
  state_ = State::kClosed;
  boost::system::error_code ignored;
  connect_timer_.cancel();
  resolver_.cancel();
  socket_.close(ignored);
  std::deque<Pending> failed;
  failed.swap(handlers_);
  for (Pending& p : failed) p.handler(why);
  if (was == State::kConnecting) {
    if (on_started_) on_started_(why);
  } else if (on_closed_) {
    on_closed_(why);
  }
}

}  // namespace caudal::redis
