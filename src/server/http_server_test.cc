// HttpServer on a loopback port with a manual clock: connection deadlines follow the injected
// clock's MonotonicCoarse(), not the machine's. Each test runs on both transports (epoll and
// io_uring); the last ones check io_uring's own paths and its fallback.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <netinet/in.h>
#include <poll.h>
#include <stddef.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "caudal/store/memory_store.h"
#include "server/server.h"
#include "server/uring_transport.h"
#include "support/manual_clock.h"

namespace caudal {
namespace {

// A blocking client socket connected to 127.0.0.1:port; closed when it goes.
class Client {
 public:
  explicit Client(uint16_t port) : fd_(socket(AF_INET, SOCK_STREAM, 0)) {
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    connected_ = connect(fd_, reinterpret_cast<const sockaddr*>(&a), sizeof a) == 0;
  }
  ~Client() { close(fd_); }
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  bool connected() const { return connected_; }
  int fd() const { return fd_; }
  bool Send(std::string_view s) const {
    return send(fd_, s.data(), s.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(s.size());
  }
  // Reads until `n` responses with their Content-Length bodies have arrived, or EOF; they are
  // returned whole, one string each.
  std::vector<std::string> ReceiveResponses(size_t n) const {
    std::vector<std::string> out;
    std::string buffered;
    while (out.size() < n) {
      const size_t end = buffered.find("\r\n\r\n");
      if (end != std::string::npos) {
        const size_t cl = buffered.find("Content-Length: ");
        const size_t length =
            cl < end ? std::stoul(buffered.substr(cl + 16, buffered.find('\r', cl) - cl - 16)) : 0;
        if (buffered.size() >= end + 4 + length) {
          out.push_back(buffered.substr(0, end + 4 + length));
          buffered.erase(0, end + 4 + length);
          continue;
        }
      }
      const std::string more = Receive();
      if (more.empty()) break;
      buffered += more;
    }
    return out;
  }
  // What one recv() returns: "" at EOF (or on a reset).
  std::string Receive() const {
    std::string out(4096, '\0');
    const ssize_t n = recv(fd_, out.data(), out.size(), 0);
    out.resize(n > 0 ? static_cast<size_t>(n) : 0);
    return out;
  }

 private:
  int fd_;
  bool connected_ = false;
};

// Waits up to `timeout_ms` for `fd` to become readable; true when it is (data or EOF).
bool Readable(int fd, int timeout_ms) {
  pollfd p{.fd = fd, .events = POLLIN, .revents = 0};
  return poll(&p, 1, timeout_ms) == 1;
}

// A manual clock that counts the server's coarse readings. The server reads it once per look at
// its deadlines (a connection's start, each firing of a deadline timer), so a test can wait for
// it to have looked, instead of waiting for time to pass.
class CountingClock final : public Clock {
 public:
  Nanos Now() const override { return clock_.Now(); }
  Nanos Monotonic() const override { return clock_.Monotonic(); }
  Nanos MonotonicCoarse() const override {
    {
      std::lock_guard lock(mu_);
      ++coarse_reads_;
    }
    read_.notify_all();
    return clock_.MonotonicCoarse();
  }
  bool WaitUntil(std::condition_variable& cv, std::unique_lock<std::mutex>& lock, Nanos deadline,
                 const std::function<bool()>& done) const override {
    return clock_.WaitUntil(cv, lock, deadline, done);
  }
  void Advance(Nanos d) { clock_.Advance(d); }

  // Blocks until the server has read the clock `n` more times (false after 10 s without): with
  // one I/O thread, the reading before the last has then been acted on.
  bool AwaitCoarseReads(uint64_t n) const {
    std::unique_lock lock(mu_);
    const uint64_t until = coarse_reads_ + n;
    return read_.wait_for(lock, std::chrono::seconds(10), [&] { return coarse_reads_ >= until; });
  }

 private:
  ManualClock clock_;
  mutable std::mutex mu_;
  mutable std::condition_variable read_;
  mutable uint64_t coarse_reads_ = 0;  // guarded by mu_
};

class HttpServerClockTest : public ::testing::TestWithParam<HttpIo> {
 protected:
  HttpServerClockTest()
      : store_(clock_),
        log_([](LogLevel, std::string_view) {}),
        engine_(store_, clock_, {}),
        health_(store_, clock_, {}) {}

  void StartServer() {
    HttpServerOptions options;
    options.port = 0;
    options.threads = threads_;
    options.io = GetParam();
    options.header_timeout = std::chrono::milliseconds(50);
    options.body_timeout = std::chrono::milliseconds(50);
    options.idle_timeout = std::chrono::milliseconds(50);
    auto started = HttpServer::Start(
        {.engine = engine_, .metrics = metrics_, .log = log_, .health = health_, .clock = clock_},
        options, {});
    ASSERT_TRUE(started.ok()) << started.status().ToString();
    server_ = std::move(*started);
    ASSERT_EQ(server_->io(), GetParam());
  }

  CountingClock clock_;
  MemoryStore store_;
  Metrics metrics_;
  Logger log_;
  Engine engine_;
  StoreHealth health_;  // never started: /readyz is not asked here
  int64_t threads_ = 1;
  std::unique_ptr<HttpServer> server_;
};

TEST_P(HttpServerClockTest, HeaderDeadlineFollowsTheInjectedClock) {
  StartServer();
  Client client(server_->port());
  ASSERT_TRUE(client.connected());
  ASSERT_TRUE(client.Send("GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: "));
  // Five more looks at its deadlines (the connection's start among them at most twice): the
  // server's timer has fired with the manual clock standing still, and the connection is open.
  ASSERT_TRUE(clock_.AwaitCoarseReads(5));
  EXPECT_FALSE(Readable(client.fd(), 0));
  clock_.Advance(std::chrono::milliseconds(51));
  ASSERT_TRUE(Readable(client.fd(), 5000));
  EXPECT_EQ(client.Receive(), "");  // closed, unanswered
}

TEST_P(HttpServerClockTest, KeepAliveWaitEndsOnTheInjectedClock) {
  StartServer();
  Client client(server_->port());
  ASSERT_TRUE(client.connected());
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(client.Send("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"));
    ASSERT_TRUE(Readable(client.fd(), 5000));
    EXPECT_EQ(client.Receive().substr(0, 15), "HTTP/1.1 200 OK");
  }
  ASSERT_TRUE(clock_.AwaitCoarseReads(5));  // as above: the timer looked, the clock stood still
  EXPECT_FALSE(Readable(client.fd(), 0));
  clock_.Advance(std::chrono::milliseconds(51));
  ASSERT_TRUE(Readable(client.fd(), 5000));
  EXPECT_EQ(client.Receive(), "");
}

// Three requests in one segment get three responses, in order, on the one connection.
TEST_P(HttpServerClockTest, PipelinedRequestsAreAnsweredInOrder) {
  StartServer();
  Client client(server_->port());
  ASSERT_TRUE(client.connected());
  ASSERT_TRUE(
      client.Send("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"
                  "GET /nowhere HTTP/1.1\r\nHost: x\r\n\r\n"
                  "GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"));
  const std::vector<std::string> replies = client.ReceiveResponses(3);
  ASSERT_EQ(replies.size(), 3u);
  EXPECT_EQ(replies[0].substr(0, 15), "HTTP/1.1 200 OK");
  EXPECT_EQ(replies[1].substr(0, 12), "HTTP/1.1 404");
  EXPECT_EQ(replies[2].substr(0, 15), "HTTP/1.1 200 OK");
  EXPECT_NE(replies[2].find("Connection: close"), std::string::npos);
  EXPECT_EQ(client.Receive(), "");  // closed after the third, as it asked
}

// A response far larger than what the client's socket takes at once (the OpenAPI document,
// 100+ KiB, against a 4 KiB receive buffer) arrives whole: the server sends what is left as the
// client reads, and the connection then serves the next request.
TEST_P(HttpServerClockTest, AResponseLargerThanTheSocketBufferArrivesWhole) {
  StartServer();
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  const int small = 4096;
  ASSERT_EQ(setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof(small)), 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(server_->port());
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(connect(fd, reinterpret_cast<const sockaddr*>(&a), sizeof a), 0);
  const std::string request = "GET /v1/openapi.json HTTP/1.1\r\nHost: x\r\n\r\n";
  for (int round = 0; round < 2; ++round) {
    ASSERT_EQ(send(fd, request.data(), request.size(), MSG_NOSIGNAL),
              static_cast<ssize_t>(request.size()));
    std::string got;
    size_t want = std::string::npos;
    while (got.size() < want) {
      char chunk[2048];
      const ssize_t n = recv(fd, chunk, sizeof chunk, 0);
      ASSERT_GT(n, 0) << "after " << got.size() << " bytes";
      got.append(chunk, static_cast<size_t>(n));
      const size_t end = got.find("\r\n\r\n");
      const size_t cl = got.find("Content-Length: ");
      if (want == std::string::npos && end != std::string::npos && cl < end) {
        want = end + 4 + std::stoul(got.substr(cl + 16));
      }
    }
    EXPECT_EQ(got.substr(0, 15), "HTTP/1.1 200 OK");
    EXPECT_GT(got.size(), 100'000u);
    EXPECT_EQ(got.substr(got.size() - 2), "}\n");
  }
  close(fd);
}

// Fifty clients on two I/O threads, three requests each, all answered; once StopAccepting()
// returns, a new connection is refused, and the keep-alive ones left are closed once the server
// has stopped and gone.
TEST_P(HttpServerClockTest, ManyConnectionsOnTwoThreadsThenStop) {
  threads_ = 2;
  StartServer();
  std::vector<std::unique_ptr<Client>> clients;
  for (int i = 0; i < 50; ++i) {
    clients.push_back(std::make_unique<Client>(server_->port()));
    ASSERT_TRUE(clients.back()->connected());
  }
  for (int round = 0; round < 3; ++round) {
    for (auto& c : clients) ASSERT_TRUE(c->Send("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"));
    for (auto& c : clients) {
      const std::vector<std::string> r = c->ReceiveResponses(1);
      ASSERT_EQ(r.size(), 1u);
      EXPECT_EQ(r[0].substr(0, 15), "HTTP/1.1 200 OK");
    }
  }
  const uint16_t port = server_->port();
  server_->StopAccepting();
  Client late(port);
  EXPECT_FALSE(late.connected());
  server_->Stop();
  server_.reset();
  for (auto& c : clients) {
    ASSERT_TRUE(Readable(c->fd(), 5000));
    EXPECT_EQ(c->Receive(), "");
  }
}

INSTANTIATE_TEST_SUITE_P(Io, HttpServerClockTest,
                         ::testing::Values(HttpIo::kEpoll, HttpIo::kIoUring),
                         [](const auto& p) { return std::string(HttpIoName(p.param)); });

// A process whose seccomp filter refuses io_uring_setup (as container runtimes' default profiles
// do) asks for io_uring and gets epoll, and serves all the same. In a child, since a filter
// cannot be lifted.
TEST(HttpServerFallback, IoUringRefusedBySeccompFallsBackToEpoll) {
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    sock_filter filter[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_io_uring_setup, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    sock_fprog program{.len = sizeof(filter) / sizeof(filter[0]), .filter = filter};
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) _exit(10);
    if (prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &program) != 0) _exit(11);
    ManualClock clock;
    MemoryStore store(clock);
    Metrics metrics;
    std::vector<std::string> lines;
    Logger log([&lines](LogLevel, std::string_view line) { lines.emplace_back(line); });
    Engine engine(store, clock, {});
    StoreHealth health(store, clock, {});
    HttpServerOptions options;
    options.port = 0;
    options.threads = 1;
    options.io = HttpIo::kIoUring;
    auto started = HttpServer::Start(
        {.engine = engine, .metrics = metrics, .log = log, .health = health, .clock = clock},
        options, {});
    if (!started.ok()) _exit(12);
    if ((*started)->io() != HttpIo::kEpoll) _exit(13);
    bool warned = false;
    for (const std::string& l : lines) {
      warned |=
          l.find("io_uring refused (io_uring_setup: Operation not permitted") != std::string::npos;
    }
    if (!warned) _exit(14);
    Client client((*started)->port());
    if (!client.Send("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")) _exit(15);
    const std::vector<std::string> r = client.ReceiveResponses(1);
    if (r.size() != 1 || r[0].substr(0, 15) != "HTTP/1.1 200 OK") _exit(16);
    started->reset();
    _exit(0);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "10-11: no filter, 12: no start, 13: not epoll, "
                                       "14: no warning, 15-16: no answer";
}

// Where nothing refuses it, the probe passes (the suite's io_uring runs rely on it).
TEST(HttpServerFallback, ThisKernelOffersIoUring) {
  EXPECT_TRUE(http_server::ProbeUring().ok()) << http_server::ProbeUring().ToString();
}

}  // namespace
}  // namespace caudal
