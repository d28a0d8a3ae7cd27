#include "support/redis_cluster.h"

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <utility>

#include "support/fixture_util.h"

namespace caudal::testing {
namespace {

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  std::string s = ss.str();
  return s.size() > 3000 ? s.substr(s.size() - 3000) : s;
}

std::string Quote(const std::string& s) { return Join({"'", s, "'"}); }

// One line of CLUSTER NODES.
struct NodeLine {
  std::string id;
  std::string address;  // "127.0.0.1:<port>@<bus port>"
  std::string flags;
  std::string link;
  std::vector<std::pair<int, int>> slots;  // the ranges it serves (slots being migrated left out)

  bool primary() const { return flags.find("master") != std::string::npos; }
  int port() const { return std::stoi(address.substr(address.find(':') + 1)); }
};

std::vector<NodeLine> ParseNodes(const std::string& text) {
  std::vector<NodeLine> out;
  for (const std::string& line : Lines(text)) {
    std::istringstream in(line);
    NodeLine n;
    std::string master, ping, pong, epoch;
    in >> n.id >> n.address >> n.flags >> master >> ping >> pong >> epoch >> n.link;
    for (std::string range; in >> range;) {
      if (range.front() == '[') continue;  // a slot being migrated
      const size_t dash = range.find('-');
      const int first = std::stoi(range.substr(0, dash));
      const int last = dash == std::string::npos ? first : std::stoi(range.substr(dash + 1));
      n.slots.emplace_back(first, last);
    }
    out.push_back(std::move(n));
  }
  return out;
}

// Why the cluster is not healthy yet, "" once it is: every live node sees cluster_state:ok,
// every live node connected and not failed, every slot served by a live primary, every live
// replica in sync.
std::string Unhealthy(const std::vector<std::unique_ptr<RedisServer>>& nodes) {
  std::set<std::string> live_ids;
  for (const auto& n : nodes) {
    if (!n->running()) continue;
    Result<std::string> id = n->Command({"CLUSTER", "MYID"});
    if (id.ok()) live_ids.insert(*id);
  }
  for (const auto& n : nodes) {
    if (!n->running()) continue;
    const std::string port = std::to_string(n->port());
    Result<std::string> info = n->Command({"CLUSTER", "INFO"});
    if (!info.ok() || info->find("cluster_state:ok") == std::string::npos) {
      return Join({"node ", port, " is not ok yet"});
    }
    Result<std::string> text = n->Command({"CLUSTER", "NODES"});
    if (!text.ok()) return std::string(text.status().message());
    std::string why;
    int served = 0;
    for (const NodeLine& line : ParseNodes(*text)) {
      const bool live = live_ids.contains(line.id);
      if (live && (line.flags.find("fail") != std::string::npos || line.link != "connected")) {
        why = Join({"node ", line.address, " is seen as ", line.flags, "/", line.link});
      }
      if (!line.primary()) continue;
      for (auto [first, last] : line.slots) {
        if (!live) {
          why = Join({"a dead node ", line.address, " still serves slots"});
          continue;
        }
        served += last - first + 1;
      }
    }
    if (served != 16384) why = Join({"node ", port, " sees slots unserved"});
    if (!why.empty()) return why;
  }
  for (const auto& n : nodes) {
    if (!n->running()) continue;
    Result<std::string> role = n->Command({"INFO", "replication"});
    if (role.ok() && role->find("role:slave") != std::string::npos &&
        role->find("master_link_status:up") == std::string::npos) {
      return Join({"replica ", std::to_string(n->port()), " is not in sync"});
    }
  }
  return "";
}

}  // namespace

Result<std::unique_ptr<RedisCluster>> RedisCluster::Start(RedisClusterOptions options) {
  std::unique_ptr<RedisCluster> cluster(new RedisCluster());
  std::string tmpl = (std::filesystem::temp_directory_path() / "caudal-cluster-XXXXXX").string();
  if (::mkdtemp(tmpl.data()) == nullptr) return Status::Unavailable("mkdtemp failed");
  cluster->dir_ = tmpl;
  if (Status s = cluster->Create(options); !s.ok()) return s;
  return cluster;
}

RedisCluster::~RedisCluster() {
  nodes_.clear();  // stops every server
  std::error_code ec;
  if (!dir_.empty()) std::filesystem::remove_all(dir_, ec);
}

Status RedisCluster::Create(const RedisClusterOptions& options) {
  const int total = options.primaries * (1 + options.replicas_per_primary);
  primaries_ = static_cast<size_t>(options.primaries);
  tls_ = options.tls;
  for (int i = 0; i < total; ++i) {
    std::vector<std::string> args = {
        "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf", "--cluster-node-timeout",
        std::to_string(options.node_timeout.count()),
        // a replica of a dead primary may take over however stale it is
        "--cluster-replica-validity-factor", "0", "--cluster-require-full-coverage",
        options.require_full_coverage ? "yes" : "no"};
    args.insert(args.end(), options.extra_args.begin(), options.extra_args.end());
    Result<std::unique_ptr<RedisServer>> node =
        RedisServer::Start({.tls = options.tls,
                            .tls_admin_port = options.tls,
                            .tls_files_from = options.tls && i > 0 ? nodes_[0]->dir() : "",
                            .extra_args = std::move(args),
                            .cluster_bus_port = true});
    if (!node.ok()) return node.status();
    nodes_.push_back(std::move(*node));
  }
  // redis-cli gives the first `primaries` nodes the slots, and the rest to them as replicas.
  std::vector<std::string> args = {"--cluster", "create"};
  for (const auto& n : nodes_) args.push_back(Loopback(n->port()));
  args.insert(args.end(), {"--cluster-replicas", std::to_string(options.replicas_per_primary),
                           "--cluster-yes"});
  if (Status s = RunTool(args, Join({dir_, "/create.log"})); !s.ok()) return s;
  return WaitHealthy(std::chrono::seconds(30));
}

Status RedisCluster::RunTool(const std::vector<std::string>& args, const std::string& log) const {
  std::string cmd = RedisCliBinary();
  for (const std::string& a : args) cmd.append(Join({" ", Quote(a)}));
  cmd.append(Join({" >", Quote(log), " 2>&1 </dev/null"}));
  if (std::system(cmd.c_str()) != 0) {
    return Status::Unavailable(Join({"`", cmd, "` failed: ", ReadFile(log)}));
  }
  return Status::Ok();
}

std::string RedisCluster::url() const {
  std::string out = "redis-cluster://";
  for (size_t i = 0; i < primaries_ && i < nodes_.size(); ++i) {
    if (i > 0) out += ",";
    out.append(Loopback(nodes_[i]->client_port()));
  }
  if (tls_) out.append("?tls=true");
  return out;
}

Result<std::string> RedisCluster::NodeId(size_t i) const {
  return nodes_.at(i)->Command({"CLUSTER", "MYID"});
}

Result<size_t> RedisCluster::PrimaryOf(int slot) const {
  for (const auto& n : nodes_) {
    if (!n->running()) continue;
    Result<std::string> text = n->Command({"CLUSTER", "NODES"});
    if (!text.ok()) continue;
    for (const NodeLine& line : ParseNodes(*text)) {
      if (!line.primary()) continue;
      for (auto [first, last] : line.slots) {
        if (slot < first || slot > last) continue;
        for (size_t i = 0; i < nodes_.size(); ++i) {
          if (nodes_[i]->port() == line.port()) return i;
        }
      }
    }
    return Status::NotFound(Join({"no primary serves slot ", std::to_string(slot)}));
  }
  return Status::Unavailable("no cluster node answers");
}

Status RedisCluster::Reshard(size_t from, size_t to, int slots) const {
  Result<std::string> from_id = NodeId(from);
  Result<std::string> to_id = NodeId(to);
  if (!from_id.ok()) return from_id.status();
  if (!to_id.ok()) return to_id.status();
  static int runs = 0;
  const std::string log = Join({dir_, "/reshard-", std::to_string(++runs), ".log"});
  return RunTool(
      {"--cluster", "reshard", Loopback(nodes_.at(to)->port()), "--cluster-from", *from_id,
       "--cluster-to", *to_id, "--cluster-slots", std::to_string(slots), "--cluster-yes"},
      log);
}

Status RedisCluster::MigrateSlot(int slot, size_t to, MigrationStep up_to) {
  Result<size_t> from = PrimaryOf(slot);
  if (!from.ok()) return from.status();
  Result<std::string> from_id = NodeId(*from);
  Result<std::string> to_id = NodeId(to);
  if (!from_id.ok()) return from_id.status();
  if (!to_id.ok()) return to_id.status();
  RedisServer& source = *nodes_.at(*from);
  RedisServer& target = *nodes_.at(to);
  const std::string s = std::to_string(slot);
  auto run = [](const RedisServer& n, const std::vector<std::string>& argv) -> Status {
    Result<std::string> r = n.Command(argv);
    return r.ok() ? Status::Ok() : r.status();
  };
  if (*from != to) {  // not yet under way
    if (Status st = run(target, {"CLUSTER", "SETSLOT", s, "IMPORTING", *from_id}); !st.ok()) {
      return st;
    }
    if (Status st = run(source, {"CLUSTER", "SETSLOT", s, "MIGRATING", *to_id}); !st.ok()) {
      return st;
    }
  }
  if (up_to == MigrationStep::kOpen) return Status::Ok();
  for (;;) {
    Result<std::string> keys = source.Command({"CLUSTER", "GETKEYSINSLOT", s, "100"});
    if (!keys.ok()) return keys.status();
    std::vector<std::string> argv = {"MIGRATE", "127.0.0.1", std::to_string(target.port()), "", "0",
                                     "5000",    "KEYS"};
    for (const std::string& k : Lines(*keys)) {
      if (!k.empty()) argv.push_back(k);
    }
    if (argv.size() == 7) break;
    if (Status st = run(source, argv); !st.ok()) return st;
  }
  if (up_to == MigrationStep::kMoveKeys) return Status::Ok();
  for (const auto& n : nodes_) {
    Result<std::string> role = n->running() ? n->Command({"ROLE"}) : Status::Unavailable("down");
    if (!role.ok() || !role->starts_with("master")) continue;  // SETSLOT is for primaries
    if (Status st = run(*n, {"CLUSTER", "SETSLOT", s, "NODE", *to_id}); !st.ok()) return st;
  }
  return Status::Ok();
}

Status RedisCluster::WaitHealthy(std::chrono::milliseconds timeout) const {
  return WaitConverged(timeout, "the cluster did not become healthy",
                       [this] { return Unhealthy(nodes_); });
}

}  // namespace caudal::testing
