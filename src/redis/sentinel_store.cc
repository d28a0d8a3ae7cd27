#include <boost/asio/post.hpp>
#include <future>

#include "caudal/redis/redis_store.h"
#include "common/cat.h"
#include "redis/node.h"
#include "redis/one_shot.h"
#include "redis/pipeline.h"
#include "redis/sentinel_protocol.h"
#include "redis/store_support.h"

namespace caudal {

namespace asio = boost::asio;
using redis::Endpoint;
using redis::Reply;

namespace {

// Asks are at least this far apart (a failing primary prompts one per failed call).
constexpr auto kMinAskGap = std::chrono::milliseconds(100);
// While the primary is down, the sentinels are asked this often.
constexpr auto kDegradedAsk = std::chrono::milliseconds(250);
// After a failover's announcement, answers that still name the old primary are ignored this long
// (the sentinels name the new one once the failover ends, a few seconds later at most).
constexpr auto kAnnouncementHold = std::chrono::seconds(10);

std::string Address(const Endpoint& e) {
  return e.host.find(':') != std::string::npos ? Cat('[', e.host, "]:", e.port)
                                               : Cat(e.host, ':', e.port);
}

}  // namespace

// One Node, on the primary the sentinels name, replaced when they name another.
struct RedisSentinelStore::Impl final : redis::Router, redis::NodeListener {
  Impl(const Clock& c, RedisStoreOptions o, redis::SentinelUrl u)
      : options(std::move(o)),
        url(std::move(u)),
        clock(c),
        pipeline(runner.io, clock, redis::PipelineOptionsFrom(options, /*split_by_slot=*/false),
                 *this),
        ask_timer(runner.io) {
    for (size_t i = 0; i < url.sentinels.size(); ++i) {
      subscriptions.push_back(std::make_unique<Subscription>(runner.io));
    }
  }

  // Router.
  void Route(redis::RequestPartPtr part) override { primary->Enqueue(std::move(part)); }
  void Send() override { primary->Dispatch(); }
  void CheckStalls(Nanos now) override { primary->CheckStalls(now); }
  std::optional<Nanos> NextStallCheck() const override { return primary->NextStallCheck(); }
  bool Late(const redis::RequestPart&, Nanos now, Nanos budget) const override {
    return primary == nullptr || primary->Late(now, budget);
  }
  bool ReplyUnread(const redis::RequestPart&) const override {
    return primary != nullptr && primary->ReplyUnread();
  }
  // NodeListener.
  void OnCallDone(redis::Node& node, std::vector<redis::PartPtr>& parts,
                  Result<Reply> reply) override;
  void OnNodeDown(redis::Node& node, const Status&) override {
    if (&node == primary.get()) RequestAsk();
  }

  // Asks the sentinels in turn for the primary (one ask at a time, kMinAskGap apart).
  void RequestAsk();
  void AskNext(size_t i, Status last);
  void OnAnswer(Result<Endpoint> primary_at);
  void ArmAsk(Nanos at);
  // Makes `at` the primary: a new node; what waited on the old one moves over.
  void SwitchTo(const Endpoint& at, bool again);
  void OnAnnouncement(const Endpoint& at);
  void Subscribe(size_t i);
  void Shutdown();
  // The current primary, read again after a failover.
  std::vector<redis::Node*> Primaries() const {
    return primary ? std::vector<redis::Node*>{primary.get()} : std::vector<redis::Node*>{};
  }

  // A connection to one sentinel listening for announcements.
  struct Subscription {
    explicit Subscription(asio::io_context& io) : retry(io) {}
    std::shared_ptr<redis::Connection> conn;
    asio::steady_timer retry;
    std::chrono::milliseconds backoff{0};
  };

  const RedisStoreOptions options;
  const redis::SentinelUrl url;
  const Clock& clock;
  redis::IoRunner runner;  // declared before what runs on it: destroyed after
  redis::NodeCounters counters;
  redis::Pipeline pipeline;
  std::atomic<uint64_t> asks{0}, switches{0};

  // io thread only.
  std::unique_ptr<redis::Node> primary;
  std::vector<std::unique_ptr<redis::Node>> retired;  // closed, destroyed on a later turn
  std::function<void(Status)> on_opened;              // Open() waiting for the first primary
  bool asking = false, ask_wanted = false;
  std::optional<Nanos> last_ask, ask_at;
  size_t next_sentinel = 0;           // which sentinel to ask first
  std::optional<Nanos> announced_at;  // the last failover announcement
  std::shared_ptr<redis::OneShot> ask;
  asio::steady_timer ask_timer;
  std::vector<std::unique_ptr<Subscription>> subscriptions;  // one per sentinel
  bool shut_down = false;
  std::unique_ptr<redis::EvictionCheck> eviction;  // with options.eviction_watch
  Metrics::Registration metric_rows;  // last: unregistered before what it reads is destroyed
};

void RedisSentinelStore::Impl::OnCallDone(redis::Node& node, std::vector<redis::PartPtr>& parts,
                                          Result<Reply> reply) {
  if (!reply.ok()) {
    if (&node == primary.get()) RequestAsk();
  } else if (redis::IsError(**reply)) {
    const std::string_view text = redis::Text(**reply);
    // The server stopped being the primary: reconnect (ROLE refuses a replica) and ask.
    if (text.starts_with("READONLY") || text.starts_with("MASTERDOWN")) {
      redis::FailParts(pipeline, parts,
                       Status::Unavailable(
                           Cat("redis at ", node.address(), ": ", text, "; asking the sentinels")));
      if (&node == primary.get()) {
        const Endpoint at{.host = node.url().host, .port = node.url().port};
        SwitchTo(at, /*again=*/true);
      }
      RequestAsk();
      return;
    }
  }
  redis::DeliverReply(pipeline, parts, std::move(reply));
}

void RedisSentinelStore::Impl::RequestAsk() {
  if (shut_down) return;
  if (asking) {
    ask_wanted = true;
    return;
  }
  if (last_ask && clock.Monotonic() < *last_ask + kMinAskGap) {
    ArmAsk(*last_ask + kMinAskGap);
    return;
  }
  asking = true;
  ask_wanted = false;
  asks.fetch_add(1, std::memory_order_relaxed);
  AskNext(0, Status::Unavailable("redis sentinel: no sentinel to ask"));
}

void RedisSentinelStore::Impl::ArmAsk(Nanos at) {
  if (shut_down || (ask_at && *ask_at <= at)) return;
  ask_at = at;
  ask_timer.expires_after(std::max(Nanos(0), at - clock.Monotonic()));
  ask_timer.async_wait([this](const boost::system::error_code& ec) {
    if (ec) return;
    ask_at.reset();
    RequestAsk();
  });
}

// Sentinels in turn, starting with the one that answered last; a refusal of the credentials or
// a name no sentinel knows says more than an unreachable sentinel, so it is kept as the reason.
void RedisSentinelStore::Impl::AskNext(size_t i, Status last) {
  if (shut_down) return;
  if (i >= url.sentinels.size()) {
    OnAnswer(std::move(last));
    return;
  }
  const size_t which = (next_sentinel + i) % url.sentinels.size();
  const Endpoint& sentinel = url.sentinels[which];
  ask = redis::OneShot::Ask(
      runner, clock, url.Sentinel(sentinel),
      {"SENTINEL", "GET-MASTER-ADDR-BY-NAME", url.master_name}, options.connect_timeout,
      [this, i, which, sentinel, last](Result<Reply> r) {
        if (shut_down) return;
        ask.reset();
        Status why;
        if (!r.ok()) {
          why = r.status();
        } else {
          Result<std::optional<Endpoint>> addr = redis::ParseMasterAddr(**r);
          if (addr.ok() && addr->has_value()) {
            next_sentinel = which;
            OnAnswer(**addr);
            return;
          }
          why =
              addr.ok()
                  ? Status::InvalidArgument(Cat("sentinel ", Address(sentinel),
                                                " knows no master named ", Quoted(url.master_name)))
                  : Status(addr.status().code(),
                           Cat("sentinel ", Address(sentinel), ": ", addr.status().message()));
        }
        const bool keep = last.code() == StatusCode::kInvalidArgument &&
                          why.code() != StatusCode::kInvalidArgument;
        AskNext(i + 1, keep ? last : why);
      });
}

void RedisSentinelStore::Impl::OnAnswer(Result<Endpoint> primary_at) {
  asking = false;
  const Nanos now = clock.Monotonic();
  last_ask = now;
  const bool held = announced_at && now < *announced_at + Nanos(kAnnouncementHold);
  if (primary_at.ok() && !held) {
    SwitchTo(*primary_at, /*again=*/false);
  } else if (!primary_at.ok()) {
    if (counters.ready.load() == 0) counters.SetLastError(primary_at.status().message());
    if (on_opened) std::exchange(on_opened, nullptr)(primary_at.status());
  }
  const bool down = primary == nullptr || !primary->ready();
  ArmAsk(now + (down ? Nanos(kDegradedAsk) : Nanos(options.topology_refresh)));
  if (ask_wanted) RequestAsk();
}

void RedisSentinelStore::Impl::SwitchTo(const Endpoint& at, bool again) {
  const std::string address = Address(at);
  if (primary != nullptr && primary->address() == address && !again) return;
  redis::NodeOptions node_options = redis::NodeOptionsFrom(
      options, url.Primary(at), Cat("redis primary ", address, " (", url.master_name, ')'));
  node_options.setup.require_primary = true;  // ROLE: never decide on a replica
  auto next = std::make_unique<redis::Node>(runner.io, runner.tls(), clock, std::move(node_options),
                                            *this, counters);
  std::vector<redis::PartPtr> waiting;
  if (primary != nullptr) {
    if (primary->address() != address) switches.fetch_add(1, std::memory_order_relaxed);
    waiting = primary->TakeWaiting();
    primary->Shutdown(Status::Unavailable(Cat("the primary moved to ", address)));
    retired.push_back(std::move(primary));
    asio::post(runner.io, [this] {  // not inside one of its own callbacks
      std::erase_if(retired, [](const auto& n) { return !n->busy(); });
    });
  }
  primary = std::move(next);
  for (redis::PartPtr& p : waiting) primary->Enqueue(std::move(p));
  primary->Start([this](Status st) {
    if (on_opened) std::exchange(on_opened, nullptr)(st);
  });
}

// Listens on sentinel `i` for the announcements of a failover: +selected-slave (the leader chose
// the replica it is about to promote: from then on decisions wait for it, failing until its ROLE
// says primary, rather than go to the old primary, whose writes the promotion will discard),
// +promoted-slave and +switch-master (the others hear of it later). Every sentinel is listened
// to, since only the leader announces the first two. A lost subscription is made again with
// backoff, and prompts an ask (an announcement may have been missed meanwhile).
void RedisSentinelStore::Impl::Subscribe(size_t i) {
  if (shut_down) return;
  Subscription& sub = *subscriptions[i];
  auto conn = std::make_shared<redis::Connection>(
      runner.io, url.Sentinel(url.sentinels[i]), runner.tls(), clock,
      redis::ConnectionSetup{.select_db = false, .load_script = false});
  sub.conn = conn;
  conn->SetPushHandler([this](Reply message) {
    if (const std::optional<Endpoint> at = redis::ParseSwitchMaster(*message, url.master_name)) {
      OnAnnouncement(*at);
    }
  });
  auto retry = [this, i] {
    if (shut_down) return;
    Subscription& s = *subscriptions[i];
    s.backoff = std::clamp(s.backoff * 2, options.reconnect_min, options.reconnect_max);
    s.retry.expires_after(s.backoff);
    s.retry.async_wait([this, i](const boost::system::error_code& ec) {
      if (!ec) Subscribe(i);
    });
  };
  std::weak_ptr<redis::Connection> weak = conn;
  conn->Start(
      options.connect_timeout,
      [this, i, weak, retry](Status st) {
        const std::shared_ptr<redis::Connection> c = weak.lock();
        if (shut_down || c == nullptr) return;
        if (!st.ok()) {
          retry();
          return;
        }
        std::string command;
        redis::AppendCommand(std::vector<std::string_view>{"SUBSCRIBE", "+selected-slave",
                                                           "+promoted-slave", "+switch-master"},
                             command);
        // The first channel's confirmation; the others' go to the push handler, which ignores
        // them.
        c->Send(command, [this, i](Result<Reply> r) {
          if (r.ok() && !redis::IsError(**r)) subscriptions[i]->backoff = {};
        });
      },
      [this, retry](Status) {
        if (shut_down) return;
        RequestAsk();
        retry();
      });
}

// A sentinel announced (or is about to make) `at` the primary: switch now, and for a while trust
// no ask that still names the old one.
void RedisSentinelStore::Impl::OnAnnouncement(const Endpoint& at) {
  announced_at = clock.Monotonic();
  SwitchTo(at, /*again=*/false);
}

void RedisSentinelStore::Impl::Shutdown() {
  const Status closed = Status::Unavailable("the redis sentinel store is shutting down");
  shut_down = true;
  if (eviction) eviction->Stop();
  ask_timer.cancel();
  if (const std::shared_ptr<redis::OneShot> a = std::move(ask)) a->Cancel(closed);
  for (const auto& sub : subscriptions) {
    sub->retry.cancel();
    if (sub->conn) sub->conn->Close(closed);
  }
  pipeline.Shutdown(closed);
  if (primary) primary->Shutdown(closed);
  for (const auto& n : retired) n->Shutdown(closed);
  if (on_opened) std::exchange(on_opened, nullptr)(closed);
}

RedisSentinelStore::RedisSentinelStore(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

RedisSentinelStore::~RedisSentinelStore() {
  Impl& impl = *impl_;
  impl.runner.Stop([&impl] { impl.Shutdown(); });
}

Result<std::unique_ptr<RedisSentinelStore>> RedisSentinelStore::Open(const Clock& clock,
                                                                     RedisStoreOptions options) {
  auto store = redis::OpenStore<RedisSentinelStore, Impl, redis::SentinelUrl>(
      clock, std::move(options), redis::ParseSentinelUrl,
      [](std::unique_ptr<Impl> impl) {
        return std::unique_ptr<RedisSentinelStore>(new RedisSentinelStore(std::move(impl)));
      },
      // Every ask and connection attempt is bounded by connect_timeout.
      [](Impl& impl, std::function<void(Status)> done) {
        impl.on_opened = std::move(done);
        impl.RequestAsk();
      });
  if (!store.ok()) return store;
  Impl* raw = (*store)->impl_.get();
  asio::post(raw->runner.io, [raw] {
    for (size_t i = 0; i < raw->subscriptions.size(); ++i) raw->Subscribe(i);
  });
  return store;
}

void RedisSentinelStore::DecideBatchAsync(std::span<const EntryRef> entries, DecideCallback done) {
  Impl& impl = *impl_;
  redis::SubmitDecision(impl.pipeline, impl.counters, entries, std::move(done),
                        [&impl] { return "the primary of " + impl.url.Redacted(); });
}

Status RedisSentinelStore::Ping() {
  Impl& impl = *impl_;
  return redis::PingNodes(impl.runner, impl.clock, impl.options.connect_timeout, [&impl] {
    return impl.primary ? std::vector<redis::Node*>{impl.primary.get()}
                        : std::vector<redis::Node*>{};
  });
}

RedisStoreStats RedisSentinelStore::Stats() const {
  const Impl& impl = *impl_;
  RedisStoreStats s = redis::CollectStats(impl.counters, impl.pipeline.counters());
  s.topology_refreshes = impl.asks.load();
  s.primary_switches = impl.switches.load();
  return s;
}

}  // namespace caudal
