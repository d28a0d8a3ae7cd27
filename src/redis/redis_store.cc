#include "caudal/redis_store.h"

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/post.hpp>
#include <deque>
#include <future>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "redis/connection.h"
#include "redis/lua_protocol.h"
#include "redis/redis_url.h"
#include "redis/resp.h"
#include "redis/script.h"

namespace caudal {

namespace asio = boost::asio;
using redis::Connection;
using redis::Reply;
using SteadyClock = std::chrono::steady_clock;

namespace {

// One request from DecideAsync until its callback.
struct Pending {
  redis::EncodedRequest request;
  DecideCallback done;
  SteadyClock::time_point deadline;
  bool resolved = false;  // io thread only
};
using PendingPtr = std::shared_ptr<Pending>;

// Requests travelling together in one script call.
struct Batch {
  std::vector<PendingPtr> items;
  int reloads = 0;
};

std::string Millis(std::chrono::microseconds d) {
  return d.count() % 1000 == 0 ? std::to_string(d.count() / 1000) + "ms"
                               : std::to_string(d.count()) + "us";
}

}  // namespace

struct RedisStore::Impl {
  struct Slot {
    explicit Slot(asio::io_context& io) : retry(io) {}
    std::shared_ptr<Connection> conn;
    asio::steady_timer retry;
    std::chrono::milliseconds backoff{0};
  };

  Impl(RedisStoreOptions o, redis::RedisUrl u)
      : options(std::move(o)), url(std::move(u)), work(io.get_executor()), sweep_timer(io) {
    for (size_t i = 0; i < options.connections; ++i) slots.push_back(std::make_unique<Slot>(io));
  }

  // Connections and the batcher (io thread).
  void Connect(Slot& slot, std::function<void(Status)> done);
  void OnLost(Slot& slot, const Status& why);
  void Retry(Slot& slot);
  void Flush();
  void Dispatch();
  void SendBatch(const std::shared_ptr<Connection>& conn, std::shared_ptr<Batch> batch);
  void OnBatchReply(const std::weak_ptr<Connection>& conn, const std::shared_ptr<Batch>& batch,
                    Result<Reply> reply);
  void FailBatch(const Batch& batch, const Status& why);
  void Resolve(Pending& p, Result<StoreResponse> result);
  void Sweep();
  void ArmSweep();
  void Shutdown();
  std::shared_ptr<Connection> PickConnection() const;
  Status NotConnected();

  const RedisStoreOptions options;
  const redis::RedisUrl url;
  asio::io_context io;  // declared first: destroyed after everything that uses it
  std::optional<asio::ssl::context> tls;
  asio::executor_work_guard<asio::io_context::executor_type> work;
  std::thread thread;

  // Shared with the callers of DecideAsync.
  std::mutex mu;
  std::vector<PendingPtr> incoming;              // guarded by mu
  bool flush_posted = false;                     // guarded by mu
  std::string last_error = "not connected yet";  // guarded by mu
  std::atomic<size_t> outstanding{0};
  std::atomic<int> ready{0};
  bool shutting_down = false;  // io thread only
  std::atomic<uint64_t> calls{0}, requests{0}, reloads{0}, reconnects{0}, timeouts{0};

  // io thread only.
  std::vector<std::unique_ptr<Slot>> slots;
  std::deque<PendingPtr> waiting;  // not yet sent
  std::deque<PendingPtr> watch;    // every pending not yet known resolved, oldest first
  asio::steady_timer sweep_timer;
  std::optional<SteadyClock::time_point> sweep_at;
};

Status RedisStore::Impl::NotConnected() {
  std::lock_guard lock(mu);
  return Status::Unavailable("no connection to " + url.Redacted() + ": " + last_error);
}

void RedisStore::Impl::Connect(Slot& slot, std::function<void(Status)> done) {
  auto conn = std::make_shared<Connection>(io, url, tls ? &*tls : nullptr);
  slot.conn = conn;
  Slot* s = &slot;
  conn->Start(
      options.connect_timeout,
      [this, s, done = std::move(done)](Status st) {
        if (st.ok()) {
          ready.fetch_add(1);
          s->backoff = options.reconnect_min;
        } else {
          std::lock_guard lock(mu);
          last_error = st.message();
        }
        done(st);
      },
      [this, s](Status why) { OnLost(*s, why); });
}

void RedisStore::Impl::OnLost(Slot& slot, const Status& why) {
  ready.fetch_sub(1);
  if (shutting_down) return;
  {
    std::lock_guard lock(mu);
    last_error = why.message();
  }
  if (ready.load() == 0) Dispatch();  // fails what is waiting: nothing can carry it
  Retry(slot);
}

void RedisStore::Impl::Retry(Slot& slot) {
  slot.retry.expires_after(slot.backoff);
  slot.retry.async_wait([this, s = &slot](const boost::system::error_code& ec) {
    if (ec || shutting_down) return;
    Connect(*s, [this, s](Status st) {
      if (shutting_down) return;
      if (st.ok()) {
        reconnects.fetch_add(1);
        Dispatch();
        return;
      }
      s->backoff = std::min(s->backoff * 2, options.reconnect_max);
      Retry(*s);
    });
  });
}

std::shared_ptr<Connection> RedisStore::Impl::PickConnection() const {
  std::shared_ptr<Connection> best;
  for (const auto& slot : slots) {
    const auto& c = slot->conn;
    if (c && c->ready() && c->in_flight() < options.max_calls_in_flight &&
        (!best || c->in_flight() < best->in_flight())) {
      best = c;
    }
  }
  return best;
}

void RedisStore::Impl::Flush() {
  std::vector<PendingPtr> batch;
  {
    std::lock_guard lock(mu);
    batch.swap(incoming);
    flush_posted = false;
  }
  for (PendingPtr& p : batch) {
    waiting.push_back(p);
    watch.push_back(std::move(p));
  }
  Dispatch();
  ArmSweep();
}

// Sends what waits, as batches, to connections with room. With every call slot busy requests
// keep waiting, which is what makes the batches grow under load.
void RedisStore::Impl::Dispatch() {
  while (!waiting.empty()) {
    if (ready.load() == 0) {
      const Status why = NotConnected();
      while (!waiting.empty()) {
        Resolve(*waiting.front(), why);
        waiting.pop_front();
      }
      return;
    }
    std::shared_ptr<Connection> conn = PickConnection();
    if (!conn) return;
    auto batch = std::make_shared<Batch>();
    while (!waiting.empty() && batch->items.size() < options.max_batch) {
      if (!waiting.front()->resolved) batch->items.push_back(std::move(waiting.front()));
      waiting.pop_front();
    }
    if (!batch->items.empty()) SendBatch(conn, std::move(batch));
  }
}

void RedisStore::Impl::SendBatch(const std::shared_ptr<Connection>& conn,
                                 std::shared_ptr<Batch> batch) {
  std::vector<const redis::EncodedRequest*> encoded;
  encoded.reserve(batch->items.size());
  for (const PendingPtr& p : batch->items) encoded.push_back(&p->request);
  const bool given = options.decision_clock != nullptr;
  const int64_t now_us =
      given ? std::chrono::duration_cast<Micros>(options.decision_clock->Now()).count() : 0;
  redis::CallArgv call;
  redis::BuildCall("EVALSHA", redis::kDecideSha1,
                   given ? redis::TimeSource::kGiven : redis::TimeSource::kRedisTime, now_us,
                   encoded, call);
  std::string command;
  redis::AppendCommand(call.argv, command);
  calls.fetch_add(1, std::memory_order_relaxed);
  conn->Send(command, [this, weak = std::weak_ptr<Connection>(conn), batch](Result<Reply> r) {
    OnBatchReply(weak, batch, std::move(r));
  });
}

void RedisStore::Impl::OnBatchReply(const std::weak_ptr<Connection>& weak,
                                    const std::shared_ptr<Batch>& batch, Result<Reply> reply) {
  if (!reply.ok()) {
    FailBatch(*batch, reply.status());
    return;
  }
  const redisReply& r = **reply;
  if (redis::IsError(r)) {
    const std::string_view text = redis::Text(r);
    std::shared_ptr<Connection> conn = weak.lock();
    // The script was flushed (SCRIPT FLUSH, a restart): it did not run, so load it and resend.
    if (text.starts_with("NOSCRIPT") && batch->reloads < 2 && conn && conn->ready()) {
      ++batch->reloads;
      reloads.fetch_add(1, std::memory_order_relaxed);
      std::string load;
      redis::AppendCommand(std::vector<std::string_view>{"SCRIPT", "LOAD", redis::kDecideScript},
                           load);
      conn->Send(load, [](Result<Reply>) {});  // a failure shows in the EVALSHA that follows
      SendBatch(conn, batch);
      return;
    }
    FailBatch(*batch, Status::Unavailable("redis: " + std::string(text)));
    Dispatch();
    return;
  }
  std::vector<int64_t> ints;
  if (!redis::ToIntegers(r, ints)) {
    FailBatch(*batch, Status::Internal("redis script returned something other than integers"));
    Dispatch();
    return;
  }
  // Counted before the callbacks run, so a caller that saw its answer sees it in Stats().
  requests.fetch_add(batch->items.size(), std::memory_order_relaxed);
  size_t pos = 0;
  for (const PendingPtr& p : batch->items) {
    Result<StoreResponse> resp = redis::DecodeResponse(ints, pos, p->request);
    Resolve(*p, std::move(resp));
  }
  Dispatch();
}

void RedisStore::Impl::FailBatch(const Batch& batch, const Status& why) {
  for (const PendingPtr& p : batch.items) Resolve(*p, why);
}

void RedisStore::Impl::Resolve(Pending& p, Result<StoreResponse> result) {
  if (p.resolved) return;
  p.resolved = true;
  outstanding.fetch_sub(1, std::memory_order_relaxed);
  DecideCallback done = std::move(p.done);
  done(std::move(result));
}

// Completes every decision past its deadline and drops connections that stopped answering.
void RedisStore::Impl::Sweep() {
  const auto now = SteadyClock::now();
  while (!watch.empty()) {
    Pending& p = *watch.front();
    if (!p.resolved) {
      if (p.deadline > now) break;
      timeouts.fetch_add(1, std::memory_order_relaxed);
      // Unavailable, as for any store that cannot answer; the message says it was the deadline.
      Resolve(p, Status::Unavailable("redis did not answer within the " +
                                     Millis(options.deadline) + " deadline"));
    }
    watch.pop_front();
  }
  for (const auto& slot : slots) {
    const auto& c = slot->conn;
    if (c && c->ready() && c->in_flight() > 0 && now - c->oldest_sent() >= options.stall_timeout) {
      c->Close(Status::Unavailable("redis stopped answering for " + Millis(options.stall_timeout) +
                                   "; reconnecting"));
    }
  }
  ArmSweep();
}

void RedisStore::Impl::ArmSweep() {
  while (!watch.empty() && watch.front()->resolved) watch.pop_front();
  std::optional<SteadyClock::time_point> at;
  if (!watch.empty()) at = watch.front()->deadline;
  for (const auto& slot : slots) {
    const auto& c = slot->conn;
    if (c && c->ready() && c->in_flight() > 0) {
      const auto stall = c->oldest_sent() + options.stall_timeout;
      if (!at || stall < *at) at = stall;
    }
  }
  if (!at || (sweep_at && *sweep_at <= *at)) return;
  sweep_at = at;
  sweep_timer.expires_at(*at);
  sweep_timer.async_wait([this](const boost::system::error_code& ec) {
    if (ec) return;  // re-armed earlier, or shutting down
    sweep_at.reset();
    Sweep();
  });
}

void RedisStore::Impl::Shutdown() {
  const Status closed = Status::Unavailable("the redis store is shutting down");
  shutting_down = true;
  for (const auto& slot : slots) {
    slot->retry.cancel();
    if (slot->conn) slot->conn->Close(closed);
  }
  Flush();  // moves the last requests in; with no connection ready they fail
  for (const PendingPtr& p : watch) Resolve(*p, closed);
  watch.clear();
  waiting.clear();
  sweep_timer.cancel();
  work.reset();
}

RedisStore::RedisStore(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

RedisStore::~RedisStore() {
  asio::post(impl_->io, [impl = impl_.get()] { impl->Shutdown(); });
  impl_->thread.join();
}

Result<std::unique_ptr<RedisStore>> RedisStore::Open(RedisStoreOptions options) {
  Result<redis::RedisUrl> url = redis::ParseRedisUrl(options.url);
  if (!url.ok()) return url.status();
  if (options.connections < 1 || options.connections > 64) {
    return Status::InvalidArgument("redis store: connections must be between 1 and 64");
  }
  if (options.deadline <= Micros(0) || options.connect_timeout <= std::chrono::milliseconds(0) ||
      options.stall_timeout <= std::chrono::milliseconds(0)) {
    return Status::InvalidArgument("redis store: deadline and timeouts must be positive");
  }
  if (options.max_batch < 1 || options.max_calls_in_flight < 1 || options.max_outstanding < 1) {
    return Status::InvalidArgument(
        "redis store: max_batch, max_calls_in_flight and max_outstanding must be at least 1");
  }
  // A call's reply is one array: the allowed flag and 4 integers per entry of every request.
  const size_t max_batch = static_cast<size_t>(redis::ReplyLimits{}.max_elements) /
                           (1 + 4 * kMaxEntriesPerRequest);
  if (options.max_batch > max_batch) {
    return Status::InvalidArgument("redis store: max_batch must be at most " +
                                   std::to_string(max_batch) +
                                   " (a call's reply must fit the reply parser's bound)");
  }
  if (options.reconnect_min <= std::chrono::milliseconds(0) ||
      options.reconnect_max < options.reconnect_min) {
    return Status::InvalidArgument("redis store: need 0 < reconnect_min <= reconnect_max");
  }
  auto impl = std::make_unique<Impl>(std::move(options), *url);
  if (url->transport == redis::Transport::kTls) {
    impl->tls.emplace(asio::ssl::context::tls_client);
    boost::system::error_code ec;
    impl->tls->set_verify_mode(asio::ssl::verify_peer, ec);
    if (impl->options.tls_ca_file.empty()) {
      impl->tls->set_default_verify_paths(ec);
    } else {
      impl->tls->load_verify_file(impl->options.tls_ca_file, ec);
    }
    if (ec) {
      return Status::InvalidArgument("redis store: cannot load the TLS CA certificates \"" +
                                     impl->options.tls_ca_file + "\": " + ec.message());
    }
  }
  Impl* raw = impl.get();
  raw->thread = std::thread([raw] { raw->io.run(); });
  std::unique_ptr<RedisStore> store(new RedisStore(std::move(impl)));

  std::vector<std::shared_ptr<std::promise<Status>>> started;
  for (const auto& slot : raw->slots) {
    auto promise = std::make_shared<std::promise<Status>>();
    started.push_back(promise);
    asio::post(raw->io, [raw, s = slot.get(), promise] {
      raw->Connect(*s, [promise](Status st) { promise->set_value(std::move(st)); });
    });
  }
  for (const auto& promise : started) {
    Status st = promise->get_future().get();  // Start() always reports, within connect_timeout
    if (!st.ok()) return st;
  }
  return store;
}

void RedisStore::DecideAsync(std::span<const EntryRef> entries, DecideCallback done) {
  Impl& impl = *impl_;
  if (Status s = ValidateEntries(entries); !s.ok()) {
    done(std::move(s));
    return;
  }
  if (impl.ready.load() == 0) {
    done(impl.NotConnected());
    return;
  }
  if (impl.outstanding.fetch_add(1) >= impl.options.max_outstanding) {
    impl.outstanding.fetch_sub(1);
    done(Status::ResourceExhausted("redis store: " + std::to_string(impl.options.max_outstanding) +
                                   " decisions already waiting for redis"));
    return;
  }
  auto p = std::make_shared<Pending>();
  p->request = redis::EncodeRequest(entries, impl.options.key_prefix);
  p->done = std::move(done);
  p->deadline = SteadyClock::now() + impl.options.deadline;
  bool post = false;
  {
    std::lock_guard lock(impl.mu);
    impl.incoming.push_back(std::move(p));
    post = !impl.flush_posted;
    impl.flush_posted = true;
  }
  if (post) asio::post(impl.io, [&impl] { impl.Flush(); });
}

Status RedisStore::Ping() {
  Impl& impl = *impl_;
  if (impl.ready.load() == 0) return impl.NotConnected();
  auto promise = std::make_shared<std::promise<Status>>();
  std::future<Status> answer = promise->get_future();
  asio::post(impl.io, [&impl, promise] {
    std::shared_ptr<Connection> conn;
    for (const auto& slot : impl.slots) {
      if (slot->conn && slot->conn->ready()) conn = slot->conn;
    }
    if (!conn) {
      promise->set_value(impl.NotConnected());
      return;
    }
    std::string ping;
    redis::AppendCommand(std::vector<std::string_view>{"PING"}, ping);
    conn->Send(ping, [promise](Result<Reply> r) {
      if (!r.ok()) {
        promise->set_value(r.status());
      } else if (redis::IsError(**r)) {
        promise->set_value(Status::Unavailable("redis: " + std::string(redis::Text(**r))));
      } else {
        promise->set_value(Status::Ok());
      }
    });
  });
  if (answer.wait_for(impl.options.connect_timeout) != std::future_status::ready) {
    return Status::Unavailable("redis did not answer PING within " +
                               Millis(impl.options.connect_timeout));
  }
  return answer.get();
}

RedisStoreStats RedisStore::Stats() const {
  const Impl& impl = *impl_;
  return {.calls = impl.calls.load(),
          .requests = impl.requests.load(),
          .script_reloads = impl.reloads.load(),
          .reconnects = impl.reconnects.load(),
          .timeouts = impl.timeouts.load()};
}

}  // namespace caudal
