#include <boost/asio/post.hpp>
#include <map>

#include "caudal/redis/redis_store.h"
#include "common/cat.h"
#include "redis/cluster_topology.h"
#include "redis/hash_slot.h"
#include "redis/node.h"
#include "redis/pipeline.h"
#include "redis/slot_map.h"
#include "redis/store_support.h"

namespace caudal {

namespace asio = boost::asio;
using redis::Reply;
using redis::RequestPart;
using redis::RequestPartPtr;

namespace {

// After TRYAGAIN (a multi-key call during a slot's migration) a part is sent again this much later.
constexpr auto kTryAgainDelay = std::chrono::milliseconds(2);

bool IsTopologyError(std::string_view text) {
  return text.starts_with("CLUSTERDOWN") || text.starts_with("MASTERDOWN") ||
         text.starts_with("READONLY") || text.starts_with("LOADING");
}

}  // namespace

// The pipeline splits requests by slot; parts go to the node the topology says, and redirects
// come back here.
struct RedisClusterStore::Impl final : redis::Router, redis::TopologyListener {
  Impl(const Clock& c, RedisStoreOptions o, redis::ClusterUrl u)
      : options(std::move(o)),
        url(std::move(u)),
        clock(c),
        pipeline(runner.io, clock, redis::PipelineOptionsFrom(options, /*split_by_slot=*/true),
                 *this),
        topology(runner, clock, options, url, *this, counters),
        tryagain_timer(runner.io) {}

  // Router.
  void Route(RequestPartPtr part) override;
  void Send() override;
  void CheckStalls(Nanos now) override { topology.CheckStalls(now); }
  std::optional<Nanos> NextStallCheck() const override { return topology.NextStallCheck(); }
  bool Late(const RequestPart& part, Nanos now, Nanos budget) const override {
    const redis::Node* node = topology.PrimaryOf(part.slot);
    return node == nullptr || node->Late(now, budget);
  }
  bool ReplyUnread(const RequestPart& part) const override {
    const redis::Node* node = topology.PrimaryOf(part.slot);
    return node != nullptr && node->ReplyUnread();
  }
  void DeadlinePassed(const RequestPart& part, Nanos now) override {
    if (redis::Node* node = topology.PrimaryOf(part.slot)) {
      node->DeadlinePassed(part, now, "a call passed its deadline unanswered");
    }
  }
  // TopologyListener.
  void OnCallDone(redis::Node& node, std::vector<redis::PartPtr>& parts,
                  Result<Reply> reply) override;
  bool Resend(const RequestPartPtr& part) override {
    not_served.fetch_add(1, std::memory_order_relaxed);
    topology.RequestRefresh();
    if (!CountRedirect(part)) return true;
    part->own_slot = true;
    Route(part);
    Send();
    return true;
  }
  void Reroute(std::vector<redis::PartPtr> parts) override {
    for (redis::PartPtr& p : parts) Route(std::static_pointer_cast<RequestPart>(std::move(p)));
    Send();
  }

  void Redirect(std::vector<redis::PartPtr>& parts, const redis::Redirect& to);
  void TryAgain(std::vector<redis::PartPtr>& parts);
  // Counts one more redirect for `part`; false (and the part failed) past max_redirects.
  bool CountRedirect(const RequestPartPtr& part);
  void Shutdown();
  std::vector<redis::Node*> Primaries() const { return topology.Primaries(); }

  const RedisStoreOptions options;
  const redis::ClusterUrl url;
  const Clock& clock;
  redis::IoRunner runner;  // declared before what runs on it: destroyed after
  redis::NodeCounters counters;
  redis::Pipeline pipeline;
  redis::ClusterTopology topology;
  std::atomic<uint64_t> moved{0}, asked{0}, tryagain{0}, not_served{0};

  // io thread only.
  std::vector<redis::Node*> dirty;  // nodes given parts since the last Send()
  asio::steady_timer tryagain_timer;
  std::vector<RequestPartPtr> tryagain_parts;
  bool tryagain_armed = false;
  bool shut_down = false;
  std::unique_ptr<redis::EvictionCheck> eviction;  // with options.eviction_watch
  Metrics::Registration metric_rows;  // last: unregistered before what it reads is destroyed
};

void RedisClusterStore::Impl::Route(RequestPartPtr part) {
  redis::Node* node = topology.PrimaryOf(part->slot);
  if (node == nullptr) {
    topology.RequestRefresh();
    pipeline.Fail(part, Status::Unavailable(Cat("redis cluster: no primary serves slot ",
                                                part->slot, " (", topology.why_uncovered(), ')')));
    return;
  }
  node->Enqueue(std::move(part));
  if (std::find(dirty.begin(), dirty.end(), node) == dirty.end()) dirty.push_back(node);
}

void RedisClusterStore::Impl::Send() {
  std::vector<redis::Node*> nodes;
  nodes.swap(dirty);
  for (redis::Node* node : nodes) node->Dispatch();
}

void RedisClusterStore::Impl::OnCallDone(redis::Node& node, std::vector<redis::PartPtr>& parts,
                                         Result<Reply> reply) {
  for (const redis::PartPtr& p : parts) p->asking = false;
  if (!reply.ok()) {  // lost, or never sent: the node is down, its replica may take over
    topology.RequestRefresh();
    redis::FailParts(pipeline, parts, reply.status());
    return;
  }
  if (redis::IsError(**reply)) {
    const std::string_view text = redis::Text(**reply);
    const redis::Endpoint from{.host = node.url().host, .port = node.url().port};
    if (const std::optional<redis::Redirect> to = redis::ParseRedirect(text, from)) {
      Redirect(parts, *to);
      return;
    }
    if (text.starts_with("TRYAGAIN")) {
      TryAgain(parts);
      return;
    }
    if (IsTopologyError(text)) {
      topology.RequestRefresh();
      redis::FailParts(pipeline, parts,
                       Status::Unavailable(Cat("redis cluster node ", node.address(), ": ", text)));
      return;
    }
  }
  redis::DeliverReply(pipeline, parts, std::move(reply));
}

bool RedisClusterStore::Impl::CountRedirect(const RequestPartPtr& part) {
  if (++part->redirects <= options.max_redirects) return true;
  pipeline.Fail(part, Status::Unavailable(Cat("redis cluster: more than ", options.max_redirects,
                                              " redirects for slot ", part->slot)));
  return false;
}

void RedisClusterStore::Impl::Redirect(std::vector<redis::PartPtr>& parts,
                                       const redis::Redirect& to) {
  const bool ask = to.kind == redis::Redirect::Kind::kAsk;
  (ask ? asked : moved).fetch_add(1, std::memory_order_relaxed);
  redis::Node* target = topology.NodeAt(to.to);
  if (!ask) topology.OnMoved(to.slot, target);
  if (target == nullptr) {
    redis::FailParts(pipeline, parts,
                     Status::Unavailable(Cat("redis cluster: cannot follow a redirect to ",
                                             to.to.host, ':', to.to.port, " (too many nodes)")));
    return;
  }
  for (const redis::PartPtr& p : parts) {
    auto part = std::static_pointer_cast<RequestPart>(p);
    if (!CountRedirect(part)) continue;
    part->asking = ask;  // an ASK holds for one call, sent alone
    target->Enqueue(std::move(part));
  }
  target->Dispatch();
}

void RedisClusterStore::Impl::TryAgain(std::vector<redis::PartPtr>& parts) {
  tryagain.fetch_add(1, std::memory_order_relaxed);
  for (const redis::PartPtr& p : parts) {
    auto part = std::static_pointer_cast<RequestPart>(p);
    if (CountRedirect(part)) tryagain_parts.push_back(std::move(part));
  }
  if (tryagain_armed || tryagain_parts.empty()) return;
  tryagain_armed = true;
  tryagain_timer.expires_after(kTryAgainDelay);
  tryagain_timer.async_wait([this](const boost::system::error_code& ec) {
    tryagain_armed = false;
    if (ec || shut_down) return;
    std::vector<RequestPartPtr> again;
    again.swap(tryagain_parts);
    for (RequestPartPtr& part : again) Route(std::move(part));
    Send();
  });
}

void RedisClusterStore::Impl::Shutdown() {
  const Status closed = Status::Unavailable("the redis cluster store is shutting down");
  shut_down = true;
  if (eviction) eviction->Stop();
  tryagain_timer.cancel();
  pipeline.Shutdown(closed);
  topology.Shutdown(closed);
}

RedisClusterStore::RedisClusterStore(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

RedisClusterStore::~RedisClusterStore() {
  Impl& impl = *impl_;
  impl.runner.Stop([&impl] { impl.Shutdown(); });
}

Result<std::unique_ptr<RedisClusterStore>> RedisClusterStore::Open(const Clock& clock,
                                                                   RedisStoreOptions options) {
  return redis::OpenStore<RedisClusterStore, Impl, redis::ClusterUrl>(
      clock, std::move(options), redis::ParseClusterUrl,
      [](std::unique_ptr<Impl> impl) {
        return std::unique_ptr<RedisClusterStore>(new RedisClusterStore(std::move(impl)));
      },
      // The topology always reports: every seed and node attempt is bounded by connect_timeout.
      [](Impl& impl, std::function<void(Status)> done) { impl.topology.Start(std::move(done)); });
}

void RedisClusterStore::DecideBatchAsync(std::span<const EntryRef> entries, DecideCallback done) {
  Impl& impl = *impl_;
  redis::SubmitDecision(impl.pipeline, impl.counters, entries, std::move(done),
                        [&impl] { return impl.url.Redacted(); });
}

Status RedisClusterStore::Ping() {
  Impl& impl = *impl_;
  auto uncovered = std::make_shared<redis::Handoff<std::string>>();
  const Nanos deadline = impl.clock.Monotonic() + impl.options.connect_timeout;
  asio::post(impl.runner.io, [&impl, uncovered] {
    uncovered->Set(impl.topology.covered() ? std::string() : impl.topology.why_uncovered());
  });
  const std::optional<std::string> why = uncovered->Await(impl.clock, deadline);
  if (!why.has_value()) {
    return Status::Unavailable("redis cluster store: the io thread did not answer");
  }
  if (const std::string& w = *why; !w.empty()) {
    return Status::Unavailable(Cat("redis cluster: not every slot has a primary (", w, ')'));
  }
  return redis::PingNodes(impl.runner, impl.clock, impl.options.connect_timeout,
                          [&impl] { return impl.topology.Primaries(); });
}

RedisStoreStats RedisClusterStore::Stats() const {
  const Impl& impl = *impl_;
  RedisStoreStats s = redis::CollectStats(impl.counters, impl.pipeline.counters());
  s.moved = impl.moved.load();
  s.asked = impl.asked.load();
  s.tryagain = impl.tryagain.load();
  s.not_served = impl.not_served.load();
  s.topology_refreshes = impl.topology.refreshes();
  return s;
}

}  // namespace caudal
