// UringServer: HttpServer's connections on io_uring, one ring per I/O thread.
//
// The epoll transport (Asio) pays one system call per readiness change, per recv() and per
// send(). Here a thread's loop prepares every receive, send and accept it has for its connections
// and hands them all to the kernel, and takes all their completions back, in one io_uring_enter
// per round: under load, one call covers many requests. A response is sent with its connection's
// next receive linked behind it, so a keep-alive request costs two submissions and no call of its
// own. Thread 0 accepts and deals the connections out round-robin.
//
// Behaviour is the epoll transport's, request for request: the same parser, limits, deadlines
// (one timer per thread: a sweep of its connections once a tick, and a check at each deadline
// due before the next; DeadlineSweep), caps, refusals, TLS (OpenSSL over memory buffers) and
// drain (HttpServer::Impl holds the shared parts).
//
// Thread-safety: Start() and Stop() from one thread; a connection's completions and replies run
// on its ring's thread (a reply from a store thread is posted there through an eventfd).
#pragma once

#include <memory>
#include <vector>

#include "caudal/common/status.h"
#include "server/server.h"

namespace caudal::http_server {

class UringLoop;

// Why this process cannot run the HTTP listener on io_uring (the kernel has it disabled, a
// seccomp profile refuses io_uring_setup, or an operation it needs is missing); OK when it can.
Status ProbeUring();

class UringServer {
 public:
  // `threads` rings, each on its thread; thread 0 accepts from `listen_fd` (listening, owned by
  // the caller, which closes it after Stop()). Fails, with nothing left running, when a ring
  // cannot be set up.
  static Result<std::unique_ptr<UringServer>> Start(HttpServer::Impl& server, int listen_fd,
                                                    int threads);
  ~UringServer();  // Stop()
  UringServer(const UringServer&) = delete;
  UringServer& operator=(const UringServer&) = delete;

  // The listener stops listening at once (shutdown(2)): once this returns, new connections are
  // refused. Any thread.
  void StopAccepting();
  // Ends the loops: open connections are closed, posted replies dropped. Joins the threads.
  void Stop();

 private:
  UringServer(int listen_fd, std::vector<std::unique_ptr<UringLoop>> loops);
  const int listen_fd_;
  std::vector<std::unique_ptr<UringLoop>> loops_;
};

}  // namespace caudal::http_server
