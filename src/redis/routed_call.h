// RoutedCalls: calls of one Lua script, each sent to the Redis server that must answer it: the
// one server; on Redis Cluster, the node last found serving the call's slot (following MOVED,
// and trying the next seed when a node cannot be reached); with Sentinel, the primary the
// sentinels name, asked of them again (one question at a time, the calls waiting for its answer)
// when it is lost or answers READONLY. A few tries at most; each call answered within its
// timeout. For the stores' records that are not decisions (runtime overrides, idempotency keys),
// whose calls must not wait behind decisions.
//
// Each server it talks to is a Node (node.h) of its own: `connections` persistent connections,
// reconnected with backoff, each of which loaded the script on connect (SCRIPT LOAD); calls are
// pipelined on them as EVALSHA, and a NOSCRIPT (SCRIPT FLUSH, a restart) loads it again and
// resends. At most `max_calls` calls are in flight (waiting to be sent or sent, until answered
// or their connection is dropped); beyond it a call fails at once with kResourceExhausted, and a
// follow-up call (one that ends work a call before it started) may take as many again. A call
// unanswered at its `timeout` fails then, and stays counted until its connection answers or is
// dropped: a connection whose oldest call waited `stall_timeout` is, so a server that stops
// answering holds no more than the bound. At most kMaxServers servers are kept (Cluster: idle
// ones go first).
//
// Thread-safety: Ask and AskAndWait may be called from any thread (AskAndWait never from the io
// thread); Shutdown and the routing state belong to the io thread.
#pragma once

#include <atomic>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "caudal/common/clock.h"
#include "caudal/common/status.h"
#include "redis/node.h"
#include "redis/one_shot.h"
#include "redis/redis_url.h"
#include "redis/resp.h"
#include "redis/store_support.h"

namespace caudal::redis {

struct RoutedCallsOptions {
  // A call's answer, over all its tries, connecting and asking the sentinels included: the
  // store's deadline (store.timeout), as for a decision.
  Micros timeout = std::chrono::milliseconds(10);
  // A connection's setup (resolve, TCP, TLS, AUTH, SELECT, SCRIPT LOAD), and a sentinel's answer.
  std::chrono::milliseconds connect_timeout{2000};
  // A connection whose oldest call has waited this long is dropped and made again.
  std::chrono::milliseconds stall_timeout{2000};
  size_t connections = 2;  // per server
  size_t max_calls = 1024;
  std::chrono::milliseconds reconnect_min{10};
  std::chrono::milliseconds reconnect_max{500};
};

// A store's RoutedCallsOptions: its deadline, connect_timeout, stall_timeout, max_record_calls
// and reconnect backoff.
RoutedCallsOptions RecordCallsOptions(const RedisStoreOptions& options);

class RoutedCalls final : private NodeListener {
 public:
  using Done = std::function<void(Result<Reply>)>;
  enum class Admission : uint8_t {
    kNew,       // refused beyond max_calls in flight
    kFollowUp,  // refused beyond twice max_calls
  };
  static constexpr size_t kMaxServers = 64;

  // `url` is the server's (for Redis Cluster, the first seed's, with `cluster` naming the
  // others; for Sentinel, ignored: `sentinel` names the sentinels). `script` (static storage) is
  // what every call runs. `runner` and `clock` must outlive this object; Shutdown must have run
  // on the io thread (the runner stopped) before it goes. Nothing connects before the first call.
  RoutedCalls(IoRunner& runner, const Clock& clock, RedisUrl url, std::optional<ClusterUrl> cluster,
              std::optional<SentinelUrl> sentinel, std::string_view script,
              RoutedCallsOptions options);
  ~RoutedCalls() override;
  RoutedCalls(const RoutedCalls&) = delete;
  RoutedCalls& operator=(const RoutedCalls&) = delete;

  // EVALSHA of the script with `args` (numkeys, the keys, in Cluster slot `slot` (-1: any node),
  // then the arguments). `done` runs once: the reply, which is not an error reply (a Redis error
  // is kUnavailable quoting it), on the io thread; or kResourceExhausted at once, on the
  // caller's thread, past the bound.
  void Ask(std::vector<std::string> args, int slot, Done done,
           Admission admission = Admission::kNew);
  // The same, waited for.
  Result<Reply> AskAndWait(std::vector<std::string> args, int slot);
  // Io thread: closes every connection and stops; calls in flight and after fail.
  void Shutdown();

  // The database the connections SELECT (the URL's, or the Sentinel URL's).
  int64_t db() const { return sentinel_ ? sentinel_->db : first_.db; }
  // Calls in flight now; any thread.
  size_t in_flight() const { return in_flight_.load(std::memory_order_relaxed); }
  // The script's SHA1, which EVALSHA names.
  const std::string& sha1() const { return sha1_; }

 private:
  struct Call;
  struct Server;
  using CallPtr = std::shared_ptr<Call>;

  void OnCallDone(Node&, std::vector<PartPtr>&, Result<Reply>) override {}
  void OnNodeDown(Node&, const Status&) override {}

  void Begin(const CallPtr& call);
  void Attempt(const CallPtr& call);
  void AskSentinel(size_t i, Status why);
  void PrimaryNamed(RedisUrl primary);
  Server* ServerFor(const RedisUrl& url);
  void Retire(const std::string& address);
  void Send(const CallPtr& call);
  void Write(Server& server, const CallPtr& call);
  void OnReply(const CallPtr& call, Result<Reply> r);
  void Reload(const CallPtr& call);
  void CheckStallsLater();
  void Finish(const CallPtr& call, Result<Reply> r);
  static void Answer(Call& call, Result<Reply> r);
  void Release(Call& call);

  IoRunner& runner_;
  const Clock& clock_;
  const RedisUrl first_;
  const std::optional<ClusterUrl> cluster_;
  const std::optional<SentinelUrl> sentinel_;
  const std::string_view script_;
  const std::string sha1_;
  const RoutedCallsOptions options_;
  std::atomic<size_t> in_flight_{0};
  NodeCounters counters_;
  // io thread only:
  bool shut_down_ = false;
  RedisUrl url_;                     // one server; Sentinel: the primary last named
  bool primary_known_ = false;       // Sentinel: url_ is the primary a sentinel named
  std::shared_ptr<OneShot> asking_;  // Sentinel: the question on its way
  std::deque<CallPtr> for_primary_;  // Sentinel: calls waiting for its answer
  std::unordered_map<int, Endpoint>
      slot_node_;         // Cluster: who last served each slot (16384 at most)
  size_t next_seed_ = 0;  // Cluster: the seed tried when a node is unreachable
  std::unordered_map<std::string, std::unique_ptr<Server>> servers_;  // by "host:port"
  boost::asio::steady_timer stall_timer_;
  std::optional<Nanos> stall_check_at_;  // when stall_timer_ fires (Monotonic())
};

}  // namespace caudal::redis
