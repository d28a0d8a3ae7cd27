#include "redis/change_feed.h"

#include <hiredis/hiredis.h>

#include <algorithm>
#include <charconv>

#include "common/cat.h"
#include "redis/sentinel_protocol.h"

namespace caudal::redis {

namespace {

std::string_view StringOf(const redisReply* r) {
  if (r == nullptr || (r->type != REDIS_REPLY_STRING && r->type != REDIS_REPLY_STATUS)) return {};
  return {r->str, r->len};
}

}  // namespace

FeedFrame ParseFeedFrame(const redisReply& frame, std::string_view channel) {
  FeedFrame out;
  if (frame.type != REDIS_REPLY_ARRAY || frame.elements != 3) return out;
  if (StringOf(frame.element[1]) != channel) return out;
  const std::string_view kind = StringOf(frame.element[0]);
  if (kind == "subscribe") {
    out.kind = FeedFrame::Kind::kSubscribed;
  } else if (kind == "message") {
    out.kind = FeedFrame::Kind::kMessage;
    const std::string_view text = StringOf(frame.element[2]);
    uint64_t v = 0;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
    if (!text.empty() && text.size() <= kMaxFeedMessageBytes && ec == std::errc() &&
        end == text.data() + text.size()) {
      out.version = v;
    }
  }
  return out;
}

ChangeFeed::ChangeFeed(IoRunner& runner, const Clock& clock, std::string channel,
                       std::vector<RedisUrl> servers, std::optional<SentinelUrl> sentinel,
                       ChangeFeedOptions options, OverrideFeed feed)
    : runner_(runner),
      clock_(clock),
      channel_(std::move(channel)),
      servers_(std::move(servers)),
      sentinel_(std::move(sentinel)),
      options_(options),
      feed_(std::move(feed)),
      retry_(runner.io),
      heartbeat_(runner.io) {}

void ChangeFeed::Start() { Connect(); }

void ChangeFeed::Shutdown() {
  shut_down_ = true;
  retry_.cancel();
  heartbeat_.cancel();
  const Status closed = Status::Unavailable("the change feed is shutting down");
  if (const std::shared_ptr<OneShot> ask = std::move(ask_)) ask->Cancel(closed);
  if (const std::shared_ptr<Connection> conn = std::move(conn_)) conn->Close(closed);
}

// The server to subscribe on: the next one listed, or the primary the next sentinel names.
void ChangeFeed::Connect() {
  if (shut_down_) return;
  if (!sentinel_) {
    if (servers_.empty()) return;
    const RedisUrl& url = servers_[next_++ % servers_.size()];
    Subscribe(url);
    return;
  }
  const Endpoint& at = sentinel_->sentinels[next_++ % sentinel_->sentinels.size()];
  ask_ = OneShot::Ask(runner_, clock_, sentinel_->Sentinel(at),
                      {"SENTINEL", "GET-MASTER-ADDR-BY-NAME", sentinel_->master_name},
                      options_.connect_timeout, [this](Result<Reply> r) {
                        if (shut_down_) return;
                        ask_.reset();
                        if (!r.ok()) return Lost(r.status());
                        Result<std::optional<Endpoint>> primary = ParseMasterAddr(**r);
                        if (!primary.ok()) return Lost(primary.status());
                        if (!primary->has_value()) {
                          return Lost(Status::Unavailable(Cat("the sentinel knows no master ",
                                                              Quoted(sentinel_->master_name))));
                        }
                        Subscribe(sentinel_->Primary(**primary));
                      });
}

void ChangeFeed::Subscribe(const RedisUrl& url) {
  auto conn =
      std::make_shared<Connection>(runner_.io, url, runner_.tls(), clock_,
                                   ConnectionSetup{.select_db = false, .load_script = false});
  conn_ = conn;
  subscribed_ = false;
  ping_waiting_ = false;
  conn->SetPushHandler([this](Reply frame) { OnFrame(frame); });
  std::weak_ptr<Connection> weak = conn;
  conn->Start(
      options_.connect_timeout,
      [this, weak](Status st) {
        const std::shared_ptr<Connection> c = weak.lock();
        if (shut_down_ || c == nullptr || c != conn_) return;
        if (!st.ok()) return Lost(st);
        std::string command;
        AppendCommand(std::vector<std::string_view>{"SUBSCRIBE", channel_}, command);
        c->Send(command, [this, weak](Result<Reply> r) {
          if (!r.ok()) return;  // the connection failed: on_closed says why
          if (IsError(**r)) {
            if (const std::shared_ptr<Connection> live = weak.lock()) {
              live->Close(Status::Unavailable(Cat("SUBSCRIBE refused: ", Text(**r))));
            }
            return;
          }
          OnFrame(*r);
        });
        ArmBeat();  // the SUBSCRIBE too must be answered within a beat
      },
      [this, weak](Status why) {
        if (shut_down_ || weak.lock() != conn_) return;
        Lost(why);
      });
}

void ChangeFeed::OnFrame(const Reply& frame) {
  if (shut_down_) return;
  ping_waiting_ = false;  // the connection answers
  const FeedFrame f = ParseFeedFrame(*frame, channel_);
  if (f.kind == FeedFrame::Kind::kMessage) {
    if (feed_.announced) feed_.announced(f.version);
  } else if (f.kind == FeedFrame::Kind::kSubscribed && !subscribed_) {
    subscribed_ = true;
    backoff_ = {};
    const bool again = ever_subscribed_;
    ever_subscribed_ = true;
    if (feed_.subscribed) feed_.subscribed(again);
  }
}

void ChangeFeed::ArmBeat() {
  heartbeat_.expires_after(options_.heartbeat);
  heartbeat_.async_wait([this](const boost::system::error_code& ec) {
    if (!ec) Beat();
  });
}

void ChangeFeed::Beat() {
  if (shut_down_ || conn_ == nullptr) return;
  if (!subscribed_ || ping_waiting_) {
    conn_->Close(
        Status::Unavailable(Cat(conn_->Where(), " left ", subscribed_ ? "a PING" : "the SUBSCRIBE",
                                " unanswered for ", options_.heartbeat.count(), "ms")));
    return;
  }
  ping_waiting_ = true;
  std::string command;
  AppendCommand(std::vector<std::string_view>{"PING"}, command);
  // In subscribe mode the answer is ["pong", ""]; a message may come first and take the PING's
  // place in the connection's order: either way, each frame goes to OnFrame.
  conn_->Send(command, [this](Result<Reply> r) {
    if (r.ok()) OnFrame(*r);
  });
  ArmBeat();
}

void ChangeFeed::Lost(const Status& why) {
  if (shut_down_) return;
  heartbeat_.cancel();
  subscribed_ = false;
  if (const std::shared_ptr<Connection> conn = std::move(conn_)) conn->Close(why);
  if (feed_.lost) feed_.lost(why);
  backoff_ = std::clamp(backoff_ * 2, options_.reconnect_min, options_.reconnect_max);
  retry_.expires_after(backoff_);
  retry_.async_wait([this](const boost::system::error_code& ec) {
    if (!ec) Connect();
  });
}

}  // namespace caudal::redis
