// RoutedCalls: one command at a time, each on a connection of its own (OneShot), sent to the
// Redis server that must answer it: the one server; on Redis Cluster, the node last found
// serving the command's slot (following MOVED, and trying the next seed when a node cannot be
// reached); with Sentinel, the primary the sentinels name, asked of them again when it is lost
// or answers READONLY. A few tries at most, each bounded by the timeout. For the stores'
// records that are not decisions (runtime overrides, idempotency keys), whose calls are rare
// next to decisions and must not wait behind them.
//
// Thread-safety: Ask and AskAndWait may be called from any thread (AskAndWait never from the io
// thread); the routing state lives on the io thread.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "caudal/common/clock.h"
#include "caudal/common/status.h"
#include "redis/redis_url.h"
#include "redis/resp.h"
#include "redis/store_support.h"

namespace caudal::redis {

class RoutedCalls {
 public:
  using Done = std::function<void(Result<Reply>)>;

  // `url` is the server's (for Redis Cluster, the first seed's, with `cluster` naming the
  // others; for Sentinel, ignored: `sentinel` names the sentinels). `runner` and `clock` must
  // outlive this object, and calls in flight must be done (the runner stopped) before it goes.
  RoutedCalls(IoRunner& runner, const Clock& clock, RedisUrl url, std::optional<ClusterUrl> cluster,
              std::optional<SentinelUrl> sentinel, std::chrono::milliseconds timeout);

  // Sends `argv` (its keys in Cluster slot `slot`; -1: any node). `done` runs once on the io
  // thread: the reply, which is not an error reply; a Redis error is kUnavailable quoting it.
  void Ask(std::vector<std::string> argv, int slot, Done done);
  // The same, waited for.
  Result<Reply> AskAndWait(std::vector<std::string> argv, int slot);

  // The database commands should SELECT (the URL's, or the Sentinel URL's).
  int64_t db() const { return sentinel_ ? sentinel_->db : first_.db; }

 private:
  struct Call;
  void Attempt(const std::shared_ptr<Call>& call);
  void AskSentinel(const std::shared_ptr<Call>& call, size_t i, Status why);
  void Send(const std::shared_ptr<Call>& call);
  void OnReply(const std::shared_ptr<Call>& call, Result<Reply> r);
  void Finish(const std::shared_ptr<Call>& call, Result<Reply> r);

  IoRunner& runner_;
  const Clock& clock_;
  const RedisUrl first_;
  const std::optional<ClusterUrl> cluster_;
  const std::optional<SentinelUrl> sentinel_;
  const std::chrono::milliseconds timeout_;
  // io thread only:
  RedisUrl url_;                // one server; Sentinel: the primary last named
  bool primary_known_ = false;  // Sentinel: url_ is the primary a sentinel named
  std::unordered_map<int, Endpoint>
      slot_node_;         // Cluster: who last served each slot (16384 at most)
  size_t next_seed_ = 0;  // Cluster: the seed tried when a node is unreachable
};

}  // namespace caudal::redis
