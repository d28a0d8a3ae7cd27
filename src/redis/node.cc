#include "redis/node.h"

#include <hiredis/hiredis.h>

#include <algorithm>

#include "redis/script.h"

namespace caudal::redis {

namespace asio = boost::asio;

namespace {

// How far down the queue a batch looks for parts of its slot: bounds the work per batch when the
// queue holds parts of many slots.
constexpr size_t kBatchScan = 1024;

std::string NodeAddress(const RedisUrl& url) {
  const bool ipv6 = url.host.find(':') != std::string::npos;
  return (ipv6 ? "[" + url.host + "]" : url.host) + ":" + std::to_string(url.port);
}

}  // namespace

Node::Node(asio::io_context& io, asio::ssl::context* tls, const Clock& clock, NodeOptions options,
           NodeListener& listener, NodeCounters& counters)
    : io_(io),
      tls_(tls),
      clock_(clock),
      options_(std::move(options)),
      address_(NodeAddress(options_.url)),
      name_(options_.name.empty() ? address_ : options_.name),
      listener_(listener),
      counters_(counters) {
  if (options_.breaker) breaker_.emplace(*options_.breaker);
  for (size_t i = 0; i < options_.connections; ++i) links_.push_back(std::make_unique<Link>(io));
}

Node::~Node() {
  Shutdown(Status::Unavailable(name_ + " removed"));
  *alive_ = false;
}

Status Node::NotConnected() const {
  return Status::Unavailable("no connection to " + name_ + ": " + last_error_);
}

bool Node::ReplyUnread() const {
  return std::any_of(links_.begin(), links_.end(), [](const auto& l) {
    return l->conn && l->conn->in_flight() > 0 && l->conn->Unread() > 0;
  });
}

bool Node::busy() const {
  if (std::any_of(waiting_.begin(), waiting_.end(),
                  [](const PartPtr& p) { return p != nullptr; })) {
    return true;
  }
  return std::any_of(links_.begin(), links_.end(),
                     [](const auto& l) { return l->conn && l->conn->in_flight() > 0; });
}

void Node::Start(std::function<void(Status)> done) {
  struct Tally {
    size_t left;
    Status first;
    std::function<void(Status)> done;
  };
  auto tally = std::make_shared<Tally>(Tally{links_.size(), Status::Ok(), std::move(done)});
  starting_ = true;
  for (const auto& link : links_) {
    Link* l = link.get();
    Connect(*l, [this, l, tally](Status st) {
      if (!st.ok() && !shut_down_) Retry(*l);
      if (!st.ok() && tally->first.ok()) tally->first = st;
      if (--tally->left > 0) return;
      starting_ = false;
      if (tally->done) tally->done(tally->first);
      if (!shut_down_) Dispatch();
    });
  }
}

void Node::Connect(Link& link, std::function<void(Status)> done) {
  auto conn = std::make_shared<Connection>(io_, options_.url, tls_, clock_, options_.setup);
  link.conn = conn;
  Link* l = &link;
  conn->Start(
      options_.connect_timeout,
      [this, l, done = std::move(done)](Status st) {
        if (st.ok()) {
          ++ready_;
          counters_.ready.fetch_add(1);
          l->backoff = options_.reconnect_min;
        } else {
          last_error_ = st.message();
          counters_.SetLastError(st.message());
          if (l->backoff.count() == 0) l->backoff = options_.reconnect_min;
        }
        done(st);
        if (!st.ok() && ready_ == 0 && !shut_down_) listener_.OnNodeDown(*this, st);
      },
      [this, l](Status why) { OnLost(*l, why); });
}

void Node::OnLost(Link& link, const Status& why) {
  --ready_;
  counters_.ready.fetch_sub(1);
  if (shut_down_) return;
  last_error_ = why.message();
  counters_.SetLastError(why.message());
  if (ready_ == 0) {
    Dispatch();  // fails what is waiting: nothing can carry it
    listener_.OnNodeDown(*this, why);
  }
  Retry(link);
}

void Node::Retry(Link& link) {
  link.retry.expires_after(link.backoff);
  link.retry.async_wait(
      [this, l = &link, alive = std::weak_ptr<bool>(alive_)](const boost::system::error_code& ec) {
        const auto still = alive.lock();
        if (ec || !still || !*still || shut_down_) return;
        Connect(*l, [this, l](Status st) {
          if (shut_down_) return;
          if (st.ok()) {
            counters_.reconnects.fetch_add(1, std::memory_order_relaxed);
            Dispatch();
            return;
          }
          l->backoff = std::min(l->backoff * 2, options_.reconnect_max);
          Retry(*l);
        });
      });
}

void Node::Shutdown(const Status& why) {
  if (shut_down_) return;
  shut_down_ = true;
  for (const auto& link : links_) {
    link->retry.cancel();
    if (link->conn) link->conn->Close(why);
  }
}

std::shared_ptr<Connection> Node::PickConnection() const {
  std::shared_ptr<Connection> best;
  for (const auto& link : links_) {
    const auto& c = link->conn;
    if (c && c->ready() && c->in_flight() < options_.max_calls_in_flight &&
        (!best || c->in_flight() < best->in_flight())) {
      best = c;
    }
  }
  return best;
}

std::vector<PartPtr> Node::TakeWaiting() {
  std::vector<PartPtr> out;
  for (PartPtr& p : waiting_) {
    if (p) out.push_back(std::move(p));
  }
  waiting_.clear();
  return out;
}

// The front part and, unless it travels alone, up to max_batch - 1 parts after it that may
// share its call.
std::vector<PartPtr> Node::NextBatch() {
  std::vector<PartPtr> batch;
  auto usable = [](const PartPtr& p) { return p != nullptr && !p->Abandoned(); };
  while (!waiting_.empty() && batch.empty()) {
    PartPtr p = std::move(waiting_.front());
    waiting_.pop_front();
    if (usable(p)) batch.push_back(std::move(p));
  }
  if (batch.empty() || batch.front()->asking) return batch;
  const bool native = Native(*batch.front());
  const int slot = batch.front()->slot;
  const bool mix = options_.cross_slot && !batch.front()->own_slot;
  const size_t scan = std::min(waiting_.size(), std::max(kBatchScan, options_.max_batch));
  for (size_t i = 0; i < scan && batch.size() < options_.max_batch; ++i) {
    PartPtr& p = waiting_[i];
    if (!usable(p) || p->asking || Native(*p) != native) continue;
    if (slot >= 0 && p->slot != slot && (!mix || p->own_slot)) continue;
    batch.push_back(std::move(p));  // leaves a null entry behind
  }
  while (!waiting_.empty() && waiting_.front() == nullptr) waiting_.pop_front();
  return batch;
}

void Node::FailWaiting(const Status& why) {
  std::vector<PartPtr> failed = TakeWaiting();
  failed.erase(
      std::remove_if(failed.begin(), failed.end(), [](const PartPtr& p) { return p->Abandoned(); }),
      failed.end());
  if (!failed.empty()) listener_.OnCallDone(*this, failed, why);
}

void Node::Dispatch() {
  while (!waiting_.empty()) {
    if (ready_ == 0 && starting_) return;  // Start() dispatches once its attempts are over
    const Nanos now = clock_.Monotonic();
    if (breaker_ && breaker_->Refusing(now)) {
      FailWaiting(Status::Unavailable(name_ + ": circuit open after " +
                                      std::to_string(breaker_->rules().failures_to_open) +
                                      " consecutive failures; last: " + breaker_->last_error()));
      return;
    }
    if (ready_ == 0) {
      // No connection: a failure at once for the breaker (a dead server opens it on the count,
      // and /metrics shows it), and the parts' failure mode decides.
      const Status why = NotConnected();
      if (breaker_) {
        const BreakerState before = breaker_->state();
        const bool probe = breaker_->Admit(now) == CircuitBreaker::Verdict::kProbe;
        breaker_->Failed(now,
                         probe ? CircuitBreaker::Call::kProbe : CircuitBreaker::Call::kOrdinary,
                         CircuitBreaker::Failure::kAtOnce, why.message());
        BreakerMoved(before);
      }
      FailWaiting(why);
      return;
    }
    std::shared_ptr<Connection> conn = PickConnection();
    if (!conn) return;
    auto call = std::make_shared<Call>();
    call->parts = NextBatch();
    if (call->parts.empty()) continue;
    call->native = Native(*call->parts.front());
    if (call->native && !NativeClockReady()) {  // back where they were, until the TIME comes
      for (auto it = call->parts.rbegin(); it != call->parts.rend(); ++it) {
        waiting_.push_front(std::move(*it));
      }
      return;
    }
    if (breaker_) {
      const BreakerState before = breaker_->state();
      call->probe = breaker_->Admit(now) == CircuitBreaker::Verdict::kProbe;
      BreakerMoved(before);
    }
    for (const PartPtr& p : call->parts) p->probe = call->probe;
    SendCall(conn, std::move(call));
  }
}

void Node::DeadlinePassed(const Part& part, Nanos now, const std::string& why) {
  BreakerFailed(now, part.probe ? CircuitBreaker::Call::kProbe : CircuitBreaker::Call::kOrdinary,
                CircuitBreaker::Failure::kSlow, why);
}

void Node::BreakerFailed(Nanos now, CircuitBreaker::Call call, CircuitBreaker::Failure how,
                         std::string why) {
  if (!breaker_) return;
  const BreakerState before = breaker_->state();
  breaker_->Failed(now, call, how, std::move(why));
  BreakerMoved(before);
}

void Node::BreakerMoved(BreakerState before) {
  const BreakerState after = breaker_->state();
  if (after == before) return;
  if (before == BreakerState::kClosed) {
    counters_.breaker_opens.fetch_add(1, std::memory_order_relaxed);
  }
  if (options_.on_breaker) {
    options_.on_breaker({.node = address_,
                         .from = before,
                         .to = after,
                         .opens = breaker_->opens(),
                         .why = breaker_->last_error(),
                         .rules = breaker_->rules()});
  }
}

bool Node::NativeClockReady() {
  if (options_.decision_clock != nullptr || native_clock_.known()) return true;
  AskTime();
  return false;
}

void Node::AskTime() {
  if (asking_time_) return;
  const int64_t sent = std::chrono::duration_cast<Micros>(clock_.Now()).count();
  asking_time_ =
      SendCommand({"TIME"}, [this, alive = std::weak_ptr<bool>(alive_), sent](Result<Reply> reply) {
        const auto still = alive.lock();
        if (!still || !*still) return;
        asking_time_ = false;
        const std::optional<int64_t> t = reply.ok() ? TimeMicros(**reply) : std::nullopt;
        if (t) {
          native_clock_.Observe(*t, sent, std::chrono::duration_cast<Micros>(clock_.Now()).count());
        }
        // SendCommand dispatches what waits once this returns; without a time the parts wait for
        // their deadline or the next attempt.
      });
}

void Node::SendNativeCall(const std::shared_ptr<Connection>& conn,
                          const std::shared_ptr<Call>& call) {
  const Clock* given = options_.decision_clock;
  call->sent_wall_us = std::chrono::duration_cast<Micros>(clock_.Now()).count();
  const int64_t now_us = given ? std::chrono::duration_cast<Micros>(given->Now()).count()
                               : native_clock_.Now(call->sent_wall_us);
  std::vector<EncodedRequest*> requests;
  requests.reserve(call->parts.size());
  for (const PartPtr& p : call->parts) {
    p->request.native_sent = true;
    requests.push_back(&p->request);
  }
  std::vector<std::string> commands =
      BuildNativeCall(requests, now_us, given ? kGivenTimeTtlSlackMs : 0);
  counters_.calls.fetch_add(1, std::memory_order_relaxed);
  std::string bytes;
  for (const std::string& c : commands) bytes += c;
  conn->SendCall(
      bytes, commands.size(),
      [this, weak = std::weak_ptr<Connection>(conn), call](Result<Reply> r) {
        OnCallReply(weak, call, std::move(r));
      },
      Connection::Answer::kAll);
  if (!given && native_clock_.Stale(call->sent_wall_us)) AskTime();  // for the calls after this
}

void Node::SendCall(const std::shared_ptr<Connection>& conn, std::shared_ptr<Call> call) {
  if (call->native) {
    const Nanos sent = clock_.Monotonic();
    for (const PartPtr& p : call->parts) {
      if (p->sent_at.count() < 0) p->sent_at = sent;
    }
    return SendNativeCall(conn, call);
  }
  std::vector<const EncodedRequest*> encoded;
  encoded.reserve(call->parts.size());
  for (const PartPtr& p : call->parts) encoded.push_back(&p->request);
  const Clock* given = options_.decision_clock;
  const int64_t now_us = given ? std::chrono::duration_cast<Micros>(given->Now()).count() : 0;
  const Nanos sent = clock_.Monotonic();
  for (const PartPtr& p : call->parts) {
    if (p->sent_at.count() < 0) p->sent_at = sent;
  }
  const int slot = call->parts.front()->slot;
  const bool one_slot = std::all_of(call->parts.begin(), call->parts.end(),
                                    [slot](const PartPtr& p) { return p->slot == slot; });
  const KeyPlacement placement = one_slot ? KeyPlacement::kDeclared : KeyPlacement::kUndeclared;
  // A call of plain consumes goes to the fast script, as a function where the server holds it
  // (script.h).
  // Or to the caudal module, where the server holds this build's.
  const bool consume = ForConsumeScript(encoded, placement);
  call->module = consume && conn->has_module();
  const bool function = consume && conn->has_consume_function();
  CallArgv argv;
  BuildCall(call->module ? kModuleCommand : (function ? "FCALL" : "EVALSHA"),
            call->module || function ? kConsumeFunction : (consume ? kConsumeSha1 : kDecideSha1),
            given ? TimeSource::kGiven : TimeSource::kRedisTime, now_us, encoded, argv, placement,
            consume);
  if (call->module) counters_.module_calls.fetch_add(1, std::memory_order_relaxed);
  std::string command;
  if (call->parts.front()->asking) {
    AppendCommand(std::vector<std::string_view>{"ASKING"}, command);
    conn->Send(command, [](Result<Reply>) {});  // its failure shows in the call that follows
    command.clear();
  }
  AppendCommand(argv.argv, command);
  counters_.calls.fetch_add(1, std::memory_order_relaxed);
  conn->Send(command, [this, weak = std::weak_ptr<Connection>(conn), call](Result<Reply> r) {
    OnCallReply(weak, call, std::move(r));
  });
}

void Node::OnCallReply(const std::weak_ptr<Connection>& weak, const std::shared_ptr<Call>& call,
                       Result<Reply> reply) {
  const std::string_view error = reply.ok() && IsError(**reply) ? Text(**reply) : "";
  const bool no_function = error.find("Function not found") != std::string_view::npos;
  // The module refused the call as another build's, or is gone (MODULE UNLOAD): the call did not
  // run; the script decides it, and every call after it.
  const bool no_module =
      call->module && (error.find("another build's protocol") != std::string_view::npos ||
                       error.starts_with("ERR unknown command"));
  if (no_module) {
    std::shared_ptr<Connection> conn = weak.lock();
    if (call->reloads < 2 && conn && conn->ready()) {
      ++call->reloads;
      conn->ForgetModule();
      SendCall(conn, call);
      return;
    }
  }
  if (no_function || error.starts_with("NOSCRIPT")) {
    // The library or the scripts were flushed (FUNCTION FLUSH, SCRIPT FLUSH, a restart): the call
    // did not run, so load what is missing and resend (to the script until the library is back).
    std::shared_ptr<Connection> conn = weak.lock();
    if (call->reloads < 2 && conn && conn->ready()) {
      ++call->reloads;
      counters_.reloads.fetch_add(1, std::memory_order_relaxed);
      if (no_function) {
        conn->ReloadConsumeFunction();
      } else {
        for (const std::string_view script : {kDecideScript, kConsumeScript}) {
          std::string load;  // both scripts: the call may be sent to either
          AppendCommand(std::vector<std::string_view>{"SCRIPT", "LOAD", script}, load);
          conn->Send(load, [](Result<Reply>) {});  // a failure shows in the call that follows
        }
      }
      SendCall(conn, call);
      return;
    }
  }
  if (breaker_ && !shut_down_) {
    const auto kind = call->probe ? CircuitBreaker::Call::kProbe : CircuitBreaker::Call::kOrdinary;
    if (reply.ok()) {
      const BreakerState before = breaker_->state();
      breaker_->Succeeded(kind);
      BreakerMoved(before);
    } else {
      // Slow whatever it took: a lost connection fails every call on it at once, which is one
      // event, and a node with no connection at all fails its parts without a call.
      BreakerFailed(clock_.Monotonic(), kind, CircuitBreaker::Failure::kSlow,
                    reply.status().message());
    }
  }
  listener_.OnCallDone(*this, call->parts, std::move(reply));
  if (!shut_down_) Dispatch();
}

bool Node::SendCommand(const std::vector<std::string_view>& argv,
                       Connection::ReplyHandler handler) {
  std::shared_ptr<Connection> conn;
  for (const auto& link : links_) {
    if (link->conn && link->conn->ready() &&
        (!conn || link->conn->in_flight() < conn->in_flight())) {
      conn = link->conn;
    }
  }
  if (!conn) return false;
  std::string command;
  AppendCommand(argv, command);
  // The command takes a call slot of its connection until it is answered: what waited for that
  // slot leaves then.
  conn->Send(command, [this, alive = std::weak_ptr<bool>(alive_),
                       handler = std::move(handler)](Result<Reply> reply) {
    handler(std::move(reply));
    const auto still = alive.lock();
    if (still && *still && !shut_down_ && !waiting_.empty()) Dispatch();
  });
  return true;
}

void Node::CheckStalls(Nanos now) {
  for (const auto& link : links_) {
    const auto& c = link->conn;
    if (c && c->ready() && c->in_flight() > 0 && now - c->oldest_sent() >= options_.stall_timeout) {
      c->Close(Status::Unavailable(name_ + " stopped answering for " +
                                   std::to_string(options_.stall_timeout.count()) +
                                   "ms; reconnecting"));
    }
  }
}

bool Node::Late(Nanos now, Nanos budget) const {
  if (ready_ == 0) return true;
  return std::none_of(links_.begin(), links_.end(), [&](const auto& link) {
    const auto& c = link->conn;
    return c && c->ready() && (c->in_flight() == 0 || now - c->oldest_sent() < budget);
  });
}

std::optional<Nanos> Node::NextStallCheck() const {
  std::optional<Nanos> at;
  for (const auto& link : links_) {
    const auto& c = link->conn;
    if (c && c->ready() && c->in_flight() > 0) {
      const Nanos stall = c->oldest_sent() + options_.stall_timeout;
      if (!at || stall < *at) at = stall;
    }
  }
  return at;
}

}  // namespace caudal::redis
