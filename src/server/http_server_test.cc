// HttpServer on a loopback port with a manual clock: connection deadlines follow the injected
// clock's MonotonicCoarse(), not the machine's.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>

#include "caudal/server/server.h"
#include "caudal/store/memory_store.h"
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

class HttpServerClockTest : public ::testing::Test {
 protected:
  HttpServerClockTest()
      : store_(clock_),
        log_([](LogLevel, std::string_view) {}),
        engine_(store_, clock_, {}),
        health_(store_, clock_, {}) {}

  void StartServer() {
    HttpServerOptions options;
    options.port = 0;
    options.threads = 1;
    options.header_timeout = std::chrono::milliseconds(50);
    options.body_timeout = std::chrono::milliseconds(50);
    options.idle_timeout = std::chrono::milliseconds(50);
    auto started = HttpServer::Start(
        {.engine = engine_, .metrics = metrics_, .log = log_, .health = health_, .clock = clock_},
        options, {});
    ASSERT_TRUE(started.ok()) << started.status().ToString();
    server_ = std::move(*started);
  }

  ManualClock clock_;
  MemoryStore store_;
  Metrics metrics_;
  Logger log_;
  Engine engine_;
  StoreHealth health_;  // never started: /readyz is not asked here
  std::unique_ptr<HttpServer> server_;
};

TEST_F(HttpServerClockTest, HeaderDeadlineFollowsTheInjectedClock) {
  StartServer();
  Client client(server_->port());
  ASSERT_TRUE(client.connected());
  ASSERT_TRUE(client.Send("GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: "));
  // Six times the header timeout of real time, a dozen ticks: the manual clock has not moved,
  // so the connection is still open.
  EXPECT_FALSE(Readable(client.fd(), 300));
  clock_.Advance(std::chrono::milliseconds(51));
  ASSERT_TRUE(Readable(client.fd(), 5000));
  EXPECT_EQ(client.Receive(), "");  // closed, unanswered
}

TEST_F(HttpServerClockTest, KeepAliveWaitEndsOnTheInjectedClock) {
  StartServer();
  Client client(server_->port());
  ASSERT_TRUE(client.connected());
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(client.Send("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"));
    ASSERT_TRUE(Readable(client.fd(), 5000));
    EXPECT_EQ(client.Receive().substr(0, 15), "HTTP/1.1 200 OK");
  }
  EXPECT_FALSE(Readable(client.fd(), 200));
  clock_.Advance(std::chrono::milliseconds(51));
  ASSERT_TRUE(Readable(client.fd(), 5000));
  EXPECT_EQ(client.Receive(), "");
}

}  // namespace
}  // namespace caudal
