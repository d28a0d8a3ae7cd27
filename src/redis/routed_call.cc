#include "redis/routed_call.h"

#include <hiredis/hiredis.h>
#include <openssl/evp.h>

#include <algorithm>
#include <boost/asio/post.hpp>
#include <charconv>
#include <future>

#include "caudal/common/clock.h"
#include "common/cat.h"
#include "redis/sentinel_protocol.h"

namespace caudal::redis {
namespace {

constexpr size_t kMaxTries = 4;
constexpr int kMaxReloads = 2;

// "MOVED <slot> <host>:<port>": where Redis Cluster serves the keys now.
std::optional<Endpoint> Moved(const redisReply& r) {
  const std::string_view text(r.str, r.len);
  if (!text.starts_with("MOVED ")) return std::nullopt;
  const size_t space = text.find(' ', 6);
  const size_t colon = text.rfind(':');
  if (space == std::string_view::npos || colon == std::string_view::npos || colon < space) {
    return std::nullopt;
  }
  int port = 0;
  const std::string_view digits = text.substr(colon + 1);
  const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), port);
  if (ec != std::errc() || end != digits.data() + digits.size() || port <= 0 || port > 65535) {
    return std::nullopt;
  }
  return Endpoint{.host = std::string(text.substr(space + 1, colon - space - 1)),
                  .port = static_cast<uint16_t>(port)};
}

bool ErrorStarting(const Result<Reply>& r, std::string_view prefix) {
  return r.ok() && (*r)->type == REDIS_REPLY_ERROR &&
         std::string_view((*r)->str, (*r)->len).starts_with(prefix);
}

std::string Sha1Hex(std::string_view text) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int size = 0;
  EVP_Digest(text.data(), text.size(), digest, &size, EVP_sha1(), nullptr);
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  for (unsigned int i = 0; i < size; ++i) {
    out.push_back(kHex[digest[i] >> 4]);
    out.push_back(kHex[digest[i] & 0xf]);
  }
  return out;
}

std::string ServerKey(const RedisUrl& url) { return Cat(url.host, ':', url.port); }

}  // namespace

RoutedCallsOptions RecordCallsOptions(const RedisStoreOptions& options) {
  return {.timeout = options.deadline,
          .connect_timeout = options.connect_timeout,
          .stall_timeout = options.stall_timeout,
          .connections = 2,
          .max_calls = options.max_record_calls,
          .reconnect_min = options.reconnect_min,
          .reconnect_max = options.reconnect_max};
}

struct RoutedCalls::Call {
  explicit Call(boost::asio::io_context& io) : timer(io) {}
  std::vector<std::string> args;
  int slot = -1;
  Done done;
  size_t attempt = 0;
  int reloads = 0;
  RedisUrl url;  // where this try goes
  boost::asio::steady_timer timer;
  bool answered = false;  // done ran (the answer, or the timeout)
  bool released = false;  // no longer counted in flight
};

struct RoutedCalls::Server {
  std::unique_ptr<Node> node;
  bool starting = true;         // its first connections are being made
  std::deque<CallPtr> waiting;  // calls that came meanwhile
};

RoutedCalls::RoutedCalls(IoRunner& runner, const Clock& clock, RedisUrl url,
                         std::optional<ClusterUrl> cluster, std::optional<SentinelUrl> sentinel,
                         std::string_view script, RoutedCallsOptions options)
    : runner_(runner),
      clock_(clock),
      first_(url),
      cluster_(std::move(cluster)),
      sentinel_(std::move(sentinel)),
      script_(script),
      sha1_(Sha1Hex(script)),
      options_(options),
      url_(std::move(url)),
      stall_timer_(runner.io) {}

RoutedCalls::~RoutedCalls() = default;

void RoutedCalls::Ask(std::vector<std::string> args, int slot, Done done, Admission admission) {
  const size_t limit = admission == Admission::kNew ? options_.max_calls : 2 * options_.max_calls;
  size_t n = in_flight_.load(std::memory_order_relaxed);
  do {
    if (n >= limit) {
      return done(Status::ResourceExhausted(
          Cat("redis: ", n, " calls in flight already (at most ", limit, ")")));
    }
  } while (!in_flight_.compare_exchange_weak(n, n + 1, std::memory_order_relaxed));
  auto call = std::make_shared<Call>(runner_.io);
  call->args = std::move(args);
  call->slot = slot;
  call->done = std::move(done);
  boost::asio::post(runner_.io, [this, call] { Begin(call); });
}

Result<Reply> RoutedCalls::AskAndWait(std::vector<std::string> args, int slot) {
  auto promise = std::make_shared<std::promise<Result<Reply>>>();
  auto future = promise->get_future();
  Ask(std::move(args), slot, [promise](Result<Reply> r) { promise->set_value(std::move(r)); });
  return future.get();
}

void RoutedCalls::Begin(const CallPtr& call) {
  call->timer.expires_after(options_.timeout);
  call->timer.async_wait([this, call](const boost::system::error_code& ec) {
    if (ec || call->answered) return;
    // Answered now; still counted in flight until its reply comes, its connection is dropped
    // (CheckStallsLater) or it leaves the queue it waits in (a server's first connections, the
    // sentinels' answer: each bounded by the timeout too).
    Answer(*call,
           Status::Unavailable(Cat("redis: no answer within ", FormatDuration(options_.timeout))));
  });
  Attempt(call);
}

void RoutedCalls::Attempt(const CallPtr& call) {
  if (shut_down_) return Finish(call, Status::Unavailable("redis: the store is shutting down"));
  if (call->answered) return Release(*call);
  if (sentinel_ && !primary_known_) {
    for_primary_.push_back(call);
    if (!asking_) AskSentinel(0, Status::Unavailable("redis: no sentinel answered"));
    return;
  }
  if (cluster_) {
    auto known = slot_node_.find(call->slot);
    call->url = cluster_->Node(known != slot_node_.end()
                                   ? known->second
                                   : cluster_->seeds[next_seed_ % cluster_->seeds.size()]);
  } else {
    call->url = url_;
  }
  Send(call);
}

// The primary's URL, as the first sentinel that knows it says; then the calls waiting for it go.
void RoutedCalls::AskSentinel(size_t i, Status why) {
  auto fail_waiting = [this](const Status& st) {
    std::deque<CallPtr> failed;
    failed.swap(for_primary_);
    for (const CallPtr& c : failed) Finish(c, st);
  };
  if (shut_down_) return fail_waiting(Status::Unavailable("redis: the store is shutting down"));
  if (i >= sentinel_->sentinels.size()) return fail_waiting(why);
  asking_ = OneShot::Ask(
      runner_, clock_, sentinel_->Sentinel(sentinel_->sentinels[i]),
      {"SENTINEL", "GET-MASTER-ADDR-BY-NAME", sentinel_->master_name}, options_.connect_timeout,
      [this, i](Result<Reply> r) {
        asking_.reset();
        if (!r.ok()) return AskSentinel(i + 1, r.status());
        auto addr = ParseMasterAddr(**r);
        if (!shut_down_ && addr.ok() && addr->has_value()) {
          PrimaryNamed(sentinel_->Primary(**addr));
          std::deque<CallPtr> ready;
          ready.swap(for_primary_);
          for (const CallPtr& c : ready) Attempt(c);
          return;
        }
        AskSentinel(i + 1, Status::Unavailable(Cat("redis: the sentinels know no primary named ",
                                                   Quoted(sentinel_->master_name))));
      });
}

// The calls sent to a former primary fail as it is retired, and go to this one.
void RoutedCalls::PrimaryNamed(RedisUrl primary) {
  const std::string before = ServerKey(url_);
  url_ = std::move(primary);
  primary_known_ = true;
  if (ServerKey(url_) != before) Retire(before);
}

RoutedCalls::Server* RoutedCalls::ServerFor(const RedisUrl& url) {
  const std::string address = ServerKey(url);
  if (auto it = servers_.find(address); it != servers_.end()) return it->second.get();
  if (servers_.size() >= kMaxServers) {
    auto idle = std::find_if(servers_.begin(), servers_.end(), [](const auto& s) {
      return !s.second->starting && !s.second->node->busy();
    });
    if (idle == servers_.end()) return nullptr;
    Retire(idle->first);
  }
  auto server = std::make_unique<Server>();
  server->node =
      std::make_unique<Node>(runner_.io, runner_.tls(), clock_,
                             NodeOptions{.url = url,
                                         .name = {},
                                         .setup = {.select_db = true,
                                                   .load_script = true,
                                                   .script = script_,
                                                   .script_sha1 = sha1_,
                                                   .require_primary = sentinel_.has_value()},
                                         .connections = options_.connections,
                                         .connect_timeout = options_.connect_timeout,
                                         .stall_timeout = options_.stall_timeout,
                                         .reconnect_min = options_.reconnect_min,
                                         .reconnect_max = options_.reconnect_max},
                             static_cast<NodeListener&>(*this), counters_);
  Server* s = server.get();
  servers_.emplace(address, std::move(server));
  s->node->Start([this, s](Status st) {
    s->starting = false;
    std::deque<CallPtr> waiting;
    waiting.swap(s->waiting);
    for (const CallPtr& c : waiting) {
      if (c->released) continue;
      if (shut_down_ || !s->node->ready()) {
        OnReply(c, st.ok() ? s->node->NotConnected() : st);
      } else {
        Write(*s, c);
      }
    }
  });
  return s;
}

// Stops using the server at `address`: its calls waiting to be sent go elsewhere, those sent
// fail as its connections close, and the node goes once its handlers have run.
void RoutedCalls::Retire(const std::string& address) {
  auto it = servers_.find(address);
  if (it == servers_.end()) return;
  std::unique_ptr<Server> server = std::move(it->second);
  servers_.erase(it);
  std::deque<CallPtr> waiting;
  waiting.swap(server->waiting);
  server->node->Shutdown(Status::Unavailable(Cat("redis at ", address, " no longer used")));
  for (const CallPtr& c : waiting) {
    if (!c->released) OnReply(c, Status::Unavailable(Cat("redis at ", address, " left")));
  }
  std::shared_ptr<Server> gone(std::move(server));
  boost::asio::post(runner_.io, [gone] {});
}

void RoutedCalls::Send(const CallPtr& call) {
  Server* server = ServerFor(call->url);
  if (server == nullptr) {
    return Finish(call, Status::ResourceExhausted(
                            Cat("redis: ", kMaxServers, " servers in use, none of them idle")));
  }
  if (server->starting) {
    server->waiting.push_back(call);
    return;
  }
  Write(*server, call);
}

void RoutedCalls::Write(Server& server, const CallPtr& call) {
  if (call->answered) return Release(*call);
  std::vector<std::string_view> argv = {"EVALSHA", sha1_};
  argv.insert(argv.end(), call->args.begin(), call->args.end());
  const bool sent = server.node->SendCommand(
      argv, [this, call](Result<Reply> r) { OnReply(call, std::move(r)); });
  if (!sent) return OnReply(call, server.node->NotConnected());
  CheckStallsLater();
}

void RoutedCalls::OnReply(const CallPtr& call, Result<Reply> r) {
  if (call->answered || shut_down_) {
    return Finish(
        call, shut_down_ ? Status::Unavailable("redis: the store is shutting down") : std::move(r));
  }
  if (ErrorStarting(r, "NOSCRIPT") && call->reloads < kMaxReloads) return Reload(call);
  const bool last = ++call->attempt >= kMaxTries;
  if (sentinel_) {
    // A lost primary, or one demoted to replica: ask the sentinels again.
    if (!r.ok() || ErrorStarting(r, "READONLY")) {
      if (ServerKey(call->url) == ServerKey(url_)) primary_known_ = false;
      if (!last) return Attempt(call);
    }
    return Finish(call, std::move(r));
  }
  if (cluster_) {
    if (!r.ok()) {
      slot_node_.erase(call->slot);
      ++next_seed_;
      if (!last) return Attempt(call);
      return Finish(call, std::move(r));
    }
    if ((*r)->type == REDIS_REPLY_ERROR) {
      if (auto moved = Moved(**r); moved && !last) {
        if (call->slot >= 0) slot_node_[call->slot] = *moved;
        call->url = cluster_->Node(*moved);
        return Send(call);
      }
    }
    if (call->slot >= 0 && (*r)->type != REDIS_REPLY_ERROR) {
      slot_node_.try_emplace(call->slot, Endpoint{.host = call->url.host, .port = call->url.port});
    }
  }
  Finish(call, std::move(r));
}

// The server forgot the script (SCRIPT FLUSH, a restart): the call did not run. Loads it, then
// sends the call again once the load is answered (the cache is the server's, whichever
// connection carries the call).
void RoutedCalls::Reload(const CallPtr& call) {
  ++call->reloads;
  counters_.reloads.fetch_add(1, std::memory_order_relaxed);
  auto it = servers_.find(ServerKey(call->url));
  if (it == servers_.end()) return Send(call);
  const bool sent = it->second->node->SendCommand({"SCRIPT", "LOAD", script_},
                                                  [this, call](Result<Reply> loaded) {
                                                    if (!loaded.ok())
                                                      return OnReply(call, std::move(loaded));
                                                    // A refused load shows in the EVALSHA that
                                                    // follows.
                                                    if (call->answered || shut_down_)
                                                      return OnReply(call, std::move(loaded));
                                                    Send(call);
                                                  });
  if (!sent) OnReply(call, it->second->node->NotConnected());
}

// Drops the connections whose oldest call has waited the timeout, once one may have.
void RoutedCalls::CheckStallsLater() {
  std::optional<Nanos> at;
  for (const auto& [address, server] : servers_) {
    const std::optional<Nanos> next = server->node->NextStallCheck();
    if (next && (!at || *next < *at)) at = next;
  }
  if (!at || (stall_check_at_ && *stall_check_at_ <= *at)) return;
  stall_check_at_ = at;
  stall_timer_.expires_after(std::max(Nanos(0), *at - clock_.Monotonic()));
  stall_timer_.async_wait([this](const boost::system::error_code& ec) {
    if (ec || shut_down_) return;
    stall_check_at_.reset();
    const Nanos now = clock_.Monotonic();
    // CheckStalls closes connections, whose calls may retire servers (which go later, on the
    // io thread): walk a copy.
    std::vector<Node*> nodes;
    for (const auto& [address, server] : servers_) nodes.push_back(server->node.get());
    for (Node* node : nodes) node->CheckStalls(now);
    CheckStallsLater();
  });
}

void RoutedCalls::Shutdown() {
  if (shut_down_) return;
  shut_down_ = true;
  stall_timer_.cancel();
  if (asking_) asking_->Cancel(Status::Unavailable("redis: the store is shutting down"));
  std::vector<std::string> addresses;
  for (const auto& [address, server] : servers_) addresses.push_back(address);
  for (const std::string& a : addresses) Retire(a);
}

void RoutedCalls::Finish(const CallPtr& call, Result<Reply> r) {
  Release(*call);
  if (r.ok() && (*r)->type == REDIS_REPLY_ERROR) {
    return Answer(*call,
                  Status::Unavailable(Cat("redis: ", std::string_view((*r)->str, (*r)->len))));
  }
  Answer(*call, std::move(r));
}

void RoutedCalls::Answer(Call& call, Result<Reply> r) {
  if (call.answered) return;
  call.answered = true;
  Done done = std::move(call.done);
  call.done = nullptr;
  done(std::move(r));
}

void RoutedCalls::Release(Call& call) {
  if (call.released) return;
  call.released = true;
  call.timer.cancel();
  in_flight_.fetch_sub(1, std::memory_order_relaxed);
}

}  // namespace caudal::redis
