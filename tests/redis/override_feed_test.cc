// The Redis OverrideStore's announcements (OverrideStore::Watch, src/redis/change_feed.h) against
// real servers: one store watches, another changes the records. On one redis-server, a Redis
// Cluster (the watcher's seed is not the node serving the records' slot: the message crosses the
// cluster bus) and Sentinel, across a failover (the watcher subscribes again on the new primary).
#include <gtest/gtest.h>
#include <signal.h>

#include <boost/asio/post.hpp>
#include <condition_variable>
#include <mutex>
#include <vector>

#include "config/store_registry.h"
#include "redis/change_feed.h"
#include "redis/hash_slot.h"
#include "store/override_store.h"
#include "support/redis_cluster.h"
#include "support/redis_sentinel.h"
#include "support/redis_server.h"

namespace caudal {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using testing::RedisCluster;
using testing::RedisSentinels;
using testing::RedisServer;

// What the feed told, in order; waited for in real time (real servers).
class Heard {
 public:
  OverrideFeed Feed() {
    return {
        .announced = [this](std::optional<uint64_t> v) { Add([&] { versions_.push_back(v); }); },
        .subscribed = [this](bool again) { Add([&] { ++(again ? resubscribed_ : subscribed_); }); },
        .lost = [this](const Status&) { Add([&] { ++lost_; }); }};
  }
  // Until `pred` holds (under the lock), at most `timeout`.
  bool WaitFor(const std::function<bool()>& pred, std::chrono::seconds timeout = seconds(10)) {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, timeout, pred);
  }
  bool HeardVersion(uint64_t v) {
    return WaitFor([&] {
      for (const auto& h : versions_) {
        if (h == v) return true;
      }
      return false;
    });
  }
  bool HeardUnreadable() {
    return WaitFor([&] {
      for (const auto& h : versions_) {
        if (!h) return true;
      }
      return false;
    });
  }
  bool Subscribed() {
    return WaitFor([&] { return subscribed_ > 0; });
  }
  bool Lost() {
    return WaitFor([&] { return lost_ > 0; });
  }
  bool SubscribedAgain() {
    return WaitFor([&] { return lost_ > 0 && resubscribed_ > 0; }, seconds(30));
  }

 private:
  void Add(const std::function<void()>& f) {
    {
      std::lock_guard lock(mu_);
      f();
    }
    cv_.notify_all();
  }
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::optional<uint64_t>> versions_;  // guarded by mu_
  int subscribed_ = 0, resubscribed_ = 0, lost_ = 0;
};

std::unique_ptr<OverrideStore> Open(const std::string& url) {
  StoreConfig config;
  config.timeout = seconds(2);
  config.url = url;
  auto store = OpenOverrideStore(config, SystemClock::Instance());
  EXPECT_TRUE(store.ok()) << store.status().ToString();
  return store.ok() ? std::move(*store) : nullptr;
}

// `changer`'s put and delete are heard by `watcher`'s feed, with the versions they made.
void ExpectHeard(OverrideStore& watcher, OverrideStore& changer) {
  Heard heard;
  auto watch = watcher.Watch(heard.Feed());
  ASSERT_NE(watch, nullptr);
  ASSERT_TRUE(heard.Subscribed());
  ASSERT_TRUE(changer.Put("p|a|1:x", "body", std::nullopt, 10).ok());
  auto v = changer.Version();
  ASSERT_TRUE(v.ok()) << v.status().ToString();
  EXPECT_TRUE(heard.HeardVersion(*v)) << "the put";
  ASSERT_TRUE(changer.Delete("p|a|1:x").ok());
  EXPECT_TRUE(heard.HeardVersion(*v + 1)) << "the delete";
  ASSERT_TRUE(changer.Touch().ok());
  EXPECT_TRUE(heard.HeardVersion(*v + 2)) << "a reset's touch";
}

TEST(RedisOverrideFeed, AnnouncesEveryChangeOnOneServer) {
  auto server = RedisServer::Start();
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  auto watcher = Open((*server)->url());
  auto changer = Open((*server)->url());
  ASSERT_TRUE(watcher && changer);
  ExpectHeard(*watcher, *changer);
}

TEST(RedisOverrideFeed, AForgedMessageIsAHintWithoutAVersion) {
  auto server = RedisServer::Start();
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  auto watcher = Open((*server)->url());
  ASSERT_TRUE(watcher);
  Heard heard;
  auto watch = watcher->Watch(heard.Feed());
  ASSERT_TRUE(heard.Subscribed());
  ASSERT_TRUE(
      (*server)->Command({"PUBLISH", "caudal:{overrides}:changes", std::string(100, '9')}).ok());
  EXPECT_TRUE(heard.HeardUnreadable());
}

TEST(RedisOverrideFeed, CrossesTheClusterBusFromAnyNode) {
  auto cluster = RedisCluster::Start();
  ASSERT_TRUE(cluster.ok()) << cluster.status().ToString();
  auto owner = (*cluster)->PrimaryOf(redis::HashSlot("caudal:{overrides}:records"));
  ASSERT_TRUE(owner.ok());
  const size_t other = (*owner + 1) % (*cluster)->size();
  // The watcher's only seed serves none of the records: it hears them over the bus.
  auto watcher =
      Open("redis-cluster://127.0.0.1:" + std::to_string((*cluster)->node(other).port()));
  auto changer = Open((*cluster)->url());
  ASSERT_TRUE(watcher && changer);
  ExpectHeard(*watcher, *changer);
}

TEST(RedisOverrideFeed, FollowsTheSentinelsPrimaryAcrossAFailover) {
  auto sentinels = RedisSentinels::Start();
  ASSERT_TRUE(sentinels.ok()) << sentinels.status().ToString();
  auto watcher = Open((*sentinels)->url());
  auto changer = Open((*sentinels)->url());
  ASSERT_TRUE(watcher && changer);
  Heard heard;
  auto watch = watcher->Watch(heard.Feed());
  ASSERT_TRUE(heard.Subscribed());
  auto primary = (*sentinels)->PrimaryIndex();
  ASSERT_TRUE(primary.ok());
  (*sentinels)->server(*primary).Kill();
  ASSERT_TRUE((*sentinels)->WaitPrimary(1 - *primary, seconds(30), /*replica_too=*/false).ok());
  ASSERT_TRUE(heard.SubscribedAgain()) << "on the new primary";
  Status touched = Status::Unavailable("not yet");
  for (int i = 0; i < 100 && !touched.ok(); ++i) touched = changer->Touch();
  ASSERT_TRUE(touched.ok()) << touched.ToString();
  auto v = changer->Version();
  ASSERT_TRUE(v.ok());
  EXPECT_TRUE(heard.HeardVersion(*v));
}

// A server that stops answering (SIGSTOP) keeps the connection open: the PING it leaves
// unanswered drops it, and the feed subscribes again once the server is back.
TEST(RedisOverrideFeed, DropsAServerThatLeavesAPingUnanswered) {
  auto server = RedisServer::Start();
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  auto url = redis::ParseRedisUrl((*server)->url());
  ASSERT_TRUE(url.ok());
  redis::IoRunner runner;
  runner.Start();
  Heard heard;
  redis::ChangeFeed feed(runner, SystemClock::Instance(), "caudal:{overrides}:changes", {*url},
                         std::nullopt, {.heartbeat = milliseconds(100)}, heard.Feed());
  boost::asio::post(runner.io, [&] { feed.Start(); });
  ASSERT_TRUE(heard.Subscribed());
  ASSERT_EQ(kill((*server)->pid(), SIGSTOP), 0);
  EXPECT_TRUE(heard.Lost());
  ASSERT_EQ(kill((*server)->pid(), SIGCONT), 0);
  EXPECT_TRUE(heard.SubscribedAgain());
  runner.Stop([&] { feed.Shutdown(); });
}

}  // namespace
}  // namespace caudal
