// Raw-socket HTTP/1.1 clients for the service tests: a request on a fresh connection, one on a
// connection kept alive, and whether a port still has a listener.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>

namespace caudal::testing {

inline int ConnectLoopback(uint16_t port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<const sockaddr*>(&a), sizeof a) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

inline std::string PostRequest(std::string_view target, std::string_view body,
                               std::string_view connection) {
  return "POST " + std::string(target) +
         " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: " + std::string(connection) +
         "\r\nContent-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) +
         "\r\n\r\n" + std::string(body);
}

// A response's status (0 when nothing answered), its header block and its body.
struct HttpReply {
  int status = 0;
  std::string head;
  std::string body;
};

inline HttpReply ParseReply(const std::string& response) {
  if (!response.starts_with("HTTP/1.1 ") || response.size() < 12) return {};
  const size_t blank = response.find("\r\n\r\n");
  if (blank == std::string::npos) return {};
  return {.status = std::stoi(response.substr(9, 3)),
          .head = response.substr(0, blank),
          .body = response.substr(blank + 4)};
}

// One HTTP/1.1 exchange on a fresh connection: the status (0 when nothing answered) and the
// body.
inline std::pair<int, std::string> Post(uint16_t port, std::string_view target,
                                        std::string_view body) {
  const int fd = ConnectLoopback(port);
  std::string response;
  if (fd >= 0) {
    const std::string request = PostRequest(target, body, "close");
    if (send(fd, request.data(), request.size(), MSG_NOSIGNAL) ==
        static_cast<ssize_t>(request.size())) {
      char buf[4096];
      for (ssize_t n; (n = recv(fd, buf, sizeof buf, 0)) > 0;) response.append(buf, n);
    }
    close(fd);
  }
  HttpReply reply = ParseReply(response);
  return {reply.status, std::move(reply.body)};
}

// A connection kept open across requests. Each Exchange sends one request and reads one reply
// whose body has a Content-Length (every caudal reply has one).
class KeepAlive {
 public:
  explicit KeepAlive(uint16_t port) : fd_(ConnectLoopback(port)) {}
  ~KeepAlive() {
    if (fd_ >= 0) close(fd_);
  }
  KeepAlive(const KeepAlive&) = delete;
  KeepAlive& operator=(const KeepAlive&) = delete;

  HttpReply Exchange(std::string_view request) {
    if (fd_ < 0 || send(fd_, request.data(), request.size(), MSG_NOSIGNAL) !=
                       static_cast<ssize_t>(request.size())) {
      return {};
    }
    std::string in;
    char buf[4096];
    for (;;) {
      const size_t blank = in.find("\r\n\r\n");
      if (blank != std::string::npos) {
        const size_t at = in.find("Content-Length: ");
        const size_t length = at == std::string::npos ? 0 : std::stoul(in.substr(at + 16));
        if (in.size() >= blank + 4 + length) return ParseReply(in);
      }
      const ssize_t n = recv(fd_, buf, sizeof buf, 0);
      if (n <= 0) return {};
      in.append(buf, n);
    }
  }
  HttpReply Get(std::string_view path) {
    return Exchange("GET " + std::string(path) + " HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n");
  }

 private:
  int fd_;
};

// Whether something still listens on `port`: it cannot be bound again while a listener holds it
// (SO_REUSEADDR lets connections of the past, in TIME_WAIT, not count). A connect() would not
// do: it can connect a socket to itself when its ephemeral port happens to be `port`.
inline bool Listening(uint16_t port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  const int on = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  const bool in_use = bind(fd, reinterpret_cast<const sockaddr*>(&a), sizeof a) != 0;
  close(fd);
  return in_use;
}

}  // namespace caudal::testing
