#include "caudal/redis/redis_store.h"

#include "redis/node.h"
#include "redis/pipeline.h"
#include "redis/redis_url.h"
#include "redis/resp.h"
#include "redis/store_support.h"

namespace caudal {

using redis::Reply;

// One server: one Node, every request one part.
struct RedisStore::Impl final : redis::Router, redis::NodeListener {
  Impl(const Clock& c, RedisStoreOptions o, redis::RedisUrl u)
      : options(std::move(o)),
        url(std::move(u)),
        clock(c),
        pipeline(runner.io, clock, redis::PipelineOptionsFrom(options, /*split_by_slot=*/false),
                 *this) {}

  void Route(redis::RequestPartPtr part) override { node->Enqueue(std::move(part)); }
  void Send() override { node->Dispatch(); }
  void CheckStalls(Nanos now) override { node->CheckStalls(now); }
  std::optional<Nanos> NextStallCheck() const override { return node->NextStallCheck(); }
  bool Late(const redis::RequestPart&, Nanos now, Nanos budget) const override {
    return node->Late(now, budget);
  }
  bool ReplyUnread(const redis::RequestPart&) const override { return node->ReplyUnread(); }
  void OnCallDone(redis::Node&, std::vector<redis::PartPtr>& parts, Result<Reply> reply) override {
    redis::DeliverReply(pipeline, parts, std::move(reply));
  }
  void OnNodeDown(redis::Node&, const Status&) override {}
  std::vector<redis::Node*> Primaries() const { return {node.get()}; }

  const RedisStoreOptions options;
  const redis::RedisUrl url;
  const Clock& clock;
  redis::IoRunner runner;  // declared before what runs on it: destroyed after
  redis::NodeCounters counters;
  redis::Pipeline pipeline;
  std::unique_ptr<redis::Node> node;
  std::unique_ptr<redis::EvictionCheck> eviction;  // with options.eviction_watch
  Metrics::Registration metric_rows;  // last: unregistered before what it reads is destroyed
};

RedisStore::RedisStore(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

RedisStore::~RedisStore() {
  Impl& impl = *impl_;
  impl.runner.Stop([&impl] {
    const Status closed = Status::Unavailable("the redis store is shutting down");
    if (impl.eviction) impl.eviction->Stop();
    impl.pipeline.Shutdown(closed);
    impl.node->Shutdown(closed);
  });
}

Result<std::unique_ptr<RedisStore>> RedisStore::Open(const Clock& clock,
                                                     RedisStoreOptions options) {
  return redis::OpenStore<RedisStore, Impl, redis::RedisUrl>(
      clock, std::move(options), redis::ParseRedisUrl,
      [](std::unique_ptr<Impl> impl) {
        return std::unique_ptr<RedisStore>(new RedisStore(std::move(impl)));
      },
      [](Impl& impl, std::function<void(Status)> done) {
        impl.node = std::make_unique<redis::Node>(
            impl.runner.io, impl.runner.tls(), impl.clock,
            redis::NodeOptionsFrom(impl.options, impl.url, impl.url.Redacted()), impl,
            impl.counters);
        // Node::Start always reports, within connect_timeout.
        impl.node->Start(std::move(done));
      });
}

void RedisStore::DecideBatchAsync(std::span<const EntryRef> entries, DecideCallback done) {
  Impl& impl = *impl_;
  redis::SubmitDecision(impl.pipeline, impl.counters, entries, std::move(done),
                        [&impl] { return impl.url.Redacted(); });
}

Status RedisStore::Ping() {
  Impl& impl = *impl_;
  return redis::PingNodes(impl.runner, impl.clock, impl.options.connect_timeout,
                          [&impl] { return std::vector<redis::Node*>{impl.node.get()}; });
}

RedisStoreStats RedisStore::Stats() const {
  const Impl& impl = *impl_;
  return redis::CollectStats(impl.counters, impl.pipeline.counters());
}

}  // namespace caudal
