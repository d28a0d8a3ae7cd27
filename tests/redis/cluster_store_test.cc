// RedisClusterStore against a real Redis Cluster of 3 primaries (tests/support/redis_cluster.h):
// routing by slot, redirects, the undo of split requests and how long it holds quota, errors.
#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <thread>

#include "caudal/config/config.h"
#include "caudal/redis/redis_store.h"
#include "common/cat.h"
#include "config/store_registry.h"
#include "redis/hash_slot.h"
#include "redis/lua_protocol.h"
#include "redis/redis_test_util.h"
#include "redis/script.h"
#include "store/batch.h"
#include "support/delay_proxy.h"
#include "support/redis_cluster.h"

namespace caudal {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using testing::RedisCluster;
using Step = RedisCluster::MigrationStep;
using SteadyClock = std::chrono::steady_clock;

std::unique_ptr<RedisCluster> StartCluster(testing::RedisClusterOptions o = {}) {
  Result<std::unique_ptr<RedisCluster>> c = RedisCluster::Start(o);
  EXPECT_TRUE(c.ok()) << c.status().ToString();
  return c.ok() ? std::move(*c) : nullptr;
}

std::unique_ptr<RedisClusterStore> OpenCluster(RedisStoreOptions o) {
  if (o.deadline == RedisStoreOptions{}.deadline) o.deadline = seconds(2);
  Result<std::unique_ptr<RedisClusterStore>> s =
      RedisClusterStore::Open(SystemClock::Instance(), std::move(o));
  EXPECT_TRUE(s.ok()) << s.status().ToString();
  return s.ok() ? std::move(*s) : nullptr;
}

// A store key whose Redis key lives on node `node` and not in slot `avoid`.
std::string KeyOn(RedisCluster& c, size_t node, const std::string& base, int avoid = -1) {
  for (int i = 0;; ++i) {
    const std::string key = Cat(base, i);
    const int slot = redis::HashSlot(redis::StateKey("caudal:", key, Algorithm::kTokenBucket));
    Result<size_t> owner = c.PrimaryOf(slot);
    if (owner.ok() && *owner == node && slot != avoid) return key;
  }
}

int SlotOf(const std::string& key) {
  return redis::HashSlot(redis::StateKey("caudal:", key, Algorithm::kTokenBucket));
}

class ClusterStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    cluster_ = StartCluster();
    ASSERT_NE(cluster_, nullptr);
    store_ = OpenCluster({.url = cluster_->url()});
    ASSERT_NE(store_, nullptr);
  }

  std::unique_ptr<RedisCluster> cluster_;
  std::unique_ptr<RedisClusterStore> store_;
  const Limit bucket_ = Bucket(Algorithm::kTokenBucket, 1000, {1, std::chrono::hours(1)});
};

TEST_F(ClusterStoreTest, DecidesOnEveryPrimaryWithKeysWhereTheirSlotLives) {
  EXPECT_EQ(store_->Name(), "redis-cluster");
  EXPECT_TRUE(store_->Ping().ok());
  const Limit l = Window(Algorithm::kFixedWindow, 3, seconds(60));
  std::vector<int> keys_per_node(cluster_->size());
  for (int i = 0; i < 60; ++i) {
    const std::string key = Cat("k", i);
    for (int n = 0; n < 3; ++n) EXPECT_TRUE(DecideOne(*store_, key, l, 1).allowed());
    EXPECT_EQ(DecideOne(*store_, key, l, 1).verdict, Verdict::kDenied);
    const std::string redis_key = redis::StateKey("caudal:", key, l.algorithm());
    Result<size_t> owner = cluster_->PrimaryOf(redis::HashSlot(redis_key));
    ASSERT_TRUE(owner.ok());
    EXPECT_EQ(*cluster_->node(*owner).Command({"EXISTS", redis_key}), "1") << redis_key;
    ++keys_per_node[*owner];
  }
  for (int n : keys_per_node) EXPECT_GT(n, 0);  // every primary took part
  const RedisStoreStats stats = store_->Stats();
  EXPECT_EQ(stats.moved, 0u);
  EXPECT_EQ(stats.split_requests, 0u);
}

TEST_F(ClusterStoreTest, HashSlotsAgreeWithClusterKeyslot) {
  std::mt19937 rng(7);
  const std::string alphabet = "ab{}:-_x{}{}";
  for (int i = 0; i < 300; ++i) {
    std::string key;
    for (int j = 0, n = static_cast<int>(rng() % 12); j < n; ++j) {
      key += alphabet[rng() % alphabet.size()];
    }
    Result<std::string> slot = cluster_->node(0).Command({"CLUSTER", "KEYSLOT", key});
    ASSERT_TRUE(slot.ok());
    EXPECT_EQ(redis::HashSlot(key), std::stoi(*slot)) << key;
  }
}

// One identity's keys under one hash tag: one slot, one atomic call, no split.
TEST_F(ClusterStoreTest, KeysOfOneHashTagAreOneAtomicCall) {
  const Limit small = Window(Algorithm::kFixedWindow, 1, seconds(60));
  const ConsumeEntry both[] = {{.key = "user:{42}:a", .limit = &bucket_, .cost = 1},
                               {.key = "user:{42}:b", .limit = &small, .cost = 1}};
  EXPECT_TRUE(store_->Decide({.consumes = both})->allowed);
  const Result<DecideResponse> refused = store_->Decide({.consumes = both});
  ASSERT_TRUE(refused.ok());
  EXPECT_FALSE(refused->allowed);
  EXPECT_EQ(refused->decisions[0].remaining, 999);  // a peek: nothing consumed
  EXPECT_EQ(store_->Stats().split_requests, 0u);
  EXPECT_EQ(store_->Stats().undos, 0u);
}

TEST_F(ClusterStoreTest, SplitRequestsAreAllOrNothing) {
  const std::string a = KeyOn(*cluster_, 0, "a");
  const std::string b = KeyOn(*cluster_, 1, "b");
  const std::string c = KeyOn(*cluster_, 2, "c");
  const Limit one = Window(Algorithm::kSlidingWindowLog, 1, seconds(60));
  ASSERT_TRUE(DecideOne(*store_, c, one, 1).allowed());  // c is now exhausted
  const ConsumeEntry request[] = {{.key = a, .limit = &bucket_, .cost = 5},
                                  {.key = b, .limit = &bucket_, .cost = 7},
                                  {.key = c, .limit = &one, .cost = 1}};
  const Result<DecideResponse> r = store_->Decide({.consumes = request});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_FALSE(r->allowed);
  // The groups that admitted were undone before the answer: their entries report the state
  // without the request, as a refused request's do on one Redis.
  EXPECT_EQ(r->decisions[0].verdict, Verdict::kAllowed);
  EXPECT_EQ(r->decisions[0].remaining, 1000);
  EXPECT_EQ(r->decisions[1].remaining, 1000);
  EXPECT_EQ(r->decisions[2].verdict, Verdict::kDenied);
  EXPECT_EQ(DecideOne(*store_, a, bucket_, 0).remaining, 1000);
  EXPECT_EQ(DecideOne(*store_, b, bucket_, 0).remaining, 1000);
  const RedisStoreStats stats = store_->Stats();
  EXPECT_EQ(stats.split_requests, 1u);
  EXPECT_EQ(stats.undos, 2u);
  EXPECT_EQ(stats.undo_failures, 0u);
  // Admitted, it commits everywhere.
  const ConsumeEntry ok[] = {{.key = a, .limit = &bucket_, .cost = 5},
                             {.key = b, .limit = &bucket_, .cost = 7}};
  EXPECT_TRUE(store_->Decide({.consumes = ok})->allowed);
  EXPECT_EQ(DecideOne(*store_, a, bucket_, 0).remaining, 995);
  EXPECT_EQ(DecideOne(*store_, b, bucket_, 0).remaining, 993);
}

// The guarantee, counted: a refused split request holds, on the group that admitted it, exactly
// its cost, from its reservation until the slowest group has answered plus one round trip, and
// nothing once its answer is out. Node b's clients are paused (CLIENT PAUSE, which has begun when
// it returns) so the hold lasts long enough to be watched from outside.
TEST_F(ClusterStoreTest, ARefusedSplitRequestHoldsItsCostUntilTheSlowestGroupAnswered) {
  const std::string a = KeyOn(*cluster_, 0, "held");
  const std::string b = KeyOn(*cluster_, 1, "gate");
  const Limit gate = Window(Algorithm::kFixedWindow, 1, seconds(60));
  ASSERT_TRUE(DecideOne(*store_, b, gate, 1).allowed());  // b refuses from now on
  auto watcher = OpenCluster({.url = cluster_->url()});
  ASSERT_NE(watcher, nullptr);
  constexpr int kRequests = 8;
  constexpr auto kPause = milliseconds(500);
  const auto paused_at = SteadyClock::now();
  ASSERT_TRUE(cluster_->node(1).Command({"CLIENT", "PAUSE", "500", "ALL"}).ok());
  std::atomic<int> done{0};
  std::vector<std::thread> clients;
  std::vector<SteadyClock::time_point> answered(kRequests);
  for (int i = 0; i < kRequests; ++i) {
    clients.emplace_back([&, i] {
      const ConsumeEntry request[] = {{.key = a, .limit = &bucket_, .cost = 3},
                                      {.key = b, .limit = &gate, .cost = 1}};
      const Result<DecideResponse> r = store_->Decide({.consumes = request});
      answered[i] = SteadyClock::now();
      EXPECT_TRUE(r.ok() && !r->allowed);
      done.fetch_add(1);
    });
  }
  // While b is paused every request has reserved a's share and none can be undone yet.
  int64_t most_held = 0;
  while (done.load() == 0) {
    const int64_t held = 1000 - DecideOne(*watcher, a, bucket_, 0).remaining;
    EXPECT_LE(held, 3 * kRequests);  // never more than the refused requests' costs
    most_held = std::max(most_held, held);
  }
  for (std::thread& t : clients) t.join();
  EXPECT_EQ(most_held, 3 * kRequests);
  // Every answer came once b had refused (after its pause) and a's share was back.
  for (const auto& at : answered) EXPECT_GE(at - paused_at, kPause);
  EXPECT_EQ(DecideOne(*watcher, a, bucket_, 0).remaining, 1000);
  EXPECT_EQ(store_->Stats().undos, static_cast<uint64_t>(kRequests));
}

TEST_F(ClusterStoreTest, FollowsAskDuringAMigrationAndMovedAfterIt) {
  const std::string key = KeyOn(*cluster_, 0, "moving");
  const int slot = SlotOf(key);
  ASSERT_EQ(DecideOne(*store_, key, bucket_, 10).remaining, 990);
  // Migration opened, key still on the source: served there.
  ASSERT_TRUE(cluster_->MigrateSlot(slot, 1, Step::kOpen).ok());
  EXPECT_EQ(DecideOne(*store_, key, bucket_, 10).remaining, 980);
  // A new key of the same slot is absent from the source: ASK, and created on the target.
  std::string fresh;
  for (int i = 0; fresh.empty(); ++i) {
    const std::string k = Cat("{", key, "}", i);
    if (SlotOf(k) == slot) fresh = k;
  }
  EXPECT_EQ(DecideOne(*store_, fresh, bucket_, 1).remaining, 999);
  EXPECT_GE(store_->Stats().asked, 1u);
  // (A plain client would get MOVED from the importing node: count the slot's keys instead.)
  EXPECT_EQ(cluster_->node(1).Command({"CLUSTER", "COUNTKEYSINSLOT", std::to_string(slot)}).value(),
            "1");
  // Keys moved: ASK for them too, and their state went with them.
  ASSERT_TRUE(cluster_->MigrateSlot(slot, 1, Step::kMoveKeys).ok());
  EXPECT_EQ(DecideOne(*store_, key, bucket_, 10).remaining, 970);
  // Slot handed over: MOVED once, then the map says node 1.
  ASSERT_TRUE(cluster_->MigrateSlot(slot, 1, Step::kFinish).ok());
  const uint64_t moved = store_->Stats().moved;
  EXPECT_EQ(DecideOne(*store_, key, bucket_, 10).remaining, 960);
  EXPECT_EQ(store_->Stats().moved, moved + 1);
  EXPECT_EQ(DecideOne(*store_, key, bucket_, 10).remaining, 950);
  EXPECT_EQ(store_->Stats().moved, moved + 1);
  EXPECT_EQ(store_->Stats().timeouts, 0u);
}

// A node's requests leave together whatever their slots (one call, keys undeclared). A request
// whose slot the node no longer serves (moved behind the store's back) is skipped untouched by
// the script and sent again on its own, where MOVED takes it to its new primary.
TEST_F(ClusterStoreTest, ANodesRequestsOfManySlotsShareACallAndAMovedSlotIsSentAgain) {
  // Declared before the store, so that answers given while it shuts down still find them.
  std::mutex mu;
  std::condition_variable cv;
  std::map<std::string, Result<DecideResponse>> got;
  auto store =
      OpenCluster({.url = cluster_->url(), .connections = 1, .cluster_calls_in_flight = 1});
  ASSERT_NE(store, nullptr);
  const std::string first = KeyOn(*cluster_, 0, "first");
  const std::string moved = KeyOn(*cluster_, 0, "gone", SlotOf(first));
  ASSERT_TRUE(DecideOne(*store, first, bucket_, 1).allowed());  // the map is read, node 0 is up
  ASSERT_TRUE(cluster_->MigrateSlot(SlotOf(moved), 1, Step::kFinish).ok());  // the map is stale
  constexpr int kKeys = 20;
  std::vector<std::string> keys;
  std::set<int> slots;
  for (int i = 0; keys.size() < kKeys; ++i) {
    const std::string k = KeyOn(*cluster_, 0, Cat("many", i, "_"), SlotOf(moved));
    if (slots.insert(SlotOf(k)).second) keys.push_back(k);
  }
  keys.push_back(moved);
  const RedisStoreStats before = store->Stats();
  // The first call waits on node 0's pause; everything submitted meanwhile leaves in the next.
  ASSERT_TRUE(cluster_->node(0).Command({"CLIENT", "PAUSE", "200", "ALL"}).ok());
  std::vector<ConsumeEntry> first_request = {{.key = first, .limit = &bucket_, .cost = 1}};
  auto collect = [&](std::string key) {
    return [&, key](Result<DecideResponse> r) {
      std::lock_guard lock(mu);
      got.emplace(key, std::move(r));
      cv.notify_all();
    };
  };
  store->DecideAsync({.consumes = first_request}, collect(first));
  for (const std::string& k : keys) {
    const ConsumeEntry e[] = {{.key = k, .limit = &bucket_, .cost = 4}};
    store->DecideAsync({.consumes = e}, collect(k));
  }
  {
    std::unique_lock lock(mu);
    // Every request is answered, and well within its deadline (2 s) even when a map read
    // comes while the node's only call slot is busy.
    ASSERT_TRUE(cv.wait_for(lock, seconds(4), [&] { return got.size() == keys.size() + 1; }));
  }
  for (const auto& [key, r] : got) {
    ASSERT_TRUE(r.ok()) << key << ": " << r.status().ToString();
    EXPECT_TRUE(r->allowed) << key;
    EXPECT_EQ(r->decisions[0].remaining, key == first ? 998 : 996) << key;
  }
  const RedisStoreStats after = store->Stats();
  // The first request, then the other 21 together; the moved one, unless a map read came first
  // (they are periodic), again on its own and then after MOVED on its new primary.
  EXPECT_LE(after.calls - before.calls, 4u);
  EXPECT_LE(after.not_served - before.not_served, 1u);
  EXPECT_LE(after.moved - before.moved, 1u);
  // Where each key lives: the moved one on node 1 only, written once.
  const std::string moved_key = redis::StateKey("caudal:", moved, Algorithm::kTokenBucket);
  EXPECT_EQ(*cluster_->node(1).Command({"EXISTS", moved_key}), "1");
  EXPECT_EQ(
      *cluster_->node(0).Command({"CLUSTER", "COUNTKEYSINSLOT", std::to_string(SlotOf(moved))}),
      "0");
}

// The script itself, called with undeclared keys on node 0: a request with a key node 0 does not
// serve comes back NOT_SERVED with nothing of it written; the requests around it are decided.
TEST_F(ClusterStoreTest, TheScriptSkipsWholeARequestWithAKeyTheNodeDoesNotServe) {
  const Limit l = Window(Algorithm::kFixedWindow, 5, seconds(60));
  const std::string a = KeyOn(*cluster_, 0, "a");
  const std::string b = KeyOn(*cluster_, 0, "b", SlotOf(a));
  const std::string c = KeyOn(*cluster_, 0, "c", SlotOf(b));
  const std::string foreign = KeyOn(*cluster_, 1, "f");
  const EntryRef e1[] = {{.key = a, .limit = &l, .cost = 1}};
  const EntryRef e2[] = {{.key = b, .limit = &l, .cost = 1},
                         {.key = foreign, .limit = &l, .cost = 1}};
  const EntryRef e3[] = {{.key = c, .limit = &l, .cost = 2}};
  const redis::EncodedRequest r1 = redis::EncodeRequest(e1, "caudal:", Micros(0));
  const redis::EncodedRequest r2 = redis::EncodeRequest(e2, "caudal:", Micros(0));
  const redis::EncodedRequest r3 = redis::EncodeRequest(e3, "caudal:", Micros(0));
  const redis::EncodedRequest* batch[] = {&r1, &r2, &r3};
  redis::CallArgv call;
  redis::BuildCall("EVAL", redis::kDecideScript, redis::TimeSource::kRedisTime, 0, batch, call,
                   redis::KeyPlacement::kUndeclared);
  const Result<std::string> reply =
      cluster_->node(0).Command(std::vector<std::string>(call.argv.begin(), call.argv.end()));
  ASSERT_TRUE(reply.ok()) << reply.status().ToString();
  std::vector<int64_t> ints;
  for (std::string_view rest = *reply; !rest.empty();) {
    const size_t nl = std::min(rest.find('\n'), rest.size());
    ints.push_back(std::stoll(std::string(rest.substr(0, nl))));
    rest.remove_prefix(std::min(nl + 1, rest.size()));
  }
  size_t pos = 0;
  const Result<DecideResponse> d1 = redis::DecodeResponse(ints, pos, r1);
  ASSERT_TRUE(d1.ok());
  EXPECT_EQ(d1->decisions[0].remaining, 4);
  EXPECT_TRUE(redis::NotServedHere(ints, pos, r2));
  const Result<DecideResponse> d3 = redis::DecodeResponse(ints, pos, r3);
  ASSERT_TRUE(d3.ok());
  EXPECT_EQ(d3->decisions[0].remaining, 3);
  EXPECT_TRUE(redis::DecodeCallTime(ints, pos).ok());
  auto exists = [&](size_t node, const std::string& key) {
    return *cluster_->node(node).Command(
        {"EXISTS", redis::StateKey("caudal:", key, Algorithm::kFixedWindow)});
  };
  EXPECT_EQ(exists(0, a), "1");
  EXPECT_EQ(exists(0, b), "0");  // its request was skipped before anything was written
  EXPECT_EQ(exists(0, c), "1");
  EXPECT_EQ(exists(1, foreign), "0");
}

// A plain consume goes to the fast script's function: a node that lost the library (FUNCTION
// FLUSH) loads it again, and the call is sent again, to the script meanwhile.
TEST_F(ClusterStoreTest, ReloadsTheScriptOnTheNodeThatLostIt) {
  const std::string key = KeyOn(*cluster_, 2, "flushed");
  ASSERT_TRUE(DecideOne(*store_, key, bucket_, 1).allowed());
  ASSERT_TRUE(cluster_->node(2).Command({"FUNCTION", "FLUSH"}).ok());
  EXPECT_EQ(DecideOne(*store_, key, bucket_, 1).remaining, 998);
  EXPECT_EQ(store_->Stats().script_reloads, 1u);
  // Both gone: the library, then the script the call was sent to meanwhile.
  ASSERT_TRUE(cluster_->node(2).Command({"FUNCTION", "FLUSH"}).ok());
  ASSERT_TRUE(cluster_->node(2).Command({"SCRIPT", "FLUSH"}).ok());
  EXPECT_EQ(DecideOne(*store_, key, bucket_, 1).remaining, 997);
  EXPECT_EQ(store_->Stats().script_reloads, 3u);
}

TEST_F(ClusterStoreTest, ADownPrimaryFailsItsSlotsAtOnceAndNoOthers) {
  const std::string up = KeyOn(*cluster_, 0, "up");
  const std::string down = KeyOn(*cluster_, 2, "down");
  cluster_->node(2).Kill();  // no replica: its slots stay down
  const ConsumeEntry e{.key = down, .limit = &bucket_, .cost = 1};
  Result<DecideResponse> r = store_->Decide({.consumes = {&e, 1}});
  for (int i = 0; i < 200 && r.ok(); ++i)
    r = store_->Decide({.consumes = {&e, 1}});  // until the loss is seen
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kUnavailable);
  const auto start = SteadyClock::now();
  r = store_->Decide({.consumes = {&e, 1}});
  EXPECT_FALSE(r.ok());
  EXPECT_LT(SteadyClock::now() - start, milliseconds(500)) << "fails fast, not at the deadline";
  EXPECT_TRUE(DecideOne(*store_, up, bucket_, 1).allowed());
  EXPECT_FALSE(store_->Ping().ok());
  ASSERT_TRUE(cluster_->node(2).Restart().ok());  // back with its nodes.conf, empty
  bool back = false;
  for (int i = 0; i < 400 && !back; ++i) {
    back = store_->Decide({.consumes = {&e, 1}}).ok();
    if (!back) std::this_thread::sleep_for(milliseconds(10));  // reconnection backoff
  }
  EXPECT_TRUE(back);
}

// The store a config file with these `store:` lines (and a timeout of 500ms) opens.
Result<std::unique_ptr<Store>> OpenFromConfig(const std::string& store_lines) {
  Result<Config> config = ParseConfig(Cat("store:\n", store_lines, R"(  timeout: 500ms
policies:
  - name: p
    identity: [user]
    limits:
      - {algorithm: gcra, capacity: 10, refill: 10/1m}
)"),
                                      "test.yaml");
  if (!config.ok()) return config.status();
  return OpenStore(config->store, SystemClock::Instance());
}

TEST(RedisClusterStoreOpen, SaysWhatIsWrong) {
  Result<std::unique_ptr<RedisClusterStore>> bad =
      RedisClusterStore::Open(SystemClock::Instance(), {.url = "redis://h"});
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  auto plain = StartServer();
  ASSERT_NE(plain, nullptr);
  Result<std::unique_ptr<RedisClusterStore>> not_cluster = RedisClusterStore::Open(
      SystemClock::Instance(),
      {.url = Cat("redis-cluster://127.0.0.1:", plain->port()), .connect_timeout = seconds(2)});
  EXPECT_EQ(not_cluster.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(not_cluster.status().message().find("cluster support disabled"), std::string::npos)
      << not_cluster.status().message();
  const uint16_t port = plain->port();
  plain->Stop();
  Result<std::unique_ptr<RedisClusterStore>> nobody = RedisClusterStore::Open(
      SystemClock::Instance(),
      {.url = Cat("redis-cluster://127.0.0.1:", port), .connect_timeout = milliseconds(500)});
  EXPECT_EQ(nobody.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(nobody.status().message().find("cannot connect"), std::string::npos)
      << nobody.status().message();
}

TEST(RedisClusterStoreOpen, TheConfigAndOpenStoreTakeClusterUrls) {
  auto cluster = StartCluster();
  ASSERT_NE(cluster, nullptr);
  Result<std::unique_ptr<Store>> store = OpenFromConfig(Cat("  url: ", cluster->url(), "\n"));
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  EXPECT_EQ((*store)->Name(), "redis-cluster");
  EXPECT_TRUE((*store)->Ping().ok());
}

// store.address_map: a cluster whose nodes are reached only through proxies of this instance's
// own (as a region reaches a remote cluster): the seed and every node CLUSTER SLOTS names are
// dialled at their proxies, so cutting the proxies cuts the store off though the nodes are up.
TEST(RedisClusterStoreOpen, DialsEveryNodeThroughTheAddressMap) {
  auto cluster = StartCluster();
  ASSERT_NE(cluster, nullptr);
  std::vector<std::unique_ptr<testing::DelayProxy>> proxies;
  std::string map;
  for (size_t i = 0; i < cluster->size(); ++i) {
    auto proxy = testing::DelayProxy::Start({.target_port = cluster->node(i).port()});
    ASSERT_TRUE(proxy.ok()) << proxy.status().ToString();
    map += Cat("    127.0.0.1:", cluster->node(i).port(), ": 127.0.0.1:", (*proxy)->port(), "\n");
    proxies.push_back(std::move(*proxy));
  }
  Result<std::unique_ptr<Store>> store =
      OpenFromConfig(Cat("  url: ", cluster->url(), "\n  address_map:\n", map));
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  const Limit l = Window(Algorithm::kFixedWindow, 2, seconds(60));
  std::vector<int> keys_per_node(cluster->size());
  for (int i = 0; i < 30; ++i) {
    const std::string key = Cat("mapped", i);
    EXPECT_TRUE(DecideOne(**store, key, l, 1).allowed());
    EXPECT_TRUE(DecideOne(**store, key, l, 1).allowed());
    EXPECT_EQ(DecideOne(**store, key, l, 1).verdict, Verdict::kDenied);
    Result<size_t> owner = cluster->PrimaryOf(SlotOf(key));
    ASSERT_TRUE(owner.ok());
    ++keys_per_node[*owner];
  }
  for (size_t i = 0; i < cluster->size(); ++i) {
    EXPECT_GT(keys_per_node[i], 0) << i;
    EXPECT_GE(proxies[i]->Counts().accepted, 1u) << "node " << i << " was dialled at its proxy";
  }
  for (auto& proxy : proxies) proxy->Drop();
  bool cut = false;
  for (int i = 0; i < 200 && !cut; ++i) {
    const std::string key = Cat("mapped", i % 30);
    const ConsumeEntry e{.key = key, .limit = &l, .cost = 1};
    cut = !(*store)->Decide({.consumes = {&e, 1}}).ok();
  }
  EXPECT_TRUE(cut) << "with its proxies dropped the store reaches no node, though they are up";
  EXPECT_EQ(*cluster->node(0).Command({"PING"}), "PONG");
}

TEST(RedisClusterStoreOpen, AnAddressMapIsRefusedWhereItWouldBeIgnored) {
  Result<Config> plain = ParseConfig(R"(store:
  url: redis://127.0.0.1:6379
  address_map: {"10.0.0.1:6379": "127.0.0.1:7001"}
)",
                                     "test.yaml");
  ASSERT_FALSE(plain.ok());
  EXPECT_NE(plain.status().message().find("store.address_map: needs a redis-cluster:// or "
                                          "redis-sentinel:// store.url"),
            std::string::npos)
      << plain.status().message();
  Result<Config> portless = ParseConfig(R"(store:
  url: redis-cluster://10.0.0.1:6379
  address_map: {"10.0.0.1": "127.0.0.1:7001"}
)",
                                        "test.yaml");
  ASSERT_FALSE(portless.ok());
  EXPECT_NE(portless.status().message().find("store.address_map.10.0.0.1"), std::string::npos)
      << portless.status().message();
  EXPECT_NE(portless.status().message().find("has no port"), std::string::npos)
      << portless.status().message();
  Result<std::unique_ptr<RedisStore>> direct = RedisStore::Open(
      SystemClock::Instance(),
      {.url = "redis://127.0.0.1:1", .address_map = {{"10.0.0.1:6379", "127.0.0.1:7001"}}});
  EXPECT_EQ(direct.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(direct.status().message().find("an address map is for redis-cluster://"),
            std::string::npos)
      << direct.status().message();
}

}  // namespace
}  // namespace caudal
