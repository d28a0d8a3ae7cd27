#include "server/listen_socket.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

namespace caudal::http_server {
namespace {

// Whether a client connects to 127.0.0.1:port (a listening socket completes it from its backlog).
bool Connects(uint16_t port) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  const bool ok = connect(fd, reinterpret_cast<const sockaddr*>(&a), sizeof a) == 0;
  close(fd);
  return ok;
}

bool Open(int fd) { return fcntl(fd, F_GETFD) != -1; }

TEST(ListenSocket, ListensOnTheAddressAndSaysWhichPortItGot) {
  auto s = ListenSocket::Open("localhost", 0);  // 127.0.0.1
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->family(), IpFamily::kV4);
  ASSERT_NE(s->port(), 0);
  sockaddr_in bound{};
  socklen_t len = sizeof bound;
  ASSERT_EQ(getsockname(s->fd(), reinterpret_cast<sockaddr*>(&bound), &len), 0);
  EXPECT_EQ(ntohl(bound.sin_addr.s_addr), INADDR_LOOPBACK);
  EXPECT_EQ(ntohs(bound.sin_port), s->port());
  int reuse = 0;
  len = sizeof reuse;
  ASSERT_EQ(getsockopt(s->fd(), SOL_SOCKET, SO_REUSEADDR, &reuse, &len), 0);
  EXPECT_NE(reuse, 0);
  EXPECT_NE(fcntl(s->fd(), F_GETFD) & FD_CLOEXEC, 0);
  EXPECT_TRUE(Connects(s->port()));
}

TEST(ListenSocket, RefusesWhatIsNoAddressAndAPortTaken) {
  auto bad = ListenSocket::Open("example.com", 0);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(bad.status().message(), "http: bad address \"example.com\"");
  auto first = ListenSocket::Open("127.0.0.1", 0);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  auto second = ListenSocket::Open("127.0.0.1", first->port());
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(second.status().message().find("Address already in use"), std::string::npos)
      << second.status().message();
}

TEST(ListenSocket, ClosesItsDescriptorUnlessReleased) {
  auto s = ListenSocket::Open("127.0.0.1", 0);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  const int fd = s->fd();
  ListenSocket moved = std::move(*s);
  EXPECT_EQ(s->fd(), -1);
  EXPECT_EQ(moved.fd(), fd);
  const int released = moved.Release();
  EXPECT_EQ(released, fd);
  { const ListenSocket gone = std::move(moved); }
  EXPECT_TRUE(Open(fd));  // released: the caller's now
  close(fd);
  auto t = ListenSocket::Open("127.0.0.1", 0);
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  const int owned = t->fd();
  { const ListenSocket gone = std::move(*t); }
  EXPECT_FALSE(Open(owned));
}

}  // namespace
}  // namespace caudal::http_server
