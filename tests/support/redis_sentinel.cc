#include "support/redis_sentinel.h"

#include <sstream>

#include "support/fixture_util.h"

namespace caudal::testing {
namespace {

// A sentinel's answer flattened by RedisServer::Command: "key\nvalue\nkey\nvalue..." per
// entity, entities one after another; the value of `field` in each entity.
std::vector<std::string> Field(const std::string& flat, const std::string& field) {
  std::vector<std::string> out;
  std::istringstream in(flat);
  for (std::string key, value; std::getline(in, key) && std::getline(in, value);) {
    if (key == field) out.push_back(value);
  }
  return out;
}

}  // namespace

Result<std::unique_ptr<RedisSentinels>> RedisSentinels::Start(RedisSentinelOptions options) {
  std::unique_ptr<RedisSentinels> s(new RedisSentinels());
  s->options_ = options;
  const bool tls = options.tls;
  Result<std::unique_ptr<RedisServer>> primary =
      RedisServer::Start({.tls = tls, .tls_admin_port = tls});
  if (!primary.ok()) return primary.status();
  // The port the others reach it by: its TLS port for a TLS set.
  const std::string primary_port = std::to_string((*primary)->client_port());
  const std::string tls_files = tls ? (*primary)->dir() : "";
  s->servers_.push_back(std::move(*primary));
  Result<std::unique_ptr<RedisServer>> replica =
      RedisServer::Start({.tls = tls,
                          .tls_admin_port = tls,
                          .tls_files_from = tls_files,
                          .extra_args = {"--replicaof", "127.0.0.1", primary_port}});
  if (!replica.ok()) return replica.status();
  s->servers_.push_back(std::move(*replica));
  for (int i = 0; i < options.sentinels; ++i) {
    const std::string& name = options.master_name;
    Result<std::unique_ptr<RedisServer>> sentinel = RedisServer::Start(
        {.tls = tls,
         .tls_admin_port = tls,
         .tls_files_from = tls_files,
         .config_lines = {Join({"sentinel monitor ", name, " 127.0.0.1 ", primary_port, " 2"}),
                          Join({"sentinel down-after-milliseconds ", name, " ",
                                std::to_string(options.down_after.count())}),
                          Join({"sentinel failover-timeout ", name, " 10000"}),
                          Join({"sentinel parallel-syncs ", name, " 1"})},
         .sentinel = true});
    if (!sentinel.ok()) return sentinel.status();
    // Sentinel's periods, shortened as Redis's own sentinel tests shorten them: a primary that
    // comes back is turned into a replica only once it has been up and reporting itself a
    // primary for 4 publish periods, seen by an INFO (every 10 s by default to a replica); and a
    // sentinel whose timer is late by 2 s (a loaded test machine) enters TILT and acts on
    // nothing for 30 s. With the defaults, a run under the sanitizers on 2 cores once waited
    // more than 30 s for the old primary's demotion.
    Result<std::string> tuned =
        (*sentinel)->Command({"SENTINEL", "DEBUG", "info-period", "1000", "publish-period", "1000",
                              "tilt-period", "5000"});
    if (!tuned.ok()) return tuned.status();
    s->sentinels_.push_back(std::move(*sentinel));
  }
  if (Status st = s->WaitReady(std::chrono::seconds(30)); !st.ok()) return st;
  return s;
}

RedisSentinels::~RedisSentinels() {
  sentinels_.clear();
  servers_.clear();
}

std::string RedisSentinels::url() const {
  std::string out = "redis-sentinel://";
  for (size_t i = 0; i < sentinels_.size(); ++i) {
    if (i > 0) out.push_back(',');
    out.append(Loopback(sentinels_[i]->client_port()));
  }
  out.append(Join({"/", options_.master_name}));
  if (options_.tls) out.append("?tls=true");
  return out;
}

Result<size_t> RedisSentinels::PrimaryIndex() const {
  for (const auto& sentinel : sentinels_) {
    if (!sentinel->running()) continue;
    Result<std::string> addr =
        sentinel->Command({"SENTINEL", "GET-MASTER-ADDR-BY-NAME", options_.master_name});
    if (!addr.ok()) continue;
    const std::string port = addr->substr(addr->find('\n') + 1);
    for (size_t i = 0; i < servers_.size(); ++i) {
      if (std::to_string(servers_[i]->client_port()) == port) return i;
    }
    return Status::NotFound(Join({"the sentinels name an unknown primary: ", *addr}));
  }
  return Status::Unavailable("no sentinel answers");
}

Status RedisSentinels::WaitReady(std::chrono::milliseconds timeout) const {
  return WaitPrimary(0, timeout);
}

Status RedisSentinels::WaitPrimary(size_t i, std::chrono::milliseconds timeout,
                                   bool replica_too) const {
  const std::string port = std::to_string(servers_.at(i)->client_port());
  return WaitConverged(timeout, "sentinels not ready", [&]() -> std::string {
    int live = 0;
    for (const auto& sentinel : sentinels_) live += sentinel->running() ? 1 : 0;
    for (const auto& sentinel : sentinels_) {
      if (!sentinel->running()) continue;
      Result<std::string> addr =
          sentinel->Command({"SENTINEL", "GET-MASTER-ADDR-BY-NAME", options_.master_name});
      if (!addr.ok() || addr->substr(addr->find('\n') + 1) != port) {
        return "a sentinel names another primary";
      }
      Result<std::string> others =
          sentinel->Command({"SENTINEL", "SENTINELS", options_.master_name});
      if (!others.ok() || static_cast<int>(Field(*others, "name").size()) < live - 1) {
        return "a sentinel does not know the others yet";
      }
      if (!replica_too) continue;
      Result<std::string> replicas =
          sentinel->Command({"SENTINEL", "REPLICAS", options_.master_name});
      const std::vector<std::string> flags =
          replicas.ok() ? Field(*replicas, "flags") : std::vector<std::string>{};
      bool ok_replica = false;
      for (const std::string& f : flags) ok_replica |= f == "slave";
      if (!ok_replica) return "a sentinel does not see a healthy replica yet";
    }
    if (!replica_too) return "";
    const RedisServer& replica = *servers_.at(1 - i);
    Result<std::string> info =
        replica.running() ? replica.Command({"INFO", "replication"}) : Status::Unavailable("down");
    if (!info.ok() || info->find("master_link_status:up") == std::string::npos ||
        info->find(Join({"master_port:", port})) == std::string::npos) {
      return "the replica is not in sync";
    }
    return "";
  });
}

}  // namespace caudal::testing
