#include "redis/eviction_check.h"

#include <hiredis/hiredis.h>

#include <charconv>
#include <utility>

#include "common/cat.h"
#include "redis/node.h"
#include "redis/resp.h"

namespace caudal::redis {
namespace {

std::optional<uint64_t> ToU64(std::string_view text) {
  uint64_t v = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size() || text.empty()) return std::nullopt;
  return v;
}

}  // namespace

bool MayEvict(uint64_t maxmemory, std::string_view policy) {
  return maxmemory != 0 && policy != "noeviction";
}

std::optional<std::string_view> InfoField(std::string_view info, std::string_view field) {
  size_t at = 0;
  while (at < info.size()) {
    size_t end = info.find('\n', at);
    if (end == std::string_view::npos) end = info.size();
    std::string_view line = info.substr(at, end - at);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.size() > field.size() && line.starts_with(field) && line[field.size()] == ':') {
      return line.substr(field.size() + 1);
    }
    at = end + 1;
  }
  return std::nullopt;
}

bool ReadConfigReply(const redisReply& reply, ServerEviction& out) {
  if (reply.type != REDIS_REPLY_ARRAY) return false;
  std::optional<uint64_t> maxmemory;
  std::string policy;
  for (size_t i = 0; i + 1 < reply.elements; i += 2) {
    const std::string_view name = Text(*reply.element[i]);
    const std::string_view value = Text(*reply.element[i + 1]);
    if (name == "maxmemory") maxmemory = ToU64(value);
    if (name == "maxmemory-policy") policy = value;
  }
  if (!maxmemory || policy.empty()) return false;
  out.maxmemory = maxmemory;
  out.policy = std::move(policy);
  return true;
}

bool ReadInfoMemory(std::string_view info, ServerEviction& out) {
  const std::optional<std::string_view> maxmemory = InfoField(info, "maxmemory");
  const std::optional<std::string_view> policy = InfoField(info, "maxmemory_policy");
  if (!maxmemory || !policy || policy->empty() || !ToU64(*maxmemory)) return false;
  out.maxmemory = ToU64(*maxmemory);
  out.policy = *policy;
  return true;
}

// ---- RedisEvictionWatch ----

void RedisEvictionWatch::Begin() {
  std::lock_guard lock(mu_);
  begun_ = true;
}

std::string RedisEvictionWatch::Why(const std::string& server, const Known& k) const {
  if (k.policy.empty()) {
    return Cat("cannot read maxmemory-policy of redis at ", server, " (",
               k.error.empty() ? std::string("no answer yet") : k.error, ")");
  }
  return Cat("redis at ", server, " may evict caudal's keys (maxmemory ", k.maxmemory,
             " bytes, maxmemory-policy ", k.policy, ")");
}

void RedisEvictionWatch::Report(std::string_view store, std::span<const ServerEviction> servers) {
  if (servers.empty()) return;  // no primary known yet (the probe says why): nothing learnt
  std::vector<std::pair<LogLevel, std::string>> lines;
  {
    std::lock_guard lock(mu_);
    std::map<std::string, Known> next;
    uint64_t evicted = 0;
    for (const ServerEviction& s : servers) {
      const auto before = servers_.find(s.server);
      Known k = before != servers_.end() ? before->second : Known{};
      if (s.answered) {
        if (s.evicted_keys && k.evicted_keys) {
          // A restarted server counts from 0 again.
          evicted += *s.evicted_keys >= *k.evicted_keys ? *s.evicted_keys - *k.evicted_keys
                                                        : *s.evicted_keys;
        }
        if (s.evicted_keys) k.evicted_keys = s.evicted_keys;
        const bool was_risky = !k.policy.empty() && MayEvict(k.maxmemory, k.policy);
        if (s.maxmemory && !s.policy.empty()) {
          if (k.policy != s.policy || k.maxmemory != *s.maxmemory) k.warned = false;
          k.maxmemory = *s.maxmemory;
          k.policy = s.policy;
          k.error.clear();
          if (was_risky && !MayEvict(k.maxmemory, k.policy)) {
            lines.emplace_back(LogLevel::kInfo,
                               Cat("store ", Quoted(store), ": redis at ", s.server,
                                   " no longer evicts caudal's keys (maxmemory ", k.maxmemory,
                                   ", maxmemory-policy ", k.policy, ")"));
          }
        } else if (k.policy.empty()) {
          k.error = s.error;
        }
      }
      next.emplace(s.server, std::move(k));
    }
    servers_ = std::move(next);
    reported_ = true;
    evicted_ += evicted;
    at_risk_ = 0;
    not_ready_.clear();
    for (auto& [server, k] : servers_) {
      const bool unread = k.policy.empty();
      if (!unread && !MayEvict(k.maxmemory, k.policy)) continue;
      if (!unread) ++at_risk_;
      if (not_ready_.empty()) not_ready_ = Why(server, k);
      if (k.warned || (unread && k.error.empty())) continue;  // unreachable: the probe says so
      k.warned = true;
      lines.emplace_back(
          LogLevel::kWarning,
          Cat("store ", Quoted(store), ": ", Why(server, k),
              unread ? std::string(": whether it may evict caudal's keys is unknown")
                     : std::string(": every caudal key has a TTL, so an evicted limit starts "
                                   "fresh and admits up to its whole limit again, with no "
                                   "error; set maxmemory-policy noeviction (a full Redis then "
                                   "refuses writes, decided by store.on_failure)"),
              options_.refuse ? "; not ready (store.on_eviction_risk: refuse)" : ""));
    }
    if (options_.metrics != nullptr) {
      options_.metrics->Set(MetricId::kRedisEvictionRisk, at_risk_);
      if (evicted != 0) options_.metrics->Add(MetricId::kRedisEvictedKeys, evicted);
    }
  }
  if (options_.log == nullptr) return;
  for (const auto& [level, line] : lines) options_.log->Log(level, line);
}

Status RedisEvictionWatch::Ready() const {
  if (!options_.refuse) return Status::Ok();
  std::lock_guard lock(mu_);
  if (begun_ && !reported_) {
    return Status::Unavailable("maxmemory-policy not read yet (store.on_eviction_risk: refuse)");
  }
  if (!not_ready_.empty()) {
    return Status::Unavailable(Cat(not_ready_, " (store.on_eviction_risk: refuse)"));
  }
  return Status::Ok();
}

size_t RedisEvictionWatch::AtRisk() const {
  std::lock_guard lock(mu_);
  return at_risk_;
}

uint64_t RedisEvictionWatch::Evicted() const {
  std::lock_guard lock(mu_);
  return evicted_;
}

// ---- EvictionCheck ----

struct EvictionCheck::Round {
  RedisEvictionWatch* watch;
  std::string store;
  std::shared_ptr<Shared> shared;
  std::vector<ServerEviction> servers;
  size_t left = 0;

  void Done() {
    if (--left != 0) return;
    shared->in_flight = false;
    if (!shared->stopped) watch->Report(store, servers);
  }
};

EvictionCheck::EvictionCheck(boost::asio::io_context& io, RedisEvictionWatch* watch,
                             std::string store, std::chrono::milliseconds interval,
                             std::function<std::vector<Node*>()> nodes)
    : watch_(watch),
      store_(std::move(store)),
      interval_(interval),
      nodes_(std::move(nodes)),
      timer_(io) {}

EvictionCheck::~EvictionCheck() { shared_->stopped = true; }

void EvictionCheck::Start() {
  if (watch_ == nullptr) return;
  watch_->Begin();
  RunRound();
  Arm();
}

void EvictionCheck::Stop() {
  shared_->stopped = true;
  timer_.cancel();
}

void EvictionCheck::Arm() {
  timer_.expires_after(interval_);
  timer_.async_wait([this, shared = shared_](const boost::system::error_code& ec) {
    if (ec || shared->stopped) return;
    RunRound();
    Arm();
  });
}

void EvictionCheck::RunRound() {
  if (shared_->in_flight) return;
  const std::vector<Node*> nodes = nodes_();
  auto round = std::make_shared<Round>(
      Round{.watch = watch_, .store = store_, .shared = shared_, .servers = {}, .left = 1});
  round->servers.resize(nodes.size());
  shared_->in_flight = true;
  for (size_t i = 0; i < nodes.size(); ++i) {
    Node* node = nodes[i];
    round->servers[i].server = node->address();
    round->left += 2;
    // maxmemory and its policy: CONFIG GET, or INFO memory where CONFIG is refused.
    const bool sent =
        node->SendCommand({"CONFIG", "GET", "maxmemory*"}, [round, i, node](Result<Reply> r) {
          ServerEviction& s = round->servers[i];
          if (!r.ok()) return round->Done();
          s.answered = true;
          if (ReadConfigReply(**r, s)) return round->Done();
          s.error = IsError(**r) ? Cat("CONFIG GET: ", Text(**r)) : "CONFIG GET: no value";
          // The node lives while its connections' handlers run: a store destroys it only after
          // closing them, which answers every handler first.
          ++round->left;
          const bool again = node->SendCommand({"INFO", "memory"}, [round, i](Result<Reply> m) {
            ServerEviction& t = round->servers[i];
            if (m.ok() && !IsError(**m) && ReadInfoMemory(Text(**m), t)) {
              t.error.clear();
            } else if (m.ok()) {
              t.error += Cat("; INFO memory: ", IsError(**m) ? Text(**m) : "no value");
            }
            round->Done();
          });
          if (!again) round->Done();
          round->Done();
        });
    if (!sent) round->Done();
    const bool stats = node->SendCommand({"INFO", "stats"}, [round, i](Result<Reply> r) {
      if (r.ok() && !IsError(**r)) {
        const std::optional<std::string_view> n = InfoField(Text(**r), "evicted_keys");
        uint64_t v = 0;
        if (n && std::from_chars(n->data(), n->data() + n->size(), v).ec == std::errc()) {
          round->servers[i].evicted_keys = v;
        }
      }
      round->Done();
    });
    if (!stats) round->Done();
  }
  round->Done();  // the round's own count: reports at once when no node was asked
}

}  // namespace caudal::redis
