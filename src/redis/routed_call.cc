#include "redis/routed_call.h"

#include <hiredis/hiredis.h>

#include <boost/asio/post.hpp>
#include <charconv>
#include <future>

#include "common/cat.h"
#include "redis/one_shot.h"
#include "redis/sentinel_protocol.h"

namespace caudal::redis {
namespace {

constexpr size_t kMaxTries = 4;

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

bool ReadOnly(const Result<Reply>& r) {
  return r.ok() && (*r)->type == REDIS_REPLY_ERROR &&
         std::string_view((*r)->str, (*r)->len).starts_with("READONLY");
}

}  // namespace

struct RoutedCalls::Call {
  std::vector<std::string> argv;
  int slot = -1;
  Done done;
  size_t attempt = 0;
  RedisUrl url;  // where this try goes
};

RoutedCalls::RoutedCalls(IoRunner& runner, const Clock& clock, RedisUrl url,
                         std::optional<ClusterUrl> cluster, std::optional<SentinelUrl> sentinel,
                         std::chrono::milliseconds timeout)
    : runner_(runner),
      clock_(clock),
      first_(url),
      cluster_(std::move(cluster)),
      sentinel_(std::move(sentinel)),
      timeout_(timeout),
      url_(std::move(url)) {}

void RoutedCalls::Ask(std::vector<std::string> argv, int slot, Done done) {
  auto call = std::make_shared<Call>();
  call->argv = std::move(argv);
  call->slot = slot;
  call->done = std::move(done);
  boost::asio::post(runner_.io, [this, call] { Attempt(call); });
}

Result<Reply> RoutedCalls::AskAndWait(std::vector<std::string> argv, int slot) {
  auto promise = std::make_shared<std::promise<Result<Reply>>>();
  auto future = promise->get_future();
  Ask(std::move(argv), slot, [promise](Result<Reply> r) { promise->set_value(std::move(r)); });
  return future.get();
}

void RoutedCalls::Attempt(const std::shared_ptr<Call>& call) {
  if (sentinel_ && !primary_known_) {
    return AskSentinel(call, 0, Status::Unavailable("redis: no sentinel answered"));
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

// The primary's URL, as the first sentinel that knows it says.
void RoutedCalls::AskSentinel(const std::shared_ptr<Call>& call, size_t i, Status why) {
  if (i >= sentinel_->sentinels.size()) return Finish(call, std::move(why));
  OneShot::Ask(runner_, clock_, sentinel_->Sentinel(sentinel_->sentinels[i]),
               {"SENTINEL", "GET-MASTER-ADDR-BY-NAME", sentinel_->master_name}, timeout_,
               [this, call, i](Result<Reply> r) {
                 if (!r.ok()) return AskSentinel(call, i + 1, r.status());
                 auto addr = ParseMasterAddr(**r);
                 if (addr.ok() && addr->has_value()) {
                   url_ = sentinel_->Primary(**addr);
                   primary_known_ = true;
                   call->url = url_;
                   return Send(call);
                 }
                 AskSentinel(call, i + 1,
                             Status::Unavailable(Cat("redis: the sentinels know no primary named ",
                                                     Quoted(sentinel_->master_name))));
               });
}

void RoutedCalls::Send(const std::shared_ptr<Call>& call) {
  OneShot::Ask(runner_, clock_, call->url, call->argv, timeout_,
               [this, call](Result<Reply> r) { OnReply(call, std::move(r)); });
}

void RoutedCalls::OnReply(const std::shared_ptr<Call>& call, Result<Reply> r) {
  const bool last = ++call->attempt >= kMaxTries;
  if (sentinel_) {
    // A lost primary, or one demoted to replica: ask the sentinels again.
    if (!r.ok() || ReadOnly(r)) {
      primary_known_ = false;
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

void RoutedCalls::Finish(const std::shared_ptr<Call>& call, Result<Reply> r) {
  Done done = std::move(call->done);
  if (r.ok() && (*r)->type == REDIS_REPLY_ERROR) {
    return done(Status::Unavailable(Cat("redis: ", std::string_view((*r)->str, (*r)->len))));
  }
  done(std::move(r));
}

}  // namespace caudal::redis
