#include "caudal/redis_store.h"

#include <boost/asio/post.hpp>
#include <future>

#include "redis/node.h"
#include "redis/pipeline.h"
#include "redis/redis_url.h"
#include "redis/resp.h"
#include "redis/store_support.h"

namespace caudal {

namespace asio = boost::asio;
using redis::Reply;

// One server: one Node, every request one part.
struct RedisStore::Impl final : redis::Router, redis::NodeListener {
  Impl(RedisStoreOptions o, redis::RedisUrl u)
      : options(std::move(o)),
        url(std::move(u)),
        clock(options.clock != nullptr ? *options.clock : SystemClock::Instance()),
        pipeline(runner.io, clock,
                 {.deadline = options.deadline,
                  .max_outstanding = options.max_outstanding,
                  .split_by_slot = false,
                  .key_prefix = options.key_prefix},
                 *this) {}

  void Route(redis::RequestPartPtr part) override { node->Enqueue(std::move(part)); }
  void Send() override { node->Dispatch(); }
  void CheckStalls(Nanos now) override { node->CheckStalls(now); }
  std::optional<Nanos> NextStallCheck() const override { return node->NextStallCheck(); }
  bool Late(const redis::RequestPart&, Nanos now, Nanos budget) const override {
    return node->Late(now, budget);
  }
  void OnCallDone(redis::Node&, std::vector<redis::PartPtr>& parts, Result<Reply> reply) override {
    redis::DeliverReply(pipeline, parts, std::move(reply));
  }
  void OnNodeDown(redis::Node&, const Status&) override {}

  const RedisStoreOptions options;
  const redis::RedisUrl url;
  const Clock& clock;
  redis::IoRunner runner;  // declared before what runs on it: destroyed after
  redis::NodeCounters counters;
  redis::Pipeline pipeline;
  std::unique_ptr<redis::Node> node;
};

RedisStore::RedisStore(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

RedisStore::~RedisStore() {
  Impl& impl = *impl_;
  impl.runner.Stop([&impl] {
    const Status closed = Status::Unavailable("the redis store is shutting down");
    impl.pipeline.Shutdown(closed);
    impl.node->Shutdown(closed);
  });
}

Result<std::unique_ptr<RedisStore>> RedisStore::Open(RedisStoreOptions options) {
  Result<redis::RedisUrl> url = redis::ParseRedisUrl(options.url);
  if (!url.ok()) return url.status();
  if (Status s = redis::ValidateStoreOptions(options); !s.ok()) return s;
  url->tls_server_name = options.tls_server_name;
  auto impl = std::make_unique<Impl>(std::move(options), *url);
  Impl* raw = impl.get();
  if (url->transport == redis::Transport::kTls) {
    if (Status s = raw->runner.InitTls(raw->options); !s.ok()) return s;
  }
  raw->node = std::make_unique<redis::Node>(
      raw->runner.io, raw->runner.tls(), raw->clock,
      redis::NodeOptionsFrom(raw->options, *url, url->Redacted()), *raw, raw->counters);
  raw->runner.Start();
  std::unique_ptr<RedisStore> store(new RedisStore(std::move(impl)));

  auto started = std::make_shared<std::promise<Status>>();
  asio::post(raw->runner.io, [raw, started] {
    raw->node->Start([started](Status st) { started->set_value(std::move(st)); });
  });
  // Start() always reports, within connect_timeout.
  if (Status st = started->get_future().get(); !st.ok()) return st;
  return store;
}

void RedisStore::DecideAsync(std::span<const EntryRef> entries, DecideCallback done) {
  Impl& impl = *impl_;
  if (Status s = ValidateEntries(entries); !s.ok()) {
    done(std::move(s));
    return;
  }
  if (impl.counters.ready.load() == 0) {
    done(Status::Unavailable("no connection to " + impl.url.Redacted() + ": " +
                             impl.counters.LastError()));
    return;
  }
  impl.pipeline.Submit(entries, std::move(done));
}

Status RedisStore::Ping() {
  Impl& impl = *impl_;
  return redis::PingNodes(impl.runner, impl.options.connect_timeout,
                          [&impl] { return std::vector<redis::Node*>{impl.node.get()}; });
}

RedisStoreStats RedisStore::Stats() const {
  const Impl& impl = *impl_;
  return redis::CollectStats(impl.counters, impl.pipeline.counters());
}

}  // namespace caudal
