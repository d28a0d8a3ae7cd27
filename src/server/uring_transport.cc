#include "server/uring_transport.h"

#include <arpa/inet.h>
#include <liburing.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <boost/asio/error.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/asio/ssl/error.hpp>
#include <cerrno>
#include <cstring>
#include <functional>
#include <future>
#include <mutex>
#include <thread>
#include <unordered_map>

#include "common/cat.h"
#include "server/response_writer.h"
#include "server/tls_context.h"

namespace caudal::http_server {

namespace beast = boost::beast;
namespace http = beast::http;

namespace {

constexpr unsigned kSubmissionEntries = 1024;
constexpr unsigned kCompletionEntries = 16 * 1024;
// Completions handled per round at most, before what they prepared is submitted.
constexpr int kMaxCompletionsPerTurn = 4096;
// A response at most this long goes out with the next receive linked behind it: it fits a
// socket's send buffer, so its send is whole (MSG_WAITALL) or the connection has failed.
constexpr size_t kMaxLinkedSend = 16 * 1024;

// An operation's user_data: a connection's address with the kind in its low bit, or one of the
// loop's own, all below any address.
enum : uint64_t { kAcceptTag = 8, kWakeTag = 16, kTickTag = 24, kPauseTag = 32, kCancelTag = 40 };
enum : uint64_t { kRecvOp = 0, kSendOp = 1 };

std::string ErrnoText(int e) { return Cat(std::strerror(e), " (", e, ')'); }

__kernel_timespec Timespec(Nanos d) {
  const int64_t ns = std::max<int64_t>(d.count(), 1);
  return {.tv_sec = ns / 1'000'000'000, .tv_nsec = ns % 1'000'000'000};
}

Result<IpAddress> PeerOf(int fd) {
  sockaddr_storage ss{};
  socklen_t len = sizeof(ss);
  if (getpeername(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0) {
    return Status::InvalidArgument("no peer");
  }
  char text[INET6_ADDRSTRLEN] = {};
  const void* addr =
      ss.ss_family == AF_INET6
          ? static_cast<const void*>(&reinterpret_cast<sockaddr_in6*>(&ss)->sin6_addr)
          : static_cast<const void*>(&reinterpret_cast<sockaddr_in*>(&ss)->sin_addr);
  if (inet_ntop(ss.ss_family, addr, text, sizeof(text)) == nullptr) {
    return Status::InvalidArgument("no peer");
  }
  return IpAddress::Parse(text);
}

// A ring for one thread: single issuer, its completions run when it waits (DEFER_TASKRUN), where
// the kernel has those (6.1); plain otherwise.
int InitRing(io_uring& ring) {
  io_uring_params p{};
  p.flags = IORING_SETUP_CQSIZE | IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN;
  p.cq_entries = kCompletionEntries;
  int r = io_uring_queue_init_params(kSubmissionEntries, &ring, &p);
  if (r == -EINVAL) {
    p = {};
    p.flags = IORING_SETUP_CQSIZE;
    p.cq_entries = kCompletionEntries;
    r = io_uring_queue_init_params(kSubmissionEntries, &ring, &p);
  }
  return r;
}

}  // namespace

Status ProbeUring() {
  io_uring ring;
  const int r = io_uring_queue_init(4, &ring, 0);
  if (r < 0) return Status::Unavailable(Cat("io_uring_setup: ", ErrnoText(-r)));
  io_uring_probe* probe = io_uring_get_probe_ring(&ring);
  Status status;
  if (probe == nullptr) {
    status = Status::Unavailable("io_uring: the kernel cannot list its operations");
  } else {
    for (const int op : {IORING_OP_ACCEPT, IORING_OP_RECV, IORING_OP_SEND, IORING_OP_READ,
                         IORING_OP_TIMEOUT, IORING_OP_TIMEOUT_REMOVE, IORING_OP_ASYNC_CANCEL}) {
      if (!io_uring_opcode_supported(probe, op)) {
        status = Status::Unavailable(Cat("io_uring: the kernel lacks operation ", op));
        break;
      }
    }
    io_uring_free_probe(probe);
  }
  io_uring_queue_exit(&ring);
  return status;
}

class UringConnection;

// One I/O thread: its ring, its connections, and what other threads post to it.
class UringLoop {
 public:
  UringLoop(ServerCore& core, int listen_fd, const std::vector<std::unique_ptr<UringLoop>>* peers)
      : core_(core), listen_fd_(listen_fd), peers_(peers), sweep_(core.tick()) {}
  ~UringLoop();

  // Starts the thread; its ring's setup is waited for, and its error returned.
  Status Start();
  // Ends the loop (its connections closed, posted work dropped) and joins the thread.
  void Stop();

  // Runs `f` on this loop's thread; dropped (destroyed unrun) once the loop has ended.
  void Post(std::function<void()> f);
  bool InThisThread() const { return std::this_thread::get_id() == id_; }

  ServerCore& core() { return core_; }
  // Queued for the next submission; the connection counts each until its completion.
  void Receive(UringConnection& c, void* data, size_t size);
  void Send(UringConnection& c, const char* data, size_t size, bool link_next);
  // Frees a connection once it is closed and no operation of the ring points at it.
  void Settle(UringConnection* c);
  void Adopt(std::shared_ptr<UringConnection> c);

 private:
  void Run();
  void Turn();
  void Complete(uint64_t tag, int res, unsigned flags);
  void Drain();
  io_uring_sqe* Sqe(uint64_t tag);  // counted in outstanding_
  void ArmWake();
  void ArmTick(Nanos now);
  void ArmAccept();
  void OnAccept(int res, unsigned flags);
  void AdmitAccepted(int fd);
  void CheckDeadlines();

  ServerCore& core_;
  const int listen_fd_;  // -1: this loop does not accept
  const std::vector<std::unique_ptr<UringLoop>>* peers_;
  io_uring ring_{};
  int wake_fd_ = -1;
  uint64_t wake_value_ = 0;
  __kernel_timespec tick_{};  // the deadline timer's wait
  __kernel_timespec pause_{};
  DeadlineSweep<UringConnection*> sweep_;
  std::thread thread_;
  std::thread::id id_;
  int64_t outstanding_ = 0;  // operations submitted whose last completion has not come back
  bool stopping_ = false;
  bool accept_armed_ = false;
  bool pause_armed_ = false;
  bool enter_failed_ = false;
  size_t next_peer_ = 0;
  std::unordered_map<UringConnection*, std::shared_ptr<UringConnection>> connections_;

  std::mutex mu_;
  std::vector<std::function<void()>> posted_;  // guarded by mu_
  bool woken_ = false;                         // guarded by mu_: the eventfd has been written
  bool ended_ = false;                         // guarded by mu_: Post() drops its work
};

// One connection, the epoll transport's Session on a ring: one request at a time, answered, then
// the next while keep-alive. Every member but in_flight_self_ is touched on the loop's thread
// only.
//
// TLS goes through memory BIOs: the ring moves ciphertext (raw_ in, tls_out_ out) and OpenSSL
// turns it into the plaintext the parser reads from buffer_, and back. The handshake counts as
// part of the first request's header, as on epoll.
class UringConnection final : public std::enable_shared_from_this<UringConnection>,
                              public routes::Responder {
 public:
  UringConnection(int fd, UringLoop& loop, AdmittedPeer peer,
                  std::shared_ptr<boost::asio::ssl::context> tls)
      : fd_(fd),
        loop_(&loop),
        core_(loop.core()),
        tls_context_(std::move(tls)),
        deadline_(core_.NewDeadline()),
        admitted_(std::move(peer)),
        peer_(admitted_.address()) {}
  ~UringConnection() {
    if (ssl_ != nullptr) SSL_free(ssl_);  // and its BIOs
    if (fd_ >= 0) ::close(fd_);
  }

  void MoveTo(UringLoop& loop) { loop_ = &loop; }

  void Start() {
    deadline_.Accepted();  // the first request's header, a TLS handshake included
    if (tls_context_ == nullptr) return NextRequest();
    ssl_ = SSL_new(tls_context_->native_handle());
    BIO* in = BIO_new(BIO_s_mem());
    BIO* out = BIO_new(BIO_s_mem());
    if (ssl_ == nullptr || in == nullptr || out == nullptr) {
      BIO_free(in);
      BIO_free(out);
      return Close();
    }
    BIO_set_mem_eof_return(in, -1);  // drained: "want more", not the end of the stream
    SSL_set_bio(ssl_, in, out);
    SSL_set_accept_state(ssl_);
    rbio_ = in;
    wbio_ = out;
    raw_.resize(kReadBytes);
    handshaking_ = true;
    Receive();
  }

  void Complete(uint64_t op, int res) {
    --pending_;
    if (op == kRecvOp) return OnReceived(res);
    OnSent(res);
  }

  // Closed at once: the peer sees the end of the stream, and a pending operation completes.
  void Close() {
    if (closed_) return;
    closed_ = true;
    ::shutdown(fd_, SHUT_RDWR);
  }
  // Past its deadline (the sweep): a handshake cut there counts as a TLS failure.
  void Expire() {
    if (handshaking_) core_.HandshakeTimedOut();
    Close();
  }
  // The descriptor is given back once nothing of the ring uses it.
  void CloseDescriptor() {
    if (fd_ < 0) return;
    ::close(fd_);
    fd_ = -1;
  }

  bool settled() const { return closed_ && pending_ == 0; }
  bool closed() const { return closed_; }
  bool expired(Nanos now) const { return !closed_ && deadline_.Expired(now); }
  Nanos deadline() const { return deadline_.at(); }
  int fd() const { return fd_; }
  void Queued() { ++pending_; }  // an operation on it was prepared

  // The decision's reply, exactly once per request; possibly on a store thread (which may touch
  // in_flight_self_: the loop's thread leaves it alone until Finish).
  void Reply(http_api::Reply reply) override {
    std::shared_ptr<UringConnection> self = std::move(in_flight_self_);
    if (loop_->InThisThread()) return Finish(std::move(reply));
    UringLoop* loop = loop_;
    loop->Post([self = std::move(self), reply = std::move(reply), loop]() mutable {
      self->Finish(std::move(reply));
      loop->Settle(self.get());
    });
  }

 private:
  // What follows a TLS flush (the ciphertext OpenSSL has written, sent whole).
  enum class After : uint8_t { kHandshake, kRequests, kResponse, kClose };

  void NextRequest() {
    StartParser(parser_, request_);
    in_body_ = false;
    if (!first_) deadline_.AwaitNext();      // the first one's runs from accept
    if (buffer_.size() > 0) return Parse();  // a pipelined request is already here
    Receive();
  }

  // Right after a send with link_next, this receive is the one linked behind it.
  void Receive() {
    if (ssl_ != nullptr) {
      // Plaintext OpenSSL holds already, or records not read yet: no receive needed.
      if (tls_backlog_ || SSL_pending(ssl_) > 0) return Decrypt();
      return loop_->Receive(*this, raw_.data(), raw_.size());
    }
    if (buffer_.size() >= buffer_.max_size()) return OnReadError(http::error::buffer_overflow);
    const size_t room = std::min(kReadBytes, buffer_.max_size() - buffer_.size());
    const auto space = buffer_.prepare(room);
    loop_->Receive(*this, space.data(), space.size());
  }

  void OnReceived(int res) {
    if (closed_) return;
    if (res < 0) {  // reset, or the send linked before it failed (-ECANCELED)
      if (handshaking_) {
        return HandshakeFailed(boost::system::error_code(-res, boost::system::system_category()));
      }
      return Close();
    }
    if (res == 0) {
      if (handshaking_) return HandshakeFailed(boost::asio::error::eof);
      return OnEnd();
    }
    if (ssl_ == nullptr) {
      buffer_.commit(static_cast<size_t>(res));
      return Parse();
    }
    BIO_write(rbio_, raw_.data(), res);
    if (handshaking_) return Handshake();
    Decrypt();
  }

  // The peer ended the stream (or a TLS peer sent close_notify).
  void OnEnd() {
    beast::error_code ec;
    if (!parser_->got_some()) return OnReadError(http::error::end_of_stream);
    parser_->put_eof(ec);  // the peer ended mid-request (or a body that runs to EOF)
    if (!ec) return Handle();
    OnReadError(ec);
  }

  void Handshake() {
    ERR_clear_error();
    const int r = SSL_do_handshake(ssl_);
    if (r == 1) {
      handshaking_ = false;
      identities_ = server_tls::PeerIdentities(ssl_);
      tls_backlog_ = true;  // the client's first request may have come with its last flight
      return Flush(After::kRequests);  // the handshake's last flight (TLS 1.3: its tickets)
    }
    if (SSL_get_error(ssl_, r) == SSL_ERROR_WANT_READ) return Flush(After::kHandshake);
    HandshakeFailed(SslError());
  }

  void HandshakeFailed(const boost::system::error_code& ec) {
    handshaking_ = false;
    core_.HandshakeFailed(peer_, ec);
    if (ssl_ != nullptr && BIO_ctrl_pending(wbio_) > 0) return Flush(After::kClose);  // the alert
    Close();
  }

  static boost::system::error_code SslError() {
    return {static_cast<int>(ERR_get_error()), boost::asio::error::get_ssl_category()};
  }

  // Plaintext from what has arrived, into buffer_ for the parser.
  void Decrypt() {
    tls_backlog_ = false;
    for (;;) {
      const size_t room = std::min(kReadBytes, buffer_.max_size() - buffer_.size());
      if (room == 0) {
        tls_backlog_ = true;  // the parser makes room, or refuses the request
        break;
      }
      const auto space = buffer_.prepare(room);
      ERR_clear_error();
      const int n = SSL_read(ssl_, space.data(), static_cast<int>(space.size()));
      if (n > 0) {
        buffer_.commit(static_cast<size_t>(n));
        continue;
      }
      const int e = SSL_get_error(ssl_, n);
      if (e == SSL_ERROR_WANT_READ) break;
      if (e == SSL_ERROR_ZERO_RETURN) return OnEnd();
      return Close();
    }
    Parse();
  }

  // The ciphertext OpenSSL has written goes out whole, then `next`.
  void Flush(After next) {
    after_ = next;
    const size_t pending = BIO_ctrl_pending(wbio_);
    if (pending == 0) return Continue();
    tls_out_.resize(pending);
    BIO_read(wbio_, tls_out_.data(), static_cast<int>(pending));
    StartSend(tls_out_, false);
  }

  void Continue() {
    switch (after_) {
      case After::kHandshake:
        return Receive();
      case After::kRequests:
        return NextRequest();
      case After::kResponse:
        return Written();
      case After::kClose:
        return Close();
    }
  }

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
    Receive();
  }

  // Every refusal closes (see the epoll transport's OnReadError).
  void OnReadError(beast::error_code ec) {
    if (closed_) return;
    if (auto refusal = RefusalFor(ec))
      return Send(http_api::ErrorReply(*refusal), Connection::kClose);
    Close();
  }

  void Handle() {
    keep_alive_ = parser_->keep_alive();
    framing_ = {.version = request_.version() == 10 ? 10 : 11,
                .head = request_.verb() == http::verb::head};
    const routes::Request r = RoutesRequest(request_, forwarded_for_, peer_, identities_);
    deadline_.Deciding();  // the store's own deadline bounds the decision
    in_flight_self_ = shared_from_this();
    core_.Decide(r, *this);
  }

  void Finish(http_api::Reply reply) {
    const bool draining = core_.EndDecision();
    Send(std::move(reply), keep_alive_ && !draining ? Connection::kKeepAlive : Connection::kClose);
  }

  // A small plaintext keep-alive response with nothing else buffered goes out with the next
  // receive linked behind it, in the same submission.
  void Send(const http_api::Reply& reply, Connection connection) {
    if (closed_) return;
    core_.Responding(reply.status);
    framing_.connection = connection;
    WriteResponse(reply, framing_, out_);
    deadline_.Sending();
    if (ssl_ != nullptr) {
      ERR_clear_error();
      if (SSL_write(ssl_, out_.data(), static_cast<int>(out_.size())) <= 0) return Close();
      return Flush(After::kResponse);  // a memory BIO takes it all
    }
    const bool link = connection == Connection::kKeepAlive && buffer_.size() == 0 &&
                      out_.size() <= kMaxLinkedSend;
    StartSend(out_, link);
    if (!link) return;
    first_ = false;
    StartParser(parser_, request_);
    in_body_ = false;
    Receive();
  }

  void StartSend(const std::string& bytes, bool link) {
    wire_ = &bytes;
    sent_ = 0;
    linked_ = link;
    loop_->Send(*this, bytes.data(), bytes.size(), link);
  }

  void OnSent(int res) {
    if (closed_) return;
    if (res < 0) return Close();
    sent_ += static_cast<size_t>(res);
    if (linked_) {
      if (sent_ != wire_->size()) return Close();  // MSG_WAITALL: short only when failing
      deadline_.AwaitNext();                       // the receive behind it is armed
      return;
    }
    if (sent_ < wire_->size()) {
      return loop_->Send(*this, wire_->data() + sent_, wire_->size() - sent_, false);
    }
    if (ssl_ != nullptr) return Continue();
    Written();
  }

  void Written() {
    if (framing_.connection == Connection::kClose) return Close();
    first_ = false;
    NextRequest();
  }

  int fd_;
  UringLoop* loop_;
  ServerCore& core_;
  const std::shared_ptr<boost::asio::ssl::context> tls_context_;  // outlives ssl_
  SSL* ssl_ = nullptr;                                            // with a TLS listener
  BIO* rbio_ = nullptr;    // ciphertext received, owned by ssl_
  BIO* wbio_ = nullptr;    // ciphertext to send, owned by ssl_
  std::vector<char> raw_;  // the receive's buffer, with TLS
  std::string tls_out_;    // the ciphertext being sent
  ConnectionDeadline deadline_;
  beast::flat_buffer buffer_{kMaxBufferedBytes};
  ParsedRequest request_;  // reused: its storage outlives each request
  std::optional<RequestParser> parser_;
  std::string forwarded_for_;
  std::string out_;                    // the response being sent
  const std::string* wire_ = nullptr;  // what the send under way sends: out_ or tls_out_
  size_t sent_ = 0;
  std::shared_ptr<UringConnection> in_flight_self_;  // from Decide to Reply
  const AdmittedPeer admitted_;  // counted towards the caps while the connection lives
  const IpAddress& peer_;
  std::vector<std::string> identities_;  // the verified client certificate's CN and SANs
  ResponseFraming framing_;
  int pending_ = 0;  // the ring's operations on this connection not yet completed
  After after_ = After::kRequests;
  bool first_ = true;
  bool keep_alive_ = true;
  bool in_body_ = false;
  bool linked_ = false;  // the send under way has the next receive linked behind it
  bool handshaking_ = false;
  bool tls_backlog_ = false;  // records may wait in rbio_ unread (no room, or the handshake's)
  bool closed_ = false;
};

UringLoop::~UringLoop() { Stop(); }

Status UringLoop::Start() {
  std::promise<Status> ready;
  thread_ = std::thread([this, &ready] {
    id_ = std::this_thread::get_id();
    const int r = InitRing(ring_);
    if (r < 0) return ready.set_value(Status::Unavailable(Cat("io_uring_setup: ", ErrnoText(-r))));
    wake_fd_ = eventfd(0, EFD_CLOEXEC);
    if (wake_fd_ < 0) {
      const int e = errno;
      io_uring_queue_exit(&ring_);
      return ready.set_value(Status::Unavailable(Cat("eventfd: ", ErrnoText(e))));
    }
    ready.set_value(Status::Ok());
    Run();
  });
  Status status = ready.get_future().get();
  if (!status.ok()) {
    thread_.join();
    std::lock_guard lock(mu_);
    ended_ = true;
  }
  return status;
}

void UringLoop::Stop() {
  if (!thread_.joinable()) return;
  Post([this] { stopping_ = true; });
  thread_.join();
}

void UringLoop::Post(std::function<void()> f) {
  bool wake = false;
  std::function<void()> dropped;  // destroyed after the lock: it may own a connection
  {
    std::lock_guard lock(mu_);
    if (ended_) {
      dropped = std::move(f);
    } else {
      posted_.push_back(std::move(f));
      wake = !woken_;
      woken_ = true;
    }
  }
  if (wake) {
    const uint64_t one = 1;
    [[maybe_unused]] const ssize_t n = ::write(wake_fd_, &one, sizeof(one));
  }
}

io_uring_sqe* UringLoop::Sqe(uint64_t tag) {
  io_uring_sqe* sqe = io_uring_get_sqe(&ring_);
  while (sqe == nullptr) {  // the submission queue is full: hand it to the kernel first
    io_uring_submit(&ring_);
    sqe = io_uring_get_sqe(&ring_);
  }
  io_uring_sqe_set_data64(sqe, tag);
  ++outstanding_;
  return sqe;
}

void UringLoop::Receive(UringConnection& c, void* data, size_t size) {
  io_uring_sqe* sqe = Sqe(reinterpret_cast<uint64_t>(&c) | kRecvOp);
  io_uring_prep_recv(sqe, c.fd(), data, size, 0);
  c.Queued();
}

void UringLoop::Send(UringConnection& c, const char* data, size_t size, bool link_next) {
  // A linked pair goes in one submission: make room for both before taking the first.
  if (link_next && io_uring_sq_space_left(&ring_) < 2) io_uring_submit(&ring_);
  io_uring_sqe* sqe = Sqe(reinterpret_cast<uint64_t>(&c) | kSendOp);
  io_uring_prep_send(sqe, c.fd(), data, size, MSG_NOSIGNAL | (link_next ? MSG_WAITALL : 0));
  if (link_next) sqe->flags |= IOSQE_IO_LINK;
  c.Queued();
}

void UringLoop::Settle(UringConnection* c) {
  if (!c->settled()) return;
  c->CloseDescriptor();
  connections_.erase(c);
}

void UringLoop::Adopt(std::shared_ptr<UringConnection> c) {
  if (stopping_) return;  // dropped: its destructor closes it
  UringConnection* raw = c.get();
  c->MoveTo(*this);
  connections_.emplace(raw, std::move(c));
  raw->Start();
  Settle(raw);
}

void UringLoop::ArmWake() {
  io_uring_prep_read(Sqe(kWakeTag), wake_fd_, &wake_value_, sizeof(wake_value_), 0);
}

void UringLoop::ArmTick(Nanos now) {
  tick_ = Timespec(sweep_.Wait(now));
  io_uring_prep_timeout(Sqe(kTickTag), &tick_, 0, 0);
}

// One accept at a time, not a multishot one: the kernel reads the descriptor limit when an
// accept is prepared, so a multishot accept would go on past a limit lowered after it (and never
// meet EMFILE, which the connection budget counts on).
void UringLoop::ArmAccept() {
  io_uring_prep_accept(Sqe(kAcceptTag), listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
  accept_armed_ = true;
}

void UringLoop::Run() {
  ArmWake();
  const Nanos now = core_.Now();
  sweep_.BeginSweep(now);
  ArmTick(now);
  if (listen_fd_ >= 0) ArmAccept();
  while (!stopping_) Turn();
  Drain();
  io_uring_queue_exit(&ring_);
  std::vector<std::function<void()>> dropped;
  {
    std::lock_guard lock(mu_);
    ended_ = true;
    dropped.swap(posted_);
  }
  dropped.clear();
  connections_.clear();  // those whose decisions are still out go when their replies are dropped
  ::close(wake_fd_);
}

void UringLoop::Turn() {
  const int r = io_uring_submit_and_wait(&ring_, 1);
  if (r < 0 && r != -EINTR && r != -EAGAIN && r != -EBUSY && r != -ETIME && !enter_failed_) {
    enter_failed_ = true;  // said once: a failing ring would otherwise log at every turn
    core_.log().Error(Cat("io_uring_enter failed: ", ErrnoText(-r)));
  }
  // Each entry is given back before it is handled, so the queue has room for what handling
  // submits (and the kernel's overflow, if any, comes back through peek).
  io_uring_cqe* cqe = nullptr;
  for (int n = 0; n < kMaxCompletionsPerTurn && io_uring_peek_cqe(&ring_, &cqe) == 0; ++n) {
    const uint64_t tag = cqe->user_data;
    const int res = cqe->res;
    const unsigned flags = cqe->flags;
    io_uring_cqe_seen(&ring_, cqe);
    Complete(tag, res, flags);
  }
}

// Stopping: every connection is shut down, the loop's own operations cancelled, and the ring run
// until nothing it holds points at memory about to be freed.
void UringLoop::Drain() {
  for (auto& [raw, c] : connections_) raw->Close();
  std::vector<UringConnection*> done;
  for (auto& [raw, c] : connections_) {
    if (raw->settled()) done.push_back(raw);
  }
  for (UringConnection* c : done) Settle(c);
  io_uring_prep_cancel64(Sqe(kCancelTag), kWakeTag, 0);
  io_uring_prep_timeout_remove(Sqe(kCancelTag), kTickTag, 0);
  if (pause_armed_) io_uring_prep_timeout_remove(Sqe(kCancelTag), kPauseTag, 0);
  if (accept_armed_) io_uring_prep_cancel64(Sqe(kCancelTag), kAcceptTag, 0);
  while (outstanding_ > 0) Turn();
  for (auto& [raw, c] : connections_) raw->CloseDescriptor();
}

void UringLoop::Complete(uint64_t tag, int res, unsigned flags) {
  if (!(flags & IORING_CQE_F_MORE)) --outstanding_;
  switch (tag) {
    case kWakeTag: {
      std::vector<std::function<void()>> batch;
      {
        std::lock_guard lock(mu_);
        batch.swap(posted_);
        woken_ = false;
      }
      for (auto& f : batch) f();
      if (!stopping_) ArmWake();
      return;
    }
    case kTickTag:
      if (stopping_) return;
      return CheckDeadlines();
    case kAcceptTag:
      return OnAccept(res, flags);
    case kPauseTag:
      pause_armed_ = false;
      if (!stopping_ && !core_.draining() && !accept_armed_) ArmAccept();
      return;
    case kCancelTag:
      return;
    default:
      break;
  }
  auto* c = reinterpret_cast<UringConnection*>(tag & ~uint64_t{1});
  c->Complete(tag & 1, res);
  Settle(c);
}

void UringLoop::OnAccept(int res, unsigned flags) {
  if (!(flags & IORING_CQE_F_MORE)) accept_armed_ = false;
  const bool closing = stopping_ || core_.draining();
  if (res >= 0) {
    if (closing) {
      ::close(res);
      return;
    }
    core_.AcceptSucceeded();
    AdmitAccepted(res);
  } else if (!closing) {
    // Out of descriptors (EMFILE, ENFILE) or similar: the connection stays in the backlog, and
    // accepting resumes after the pause (ServerCore::AcceptFailure).
    if (!accept_armed_ && !pause_armed_) {
      pause_ = Timespec(
          core_.AcceptFailure(boost::system::error_code(-res, boost::system::system_category())));
      io_uring_prep_timeout(Sqe(kPauseTag), &pause_, 0, 0);
      pause_armed_ = true;
    }
    return;
  }
  if (!accept_armed_ && !pause_armed_ && !closing) ArmAccept();
}

void UringLoop::AdmitAccepted(int fd) {
  const Result<IpAddress> peer = PeerOf(fd);
  std::optional<AdmittedPeer> admitted = peer.ok() ? core_.AdmitPeer(*peer) : std::nullopt;
  if (!admitted) {  // refused, or already gone
    ::close(fd);
    return;
  }
  const int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  auto c = std::make_shared<UringConnection>(fd, *this, std::move(*admitted), core_.tls());
  UringLoop& target = *(*peers_)[next_peer_];
  next_peer_ = (next_peer_ + 1) % peers_->size();
  if (&target == this) return Adopt(std::move(c));
  target.Post([&target, c = std::move(c)]() mutable { target.Adopt(std::move(c)); });
}

// Once a tick, every connection; in between, those the last sweep saw due before the next one,
// at their deadlines (DeadlineSweep).
void UringLoop::CheckDeadlines() {
  const Nanos now = core_.Now();
  std::vector<UringConnection*> expired;
  if (sweep_.SweepDue(now)) {
    sweep_.BeginSweep(now);
    for (auto& [raw, c] : connections_) {
      if (raw->expired(now)) {
        expired.push_back(raw);
      } else if (!raw->closed()) {
        sweep_.Note(raw, raw->deadline());
      }
    }
    sweep_.EndSweep();
  } else {
    sweep_.TakeDue(now, [&](UringConnection* c) {
      // It may have been settled and freed since the sweep: only a live one is looked at.
      if (connections_.contains(c) && c->expired(now)) expired.push_back(c);
    });
  }
  for (UringConnection* c : expired) {
    c->Expire();
    Settle(c);
  }
  ArmTick(now);
}

namespace {

class UringTransport final : public Transport {
 public:
  UringTransport() = default;
  ~UringTransport() override { Stop(); }

  // `threads` rings, each on its thread; thread 0 accepts from `listener`, taken once they all
  // run. Nothing is left running on failure, and `listener` is left with the caller.
  Status Start(ServerCore& core, ListenSocket& listener, int threads) {
    for (int i = 0; i < threads; ++i) {
      loops_.push_back(std::make_unique<UringLoop>(core, i == 0 ? listener.fd() : -1, &loops_));
    }
    // The accepting loop starts last, once every loop it deals connections to is running.
    for (int i = threads - 1; i >= 0; --i) {
      if (Status st = loops_[i]->Start(); !st.ok()) {
        Stop();
        return st;
      }
    }
    listener_ = std::move(listener);
    return Status::Ok();
  }

  // shutdown(2) takes the socket out of listening at once; the descriptor is closed after Stop().
  void StopAccepting() override { ::shutdown(listener_.fd(), SHUT_RDWR); }

  void Stop() override {
    // The accepting loop first: it deals connections to the others.
    for (auto& loop : loops_) loop->Stop();
  }

 private:
  ListenSocket listener_;  // declared first so it goes last, after every loop using it
  std::vector<std::unique_ptr<UringLoop>> loops_;
};

}  // namespace

Result<std::unique_ptr<Transport>> StartUring(ServerCore& core, ListenSocket& listener,
                                              int threads) {
  if (Status probe = ProbeUring(); !probe.ok()) return probe;
  auto transport = std::make_unique<UringTransport>();
  if (Status st = transport->Start(core, listener, threads); !st.ok()) return st;
  return std::unique_ptr<Transport>(std::move(transport));
}

}  // namespace caudal::http_server
