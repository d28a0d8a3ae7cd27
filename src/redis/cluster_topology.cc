#include "redis/cluster_topology.h"

#include <hiredis/hiredis.h>

#include <algorithm>
#include <boost/asio/post.hpp>
#include <set>

#include "common/cat.h"

namespace caudal::redis {

namespace {

std::string EndpointAddress(const Endpoint& e) {
  return e.host.find(':') != std::string::npos ? Cat('[', e.host, "]:", e.port)
                                               : Cat(e.host, ':', e.port);
}

// The map a CLUSTER SLOTS reply from `from` describes.
Result<SlotMap> ParseSlots(Result<Reply> reply, const Endpoint& from) {
  if (!reply.ok()) return reply.status();
  if (IsError(**reply)) {
    const std::string_view text = Text(**reply);
    // A plain Redis behind a redis-cluster:// URL: no retry fixes that.
    const StatusCode code = text.find("cluster support disabled") != std::string_view::npos
                                ? StatusCode::kInvalidArgument
                                : StatusCode::kUnavailable;
    return Status(code, Cat("redis at ", EndpointAddress(from), " refused CLUSTER SLOTS: ", text));
  }
  Result<SlotMap> map = SlotMap::FromClusterSlots(**reply, from);
  if (map.ok() && map->covered() == 0) {
    return Status::Unavailable(Cat("redis at ", EndpointAddress(from), " serves no slot yet"));
  }
  return map;
}

}  // namespace

ClusterTopology::ClusterTopology(IoRunner& runner, const Clock& clock,
                                 const RedisStoreOptions& options, const ClusterUrl& url,
                                 TopologyListener& listener, NodeCounters& counters)
    : runner_(runner),
      clock_(clock),
      options_(options),
      url_(url),
      listener_(listener),
      counters_(counters),
      refresh_timer_(runner.io),
      ask_timer_(runner.io) {
  owner_.fill(nullptr);
}

ClusterTopology::~ClusterTopology() = default;

void ClusterTopology::Start(std::function<void(Status)> done) {
  on_started_ = std::move(done);
  StartRefresh();
}

void ClusterTopology::Shutdown(const Status& why) {
  shut_down_ = true;
  refresh_timer_.cancel();
  ask_timer_.cancel();
  if (const std::shared_ptr<OneShot> seed = std::move(seed_ask_)) seed->Cancel(why);
  for (auto& [address, node] : nodes_) node->Shutdown(why);
  if (on_started_) std::exchange(on_started_, nullptr)(why);
}

void ClusterTopology::RequestRefresh() {
  if (shut_down_) return;
  if (refreshing_) {
    refresh_wanted_ = true;
    return;
  }
  if (last_refresh_ && clock_.Monotonic() < *last_refresh_ + kMinRefreshGap) {
    ArmRefresh(*last_refresh_ + kMinRefreshGap);
    return;
  }
  StartRefresh();
}

void ClusterTopology::ArmRefresh(Nanos at) {
  if (shut_down_ || (refresh_at_ && *refresh_at_ <= at)) return;
  refresh_at_ = at;
  refresh_timer_.expires_after(std::max(Nanos(0), at - clock_.Monotonic()));
  refresh_timer_.async_wait([this](const boost::system::error_code& ec) {
    if (ec) return;  // re-armed earlier, or shutting down
    refresh_at_.reset();
    RequestRefresh();
  });
}

void ClusterTopology::StartRefresh() {
  refreshing_ = true;
  refresh_wanted_ = false;
  refreshes_.fetch_add(1, std::memory_order_relaxed);
  // Connected nodes first, a different one each time; then the seeds.
  std::vector<Node*> ready;
  for (const auto& [address, node] : nodes_) {
    if (node->ready()) ready.push_back(node.get());
  }
  if (!ready.empty()) {
    std::rotate(ready.begin(), ready.begin() + static_cast<long>(rotation_++ % ready.size()),
                ready.end());
  }
  auto candidates = std::make_shared<std::vector<Endpoint>>();
  for (Node* n : ready) candidates->push_back({.host = n->url().host, .port = n->url().port});
  for (const Endpoint& seed : url_.seeds) {
    if (std::find(candidates->begin(), candidates->end(), seed) == candidates->end()) {
      candidates->push_back(seed);
    }
  }
  AskNext(std::move(candidates), 0, Status::Unavailable("redis cluster: no seed to ask"));
}

void ClusterTopology::AskNext(std::shared_ptr<std::vector<Endpoint>> candidates, size_t i,
                              Status last) {
  if (shut_down_) return;
  if (i >= candidates->size()) {
    FinishRefresh(std::move(last));
    return;
  }
  const Endpoint at = (*candidates)[i];
  const uint64_t id = ++ask_id_;
  // A refused credential says more than an unreachable seed: keep it as the reason.
  auto next = [this, candidates, i, id, last](Result<SlotMap> map) {
    if (shut_down_ || id != ask_id_) return;  // answered after its timeout
    ++ask_id_;
    ask_timer_.cancel();
    if (map.ok()) {
      FinishRefresh(std::move(map));
      return;
    }
    const bool keep = last.code() == StatusCode::kInvalidArgument &&
                      map.status().code() != StatusCode::kInvalidArgument;
    AskNext(candidates, i + 1, keep ? last : map.status());
  };
  ask_timer_.expires_after(options_.connect_timeout);
  ask_timer_.async_wait([this, next, at](const boost::system::error_code& ec) {
    if (ec || shut_down_) return;
    const Status late = Status::Unavailable(Cat("redis at ", EndpointAddress(at),
                                                " did not answer CLUSTER SLOTS within ",
                                                options_.connect_timeout.count(), "ms"));
    if (const std::shared_ptr<OneShot> seed = std::move(seed_ask_)) {
      seed->Cancel(late);  // answers through `next`
    } else {
      next(late);
    }
  });
  const auto node = nodes_.find(EndpointAddress(at));
  if (node != nodes_.end() && node->second->ready() &&
      node->second->SendCommand({"CLUSTER", "SLOTS"}, [next, at](Result<Reply> r) {
        next(ParseSlots(std::move(r), at));
      })) {
    return;
  }
  AskSeed(at, next);
}

// A short-lived connection (AUTH only) that asks CLUSTER SLOTS once.
void ClusterTopology::AskSeed(const Endpoint& seed, std::function<void(Result<SlotMap>)> done) {
  seed_ask_ = OneShot::Ask(runner_, clock_, url_.Node(seed), {"CLUSTER", "SLOTS"},
                           options_.connect_timeout, [this, seed, done](Result<Reply> r) {
                             if (shut_down_) return;
                             seed_ask_.reset();
                             done(ParseSlots(std::move(r), seed));
                           });
}

void ClusterTopology::FinishRefresh(Result<SlotMap> map) {
  refreshing_ = false;
  const Nanos now = clock_.Monotonic();
  last_refresh_ = now;
  if (map.ok()) {
    Apply(*map);
  } else {
    if (!have_map_) map_error_ = map.status().message();
    if (counters_.ready.load() == 0) counters_.SetLastError(map.status().message());
    if (on_started_) std::exchange(on_started_, nullptr)(map.status());
  }
  MaybeStarted();
  const bool degraded = !covered() || std::any_of(owner_.begin(), owner_.end(), [](const Node* n) {
    return n != nullptr && !n->ready();
  });
  ArmRefresh(now + (degraded ? Nanos(kDegradedRefresh) : Nanos(options_.topology_refresh)));
  if (refresh_wanted_) RequestRefresh();
}

void ClusterTopology::Apply(const SlotMap& map) {
  have_map_ = true;
  for (const Endpoint& p : map.primaries()) NodeAt(p);
  for (int slot = 0; slot < kHashSlots; ++slot) {
    const Endpoint* p = map.PrimaryOf(slot);
    const auto node = p != nullptr ? nodes_.find(EndpointAddress(*p)) : nodes_.end();
    owner_[static_cast<size_t>(slot)] = node != nodes_.end() ? node->second.get() : nullptr;
  }
  map_error_ = map.covered() == kHashSlots
                   ? std::string()
                   : Cat(kHashSlots - map.covered(), " slots have no primary in CLUSTER SLOTS");
  // Parts waiting on a node that no longer serves their slot go back to be routed again (a
  // part sent after ASK stays where the redirect sent it).
  std::vector<PartPtr> misplaced;
  std::vector<Node*> kept;
  for (auto& [address, node] : nodes_) {
    for (PartPtr& p : node->TakeWaiting()) {
      if (p->asking || owner_[static_cast<size_t>(p->slot)] == node.get()) {
        node->Enqueue(std::move(p));
        if (kept.empty() || kept.back() != node.get()) kept.push_back(node.get());
      } else {
        misplaced.push_back(std::move(p));
      }
    }
  }
  if (!misplaced.empty()) listener_.Reroute(std::move(misplaced));
  for (Node* node : kept) node->Dispatch();  // a call slot may have freed meanwhile
  Cleanup();
}

// Closes nodes that serve no slot any more and have nothing waiting or in flight, later on the
// io thread (this may run inside one of their callbacks).
void ClusterTopology::Cleanup() {
  boost::asio::post(runner_.io, [this] {
    if (shut_down_) return;
    const std::set<Node*> primaries(owner_.begin(), owner_.end());
    for (auto it = nodes_.begin(); it != nodes_.end();) {
      if (!primaries.contains(it->second.get()) && !it->second->busy()) {
        if (options_.on_node_breaker) {
          const BreakerState state = it->second->breaker_state();
          options_.on_node_breaker(
              {.node = it->second->address(), .from = state, .to = state, .removed = true});
        }
        it = nodes_.erase(it);
      } else {
        ++it;
      }
    }
  });
}

Node* ClusterTopology::NodeAt(const Endpoint& at) {
  const std::string address = EndpointAddress(at);
  if (const auto it = nodes_.find(address); it != nodes_.end()) return it->second.get();
  if (nodes_.size() >= kMaxNodes || shut_down_) return nullptr;
  NodeOptions options =
      NodeOptionsFrom(options_, url_.Node(at), Cat("redis cluster node ", address));
  // One failed primary fails its own slots at once and nothing else (node.h).
  options.breaker = BreakerRules{};
  options.on_breaker = options_.on_node_breaker;
  options.max_calls_in_flight = options_.cluster_calls_in_flight;
  options.cross_slot = true;  // a node's parts batch whatever their slots (node.h)
  // The script decides native counts here as charges: a transaction's keys would have to share
  // a slot, and its redirects come back queued, not as the call's reply.
  options.native_counts = false;
  auto node = std::make_unique<Node>(runner_.io, runner_.tls(), clock_, std::move(options), *this,
                                     counters_);
  Node* raw = node.get();
  nodes_.emplace(address, std::move(node));
  // A new node's series starts closed, so that every primary shows before anything fails.
  if (options_.on_node_breaker) options_.on_node_breaker({.node = raw->address()});
  ++starting_;
  raw->Start([this](Status st) { OnNodeStarted(st); });
  return raw;
}

void ClusterTopology::OnNodeStarted(const Status& st) {
  if (!st.ok() && first_start_error_.ok()) first_start_error_ = st;
  --starting_;
  MaybeStarted();
}

// Answers Start() once the first map is applied and each of its nodes has tried to connect.
void ClusterTopology::MaybeStarted() {
  if (starting_ > 0 || !on_started_ || !have_map_) return;
  if (counters_.ready.load() > 0) {
    std::exchange(on_started_, nullptr)(Status::Ok());
  } else {
    std::exchange(on_started_, nullptr)(
        first_start_error_.ok() ? Status::Unavailable("redis cluster: no primary could be reached")
                                : first_start_error_);
  }
}

void ClusterTopology::OnMoved(int slot, Node* to) {
  owner_[static_cast<size_t>(slot)] = to;
  RequestRefresh();
}

void ClusterTopology::OnNodeDown(Node&, const Status&) { RequestRefresh(); }

bool ClusterTopology::covered() const {
  return std::none_of(owner_.begin(), owner_.end(), [](const Node* n) { return n == nullptr; });
}

std::string ClusterTopology::why_uncovered() const {
  if (!map_error_.empty()) return map_error_;
  return covered() ? std::string() : "a MOVED named a node that could not be added";
}

std::vector<Node*> ClusterTopology::Primaries() const {
  std::vector<Node*> out;
  for (Node* n : owner_) {
    if (n != nullptr && std::find(out.begin(), out.end(), n) == out.end()) out.push_back(n);
  }
  return out;
}

void ClusterTopology::CheckStalls(Nanos now) {
  for (auto& [address, node] : nodes_) node->CheckStalls(now);
}

std::optional<Nanos> ClusterTopology::NextStallCheck() const {
  std::optional<Nanos> at;
  for (const auto& [address, node] : nodes_) {
    const std::optional<Nanos> n = node->NextStallCheck();
    if (n && (!at || *n < *at)) at = n;
  }
  return at;
}

}  // namespace caudal::redis
