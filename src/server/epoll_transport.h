// The epoll transport: HttpServer's connections on Asio, one io_context per I/O thread, each run
// by that thread alone. A connection lives on one of them for its whole life, so its handlers
// never run concurrently and need no strand; thread 0 accepts and deals the connections out
// round-robin. Everything but the I/O is the ServerCore's (server_core.h).
//
// Thread-safety: as Transport (transport.h); a reply from a store thread is posted back to its
// connection's io_context.
#pragma once

#include <memory>

#include "caudal/common/status.h"
#include "server/listen_socket.h"
#include "server/server_core.h"
#include "server/transport.h"

namespace caudal::http_server {

// `threads` I/O threads serving `listener`, which the transport owns from now on. `core`
// outlives the transport.
Result<std::unique_ptr<Transport>> StartEpoll(ServerCore& core, ListenSocket listener, int threads);

}  // namespace caudal::http_server
