#include "server/listen_socket.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <utility>

#include "common/cat.h"

namespace caudal::http_server {

Result<ListenSocket> ListenSocket::Open(std::string_view host_text, uint16_t port) {
  const std::string host = host_text == "localhost" ? "127.0.0.1" : std::string(host_text);
  const Result<IpAddress> address = IpAddress::Parse(host);
  if (!address.ok()) return Status::InvalidArgument(Cat("http: bad address ", Quoted(host_text)));
  sockaddr_storage ss{};
  socklen_t len = 0;
  if (address->family == IpFamily::kV4) {
    auto* sin = reinterpret_cast<sockaddr_in*>(&ss);
    sin->sin_family = AF_INET;
    sin->sin_port = htons(port);
    std::memcpy(&sin->sin_addr, address->bytes.data(), 4);
    len = sizeof(sockaddr_in);
  } else {
    auto* sin6 = reinterpret_cast<sockaddr_in6*>(&ss);
    sin6->sin6_family = AF_INET6;
    sin6->sin6_port = htons(port);
    std::memcpy(&sin6->sin6_addr, address->bytes.data(), 16);
    len = sizeof(sockaddr_in6);
  }
  const auto failed = [&](int e) {
    return Status::Unavailable(Cat("cannot listen on ", host, ':', port, ": ", std::strerror(e)));
  };
  const int fd = ::socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return failed(errno);
  ListenSocket s(fd, address->family, port);
  const int one = 1;
  if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) != 0 ||
      ::bind(fd, reinterpret_cast<const sockaddr*>(&ss), len) != 0 ||
      ::listen(fd, SOMAXCONN) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0) {
    return failed(errno);
  }
  s.port_ =
      ntohs(address->family == IpFamily::kV4 ? reinterpret_cast<sockaddr_in*>(&ss)->sin_port
                                             : reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port);
  return s;
}

ListenSocket::ListenSocket(ListenSocket&& other) noexcept
    : fd_(std::exchange(other.fd_, -1)), family_(other.family_), port_(other.port_) {}

ListenSocket& ListenSocket::operator=(ListenSocket&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = std::exchange(other.fd_, -1);
    family_ = other.family_;
    port_ = other.port_;
  }
  return *this;
}

ListenSocket::~ListenSocket() {
  if (fd_ >= 0) ::close(fd_);
}

int ListenSocket::Release() { return std::exchange(fd_, -1); }

}  // namespace caudal::http_server
