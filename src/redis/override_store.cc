#include <hiredis/hiredis.h>

#include <boost/asio/post.hpp>
#include <charconv>
#include <mutex>
#include <optional>

#include "common/cat.h"
#include "redis/change_feed.h"
#include "redis/hash_slot.h"
#include "redis/redis_override_store.h"
#include "redis/routed_call.h"
#include "redis/store_support.h"

namespace caudal {
namespace {

// KEYS: records, ends, version, the changes' channel. ARGV: db, op, then the op's. Ends are
// written as integers (string.format: Lua's tostring would write 1.7e+15); dropping ended records
// raises the version, so that every instance lists again. Every raise is PUBLISHed (the new
// version) on the channel (change_feed.h) through pcall: a user not allowed the channel changes
// the records still, and the others learn of it by their poll. Replies: version → {version};
// list → {version, now, id, body, end ("" for none), ...}; put → {1 new | 0 replaced | -1 full};
// delete → {} or {body, end}; touch → {version}.
constexpr std::string_view kOverridesScript = R"lua(
if ARGV[1] ~= '0' then redis.call('SELECT', ARGV[1]) end
local op = ARGV[2]
local function raise()
  local v = redis.call('INCR', KEYS[3])
  redis.pcall('PUBLISH', KEYS[4], v)
  return v
end
if op == 'version' then return {tonumber(redis.call('GET', KEYS[3]) or '0')} end
if op == 'touch' then return {raise()} end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local ends = redis.call('HGETALL', KEYS[2])
local ended = false
for i = 1, #ends, 2 do
  if tonumber(ends[i + 1]) <= now then
    redis.call('HDEL', KEYS[1], ends[i])
    redis.call('HDEL', KEYS[2], ends[i])
    ended = true
  end
end
if ended then raise() end
if op == 'list' then
  local out = {tonumber(redis.call('GET', KEYS[3]) or '0'), now}
  local all = redis.call('HGETALL', KEYS[1])
  for i = 1, #all, 2 do
    out[#out + 1] = all[i]
    out[#out + 1] = all[i + 1]
    out[#out + 1] = redis.call('HGET', KEYS[2], all[i]) or ''
  end
  return out
end
if op == 'put' then
  local id = ARGV[3]
  local fresh = redis.call('HEXISTS', KEYS[1], id) == 0
  if fresh and redis.call('HLEN', KEYS[1]) >= tonumber(ARGV[6]) then return {-1} end
  redis.call('HSET', KEYS[1], id, ARGV[4])
  if ARGV[5] == '' then
    redis.call('HDEL', KEYS[2], id)
  else
    redis.call('HSET', KEYS[2], id, string.format('%.0f', now + tonumber(ARGV[5])))
  end
  raise()
  return {fresh and 1 or 0}
end
if op == 'delete' then
  local id = ARGV[3]
  local body = redis.call('HGET', KEYS[1], id)
  if not body then return {} end
  local e = redis.call('HGET', KEYS[2], id) or ''
  redis.call('HDEL', KEYS[1], id)
  redis.call('HDEL', KEYS[2], id)
  raise()
  return {body, e}
end
return redis.error_reply('unknown op')
)lua";

Status MalformedOverridesReply() {
  return Status::Unavailable("redis: an unexpected reply to the overrides script");
}

bool Integer(const redisReply* r, int64_t& out) {
  if (r == nullptr || r->type != REDIS_REPLY_INTEGER) return false;
  out = r->integer;
  return true;
}

std::optional<std::string> Text(const redisReply* r) {
  if (r == nullptr || r->type != REDIS_REPLY_STRING) return std::nullopt;
  return std::string(r->str, r->len);
}

// An end as the script wrote it ("" for none; anything else unreadable counts as none).
std::optional<Micros> End(const std::string& text) {
  int64_t us = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), us);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return Micros(us);
}

class RedisOverrideStore final : public OverrideStore {
 public:
  // `url` is the server's; for Redis Cluster, the first seed's, with `cluster` to reach the
  // others (the keys' node is found by following MOVED).
  // For Redis Sentinel, `sentinel` names the sentinels that say which server is the primary.
  RedisOverrideStore(const Clock& clock, RedisStoreOptions options, redis::RedisUrl url,
                     std::optional<redis::ClusterUrl> cluster = std::nullopt,
                     std::optional<redis::SentinelUrl> sentinel = std::nullopt)
      : options_(std::move(options)),
        clock_(clock),
        transport_(sentinel ? sentinel->transport : url.transport),
        feed_servers_(FeedServers(url, cluster)),
        feed_sentinel_(sentinel),
        calls_(runner_, clock, std::move(url), std::move(cluster), std::move(sentinel),
               kOverridesScript, redis::RecordCallsOptions(options_)) {
    const std::string base = Cat(options_.key_prefix, "{overrides}:");
    keys_ = {base + "records", base + "ends", base + "version", base + "changes"};
  }
  ~RedisOverrideStore() override {
    runner_.Stop([this] {
      if (feed_ != nullptr) feed_->Shutdown();
      calls_.Shutdown();
    });
  }

  Status Init() {
    if (transport_ == redis::Transport::kTls) {
      if (Status s = runner_.InitTls(options_); !s.ok()) return s;
    }
    runner_.Start();
    return Status::Ok();
  }

  Result<uint64_t> Version() override {
    auto r = Call({"version"});
    if (!r.ok()) return r.status();
    int64_t v = 0;
    if ((*r)->elements != 1 || !Integer((*r)->element[0], v)) return MalformedOverridesReply();
    return static_cast<uint64_t>(v);
  }

  Result<OverrideList> List() override {
    auto r = Call({"list"});
    if (!r.ok()) return r.status();
    const redisReply& a = **r;
    int64_t version = 0, now = 0;
    if (a.elements < 2 || (a.elements - 2) % 3 != 0 || !Integer(a.element[0], version) ||
        !Integer(a.element[1], now)) {
      return MalformedOverridesReply();
    }
    OverrideList out{.version = static_cast<uint64_t>(version), .now = Micros(now), .records = {}};
    for (size_t i = 2; i + 2 < a.elements; i += 3) {
      auto id = Text(a.element[i]);
      auto body = Text(a.element[i + 1]);
      auto end = Text(a.element[i + 2]);
      if (!id || !body || !end) return MalformedOverridesReply();
      out.records.push_back(
          {.id = std::move(*id), .body = std::move(*body), .expires_at = End(*end)});
    }
    return out;
  }

  Result<bool> Put(std::string_view id, std::string_view body, std::optional<Micros> expires_in,
                   size_t max_records) override {
    if (Status s = ValidateOverridePut(id, body, expires_in); !s.ok()) return s;
    auto r = Call({"put", std::string(id), std::string(body),
                   expires_in ? std::to_string(expires_in->count()) : std::string(),
                   std::to_string(max_records)});
    if (!r.ok()) return r.status();
    int64_t v = 0;
    if ((*r)->elements != 1 || !Integer((*r)->element[0], v)) return MalformedOverridesReply();
    if (v < 0)
      return Status::ResourceExhausted("the store holds as many runtime overrides as allowed");
    return v == 1;
  }

  Result<std::optional<OverrideRecord>> Delete(std::string_view id) override {
    auto r = Call({"delete", std::string(id)});
    if (!r.ok()) return r.status();
    if ((*r)->elements == 0) return std::optional<OverrideRecord>();
    if ((*r)->elements != 2) return MalformedOverridesReply();
    auto body = Text((*r)->element[0]);
    auto end = Text((*r)->element[1]);
    if (!body || !end) return MalformedOverridesReply();
    return std::optional<OverrideRecord>(
        OverrideRecord{.id = std::string(id), .body = std::move(*body), .expires_at = End(*end)});
  }

  Status Touch() override { return Call({"touch"}).status(); }

  // The feed runs on the io thread and calls `feed` through a relay, which the handle detaches.
  std::unique_ptr<OverrideWatch> Watch(OverrideFeed feed) override {
    auto relay = std::make_shared<Relay>();
    relay->feed = std::move(feed);
    OverrideFeed through{.announced =
                             [relay](std::optional<uint64_t> v) {
                               std::lock_guard lock(relay->mu);
                               if (relay->feed.announced) relay->feed.announced(v);
                             },
                         .subscribed =
                             [relay](bool again) {
                               std::lock_guard lock(relay->mu);
                               if (relay->feed.subscribed) relay->feed.subscribed(again);
                             },
                         .lost =
                             [relay](const Status& why) {
                               std::lock_guard lock(relay->mu);
                               if (relay->feed.lost) relay->feed.lost(why);
                             }};
    boost::asio::post(runner_.io, [this, through = std::move(through)]() mutable {
      if (feed_ != nullptr) return;  // one watch per store
      feed_ = std::make_unique<redis::ChangeFeed>(
          runner_, clock_, keys_[3], feed_servers_, feed_sentinel_,
          redis::ChangeFeedOptions{.connect_timeout = options_.connect_timeout,
                                   .reconnect_min = options_.reconnect_min,
                                   .reconnect_max = options_.reconnect_max},
          std::move(through));
      feed_->Start();
    });
    return std::make_unique<Handle>(std::move(relay));
  }

 private:
  struct Relay {
    std::mutex mu;
    OverrideFeed feed;  // guarded by mu; emptied by the handle
  };
  struct Handle final : OverrideWatch {
    explicit Handle(std::shared_ptr<Relay> r) : relay(std::move(r)) {}
    ~Handle() override {
      std::lock_guard lock(relay->mu);
      relay->feed = {};
    }
    std::shared_ptr<Relay> relay;
  };

  // Where the feed may subscribe: the one server, or a cluster's seeds.
  static std::vector<redis::RedisUrl> FeedServers(const redis::RedisUrl& url,
                                                  const std::optional<redis::ClusterUrl>& cluster) {
    if (!cluster) return {url};
    std::vector<redis::RedisUrl> out;
    for (const redis::Endpoint& seed : cluster->seeds) out.push_back(cluster->Node(seed));
    return out;
  }

  // One EVALSHA (routed_call.h); an array reply, or why there is none.
  Result<redis::Reply> Call(std::vector<std::string> args) {
    std::vector<std::string> argv = {"4",      keys_[0], keys_[1],
                                     keys_[2], keys_[3], std::to_string(calls_.db())};
    for (std::string& a : args) argv.push_back(std::move(a));
    auto r = calls_.AskAndWait(std::move(argv), redis::HashSlot(keys_[0]));
    if (!r.ok()) return r.status();
    if ((*r)->type != REDIS_REPLY_ARRAY) return MalformedOverridesReply();
    return r;
  }

  RedisStoreOptions options_;
  const Clock& clock_;
  const redis::Transport transport_;
  const std::vector<redis::RedisUrl> feed_servers_;
  const std::optional<redis::SentinelUrl> feed_sentinel_;
  std::vector<std::string> keys_;
  redis::IoRunner runner_;  // stopped first: no call runs while calls_ goes
  redis::RoutedCalls calls_;
  std::unique_ptr<redis::ChangeFeed> feed_;  // io thread only
};

}  // namespace

Result<std::unique_ptr<OverrideStore>> OpenRedisOverrideStore(const Clock& clock,
                                                              RedisStoreOptions options) {
  if (options.url.starts_with("redis-sentinel://")) {
    auto sentinel = redis::ParseSentinelUrl(options.url);
    if (!sentinel.ok()) return sentinel.status();
    if (Status s = redis::ApplyUrlOptions(options, *sentinel); !s.ok()) return s;
    auto store = std::make_unique<RedisOverrideStore>(clock, std::move(options), redis::RedisUrl{},
                                                      std::nullopt, std::move(*sentinel));
    if (Status s = store->Init(); !s.ok()) return s;
    return std::unique_ptr<OverrideStore>(std::move(store));
  }
  if (options.url.starts_with("redis-cluster://")) {
    auto cluster = redis::ParseClusterUrl(options.url);
    if (!cluster.ok()) return cluster.status();
    if (Status s = redis::ApplyUrlOptions(options, *cluster); !s.ok()) return s;
    redis::RedisUrl first = cluster->Node(cluster->seeds.front());
    auto store = std::make_unique<RedisOverrideStore>(clock, std::move(options), std::move(first),
                                                      std::move(*cluster));
    if (Status s = store->Init(); !s.ok()) return s;
    return std::unique_ptr<OverrideStore>(std::move(store));
  }
  auto url = redis::ParseRedisUrl(options.url);
  if (!url.ok()) return url.status();
  if (Status s = redis::ApplyUrlOptions(options, *url); !s.ok()) return s;
  auto store = std::make_unique<RedisOverrideStore>(clock, std::move(options), std::move(*url));
  if (Status s = store->Init(); !s.ok()) return s;
  return std::unique_ptr<OverrideStore>(std::move(store));
}

}  // namespace caudal
