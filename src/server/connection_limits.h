// What bounds the HTTP server's connections: the process's file descriptors, and each client's
// share of them.
//
// A connection is a descriptor. With max_connections above the descriptor limit, accept() fails
// with EMFILE long before the cap applies, so the server raises its soft RLIMIT_NOFILE to the
// hard limit (RaiseFileLimit) and lowers max_connections to what is left (ConnectionBudget).
// Within that, ClientConnections keeps one client (an address, grouped by a prefix as ip_prefix
// groups them: by default a v4 host, a v6 /64) from holding them all: past
// max_connections_per_client its new connections are closed at once, while other clients still
// get in.
//
// Thread-safety: ClientConnections is safe from any thread (one mutex); the functions are pure
// except RaiseFileLimit and OpenDescriptors, which read and set the process's state.
#pragma once

#include <cstdint>
#include <mutex>
#include <unordered_map>

#include "caudal/engine/ip.h"
#include "caudal/engine/policy.h"

namespace caudal::http_server {

// Descriptors kept free for everything but HTTP connections: the store's connections and their
// reconnections, the gRPC service's connections, the listening sockets, files being reloaded.
inline constexpr int64_t kReservedDescriptors = 128;

struct FileLimit {
  int64_t soft = 0;
  int64_t hard = 0;
};
// Raises the soft RLIMIT_NOFILE to the hard limit when it is lower (always allowed) and returns
// the limits in force afterwards.
FileLimit RaiseFileLimit();
// How many descriptors the process has open now (-1 if unknown).
int64_t OpenDescriptors();

// The most HTTP connections that fit: `wanted`, or fewer when the soft descriptor limit, less
// the `open` descriptors and kReservedDescriptors, leaves less room (at least 1).
int64_t ConnectionBudget(int64_t wanted, int64_t soft_limit, int64_t open);

// The connections each client holds, by address under a prefix.
class ClientConnections {
 public:
  // `per_client` ≥ 1.
  ClientConnections(int64_t per_client, IpPrefix prefix)
      : per_client_(per_client), prefix_(prefix) {}

  enum class Admission : uint8_t {
    kAdmitted,      // counted: Release() it when the connection ends
    kRefused,       // the client holds per_client connections already
    kRefusedFirst,  // likewise, the first time since it held none: worth a log line
  };
  Admission Admit(const IpAddress& peer);
  void Release(const IpAddress& peer);

  int64_t per_client() const { return per_client_; }
  IpAddress Group(const IpAddress& peer) const {
    return peer.Masked(peer.family == IpFamily::kV4 ? prefix_.v4 : prefix_.v6);
  }
  // Clients holding at least one connection.
  size_t clients() const;

 private:
  struct Hash {
    size_t operator()(const IpAddress& a) const;
  };
  struct Held {
    int64_t connections = 0;
    bool refusing = false;  // a connection was refused since it last held none
  };

  const int64_t per_client_;
  const IpPrefix prefix_;
  mutable std::mutex mu_;
  std::unordered_map<IpAddress, Held, Hash> held_;  // guarded by mu_; one entry per client
};

}  // namespace caudal::http_server
