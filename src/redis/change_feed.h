// ChangeFeed: the runtime overrides' announcements (OverrideFeed, store/override_store.h) heard
// through Redis Pub/Sub. The overrides' script PUBLISHes the new version on one channel with
// every change (redis_override_store.h); this keeps a connection of its own SUBSCRIBEd to it and
// hands each message's version on. A message is only a hint to read again, so a lost one costs
// the wait for the next poll, and a forged one at most an early read.
//
// Where it subscribes: the one server; on Redis Cluster, any node (a seed, each in turn after a
// failure): PUBLISH (not SPUBLISH) reaches every node over the cluster bus, so that the feed
// needs no slot routing and is not dropped when the overrides' slot moves, at the cost of one
// bus message per node for each change, which are rare; with Sentinel, the primary the sentinels
// name, asked again at each reconnection (a demoted primary that keeps the connection still
// hears the new primary's messages through replication). A lost or refused subscription (a
// server gone, CLIENT KILL, a user not allowed the channel) is made again with backoff
// (reconnect_min doubling to reconnect_max); a connection that leaves its SUBSCRIBE or a PING
// unanswered for a heartbeat is dropped. Nothing here is on a decision's path: the feed only wakes
// the admin's thread.
//
// Thread-safety: none; every member runs on the runner's io thread.
#pragma once

#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "caudal/common/clock.h"
#include "redis/connection.h"
#include "redis/one_shot.h"
#include "redis/redis_url.h"
#include "redis/resp.h"
#include "redis/store_support.h"
#include "store/override_store.h"

namespace caudal::redis {

// The longest message that names a version (20 decimal digits); longer ones are hints without one.
inline constexpr size_t kMaxFeedMessageBytes = 20;

// One frame a subscribed connection receives.
struct FeedFrame {
  enum class Kind : uint8_t { kMessage, kSubscribed, kOther };
  Kind kind = Kind::kOther;
  std::optional<uint64_t> version;  // kMessage: its decimal text, when that is all it holds
};
// A RESP2 Pub/Sub frame on `channel`: ["message", channel, text] or ["subscribe", channel, n].
FeedFrame ParseFeedFrame(const redisReply& frame, std::string_view channel);

struct ChangeFeedOptions {
  std::chrono::milliseconds connect_timeout{2000};  // a connection's setup, a sentinel's answer
  std::chrono::milliseconds reconnect_min{10};
  std::chrono::milliseconds reconnect_max{500};
  std::chrono::milliseconds heartbeat{5000};  // PING's period; unanswered by the next: dropped
};

class ChangeFeed {
 public:
  // Exactly one of `servers` (one server, or a cluster's seeds, tried in turn) and `sentinel`.
  // `runner` and `clock` must outlive the feed; Shutdown must run on the io thread before it goes.
  ChangeFeed(IoRunner& runner, const Clock& clock, std::string channel,
             std::vector<RedisUrl> servers, std::optional<SentinelUrl> sentinel,
             ChangeFeedOptions options, OverrideFeed feed);
  ChangeFeed(const ChangeFeed&) = delete;
  ChangeFeed& operator=(const ChangeFeed&) = delete;

  void Start();
  // Closes the connection; no callback of the feed runs after it.
  void Shutdown();

 private:
  void Connect();
  void Subscribe(const RedisUrl& url);
  void OnFrame(const Reply& frame);
  void Lost(const Status& why);
  void ArmBeat();
  void Beat();

  IoRunner& runner_;
  const Clock& clock_;
  const std::string channel_;
  const std::vector<RedisUrl> servers_;
  const std::optional<SentinelUrl> sentinel_;
  const ChangeFeedOptions options_;
  const OverrideFeed feed_;

  bool shut_down_ = false;
  bool ever_subscribed_ = false;
  bool subscribed_ = false;    // this connection's SUBSCRIBE was confirmed
  bool ping_waiting_ = false;  // a PING sent and not yet answered
  size_t next_ = 0;            // the server or sentinel tried next
  std::chrono::milliseconds backoff_{0};
  std::shared_ptr<Connection> conn_;
  std::shared_ptr<OneShot> ask_;
  boost::asio::steady_timer retry_;
  boost::asio::steady_timer heartbeat_;
};

}  // namespace caudal::redis
