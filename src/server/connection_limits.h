// What bounds the HTTP server's connections: the process's file descriptors, and each client's
// share of them.
//
// A connection is a descriptor. With max_connections above the descriptor limit, accept() fails
// with EMFILE long before the cap applies, so the server raises its soft RLIMIT_NOFILE to the
// hard limit (RaiseFileLimit) and lowers max_connections to what is left (ConnectionBudget).
// Within that, ClientConnections keeps one client (an address, grouped by a prefix as ip_prefix
// groups them: by default a v4 host, a v6 /64) from holding them all: past
// max_connections_per_client its new connections are closed at once, while other clients still
// get in. A connection's time is bounded too, phase by phase (ConnectionDeadline), and each
// transport cuts it at its deadline (ConnectionDeadline::Wait for one timer per connection,
// DeadlineSweep for one timer per thread).
//
// Thread-safety: ClientConnections is safe from any thread (one mutex); a ConnectionDeadline and
// a DeadlineSweep belong to one thread; the functions are pure except RaiseFileLimit and
// OpenDescriptors, which read and set the process's state.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "caudal/common/clock.h"
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

inline constexpr Nanos kNoDeadline = Nanos::max();

// A transport's timer fires every `tick` to see deadlines set since it last fired; with tick no
// longer than the shortest timeout, none of those falls before its next firing, so the timer can
// also fire at each deadline itself, and a connection is cut when its deadline passes, not up to
// a tick later. CheckWait is the wait from `now` until `next`, at least kMinCheckWait: deadlines
// are read on the clock's coarse reading, which can lag the timer by a kernel tick (1 to 10 ms),
// and a timer that finds a deadline not quite reached waits again rather than spin.
inline constexpr Nanos kMinCheckWait = std::chrono::milliseconds(1);
inline Nanos CheckWait(Nanos now, Nanos next) { return std::max(next - now, kMinCheckWait); }

// A connection's deadline through its phases, on the clock's MonotonicCoarse(). Each phase's
// deadline is a total, however the client paces its bytes:
//   - the first request's header, a TLS handshake included: header timeout from accept;
//   - a later request (keep-alive): idle timeout for its first byte, then header timeout from
//     that byte for the rest of its header;
//   - a body: body timeout from the end of its header; a response being sent: body timeout;
//   - a decision at the store: none (the store's own deadline bounds it).
// The clock is read where a phase starts, a keep-alive request whose header comes in one read
// costing no reading of its own.
class ConnectionDeadline {
 public:
  struct Timeouts {
    Micros header;
    Micros body;
    Micros idle;
  };
  ConnectionDeadline(const Clock& clock, Timeouts timeouts) : clock_(&clock), timeouts_(timeouts) {}

  void Accepted() { Start(Phase::kHeader, timeouts_.header); }
  void AwaitNext() { Start(Phase::kIdle, timeouts_.idle); }
  // Bytes of the request being read are in, its header not yet whole: its header timeout runs
  // from the first of them.
  void RequestStarted() {
    if (phase_ == Phase::kIdle) Start(Phase::kHeader, timeouts_.header);
  }
  void BodyStarted() { Start(Phase::kBody, timeouts_.body); }
  void Sending() { Start(Phase::kSending, timeouts_.body); }
  void Deciding() {
    phase_ = Phase::kDeciding;
    at_ = kNoDeadline;
  }

  Nanos at() const { return at_; }
  bool Expired(Nanos now) const { return now >= at_; }
  // For a timer of this connection's own firing at `now`: the wait until it checks again, at
  // the deadline when it falls within `tick`.
  Nanos Wait(Nanos now, Nanos tick) const { return CheckWait(now, std::min(now + tick, at_)); }

 private:
  enum class Phase : uint8_t { kHeader, kIdle, kBody, kSending, kDeciding };
  void Start(Phase phase, Micros timeout) {
    phase_ = phase;
    at_ = clock_->MonotonicCoarse() + timeout;
  }

  const Clock* clock_;
  Timeouts timeouts_;
  Phase phase_ = Phase::kHeader;
  Nanos at_ = kNoDeadline;
};

// The deadlines of one thread's connections on one timer (the io_uring transport): a sweep of
// every connection each tick cuts those past their deadline and notes those due before the next
// sweep; the timer then fires at each of those deadlines too, where only they are checked again.
// A connection is cut at its deadline for one pass over the connections per tick and one check
// per deadline that comes due, however many connections there are.
template <typename Id>
class DeadlineSweep {
 public:
  // `tick` no longer than the shortest timeout (see CheckWait).
  explicit DeadlineSweep(Nanos tick) : tick_(tick) {}

  // Whether the timer firing at `now` is the next sweep's (else a noted deadline's).
  bool SweepDue(Nanos now) const { return now >= next_sweep_; }
  // A sweep at `now`: Note() every connection not cut, then EndSweep().
  void BeginSweep(Nanos now) {
    next_sweep_ = now + tick_;
    due_.clear();
  }
  void Note(Id id, Nanos deadline) {
    if (deadline < next_sweep_) due_.push_back({deadline, id});
  }
  void EndSweep() {
    std::sort(due_.begin(), due_.end(), [](const Due& a, const Due& b) { return a.at > b.at; });
  }
  // Calls `check(id)` for each noted connection whose deadline has come by `now`, earliest first,
  // and forgets it. Its deadline may have moved since it was noted, and it may be gone: the
  // caller looks again.
  template <typename F>
  void TakeDue(Nanos now, F&& check) {
    while (!due_.empty() && due_.back().at <= now) {
      const Id id = due_.back().id;
      due_.pop_back();
      check(id);
    }
  }
  // The wait from `now` until the timer should fire next.
  Nanos Wait(Nanos now) const {
    return CheckWait(now, due_.empty() ? next_sweep_ : std::min(next_sweep_, due_.back().at));
  }

 private:
  struct Due {
    Nanos at;
    Id id;
  };
  const Nanos tick_;
  Nanos next_sweep_{0};
  std::vector<Due> due_;  // latest first: the next due at the back
};

}  // namespace caudal::http_server
