// The Redis IdempotencyStore against real servers: one redis-server, a three-primary Redis
// Cluster reached through one seed (records land on every primary, each call on its key's node:
// MOVED followed and remembered), and Sentinel's primary. The contract every implementation keeps
// (tests/support/idempotency_contract.h), each record one key whose PTTL is its window in Redis.
// The store's cost to Redis: a flood of calls shares a few persistent connections, each call an
// EVALSHA (the script reloaded after SCRIPT FLUSH), and the calls in flight are bounded.
#include "store/idempotency_store.h"

#include <gtest/gtest.h>
#include <signal.h>

#include <condition_variable>
#include <mutex>
#include <set>
#include <thread>

#include "caudal/config/config.h"
#include "common/cat.h"
#include "config/store_registry.h"
#include "redis/redis_idempotency_store.h"
#include "support/delay_proxy.h"
#include "support/idempotency_contract.h"
#include "support/redis_cluster.h"
#include "support/redis_sentinel.h"
#include "support/redis_server.h"

namespace caudal {
namespace {

using std::chrono::seconds;
using testing::ClaimOf;
using testing::CompleteOf;
using testing::OutcomeOf;
using testing::RedisCluster;
using testing::RedisSentinels;
using testing::RedisServer;
using testing::ReleaseOf;

// With a deadline (store.timeout) of 2 s: room for a loaded machine's first connections, a
// Cluster's MOVED and a Sentinel's answer (the deadline's own test sets it short).
Result<std::unique_ptr<IdempotencyStore>> Open(const std::string& url) {
  StoreConfig config;
  config.url = url;
  config.timeout = std::chrono::seconds(2);
  return OpenIdempotencyStore(config, SystemClock::Instance(), {.max_records = 1});
}

// `timeout`: each call's deadline, and the connections' connect and stall timeouts.
Result<std::unique_ptr<IdempotencyStore>> OpenBounded(const std::string& url, size_t max_calls,
                                                      std::chrono::milliseconds timeout) {
  RedisStoreOptions options;
  options.url = url;
  options.max_record_calls = max_calls;
  options.deadline = timeout;
  options.connect_timeout = timeout;
  options.stall_timeout = timeout;
  return OpenRedisIdempotencyStore(SystemClock::Instance(), std::move(options));
}

// The store a config names, as `caudal serve` opens it.
Result<std::unique_ptr<IdempotencyStore>> OpenConfigured(const std::string& store_yaml) {
  Result<Config> config = ParseConfig(Cat("store: ", store_yaml, "\npolicies: []\n"), "test.yaml");
  if (!config.ok()) return config.status();
  return OpenIdempotencyStore(config->store, SystemClock::Instance(), {.max_records = 1});
}

// How long `call` took to answer, in real time (what a client waits).
template <typename Call>
std::chrono::milliseconds Timed(Call call) {
  const auto start = std::chrono::steady_clock::now();
  call();
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() -
                                                               start);
}

// The answers of calls issued without waiting, gathered from the store's thread.
template <typename T>
class Answers {
 public:
  std::function<void(Result<T>)> Slot(size_t i) {
    {
      std::lock_guard lock(mu_);
      if (answers_.size() <= i) answers_.resize(i + 1);
    }
    return [this, i](Result<T> r) {
      std::lock_guard lock(mu_);
      answers_[i] = std::move(r);
      ++count_;
      cv_.notify_all();
    };
  }
  size_t count() {
    std::lock_guard lock(mu_);
    return count_;
  }
  // Every slot asked for so far answered, within a minute.
  bool WaitAll() {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, std::chrono::minutes(1),
                        [this] { return count_ == answers_.size(); });
  }
  Result<T> at(size_t i) {
    std::lock_guard lock(mu_);
    return answers_[i].value_or(Status::Internal("no answer"));
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::optional<Result<T>>> answers_;
  size_t count_ = 0;
};

// "<prefix><i>"
std::string Key(std::string_view prefix, size_t i) {
  return std::string(prefix).append(std::to_string(i));
}

// One field of `INFO <section>` ("" when absent).
std::string Info(const RedisServer& server, const std::string& section, const std::string& field) {
  auto info = server.Command({"INFO", section});
  EXPECT_TRUE(info.ok()) << info.status().ToString();
  if (!info.ok()) return "";
  const std::string at = std::string("\n").append(field).append(":");
  const size_t start = std::string("\n").append(*info).find(at);
  if (start == std::string::npos) return "";
  const size_t from = start + at.size() - 1;
  return info->substr(from, info->find_first_of("\r\n", from) - from);
}

// calls=N of `INFO commandstats`' line for `command` (0 when it never ran).
long long CommandCalls(const RedisServer& server, const std::string& command) {
  const std::string stats = Info(server, "commandstats", std::string("cmdstat_").append(command));
  if (stats.empty()) return 0;
  return std::stoll(stats.substr(stats.find('=') + 1));
}

TEST(RedisIdempotencyStore, KeepsTheContractOnOneServer) {
  auto server = RedisServer::Start();
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  auto store = Open((*server)->url());
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  testing::ExpectIdempotencyContract(**store, "t-");
  // max_records is the memory store's bound alone: Redis holds what its TTLs keep.
  auto keys = (*server)->Keys("caudal:idempotency:*");
  ASSERT_TRUE(keys.ok());
  EXPECT_EQ(keys->size(), 4u) << "t-k1, t-k2, t-k3, t-k4: one key per record";
}

TEST(RedisIdempotencyStore, ARecordLastsItsTtlInRedis) {
  auto server = RedisServer::Start();
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  auto store = Open((*server)->url());
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  ASSERT_EQ(OutcomeOf(ClaimOf(**store, "k", "fp", "c", seconds(10))), ClaimOutcome::kClaimed);
  auto pttl = (*server)->Command({"PTTL", "caudal:idempotency:k"});
  ASSERT_TRUE(pttl.ok()) << pttl.status().ToString();
  EXPECT_LE(std::stoll(*pttl), 10'000);
  EXPECT_GT(std::stoll(*pttl), 5'000);
  // The result's window replaces the claim's, counted from the result.
  ASSERT_EQ(testing::Changed(CompleteOf(**store, "k", "fp", "c", "r", std::chrono::hours(1))),
            true);
  pttl = (*server)->Command({"PTTL", "caudal:idempotency:k"});
  ASSERT_TRUE(pttl.ok());
  EXPECT_GT(std::stoll(*pttl), 3'590'000);
  EXPECT_LE(std::stoll(*pttl), 3'600'000);
}

TEST(RedisIdempotencyStore, RefusesAKeyThatIsNotARecord) {
  auto server = RedisServer::Start();
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  auto store = Open((*server)->url());
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  ASSERT_TRUE((*server)->Command({"SET", "caudal:idempotency:k", "junk"}).ok());
  EXPECT_EQ(ClaimOf(**store, "k", "fp", "c").status().code(), StatusCode::kUnavailable);
}

TEST(RedisIdempotencyStore, KeepsTheContractOnRedisClusterEachKeyOnItsNode) {
  auto cluster = RedisCluster::Start();
  ASSERT_TRUE(cluster.ok()) << cluster.status().ToString();
  // One seed: every other primary is found by MOVED.
  auto store = Open("redis-cluster://127.0.0.1:" + std::to_string((*cluster)->node(0).port()));
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  testing::ExpectIdempotencyContract(**store, "t-");
  for (int i = 0; i < 30; ++i) {
    ASSERT_EQ(OutcomeOf(ClaimOf(**store, "many-" + std::to_string(i), "fp", "c")),
              ClaimOutcome::kClaimed);
  }
  std::set<size_t> holders;
  for (size_t n = 0; n < (*cluster)->size(); ++n) {
    auto keys = (*cluster)->node(n).Keys("caudal:idempotency:many-*");
    ASSERT_TRUE(keys.ok());
    if (!keys->empty()) holders.insert(n);
  }
  EXPECT_EQ(holders.size(), (*cluster)->size()) << "records spread over every primary";
  for (int i = 0; i < 30; ++i) {
    EXPECT_EQ(OutcomeOf(ClaimOf(**store, "many-" + std::to_string(i), "fp", "d")),
              ClaimOutcome::kInProgress);
  }
}

TEST(RedisIdempotencyStore, KeepsTheContractOnTheSentinelsPrimary) {
  auto sentinels = RedisSentinels::Start();
  ASSERT_TRUE(sentinels.ok()) << sentinels.status().ToString();
  auto store = Open((*sentinels)->url());
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  testing::ExpectIdempotencyContract(**store, "t-");
  auto primary = (*sentinels)->PrimaryIndex();
  ASSERT_TRUE(primary.ok());
  auto keys = (*sentinels)->server(*primary).Keys("caudal:idempotency:*");
  ASSERT_TRUE(keys.ok());
  EXPECT_EQ(keys->size(), 4u) << "written on the primary";
}

// The store's persistent connections to the old primary are killed or answer READONLY: the
// sentinels are asked again and the records go on at the new primary.
TEST(RedisIdempotencyStore, FollowsASentinelFailover) {
  auto sentinels = RedisSentinels::Start();
  ASSERT_TRUE(sentinels.ok()) << sentinels.status().ToString();
  auto store = Open((*sentinels)->url());
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  ASSERT_EQ(OutcomeOf(ClaimOf(**store, "before", "fp", "c")), ClaimOutcome::kClaimed);
  ASSERT_TRUE((*sentinels)->sentinel(0).Command({"SENTINEL", "FAILOVER", "mymaster"}).ok());
  // Until the old primary is a replica it may still take writes (Sentinel does not stop them).
  ASSERT_TRUE((*sentinels)->WaitPrimary(1, seconds(30)).ok());
  Result<IdempotencyClaim> after = Status::Internal("none");
  const auto give_up = std::chrono::steady_clock::now() + seconds(30);
  while (!after.ok() && std::chrono::steady_clock::now() < give_up) {
    after = ClaimOf(**store, "after", "fp", "c");
    std::this_thread::yield();
  }
  ASSERT_EQ(OutcomeOf(after), ClaimOutcome::kClaimed);
  auto keys = (*sentinels)->server(1).Keys("caudal:idempotency:after");
  ASSERT_TRUE(keys.ok());
  EXPECT_EQ(keys->size(), 1u) << "written on the new primary";
  EXPECT_EQ(OutcomeOf(ClaimOf(**store, "before", "fp", "d")), ClaimOutcome::kInProgress)
      << "the replica had the first claim";
}

TEST(RedisIdempotencyStore, AnUnreachableServerIsUnavailable) {
  auto server = RedisServer::Start();
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  const std::string url = (*server)->url();
  server->reset();
  auto store = Open(url);
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  EXPECT_EQ(ClaimOf(**store, "k", "fp", "c").status().code(), StatusCode::kUnavailable);
}

// Every call answers within the store's deadline (store.timeout), never the 2 s connect timeout:
// a stalled Redis (SIGSTOP: connections stay open, nothing answers) fails it at the deadline,
// on a connection made before the stall and on one still being made; a killed one (refused)
// fails it at once.
TEST(RedisIdempotencyStore, CallsAnswerWithinTheStoresDeadlineWhenRedisStallsOrDies) {
  auto server = RedisServer::Start();
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  constexpr auto kDeadline = std::chrono::milliseconds(50);
  // Far below the connect timeout (2 s), with room for a loaded machine.
  constexpr auto kLate = kDeadline + std::chrono::milliseconds(250);
  const std::string store = Cat("{url: '", (*server)->url(), "', timeout: 50ms}");
  auto warm = OpenConfigured(store);
  ASSERT_TRUE(warm.ok()) << warm.status().ToString();
  ASSERT_EQ(OutcomeOf(ClaimOf(**warm, "warm", "fp", "c")), ClaimOutcome::kClaimed);
  auto cold = OpenConfigured(store);  // connects at its first call, during the stall
  ASSERT_TRUE(cold.ok()) << cold.status().ToString();

  ASSERT_EQ(kill((*server)->pid(), SIGSTOP), 0);
  for (IdempotencyStore* s : {warm->get(), cold->get()}) {
    for (int i = 0; i < 3; ++i) {
      Result<IdempotencyClaim> claim = IdempotencyClaim{};
      const auto took = Timed([&] { claim = ClaimOf(*s, Key("stalled-", i), "fp", "c"); });
      EXPECT_EQ(claim.status().code(), StatusCode::kUnavailable) << claim.status().ToString();
      EXPECT_GE(took, kDeadline) << "answered before its deadline: " << claim.status().ToString();
      EXPECT_LT(took, kLate) << (s == warm->get() ? "warm" : "cold");
    }
  }
  Result<bool> changed = false;
  EXPECT_LT(Timed([&] { changed = CompleteOf(**warm, "warm", "fp", "c", "r"); }), kLate);
  EXPECT_EQ(changed.status().code(), StatusCode::kUnavailable);
  EXPECT_LT(Timed([&] { changed = ReleaseOf(**warm, "warm", "fp", "c"); }), kLate);
  EXPECT_EQ(changed.status().code(), StatusCode::kUnavailable);
  ASSERT_EQ(kill((*server)->pid(), SIGCONT), 0);

  (*server)->Kill();
  auto after = OpenConfigured(store);
  ASSERT_TRUE(after.ok()) << after.status().ToString();
  for (IdempotencyStore* s : {warm->get(), cold->get(), after->get()}) {
    Result<IdempotencyClaim> claim = IdempotencyClaim{};
    EXPECT_LT(Timed([&] { claim = ClaimOf(*s, "refused", "fp", "c"); }), kLate);
    EXPECT_EQ(claim.status().code(), StatusCode::kUnavailable) << claim.status().ToString();
  }
}

TEST(RedisIdempotencyStore, AFloodOfCallsSharesAFewConnections) {
  auto server = RedisServer::Start();
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  constexpr size_t kCalls = 2000;
  auto store = OpenBounded((*server)->url(), kCalls, std::chrono::seconds(30));
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  // Each Info() is a connection of its own, counted as it asks.
  const long long before = std::stoll(Info(**server, "stats", "total_connections_received"));
  Answers<IdempotencyClaim> claims;
  for (size_t i = 0; i < kCalls; ++i) {
    (*store)->Claim(Key("flood-", i), "fp", "c", seconds(60), claims.Slot(i));
  }
  ASSERT_TRUE(claims.WaitAll()) << claims.count() << " of " << kCalls << " answered";
  Answers<bool> completes;
  for (size_t i = 0; i < kCalls; ++i) {
    ASSERT_EQ(OutcomeOf(claims.at(i)), ClaimOutcome::kClaimed) << i;
    (*store)->Complete(Key("flood-", i), "fp", "c", Key("r", i), seconds(60), completes.Slot(i));
  }
  ASSERT_TRUE(completes.WaitAll());
  Answers<IdempotencyClaim> replays;
  for (size_t i = 0; i < kCalls; ++i) {
    ASSERT_EQ(testing::Changed(completes.at(i)), true) << i;
    (*store)->Claim(Key("flood-", i), "fp", "d", seconds(60), replays.Slot(i));
  }
  ASSERT_TRUE(replays.WaitAll());
  for (size_t i = 0; i < kCalls; ++i) {
    auto r = replays.at(i);
    ASSERT_EQ(OutcomeOf(r), ClaimOutcome::kDone) << i;
    EXPECT_EQ(r->result, Key("r", i));
  }
  const long long after = std::stoll(Info(**server, "stats", "total_connections_received"));
  // Two connections of the store, and the second Info()'s own.
  EXPECT_LE(after - before, 3) << 3 * kCalls << " calls opened " << after - before - 1
                               << " connections";
  EXPECT_LE(std::stoll(Info(**server, "clients", "connected_clients")), 3);
}

TEST(RedisIdempotencyStore, CallsBeyondTheBoundFailAtOnceWhileRedisIsHeld) {
  auto server = RedisServer::Start();
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  auto proxy = testing::DelayProxy::Start({.target_port = (*server)->port()});
  ASSERT_TRUE(proxy.ok()) << proxy.status().ToString();
  // The bound as an operator sets it: store.max_record_calls (a deadline long enough that the
  // held calls wait for Redis).
  constexpr size_t kBound = 8;
  auto store = OpenConfigured(
      Cat("{url: '", (*proxy)->url(), "', timeout: 10s, max_record_calls: ", kBound, "}"));
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  ASSERT_EQ(OutcomeOf(ClaimOf(**store, "warm", "fp", "c")), ClaimOutcome::kClaimed);
  (*proxy)->Hold();
  Answers<IdempotencyClaim> held;
  for (size_t i = 0; i < kBound; ++i) {
    (*store)->Claim(Key("held-", i), "fp", "c", seconds(60), held.Slot(i));
  }
  // One past the bound: refused before Claim returns, nothing sent.
  std::optional<Result<IdempotencyClaim>> refused;
  (*store)->Claim("one-more", "fp", "c", seconds(60),
                  [&refused](Result<IdempotencyClaim> r) { refused = std::move(r); });
  ASSERT_TRUE(refused.has_value()) << "answered at once";
  EXPECT_EQ(refused->status().code(), StatusCode::kResourceExhausted)
      << refused->status().ToString();
  EXPECT_EQ(held.count(), 0u) << "the held calls wait for Redis";
  // Completing a claim already made may pass the bound (up to as many again).
  Answers<bool> complete;
  (*store)->Complete("warm", "fp", "c", "r", seconds(60), complete.Slot(0));
  EXPECT_EQ(complete.count(), 0u) << "admitted, waiting for Redis";
  (*proxy)->Heal();
  ASSERT_TRUE(held.WaitAll());
  ASSERT_TRUE(complete.WaitAll());
  for (size_t i = 0; i < kBound; ++i) EXPECT_EQ(OutcomeOf(held.at(i)), ClaimOutcome::kClaimed);
  EXPECT_EQ(testing::Changed(complete.at(0)), true);
  // Nothing of the refused call reached Redis, and the bound is free again.
  auto exists = (*server)->Command({"EXISTS", "caudal:idempotency:one-more"});
  ASSERT_TRUE(exists.ok()) << exists.status().ToString();
  EXPECT_EQ(*exists, "0");
  EXPECT_EQ(OutcomeOf(ClaimOf(**store, "one-more", "fp", "c")), ClaimOutcome::kClaimed);
}

TEST(RedisIdempotencyStore, AHeldCallIsAnsweredAtItsTimeoutAndItsConnectionDropped) {
  auto server = RedisServer::Start();
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  auto proxy = testing::DelayProxy::Start({.target_port = (*server)->port()});
  ASSERT_TRUE(proxy.ok()) << proxy.status().ToString();
  auto store = OpenBounded((*proxy)->url(), 1, std::chrono::milliseconds(300));
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  ASSERT_EQ(OutcomeOf(ClaimOf(**store, "warm", "fp", "c")), ClaimOutcome::kClaimed);
  (*proxy)->Hold();
  EXPECT_EQ(ClaimOf(**store, "held", "fp", "c").status().code(), StatusCode::kUnavailable)
      << "answered at its timeout";
  // Redis never answers it: it leaves the bound only when its connection, stalled for the
  // timeout, is dropped. Until then the bound refuses at once; then a call is admitted again.
  StatusCode code = StatusCode::kResourceExhausted;
  const auto give_up = std::chrono::steady_clock::now() + seconds(10);
  while (code == StatusCode::kResourceExhausted && std::chrono::steady_clock::now() < give_up) {
    code = ClaimOf(**store, "next", "fp", "c").status().code();
    std::this_thread::yield();
  }
  EXPECT_EQ(code, StatusCode::kUnavailable) << "admitted (and timed out) while Redis is held";
  (*proxy)->Heal();
  // Until a connection is made again, calls fail at once (no connection to the server).
  Result<IdempotencyClaim> after = Status::Internal("none");
  const auto reconnected = std::chrono::steady_clock::now() + seconds(10);
  while (!after.ok() && std::chrono::steady_clock::now() < reconnected) {
    after = ClaimOf(**store, "after", "fp", "c");
    std::this_thread::yield();
  }
  EXPECT_EQ(OutcomeOf(after), ClaimOutcome::kClaimed) << "connected again";
}

TEST(RedisIdempotencyStore, EachCallIsAnEvalshaOfTheScriptLoadedOncePerConnection) {
  auto server = RedisServer::Start();
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  auto store = Open((*server)->url());
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  constexpr int kRequests = 20;
  for (int i = 0; i < kRequests; ++i) {
    const std::string key = Key("k", i);
    ASSERT_EQ(OutcomeOf(ClaimOf(**store, key, "fp", "c")), ClaimOutcome::kClaimed);
    ASSERT_EQ(testing::Changed(CompleteOf(**store, key, "fp", "c", "r")), true);
  }
  EXPECT_EQ(CommandCalls(**server, "evalsha"), 2 * kRequests);
  EXPECT_EQ(CommandCalls(**server, "eval"), 0) << "the script's text is not sent per call";
  EXPECT_LE(CommandCalls(**server, "script|load"), 2) << "once per connection";
}

TEST(RedisIdempotencyStore, AFlushedScriptIsLoadedAgain) {
  auto server = RedisServer::Start();
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  auto store = Open((*server)->url());
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  ASSERT_EQ(OutcomeOf(ClaimOf(**store, "k", "fp", "c")), ClaimOutcome::kClaimed);
  const long long loads = CommandCalls(**server, "script|load");
  ASSERT_TRUE((*server)->Command({"SCRIPT", "FLUSH"}).ok());
  EXPECT_EQ(testing::Changed(CompleteOf(**store, "k", "fp", "c", "r")), true);
  auto replay = ClaimOf(**store, "k", "fp", "d");
  ASSERT_EQ(OutcomeOf(replay), ClaimOutcome::kDone);
  EXPECT_EQ(replay->result, "r");
  EXPECT_EQ(CommandCalls(**server, "script|load"), loads + 1) << "loaded again once";
  EXPECT_EQ(CommandCalls(**server, "eval"), 0);
}

}  // namespace
}  // namespace caudal
