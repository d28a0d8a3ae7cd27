// DelayProxy: a TCP proxy for tests that puts a wide-area link between a client and a server on
// loopback (this machine has no netem). It listens on a free loopback port and forwards each
// connection to one target, every byte delivered a fixed one-way delay after it arrived, per
// direction. A switch cuts the link: Hold() stops forwarding but keeps the sockets (packets
// lost, as a partition looks to TCP: the peers wait), Drop() closes every connection and
// refuses new ones (a reset link), Heal() undoes either; held bytes are then delivered no sooner
// than the delay after the heal.
//
// Bounds: at most `max_connections` connections (more are closed on accept), at most
// `max_buffered` bytes queued per direction of a connection (reading pauses until they drain).
// A connection's TCP handshake is not delayed: the first round trip of a connection through the
// proxy is one delay pair cheaper than a real link's.
//
// Thread-safety: one thread of its own does all the I/O; Hold, Drop, Heal and the accessors may
// be called from any thread, and each has taken effect when it returns.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "caudal/common/status.h"

namespace caudal::testing {

struct DelayProxyOptions {
  uint16_t target_port = 0;               // on 127.0.0.1
  std::chrono::nanoseconds to_target{0};  // one-way delay, client to target
  std::chrono::nanoseconds to_client{0};  // one-way delay, target to client
  size_t max_connections = 256;
  size_t max_buffered = size_t{1} << 20;
};

struct DelayProxyCounts {
  uint64_t accepted = 0;  // connections forwarded
  uint64_t refused = 0;   // connections closed on accept (dropped, or past max_connections)
  size_t open = 0;        // connections open now
  // Bytes read from each side, held ones included (a request sent into a held link is counted).
  uint64_t to_target_bytes = 0;
  uint64_t to_client_bytes = 0;
  // Connections whose client (target) side the proxy has read to its end, held ones included.
  uint64_t client_ends = 0;
  uint64_t target_ends = 0;
};

class DelayProxy {
 public:
  // Listens on 127.0.0.1 on a free port. kInvalidArgument for a zero target port or a negative
  // delay; kUnavailable when it cannot listen.
  static Result<std::unique_ptr<DelayProxy>> Start(DelayProxyOptions options);
  ~DelayProxy();  // closes everything
  DelayProxy(const DelayProxy&) = delete;
  DelayProxy& operator=(const DelayProxy&) = delete;

  uint16_t port() const;
  std::string url() const { return "redis://127.0.0.1:" + std::to_string(port()); }

  void Hold();
  void Drop();
  void Heal();
  // From now on, bytes read are delivered these delays after they arrived; bytes queued keep
  // their time, and the order of a direction's bytes never changes (a shorter delay delivers
  // nothing before what was queued ahead of it). kInvalidArgument for a negative delay.
  Status SetDelay(std::chrono::nanoseconds to_target, std::chrono::nanoseconds to_client);
  DelayProxyCounts Counts() const;

  struct Impl;

 private:
  explicit DelayProxy(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace caudal::testing
