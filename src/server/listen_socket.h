// ListenSocket: the HTTP server's listening TCP socket, opened once and handed to whichever
// transport serves it (epoll_transport.h, uring_transport.h), which owns it from then on.
//
// Thread-safety: none needed (made and handed over on the starting thread).
#pragma once

#include <cstdint>
#include <string_view>

#include "caudal/common/status.h"
#include "caudal/engine/ip.h"

namespace caudal::http_server {

class ListenSocket {
 public:
  // Bound to `host` ("localhost" is 127.0.0.1; otherwise an IPv4 or IPv6 address) and `port`
  // (0: any free one), with SO_REUSEADDR, listening with the system's largest backlog.
  // kInvalidArgument for a host that is not an address; kUnavailable when it cannot be bound.
  static Result<ListenSocket> Open(std::string_view host, uint16_t port);

  ListenSocket() = default;  // none: fd() is -1
  ListenSocket(ListenSocket&& other) noexcept;
  ListenSocket& operator=(ListenSocket&& other) noexcept;
  ~ListenSocket();  // closes the descriptor, unless released

  int fd() const { return fd_; }
  IpFamily family() const { return family_; }
  uint16_t port() const { return port_; }  // the one bound
  // The descriptor, now the caller's to close.
  int Release();

 private:
  ListenSocket(int fd, IpFamily family, uint16_t port) : fd_(fd), family_(family), port_(port) {}

  int fd_ = -1;
  IpFamily family_ = IpFamily::kV4;
  uint16_t port_ = 0;
};

}  // namespace caudal::http_server
