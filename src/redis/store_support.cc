#include "redis/store_support.h"

#include <openssl/ssl.h>
#include <pthread.h>

#include <boost/asio/post.hpp>
#include <future>
#include <optional>

namespace caudal::redis {

namespace asio = boost::asio;

IoRunner::IoRunner() : work_(io.get_executor()) {}

IoRunner::~IoRunner() {
  if (reload_ != nullptr) reload_->Unregister(this);
  if (thread_.joinable()) Stop([] {});
}

Status IoRunner::InitTls(const RedisStoreOptions& options) {
  Result<RedisTlsContext> made = RedisTlsReload::Load(options);
  if (!made.ok()) return made.status();
  SSL_CTX_up_ref(made->get());  // the asio context takes one reference
  tls_.emplace(made->get());
  if (options.tls_reload != nullptr) {
    reload_ = options.tls_reload;
    reload_->Register(this);
  }
  return Status::Ok();
}

PipelineOptions PipelineOptionsFrom(const RedisStoreOptions& options, bool split_by_slot) {
  return {.deadline = options.deadline,
          .max_outstanding = options.max_outstanding,
          .split_by_slot = split_by_slot,
          .key_prefix = options.key_prefix,
          .decision_clock = options.decision_clock};
}

Status InitTlsIfAsked(IoRunner& runner, const RedisStoreOptions& options, Transport transport) {
  return transport == Transport::kTls ? runner.InitTls(options) : Status::Ok();
}

Status StartOnIo(IoRunner& runner, std::function<void(std::function<void(Status)>)> start) {
  runner.Start();
  auto started = std::make_shared<std::promise<Status>>();
  asio::post(runner.io, [start = std::move(start), started] {
    start([started](Status st) { started->set_value(std::move(st)); });
  });
  return started->get_future().get();
}

void IoRunner::UseTls(RedisTlsContext context) {
  // On the io thread, where connections are made: none is being made while the context changes,
  // and the ones made before keep the old context (each SSL holds a reference to its own).
  asio::post(io, [this, context = std::move(context)] {
    SSL_CTX_up_ref(context.get());
    *tls_ = asio::ssl::context(context.get());
  });
}

void IoRunner::Start() {
  thread_ = std::thread([this] {
    // Named, so that per-thread tools (top -H, perf, /proc/<pid>/task) tell it from the others.
    pthread_setname_np(pthread_self(), "redis-io");
    io.run();
  });
}

void IoRunner::Stop(const std::function<void()>& shutdown) {
  asio::post(io, [this, shutdown] {
    shutdown();
    work_.reset();
  });
  if (thread_.joinable()) thread_.join();
}

Status ValidateStoreOptions(const RedisStoreOptions& options) {
  if (options.connections < 1 || options.connections > 64) {
    return Status::InvalidArgument("redis store: connections must be between 1 and 64");
  }
  if (options.deadline <= Micros(0) || options.connect_timeout <= std::chrono::milliseconds(0) ||
      options.stall_timeout <= std::chrono::milliseconds(0)) {
    return Status::InvalidArgument("redis store: deadline and timeouts must be positive");
  }
  if (options.max_batch < 1 || options.max_calls_in_flight < 1 ||
      options.cluster_calls_in_flight < 1 || options.max_outstanding < 1) {
    return Status::InvalidArgument(
        "redis store: max_batch, max_calls_in_flight, cluster_calls_in_flight and "
        "max_outstanding must be at least 1");
  }
  // A call's reply is one array: the allowed flag and 4 integers per entry of every request,
  // and the call's time.
  const size_t max_batch =
      static_cast<size_t>(ReplyLimits{}.max_elements - 1) / (1 + 4 * kMaxEntriesPerRequest);
  if (options.max_batch > max_batch) {
    return Status::InvalidArgument("redis store: max_batch must be at most " +
                                   std::to_string(max_batch) +
                                   " (a call's reply must fit the reply parser's bound)");
  }
  if (options.reconnect_min <= std::chrono::milliseconds(0) ||
      options.reconnect_max < options.reconnect_min) {
    return Status::InvalidArgument("redis store: need 0 < reconnect_min <= reconnect_max");
  }
  if (options.max_redirects < 0 || options.max_redirects > 100) {
    return Status::InvalidArgument("redis store: max_redirects must be between 0 and 100");
  }
  if (options.topology_refresh < std::chrono::milliseconds(100)) {
    return Status::InvalidArgument("redis store: topology_refresh must be at least 100ms");
  }
  return Status::Ok();
}

NodeOptions NodeOptionsFrom(const RedisStoreOptions& options, const RedisUrl& url,
                            std::string name) {
  return {.url = url,
          .name = std::move(name),
          .setup = {.probe_module = options.module},
          .connections = options.connections,
          .max_calls_in_flight = options.max_calls_in_flight,
          .max_batch = options.max_batch,
          .connect_timeout = options.connect_timeout,
          .stall_timeout = options.stall_timeout,
          .reconnect_min = options.reconnect_min,
          .reconnect_max = options.reconnect_max,
          .decision_clock = options.decision_clock,
          .native_counts = true};
}

void FailParts(Pipeline& pipeline, std::vector<PartPtr>& parts, const Status& why) {
  for (const PartPtr& p : parts) pipeline.Fail(std::static_pointer_cast<RequestPart>(p), why);
}

void DeliverReply(Pipeline& pipeline, std::vector<PartPtr>& parts, Result<Reply> reply) {
  if (!reply.ok()) {
    FailParts(pipeline, parts, reply.status());
    return;
  }
  const redisReply& r = **reply;
  std::vector<int64_t> ints;
  if (!parts.empty() && parts.front()->request.native_sent) {  // a pipeline of native counts
    std::vector<const EncodedRequest*> requests;
    for (const PartPtr& p : parts) requests.push_back(&p->request);
    const Status s = NativeReplyToInts(requests, r, ints);
    if (!s.ok()) {
      if (s.message().find("OOM ") != std::string::npos) pipeline.CountOom();
      return FailParts(pipeline, parts, s);
    }
  } else if (IsError(r)) {
    // OOM (used memory over maxmemory, noeviction) is a failure like any other: the failure mode
    // decides, never "over limit".
    if (Text(r).starts_with("OOM ")) pipeline.CountOom();
    FailParts(pipeline, parts, Status::Unavailable("redis: " + std::string(Text(r))));
    return;
  } else if (!ToIntegers(r, ints)) {
    FailParts(pipeline, parts,
              Status::Internal("redis script returned something other than integers"));
    return;
  }
  std::vector<RequestPartPtr> typed;
  typed.reserve(parts.size());
  for (const PartPtr& p : parts) typed.push_back(std::static_pointer_cast<RequestPart>(p));
  pipeline.OnReply(typed, ints);
}

Status PingNodes(IoRunner& runner, const Clock& clock, std::chrono::milliseconds timeout,
                 std::function<std::vector<Node*>()> nodes) {
  struct Tally {
    size_t left = 0;  // the io thread's alone
    Status first;
    Handoff<Status> done;
  };
  auto tally = std::make_shared<Tally>();
  const Nanos deadline = clock.Monotonic() + timeout;
  asio::post(runner.io, [tally, nodes = std::move(nodes)] {
    const std::vector<Node*> all = nodes();
    if (all.empty()) {
      tally->done.Set(Status::Unavailable("redis store: no node to ask"));
      return;
    }
    tally->left = all.size();
    auto report = [tally](Status st) {
      if (!st.ok() && tally->first.ok()) tally->first = std::move(st);
      if (--tally->left == 0) tally->done.Set(tally->first);
    };
    for (Node* node : all) {
      const bool sent = node->SendCommand({"PING"}, [report, node](Result<Reply> r) {
        if (!r.ok()) {
          report(r.status());
        } else if (IsError(**r)) {
          report(
              Status::Unavailable("redis at " + node->address() + ": " + std::string(Text(**r))));
        } else {
          report(Status::Ok());
        }
      });
      if (!sent) report(node->NotConnected());
    }
  });
  std::optional<Status> answer = tally->done.Await(clock, deadline);
  if (!answer.has_value()) {
    return Status::Unavailable("redis did not answer PING within " +
                               std::to_string(timeout.count()) + "ms");
  }
  return *std::move(answer);
}

RedisStoreStats CollectStats(const NodeCounters& nodes, const PipelineCounters& pipeline) {
  return {.calls = nodes.calls.load(),
          .requests = pipeline.requests.load(),
          .script_reloads = nodes.reloads.load(),
          .module_calls = nodes.module_calls.load(),
          .reconnects = nodes.reconnects.load(),
          .timeouts = pipeline.timeouts.load(),
          .oom = pipeline.oom.load(),
          .split_requests = pipeline.split.load(),
          .undos = pipeline.undos.load(),
          .undo_failures = pipeline.undo_failures.load(),
          .node_breaker_opens = nodes.breaker_opens.load()};
}

void AddStatsTo(const RedisStoreStats& stats, Metrics::CollectedValues& rows) {
  const auto add = [&rows](MetricId id, uint64_t n) { rows[static_cast<size_t>(id)] += n; };
  add(MetricId::kRedisCalls, stats.calls);
  add(MetricId::kRedisRequests, stats.requests);
  add(MetricId::kRedisScriptReloads, stats.script_reloads);
  add(MetricId::kRedisModuleCalls, stats.module_calls);
  add(MetricId::kRedisReconnects, stats.reconnects);
  add(MetricId::kRedisTimeouts, stats.timeouts);
  add(MetricId::kRedisSplitRequests, stats.split_requests);
  add(MetricId::kRedisUndos, stats.undos);
  add(MetricId::kRedisUndoFailures, stats.undo_failures);
  add(MetricId::kRedisMoved, stats.moved);
  add(MetricId::kRedisAsked, stats.asked);
  add(MetricId::kRedisTryAgain, stats.tryagain);
  add(MetricId::kRedisNotServed, stats.not_served);
  add(MetricId::kRedisTopologyRefreshes, stats.topology_refreshes);
  add(MetricId::kRedisPrimarySwitches, stats.primary_switches);
  add(MetricId::kRedisOom, stats.oom);
  // node_breaker_opens: caudal_store_node_breaker_opens_total, by node, through BreakerReporter.
}

}  // namespace caudal::redis
