#include "support/delay_proxy.h"

#include <algorithm>
#include <array>
#include <boost/asio.hpp>
#include <deque>
#include <future>
#include <set>
#include <thread>
#include <utility>
#include <vector>

namespace caudal::testing {
namespace {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;
using Steady = std::chrono::steady_clock;

// How the link is now; read and written on the I/O thread only.
enum class Link { kUp, kHeld, kDropped };

struct Chunk {
  std::vector<char> bytes;
  Steady::time_point due;
};

class Connection;

// One direction of a connection: what `from` sent, delivered to `to` `delay` later.
class Pipe {
 public:
  Pipe(Connection& conn, tcp::socket& from, tcp::socket& to, const Steady::duration& delay,
       uint64_t& read, uint64_t& ends)
      : conn_(conn),
        from_(from),
        to_(to),
        delay_(delay),
        read_(read),
        ends_(ends),
        timer_(from.get_executor()) {}

  void Read();
  void Pump();
  // Held bytes go out no sooner than the delay after the heal, as a retransmission would.
  void Healed(Steady::time_point now) {
    for (Chunk& c : queue_) c.due = std::max(c.due, now + delay_);
    Pump();
  }
  void Cancel() { timer_.cancel(); }

 private:
  Connection& conn_;
  tcp::socket& from_;
  tcp::socket& to_;
  const Steady::duration& delay_;  // the proxy's, for this direction: SetDelay changes it
  uint64_t& read_;                 // the proxy's count of bytes read in this direction
  uint64_t& ends_;                 // and of the reads that ended (EOF or error)
  asio::steady_timer timer_;
  std::deque<Chunk> queue_;
  size_t buffered_ = 0;
  bool reading_ = false, writing_ = false, waiting_ = false, eof_ = false;
  std::array<char, 16384> buf_{};
};

}  // namespace

struct DelayProxy::Impl {
  explicit Impl(DelayProxyOptions o) : options(o), acceptor(io) {}

  void Accept();
  void Close(Connection* c);

  const DelayProxyOptions options;
  // The delays now (the I/O thread's): options' until SetDelay.
  Steady::duration to_target = options.to_target;
  Steady::duration to_client = options.to_client;
  asio::io_context io;
  tcp::acceptor acceptor;
  uint16_t port = 0;
  Link link = Link::kUp;
  std::set<std::shared_ptr<Connection>> connections;  // the I/O thread's
  DelayProxyCounts counts;                            // the I/O thread's
  std::thread thread;

  // Runs `f` on the I/O thread and waits for it.
  template <typename F>
  auto Run(F f) {
    std::packaged_task<decltype(f())()> task(std::move(f));
    auto done = task.get_future();
    asio::post(io, [&task] { task(); });
    return done.get();
  }
};

namespace {

class Connection : public std::enable_shared_from_this<Connection> {
 public:
  Connection(DelayProxy::Impl& proxy, tcp::socket client)
      : proxy_(proxy),
        client_(std::move(client)),
        server_(proxy.io),
        up_(*this, client_, server_, proxy.to_target, proxy.counts.to_target_bytes,
            proxy.counts.client_ends),
        down_(*this, server_, client_, proxy.to_client, proxy.counts.to_client_bytes,
              proxy.counts.target_ends) {}

  void Start() {
    const tcp::endpoint target(asio::ip::address_v4::loopback(), proxy_.options.target_port);
    server_.async_connect(target, [self = shared_from_this()](boost::system::error_code ec) {
      if (ec || self->closed_) return self->Close();
      self->up_.Read();
      self->down_.Read();
    });
  }

  void Close() {
    if (closed_) return;
    closed_ = true;
    up_.Cancel();
    down_.Cancel();
    boost::system::error_code ignored;
    client_.close(ignored);
    server_.close(ignored);
    proxy_.Close(this);
  }

  void Healed(Steady::time_point now) {
    up_.Healed(now);
    down_.Healed(now);
  }

  bool closed() const { return closed_; }
  bool held() const { return proxy_.link != Link::kUp; }
  size_t max_buffered() const { return proxy_.options.max_buffered; }

 private:
  DelayProxy::Impl& proxy_;
  tcp::socket client_;
  tcp::socket server_;
  Pipe up_;
  Pipe down_;
  bool closed_ = false;
};

void Pipe::Read() {
  if (reading_ || eof_ || conn_.closed() || buffered_ >= conn_.max_buffered()) return;
  reading_ = true;
  from_.async_read_some(asio::buffer(buf_), [this, self = conn_.shared_from_this()](
                                                boost::system::error_code ec, size_t n) {
    reading_ = false;
    if (conn_.closed()) return;
    if (ec) {
      ++ends_;
      eof_ = true;  // what was read still goes out, then the connection closes
    } else {
      queue_.push_back({{buf_.data(), buf_.data() + n}, Steady::now() + delay_});
      buffered_ += n;
      read_ += n;
    }
    Pump();
    Read();
  });
}

void Pipe::Pump() {
  if (conn_.closed() || writing_ || waiting_ || conn_.held()) return;
  if (queue_.empty()) {
    if (eof_) conn_.Close();
    return;
  }
  if (queue_.front().due > Steady::now()) {
    waiting_ = true;
    timer_.expires_at(queue_.front().due);
    timer_.async_wait([this, self = conn_.shared_from_this()](boost::system::error_code) {
      waiting_ = false;
      Pump();
    });
    return;
  }
  writing_ = true;
  asio::async_write(to_, asio::buffer(queue_.front().bytes),
                    [this, self = conn_.shared_from_this()](boost::system::error_code ec, size_t) {
                      writing_ = false;
                      if (conn_.closed()) return;
                      if (ec) return conn_.Close();
                      buffered_ -= queue_.front().bytes.size();
                      queue_.pop_front();
                      Pump();
                      Read();
                    });
}

}  // namespace

void DelayProxy::Impl::Accept() {
  acceptor.async_accept([this](boost::system::error_code ec, tcp::socket socket) {
    if (ec == asio::error::operation_aborted) return;
    if (!ec) {
      if (link == Link::kDropped || connections.size() >= options.max_connections) {
        ++counts.refused;
        socket.close(ec);
      } else {
        ++counts.accepted;
        auto c = std::make_shared<Connection>(*this, std::move(socket));
        connections.insert(c);
        c->Start();
      }
    }
    Accept();
  });
}

void DelayProxy::Impl::Close(Connection* c) {
  const auto it = std::find_if(connections.begin(), connections.end(),
                               [c](const std::shared_ptr<Connection>& p) { return p.get() == c; });
  // Kept alive past its removal by the handler that closed it.
  if (it != connections.end()) connections.erase(it);
}

Result<std::unique_ptr<DelayProxy>> DelayProxy::Start(DelayProxyOptions options) {
  if (options.target_port == 0) return Status::InvalidArgument("delay proxy: no target port");
  if (options.to_target < std::chrono::nanoseconds(0) ||
      options.to_client < std::chrono::nanoseconds(0)) {
    return Status::InvalidArgument("delay proxy: a negative delay");
  }
  auto impl = std::make_unique<Impl>(options);
  boost::system::error_code ec;
  const tcp::endpoint local(asio::ip::address_v4::loopback(), 0);
  impl->acceptor.open(local.protocol(), ec);
  if (!ec) impl->acceptor.set_option(tcp::acceptor::reuse_address(true), ec);
  if (!ec) impl->acceptor.bind(local, ec);
  if (!ec) impl->acceptor.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) return Status::Unavailable("delay proxy: cannot listen: " + ec.message());
  impl->port = impl->acceptor.local_endpoint().port();
  impl->Accept();
  impl->thread = std::thread([io = &impl->io] { io->run(); });
  return std::unique_ptr<DelayProxy>(new DelayProxy(std::move(impl)));
}

DelayProxy::DelayProxy(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

DelayProxy::~DelayProxy() {
  impl_->Run([this] {
    boost::system::error_code ignored;
    impl_->acceptor.close(ignored);
    const auto open = impl_->connections;  // Close() removes from the set
    for (const auto& c : open) c->Close();
  });
  impl_->io.stop();
  impl_->thread.join();
}

uint16_t DelayProxy::port() const { return impl_->port; }

void DelayProxy::Hold() {
  impl_->Run([this] {
    if (impl_->link == Link::kUp) impl_->link = Link::kHeld;
  });
}

void DelayProxy::Drop() {
  impl_->Run([this] {
    impl_->link = Link::kDropped;
    const auto open = impl_->connections;
    for (const auto& c : open) c->Close();
  });
}

void DelayProxy::Heal() {
  impl_->Run([this] {
    impl_->link = Link::kUp;
    const Steady::time_point now = Steady::now();
    // A copy: a connection whose peer closed while held closes now, leaving the set.
    const auto open = impl_->connections;
    for (const auto& c : open) c->Healed(now);
  });
}

Status DelayProxy::SetDelay(std::chrono::nanoseconds to_target,
                            std::chrono::nanoseconds to_client) {
  if (to_target < std::chrono::nanoseconds(0) || to_client < std::chrono::nanoseconds(0)) {
    return Status::InvalidArgument("delay proxy: a negative delay");
  }
  impl_->Run([&] {
    impl_->to_target = to_target;
    impl_->to_client = to_client;
  });
  return Status::Ok();
}

DelayProxyCounts DelayProxy::Counts() const {
  return impl_->Run([this] {
    DelayProxyCounts c = impl_->counts;
    c.open = impl_->connections.size();
    return c;
  });
}

}  // namespace caudal::testing
