// ClusterTopology: a cluster store's view of Redis Cluster: one Node per primary, the primary of
// every hash slot, and keeping that map current.
//
// The map comes from CLUSTER SLOTS, asked of a connected node (in turn) or else of the URL's
// seeds, one short-lived connection each. It is read again every `topology_refresh`, soon after
// something suggests it changed (a MOVED, a lost node, CLUSTERDOWN: RequestRefresh), and every
// few hundred milliseconds while a primary of the map is down, which is how a replica's
// promotion is noticed. Refreshes are at least kMinRefreshGap apart and one at a time. A node
// that no longer serves a slot is closed once it has nothing in flight; parts still waiting on a
// node whose slot moved go back to the store to be routed again.
//
// Thread-safety: none; io thread only (refreshes() may be read from any thread).
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "caudal/redis/redis_store.h"
#include "redis/hash_slot.h"
#include "redis/node.h"
#include "redis/one_shot.h"
#include "redis/redis_url.h"
#include "redis/slot_map.h"
#include "redis/store_support.h"

namespace caudal::redis {

// Refreshes are at least this far apart; while a primary is down, this is their period.
inline constexpr std::chrono::milliseconds kMinRefreshGap{100};
inline constexpr std::chrono::milliseconds kDegradedRefresh{250};
// Nodes one store keeps at most (Redis Cluster suggests at most 1000).
inline constexpr size_t kMaxNodes = 1024;

class TopologyListener {
 public:
  virtual ~TopologyListener() = default;
  // A call on one of the nodes came back (see NodeListener::OnCallDone).
  virtual void OnCallDone(Node& node, std::vector<PartPtr>& parts, Result<Reply> reply) = 0;
  // Parts that waited on a node which no longer serves their slot: route them again.
  virtual void Reroute(std::vector<PartPtr> parts) = 0;
};

class ClusterTopology final : public NodeListener {
 public:
  // Everything given must outlive the topology.
  ClusterTopology(IoRunner& runner, const Clock& clock, const RedisStoreOptions& options,
                  const ClusterUrl& url, TopologyListener& listener, NodeCounters& counters);
  ~ClusterTopology() override;

  // Reads the first map and connects to every primary. `done` runs once: Ok when some primary is
  // ready; else the reason (a seed's refusal of the credentials is kInvalidArgument).
  void Start(std::function<void(Status)> done);
  // Stops refreshing and closes every node.
  void Shutdown(const Status& why);

  Node* PrimaryOf(int slot) const { return owner_[static_cast<size_t>(slot)]; }
  // The node at `at`, created (and connecting) if new; nullptr beyond kMaxNodes.
  Node* NodeAt(const Endpoint& at);
  // A MOVED said `slot` is now served by `to` (nullptr: unknown).
  void OnMoved(int slot, Node* to);
  void RequestRefresh();

  bool covered() const;
  // Why some slot has no primary (for messages).
  std::string why_uncovered() const;
  std::vector<Node*> Primaries() const;
  void CheckStalls(Nanos now);
  std::optional<Nanos> NextStallCheck() const;
  uint64_t refreshes() const { return refreshes_.load(std::memory_order_relaxed); }

  // NodeListener.
  void OnCallDone(Node& node, std::vector<PartPtr>& parts, Result<Reply> reply) override {
    listener_.OnCallDone(node, parts, std::move(reply));
  }
  void OnNodeDown(Node& node, const Status& why) override;

 private:
  void StartRefresh();
  void AskNext(std::shared_ptr<std::vector<Endpoint>> candidates, size_t i, Status last);
  void AskSeed(const Endpoint& seed, std::function<void(Result<SlotMap>)> done);
  void FinishRefresh(Result<SlotMap> map);
  void Apply(const SlotMap& map);
  void ArmRefresh(Nanos at);
  void Cleanup();
  void OnNodeStarted(const Status& st);
  void MaybeStarted();

  IoRunner& runner_;
  const Clock& clock_;
  const RedisStoreOptions& options_;
  const ClusterUrl& url_;
  TopologyListener& listener_;
  NodeCounters& counters_;
  std::atomic<uint64_t> refreshes_{0};

  std::map<std::string, std::unique_ptr<Node>> nodes_;  // by "host:port"
  std::array<Node*, kHashSlots> owner_{};
  bool have_map_ = false;
  std::string map_error_ = "no slot map yet";

  bool refreshing_ = false;
  bool refresh_wanted_ = false;
  std::optional<Nanos> last_refresh_;
  boost::asio::steady_timer refresh_timer_;
  std::optional<Nanos> refresh_at_;
  std::shared_ptr<OneShot> seed_ask_;    // a seed being asked for the map
  boost::asio::steady_timer ask_timer_;  // bounds each ask by connect_timeout
  uint64_t ask_id_ = 0;                  // answers to an older ask are ignored
  size_t rotation_ = 0;                  // which connected node to ask first
  bool shut_down_ = false;

  // Start(): called once the first map is applied and its nodes have tried to connect.
  std::function<void(Status)> on_started_;
  int starting_ = 0;
  Status first_start_error_;
};

}  // namespace caudal::redis
