// What the Redis-backed stores (one server, Cluster, Sentinel) share: the io thread and TLS
// context they run on, option checks, and the plumbing between their nodes and their pipeline.
//
// Thread-safety: IoRunner's Start/Stop belong to the store's owner; the rest runs on the io
// thread unless said otherwise.
#pragma once

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/ssl/context.hpp>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "caudal/redis/redis_store.h"
#include "observe/metrics.h"
#include "redis/eviction_check.h"
#include "redis/node.h"
#include "redis/pipeline.h"
#include "redis/redis_tls.h"
#include "redis/redis_url.h"

namespace caudal::redis {

// The io thread a store owns, and the TLS context of its connections.
class IoRunner {
 public:
  IoRunner();
  ~IoRunner();
  IoRunner(const IoRunner&) = delete;
  IoRunner& operator=(const IoRunner&) = delete;

  // Verifies servers against options.tls_ca_file (PEM; empty: the system's trust store) and
  // presents options.tls_cert_file and tls_key_file when given. kInvalidArgument naming the file
  // that cannot be loaded, or a key that is not the certificate's.
  // With options.tls_reload, registers with it until destroyed.
  Status InitTls(const RedisStoreOptions& options);
  boost::asio::ssl::context* tls() { return tls_ ? &*tls_ : nullptr; }
  // Connections made from now on use `context` (a reload); tls() keeps its address. After
  // InitTls; any thread.
  void UseTls(RedisTlsContext context);

  void Start();
  // Runs `shutdown` on the io thread, lets the handlers it leaves finish, and joins the thread.
  void Stop(const std::function<void()>& shutdown);

  boost::asio::io_context io;

 private:
  std::optional<boost::asio::ssl::context> tls_;  // replaced on the io thread alone
  RedisTlsReload* reload_ = nullptr;
  boost::asio::executor_work_guard<boost::asio::io_context::executor_type> work_;
  std::thread thread_;
};

// The checks every Redis-backed store makes on its options (kInvalidArgument).
Status ValidateStoreOptions(const RedisStoreOptions& options);

// The pipeline's options from the store's; `split_by_slot` for Redis Cluster.
PipelineOptions PipelineOptionsFrom(const RedisStoreOptions& options, bool split_by_slot);

// What the options add to a parsed URL: the TLS server name, and for a cluster or Sentinel URL
// the address map (kInvalidArgument when malformed, or given for a redis:// URL, whose address
// is the one to dial).
template <typename Url>
Status ApplyUrlOptions(const RedisStoreOptions& options, Url& url) {
  url.tls_server_name = options.tls_server_name;
  if constexpr (requires { url.address_map; }) {
    Result<AddressMap> map = ParseAddressMap(options.address_map);
    if (!map.ok()) return Status::InvalidArgument("redis store: " + map.status().message());
    url.address_map = std::move(*map);
  } else if (!options.address_map.empty()) {
    return Status::InvalidArgument(
        "redis store: an address map is for redis-cluster:// and redis-sentinel:// (a redis:// "
        "URL names the address to dial)");
  }
  return Status::Ok();
}

// What each store's Open does once its parts are built: a TLS context if `transport` asks for
// one (kInvalidArgument naming a file that cannot be used), then the io thread, on which
// `start` runs; waits for the Status `start` hands its callback. `start` must report, within a
// bounded time (every store's first attempts are bounded by connect_timeout).
Status InitTlsIfAsked(IoRunner& runner, const RedisStoreOptions& options, Transport transport);
Status StartOnIo(IoRunner& runner, std::function<void(std::function<void(Status)>)> start);

// Every Redis store's Open: its URL parsed by `parse`, its options checked, its parts (an `Impl`
// made from the clock, the options and the URL, holding `runner` and `options`) built, TLS set
// up if the URL asks for it, the store made by `make`, then `start` run on the io thread as
// StartOnIo runs it.
// Adds a store's counters to their rows of /metrics (the caudal_redis_* rows of kMetricTable).
void AddStatsTo(const RedisStoreStats& stats, Metrics::CollectedValues& rows);

template <typename StoreT, typename Impl, typename Url>
Result<std::unique_ptr<StoreT>> OpenStore(const Clock& clock, RedisStoreOptions options,
                                          Result<Url> (*parse)(std::string_view),
                                          std::unique_ptr<StoreT> (*make)(std::unique_ptr<Impl>),
                                          void (*start)(Impl&, std::function<void(Status)>)) {
  Result<Url> url = parse(options.url);
  if (!url.ok()) return url.status();
  if (Status s = ValidateStoreOptions(options); !s.ok()) return s;
  if (Status s = ApplyUrlOptions(options, *url); !s.ok()) return s;
  auto impl = std::make_unique<Impl>(clock, std::move(options), *url);
  Impl* raw = impl.get();
  if (Status s = InitTlsIfAsked(raw->runner, raw->options, url->transport); !s.ok()) return s;
  std::unique_ptr<StoreT> store = make(std::move(impl));
  if (raw->options.metrics != nullptr) {
    raw->metric_rows = raw->options.metrics->AddCollector(
        [s = store.get()](Metrics::CollectedValues& rows) { AddStatsTo(s->Stats(), rows); });
  }
  if (Status s = StartOnIo(raw->runner, [raw, start](auto done) { start(*raw, std::move(done)); });
      !s.ok()) {
    return s;
  }
  // Each Impl lists its primaries (Primaries()) and stops `eviction` in its shutdown.
  if (raw->options.eviction_watch != nullptr) {
    boost::asio::post(raw->runner.io, [raw, name = std::string(store->Name())] {
      raw->eviction = std::make_unique<EvictionCheck>(raw->runner.io, raw->options.eviction_watch,
                                                      name, raw->options.eviction_check_interval,
                                                      [raw] { return raw->Primaries(); });
      raw->eviction->Start();
    });
  }
  return store;
}

// Each store's DecideBatchAsync: invalid entries fail with their reason, a store with no connection
// fails at once (kUnavailable "no connection to <target()>: <last error>"), the rest go to the
// pipeline.
template <typename Target>
void SubmitDecision(Pipeline& pipeline, const NodeCounters& counters,
                    std::span<const EntryRef> entries, DecideCallback done, Target target) {
  if (Status s = ValidateEntries(entries); !s.ok()) return done(std::move(s));
  if (counters.ready.load() == 0) {
    return done(Status::Unavailable("no connection to " + target() + ": " + counters.LastError()));
  }
  pipeline.Submit(entries, std::move(done));
}

// A node's options from the store's: `url` names the server, `name` is for messages.
NodeOptions NodeOptionsFrom(const RedisStoreOptions& options, const RedisUrl& url,
                            std::string name);

// Hands a call's reply to the pipeline: the script's integers, or the failure of every part
// (an error reply is kUnavailable quoting Redis; anything else but integers is kInternal).
void DeliverReply(Pipeline& pipeline, std::vector<PartPtr>& parts, Result<Reply> reply);
// The same parts failed with `why`.
void FailParts(Pipeline& pipeline, std::vector<PartPtr>& parts, const Status& why);

// A value handed from the io thread to a caller's thread, which waits for it through its Clock.
// Held by a shared_ptr: the io thread may hand it over after the caller stopped waiting.
template <typename T>
class Handoff {
 public:
  void Set(T value) {
    {
      std::lock_guard lock(mu_);
      value_ = std::move(value);
    }
    cv_.notify_all();
  }
  // The value, or nullopt when none came by `deadline` (`clock`'s Monotonic()).
  std::optional<T> Await(const Clock& clock, Nanos deadline) {
    std::unique_lock lock(mu_);
    if (!clock.WaitUntil(cv_, lock, deadline, [this] { return value_.has_value(); })) return {};
    return std::move(value_);
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::optional<T> value_;  // guarded by mu_
};

// PINGs every node `nodes()` lists (run on the io thread), waiting up to `timeout` of `clock`;
// Ok when all answered. Blocks: for a caller's thread.
Status PingNodes(IoRunner& runner, const Clock& clock, std::chrono::milliseconds timeout,
                 std::function<std::vector<Node*>()> nodes);

RedisStoreStats CollectStats(const NodeCounters& nodes, const PipelineCounters& pipeline);

}  // namespace caudal::redis
