// The io_uring transport: HttpServer's connections on io_uring, one ring per I/O thread.
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
// drain (the ServerCore decides them, server_core.h).
//
// Thread-safety: as Transport (transport.h); a connection's completions and replies run on its
// ring's thread (a reply from a store thread is posted there through an eventfd).
#pragma once

#include <memory>

#include "caudal/common/status.h"
#include "server/listen_socket.h"
#include "server/server_core.h"
#include "server/transport.h"

namespace caudal::http_server {

// Why this process cannot run the HTTP listener on io_uring (the kernel has it disabled, a
// seccomp profile refuses io_uring_setup, or an operation it needs is missing); OK when it can.
Status ProbeUring();

// `threads` rings, each on its thread, serving `listener`, which the transport takes once they
// run. Fails, with nothing left running and `listener` left with the caller, when a ring cannot
// be set up. `core` outlives the transport.
Result<std::unique_ptr<Transport>> StartUring(ServerCore& core, ListenSocket& listener,
                                              int threads);

}  // namespace caudal::http_server
