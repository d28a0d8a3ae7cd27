// Connection: one pipelined connection to Redis (TCP or TLS), driven by the store's io_context.
//
// Commands are queued with Send() and written back to back; replies come back in order and go to
// each command's handler. On connect it authenticates (AUTH), selects the database (SELECT) and
// loads a script (SCRIPT LOAD: the decide script, or the one its setup names; with the decide
// script, the fast script's function library too: FUNCTION LOAD), all pipelined, and
// optionally checks that the server is a primary (ROLE); only then is it ready. A connection to a
// Sentinel sends AUTH alone; one in subscribe mode hands the messages nobody asked for to its push
// handler.
//
// Thread-safety: none. Every member function must run on the io_context's thread. A Connection
// is shared-owned: pending asynchronous operations keep it alive after the store drops it.
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/asio/ssl/stream.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "caudal/common/clock.h"
#include "caudal/common/status.h"
#include "redis/redis_url.h"
#include "redis/resp.h"

namespace caudal::redis {

// What a new connection does before it is ready.
struct ConnectionSetup {
  bool select_db = true;    // SELECT the URL's database (a Sentinel has none)
  bool load_script = true;  // SCRIPT LOAD `script`
  // The script loaded and the SHA1 SCRIPT LOAD must answer (40 lowercase hex digits); both must
  // outlive the connection. Empty: the decide script and its fast script (script.h).
  std::string_view script{};
  std::string_view script_sha1{};
  bool require_primary = false;  // ROLE must say "master": never decide on a replica
  // Ask whether the server has loaded the caudal module of this build (CAUDAL.PROTOCOL): the
  // fast script's calls then go to it (has_module). With the decide script only.
  bool probe_module = false;
};

class Connection : public std::enable_shared_from_this<Connection> {
 public:
  // The reply (which may be a Redis error reply), or the connection's failure.
  using ReplyHandler = std::function<void(Result<Reply>)>;
  using PushHandler = std::function<void(Reply)>;

  // `tls` must outlive the connection when the URL is rediss://; `clock` (its Monotonic()
  // times the commands in flight) must outlive it too.
  Connection(boost::asio::io_context& io, const RedisUrl& url, boost::asio::ssl::context* tls,
             const Clock& clock, ConnectionSetup setup = {});
  ~Connection();

  // Resolves, connects, does the TLS handshake and the Redis handshake. `done` runs once: Ok when
  // ready, or kUnavailable naming the cause (refused, timeout, wrong password, bad database...).
  // `on_closed` runs once if the connection is lost after being ready.
  void Start(std::chrono::milliseconds timeout, std::function<void(Status)> done,
             std::function<void(Status)> on_closed);

  // Queues one RESP-encoded command. Precondition: ready().
  void Send(std::string_view command, ReplyHandler handler);
  // Queues `replies` RESP-encoded commands back to back as one call (one in_flight()). kLast:
  // the replies of all but the last are read and dropped, `handler` gets the last (a
  // transaction's EXEC, which reports what the others could not). kAll: `handler` gets one array
  // of every reply, in order. Precondition: ready(), replies >= 1.
  enum class Answer : uint8_t { kLast, kAll };
  void SendCall(std::string_view commands, size_t replies, ReplyHandler handler,
                Answer answer = Answer::kLast);

  // Replies that arrive with no command waiting (Pub/Sub messages) go to `handler` instead of
  // failing the connection.
  void SetPushHandler(PushHandler handler) { on_push_ = std::move(handler); }

  // Fails every waiting handler with `why` and closes the socket. Idempotent.
  void Close(const Status& why);

  bool ready() const { return state_ == State::kReady; }
  // Whether the server holds the fast script's function library (script.h): FUNCTION LOAD
  // succeeded, or found it loaded. False before ready(), and where the server refused it: calls
  // then go to the script.
  bool has_consume_function() const { return has_consume_function_; }
  // After "Function not found" (FUNCTION FLUSH, a server that lost it): FUNCTION LOAD again,
  // pipelined before whatever is sent next; until its reply, calls go to the script.
  void ReloadConsumeFunction();
  // Whether the server holds the caudal module, speaking this build's protocol (module/): the
  // fast script's calls go to it. False before ready().
  bool has_module() const { return has_module_; }
  // After the module refused a call as another build's, or is gone (MODULE UNLOAD): calls go to
  // the script from now on.
  void ForgetModule() { has_module_ = false; }
  size_t in_flight() const { return handlers_.size(); }
  // When (Clock::Monotonic()) the oldest unanswered command was sent; meaningful when
  // in_flight() > 0.
  Nanos oldest_sent() const { return handlers_.front().sent; }
  // "redis at host:port", for messages.
  std::string Where() const;
  // Bytes the server sent that are not read yet (0 when unknown): a reply may be waiting.
  size_t Unread() const {
    boost::system::error_code ec;
    const size_t n = socket_.available(ec);
    return ec ? 0 : n;
  }

 private:
  enum class State : uint8_t { kConnecting, kReady, kClosed };
  struct Pending {
    ReplyHandler handler;
    Nanos sent;
    size_t skip = 0;  // replies before the handler's (SendCall): dropped, or gathered
    bool gather = false;
    std::vector<Reply> gathered = {};
  };

  void OnResolved(const boost::system::error_code& ec,
                  const boost::asio::ip::tcp::resolver::results_type& endpoints);
  void OnConnected(const boost::system::error_code& ec);
  void Handshake();
  void SendRaw(std::string_view command, ReplyHandler handler);
  void StartWrite();
  void StartRead();
  Status TlsFailure(const boost::system::error_code& ec) const;
  void OnRead(const boost::system::error_code& ec, size_t n);
  void Fail(const Status& why);
  void BecomeReady();

  template <typename F>
  void WithStream(F&& f) {
    if (tls_) {
      f(*tls_);
    } else {
      f(socket_);
    }
  }

  const RedisUrl url_;
  const Clock& clock_;
  const ConnectionSetup setup_;
  bool has_consume_function_ = false;
  bool has_module_ = false;
  boost::asio::ip::tcp::resolver resolver_;
  boost::asio::ip::tcp::socket socket_;
  std::unique_ptr<boost::asio::ssl::stream<boost::asio::ip::tcp::socket&>> tls_;
  boost::asio::steady_timer connect_timer_;
  State state_ = State::kConnecting;
  std::function<void(Status)> on_started_;
  std::function<void(Status)> on_closed_;
  PushHandler on_push_;

  std::deque<Pending> handlers_;
  std::string writing_;  // bytes handed to async_write
  std::string queued_;   // bytes queued while a write is in progress
  bool write_in_progress_ = false;
  ReplyParser parser_;
  std::array<char, 64 * 1024> read_buf_{};
};

}  // namespace caudal::redis
