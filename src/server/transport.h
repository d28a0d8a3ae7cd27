// Transport: how HttpServer's bytes move, one of two (server.http_io): epoll through Asio
// (epoll_transport.h) or io_uring (uring_transport.h). A transport only does I/O over the
// ServerCore it is started with (server_core.h), which decides everything else; each is started
// on the ListenSocket HttpServer opened, `threads` I/O threads serving it.
//
// Thread-safety: StopAccepting() and Stop() from the thread that owns the transport.
#pragma once

namespace caudal::http_server {

class Transport {
 public:
  virtual ~Transport() = default;  // Stop()

  // The listener stops listening: once this returns, nothing listens on the port and new
  // connections are refused. Open connections go on.
  virtual void StopAccepting() = 0;
  // Ends the I/O threads and joins them: open connections are closed, replies still to come
  // dropped. After StopAccepting().
  virtual void Stop() = 0;
};

}  // namespace caudal::http_server
