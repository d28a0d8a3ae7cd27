// Node: one Redis server as a store sees it: a few pipelined connections, re-established with
// exponential backoff when lost, and a queue of script calls that leave in batches.
//
// A store hands it Parts (one request's share of a script call, with the hash slot its keys
// live in). The node sends what waits to a connection with a free call slot, up to `max_batch`
// parts per EVALSHA; while every call slot is busy parts keep waiting, which is what makes
// batches grow under load. Parts of different slots share a call only with `cross_slot` (Redis
// Cluster refuses declared keys that span slots, so such a call passes its keys undeclared and
// the script checks them: lua_protocol.h); a part sent after an ASK redirect travels alone,
// after ASKING. A NOSCRIPT reply (SCRIPT FLUSH, a restart) is answered here by
// loading the script and sending the same call again; every other outcome goes back to the
// store's NodeListener: the reply, or the failure of the whole call.
//
// Everything known about one server lives here: its connections, its last error and, in a store
// of several servers, its own circuit breaker.
//
// Thread-safety: none; every member runs on the io thread of the store that owns the node.
#pragma once

#include <atomic>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "caudal/common/circuit_breaker.h"
#include "caudal/common/clock.h"
#include "caudal/common/status.h"
#include "caudal/redis/redis_store.h"
#include "redis/connection.h"
#include "redis/lua_protocol.h"
#include "redis/native_count.h"
#include "redis/redis_url.h"
#include "redis/resp.h"

namespace caudal::redis {

// One request's share of a script call. Stores derive from it to keep their own state.
struct Part {
  virtual ~Part() = default;
  // True when the part need not be sent any more (its request was answered meanwhile).
  virtual bool Abandoned() const { return false; }

  EncodedRequest request;
  int slot = -1;        // the hash slot of every key, or -1 (one Redis: any parts batch together)
  bool asking = false;  // after an ASK redirect: ASKING first, and this part alone in its call
  // Travels only with parts of its own slot, keys declared: the node did not serve it in a call
  // spanning slots, so Redis's redirects (MOVED, ASK) must now say where it goes.
  bool own_slot = false;
  // When (Clock::Monotonic()) its first call was written to a connection; -1 while it waits
  // here. A deadline counts from this, not from the time spent queued in caudal.
  Nanos sent_at{-1};
  bool probe = false;  // its last call was the node breaker's half-open probe
};
using PartPtr = std::shared_ptr<Part>;

class Node;

class NodeListener {
 public:
  virtual ~NodeListener() = default;
  // The call carrying `parts` came back: `reply` is Redis's reply (possibly an error reply other
  // than NOSCRIPT), or why the call failed (connection lost, or never sent: no connection).
  virtual void OnCallDone(Node& node, std::vector<PartPtr>& parts, Result<Reply> reply) = 0;
  // The node lost its last connection, or failed to reconnect.
  virtual void OnNodeDown(Node& node, const Status& why) = 0;
};

// What a store's nodes share with its callers' threads (DecideBatchAsync, Stats()).
struct NodeCounters {
  std::atomic<uint64_t> calls{0};          // script calls sent, retries included
  std::atomic<uint64_t> reloads{0};        // NOSCRIPT answered by loading the script again
  std::atomic<uint64_t> module_calls{0};   // calls sent to the caudal module (CAUDAL.CONSUME)
  std::atomic<uint64_t> reconnects{0};     // connections re-established after a loss
  std::atomic<int> ready{0};               // connections ready, over every node
  std::atomic<uint64_t> breaker_opens{0};  // node breakers opened

  void SetLastError(std::string why) {
    std::lock_guard lock(mu);
    last_error = std::move(why);
  }
  std::string LastError() const {
    std::lock_guard lock(mu);
    return last_error;
  }

 private:
  mutable std::mutex mu;
  std::string last_error = "not connected yet";  // guarded by mu
};

struct NodeOptions {
  RedisUrl url;
  std::string name;  // for messages ("redis://127.0.0.1:6379/0"); empty: host:port
  ConnectionSetup setup;
  size_t connections = 2;
  size_t max_calls_in_flight = 2;
  size_t max_batch = 128;
  // Parts of different slots may share a call, their keys undeclared (Redis Cluster).
  bool cross_slot = false;
  std::chrono::milliseconds connect_timeout{2000};
  std::chrono::milliseconds stall_timeout{2000};
  std::chrono::milliseconds reconnect_min{10};
  std::chrono::milliseconds reconnect_max{500};
  // Decide at this clock's Now() instead of Redis's TIME (tests); null in production.
  const Clock* decision_clock = nullptr;
  // Requests of native counts go as Redis's own commands (native_count.h), not the script's.
  bool native_counts = false;
  // A circuit breaker of its own (caudal/common/circuit_breaker.h), for stores of several servers;
  // none: the caller guards the store as a whole.
  std::optional<BreakerRules> breaker{};
  // Told of each change of that breaker's state (on the io thread); may be unset.
  std::function<void(const NodeBreakerEvent&)> on_breaker{};
};

class Node {
 public:
  // `tls`, `clock`, `listener` and `counters` must outlive the node; `clock`'s Monotonic()
  // times calls in flight.
  Node(boost::asio::io_context& io, boost::asio::ssl::context* tls, const Clock& clock,
       NodeOptions options, NodeListener& listener, NodeCounters& counters);
  ~Node();
  Node(const Node&) = delete;
  Node& operator=(const Node&) = delete;

  // Opens every connection. `done` runs once every connection has made its first attempt: Ok,
  // or the first failure (the failed connections keep retrying in the background).
  void Start(std::function<void(Status)> done);
  // Closes every connection and stops reconnecting; calls in flight fail with `why`.
  void Shutdown(const Status& why);

  // Queues a part; Dispatch() sends it.
  void Enqueue(PartPtr part) { waiting_.push_back(std::move(part)); }
  // Sends what waits, as batches, to connections with room. With no connection up (once the
  // first attempt to connect is over), the waiting parts go back to the listener as failed.
  void Dispatch();
  // Removes and returns every part not yet sent (to route them elsewhere).
  std::vector<PartPtr> TakeWaiting();

  // Sends one command (PING, CLUSTER SLOTS...) on a ready connection, outside the call slots.
  // False when no connection is ready.
  bool SendCommand(const std::vector<std::string_view>& argv, Connection::ReplyHandler handler);

  // `part`, sent here, passed its deadline at `now` unanswered: a failure for the node's breaker.
  void DeadlinePassed(const Part& part, Nanos now, const std::string& why);
  // Drops connections whose oldest call waited `stall_timeout` at `now` (Monotonic()).
  void CheckStalls(Nanos now);
  // When the next stall check is due, if any call is in flight.
  std::optional<Nanos> NextStallCheck() const;
  // True when the node is why parts wait here: no ready connection, or every ready connection's
  // oldest call has waited `budget` at `now` (Redis is late, not caudal busy).
  bool Late(Nanos now, Nanos budget) const;

  // True when a connection with calls in flight has bytes from the server not read yet.
  bool ReplyUnread() const;
  bool ready() const { return ready_ > 0; }
  bool busy() const;  // parts waiting or calls in flight
  const RedisUrl& url() const { return options_.url; }
  // "127.0.0.1:7000"
  const std::string& address() const { return address_; }
  // Unavailable: no connection to this node, and the last error.
  Status NotConnected() const;
  const std::string& last_error() const { return last_error_; }
  // Its breaker's state; closed when it has none.
  BreakerState breaker_state() const {
    return breaker_ ? breaker_->state() : BreakerState::kClosed;
  }

 private:
  struct Link {
    explicit Link(boost::asio::io_context& io) : retry(io) {}
    std::shared_ptr<Connection> conn;
    boost::asio::steady_timer retry;
    std::chrono::milliseconds backoff{0};
  };
  struct Call {
    std::vector<PartPtr> parts;
    int reloads = 0;
    bool probe = false;   // the half-open breaker's probe
    bool native = false;  // a pipeline of native counts (native_count.h)
    bool module = false;  // sent to the caudal module (CAUDAL.CONSUME) last
    int64_t sent_wall_us = 0;
  };

  void Connect(Link& link, std::function<void(Status)> done);
  // Fails every part waiting here with `why`.
  void FailWaiting(const Status& why);
  void BreakerFailed(Nanos now, CircuitBreaker::Call call, CircuitBreaker::Failure how,
                     std::string why);
  // Counts and tells a change of the breaker's state since `before`.
  void BreakerMoved(BreakerState before);
  void OnLost(Link& link, const Status& why);
  void Retry(Link& link);
  std::shared_ptr<Connection> PickConnection() const;
  std::vector<PartPtr> NextBatch();
  void SendCall(const std::shared_ptr<Connection>& conn, std::shared_ptr<Call> call);
  void SendNativeCall(const std::shared_ptr<Connection>& conn, const std::shared_ptr<Call>& call);
  bool Native(const Part& p) const { return options_.native_counts && !p.request.native.empty(); }
  // Whether native counts may be sent: the store's time is given, or estimated already. If not,
  // asks Redis for its TIME (once at a time) and dispatches again with the answer.
  bool NativeClockReady();
  // Sends a TIME whose answer refreshes native_clock_, unless one is on its way.
  void AskTime();
  void OnCallReply(const std::weak_ptr<Connection>& conn, const std::shared_ptr<Call>& call,
                   Result<Reply> reply);

  boost::asio::io_context& io_;
  boost::asio::ssl::context* tls_;
  const Clock& clock_;
  const NodeOptions options_;
  const std::string address_;
  const std::string name_;
  NodeListener& listener_;
  NodeCounters& counters_;
  std::vector<std::unique_ptr<Link>> links_;
  std::deque<PartPtr> waiting_;  // null entries were taken by a batch out of order
  int ready_ = 0;
  bool starting_ = false;  // Start()'s first attempts are not all over yet
  bool shut_down_ = false;
  std::string last_error_ = "not connected yet";
  std::optional<CircuitBreaker> breaker_;
  NativeClock native_clock_;
  bool asking_time_ = false;
  // Outlives the node inside pending handlers, which check it before touching the node.
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace caudal::redis
