// Shares (Store::Share) on Redis against the memory store: the Lua script (lua/share.lua) and the
// C++ (store/share_book.cc, algorithms/share.cc) on the same random sequences, with `now` from
// one ManualClock, must answer bit for bit alike; and over random sequences of shares, give-backs
// and consumes on either store, what was taken never exceeds the bucket's bound B + r·t.
#include <gtest/gtest.h>

#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "caudal/redis/redis_store.h"
#include "caudal/store/memory_store.h"
#include "support/manual_clock.h"
#include "support/shared_redis_server.h"

namespace caudal {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using testing::RedisServer;

RedisServer* Server() { return testing::SharedRedisServer(); }

std::unique_ptr<Store> OpenRedis(ManualClock& clock) {
  return testing::OpenSharedRedisStore(clock);
}

std::string Tag() {
  std::random_device rd;
  std::string tag = "share:";
  tag += std::to_string(rd());
  tag += ':';
  tag += std::to_string(rd());
  tag += ':';
  return tag;
}

// "c<i>" (GCC 12 warns, wrongly, of an overlapping copy in "c" + std::to_string(i)).
std::string Consumer(int64_t i) {
  std::string name = "c";
  name += std::to_string(i);
  return name;
}

class Rng {
 public:
  explicit Rng(uint64_t seed) : gen_(seed) {}
  int64_t Uniform(int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(gen_);
  }
  bool Chance(double p) { return std::bernoulli_distribution(p)(gen_); }

 private:
  std::mt19937_64 gen_;
};

// A random limit that leases: small ones (units that do not fit, refills that matter), and some
// with counts past 2^22 (the allocation's scaled units) or near the bounds.
Limit RandomLimit(Rng& rng) {
  const Algorithm algorithms[] = {Algorithm::kTokenBucket, Algorithm::kGcra,
                                  Algorithm::kFixedWindow};
  const Algorithm a = algorithms[rng.Uniform(0, 2)];
  int64_t count = rng.Uniform(1, 200);
  if (rng.Chance(0.25)) count = rng.Uniform(1, int64_t{1} << 40);
  const Micros period = milliseconds(rng.Chance(0.5) ? rng.Uniform(1, 2000) : 1000);
  const int64_t capacity = rng.Chance(0.5) ? count : rng.Uniform(1, kMaxCapacity);
  const LimitSpec spec = a == Algorithm::kFixedWindow
                             ? LimitSpec::Window(a, count, period)
                             : LimitSpec::Bucket(a, capacity, {.count = count, .period = period});
  Result<Limit> limit = Limit::Create(spec);
  if (!limit.ok()) {  // a bucket that fills too slowly: a plain one
    return *Limit::Create(LimitSpec::Bucket(a, 100, {.count = 100, .period = milliseconds(1000)}));
  }
  return *limit;
}

// One Share call on both stores: both fail alike, or answer alike.
struct Counts {
  int64_t calls = 0;
  int64_t refused = 0;
  int64_t grants = 0;        // entries granted units
  int64_t short_grants = 0;  // granted fewer than accrued... or none: the state was full
  int64_t many = 0;          // entries of keys with 10 consumers or more
};

void ExpectAlike(Store& memory, Store& redis, std::span<const ShareEntry> entries,
                 const std::string& where, Counts& counts) {
  const Result<ShareResponse> m = memory.Share(entries);
  const Result<ShareResponse> r = redis.Share(entries);
  ++counts.calls;
  if (!m.ok()) ++counts.refused;
  ASSERT_EQ(m.ok(), r.ok()) << where << ": memory " << m.status().ToString() << ", redis "
                            << r.status().ToString();
  if (!m.ok()) {
    EXPECT_EQ(m.status().code(), r.status().code()) << where;
    return;
  }
  ASSERT_EQ(m->decisions.size(), entries.size());
  ASSERT_EQ(r->decisions.size(), entries.size());
  for (size_t i = 0; i < entries.size(); ++i) {
    counts.grants += m->decisions[i].leased > 0;
    counts.short_grants += m->decisions[i].leased == 0 && m->decisions[i].remaining == 0;
    counts.many += m->shares[i].consumers >= 10;
    EXPECT_EQ(m->decisions[i], r->decisions[i])
        << where << " entry " << i << ": leased " << m->decisions[i].leased << " vs "
        << r->decisions[i].leased << ", remaining " << m->decisions[i].remaining << " vs "
        << r->decisions[i].remaining;
    EXPECT_EQ(m->shares[i], r->shares[i])
        << where << " entry " << i << ": allocation " << m->shares[i].allocation << " vs "
        << r->shares[i].allocation << ", consumers " << m->shares[i].consumers << " vs "
        << r->shares[i].consumers << ", demand " << m->shares[i].demand_total << " vs "
        << r->shares[i].demand_total;
  }
}

struct KeyPlan {
  std::string key;
  Limit limit;
  Fairness fairness;
  int consumers;   // names c0.. c<consumers - 1>
  int64_t ttl_ms;  // the longest ttl its calls ask
};

TEST(ShareEquivalence, TheScriptAnswersAsTheMemoryStore) {
  Counts counts;
  for (uint64_t seed = 1; seed <= 24; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    Rng rng(seed);
    ManualClock clock;
    MemoryStore memory(clock);
    std::unique_ptr<Store> redis = OpenRedis(clock);
    ASSERT_NE(redis, nullptr);
    const std::string tag = Tag();
    std::vector<KeyPlan> keys;
    for (int k = 0; k < 3; ++k) {
      keys.push_back({.key = tag + std::to_string(k),
                      .limit = RandomLimit(rng),
                      .fairness = rng.Chance(0.5) ? Fairness::kMaxMin : Fairness::kProportional,
                      .consumers = static_cast<int>(rng.Uniform(1, 40)),
                      .ttl_ms = rng.Chance(0.5) ? 2000 : 60'000});
    }
    const std::string groups[] = {"", "", "g1", "g2", "g3"};
    std::vector<std::string> names;  // storage for this step's entries
    for (int step = 0; step < 150; ++step) {
      const std::string where = "step " + std::to_string(step);
      clock.Advance(rng.Chance(0.05) ? milliseconds(rng.Uniform(1000, 5000))
                                     : Micros(rng.Uniform(0, 300'000)));
      // Now and then a step back: no time passes for an accrual.
      if (rng.Chance(0.03)) clock.Advance(-Micros(rng.Uniform(1, 200'000)));
      std::vector<ShareEntry> entries;
      names.clear();
      names.reserve(4);
      const size_t first = static_cast<size_t>(rng.Uniform(0, 2));
      const size_t count = rng.Chance(0.2) ? 2 : 1;
      for (size_t j = 0; j < count && first + j < keys.size(); ++j) {
        const KeyPlan& k = keys[first + j];
        names.push_back(Consumer(rng.Uniform(0, k.consumers - 1)));
        const int64_t n = k.limit.rate().count;
        int64_t demand = rng.Uniform(0, std::min<int64_t>(3 * n, kMaxCost));
        if (rng.Chance(0.1)) demand = rng.Uniform(0, kMaxCost);
        if (rng.Chance(0.1)) demand = 0;
        entries.push_back(
            {.key = k.key,
             .limit = &k.limit,
             .consumer = names.back(),
             .group = groups[rng.Uniform(0, 4)],
             .demand = demand,
             .weight = rng.Chance(0.2) ? rng.Uniform(1, kMaxShareWeight) : rng.Uniform(1, 4),
             .ttl = milliseconds(rng.Uniform(1, k.ttl_ms)),
             .fairness = k.fairness});
      }
      ASSERT_NO_FATAL_FAILURE(ExpectAlike(memory, *redis, entries, where, counts));
      // Now and then the key's state moves otherwise: a consume on both.
      if (rng.Chance(0.2)) {
        const KeyPlan& k = keys[static_cast<size_t>(rng.Uniform(0, 2))];
        const ConsumeEntry c{.key = k.key, .limit = &k.limit, .cost = rng.Uniform(0, 20)};
        const Result<DecideResponse> m = memory.Decide({.consumes = {&c, 1}});
        const Result<DecideResponse> r = redis->Decide({.consumes = {&c, 1}});
        ASSERT_TRUE(m.ok() && r.ok());
        EXPECT_EQ(m->decisions, r->decisions) << where;
      }
    }
    // The keys' states end alike too.
    for (const KeyPlan& k : keys) {
      const ConsumeEntry peek{.key = k.key, .limit = &k.limit, .cost = 0};
      const Result<DecideResponse> m = memory.Decide({.consumes = {&peek, 1}});
      const Result<DecideResponse> r = redis->Decide({.consumes = {&peek, 1}});
      ASSERT_TRUE(m.ok() && r.ok());
      EXPECT_EQ(m->decisions, r->decisions);
    }
  }
  // The sequences reach what they are for: grants, full states, keys of many consumers.
  std::printf(
      "%lld calls, %lld refused, %lld entries granted, %lld on a full state, %lld of "
      "keys with 10 consumers or more\n",
      static_cast<long long>(counts.calls), static_cast<long long>(counts.refused),
      static_cast<long long>(counts.grants), static_cast<long long>(counts.short_grants),
      static_cast<long long>(counts.many));
  EXPECT_EQ(counts.calls, 24 * 150);
  EXPECT_LT(counts.refused, counts.calls / 5);
  EXPECT_GT(counts.grants, counts.calls / 2);
  EXPECT_GT(counts.short_grants, 50);
  EXPECT_GT(counts.many, 500);
}

// Shares, give-backs and consumes on one token bucket: everything taken from it (granted, less
// what the give-backs returned, plus what the consumes admitted) stays within B + r·t of the
// first call, t counted in whole refill periods' units.
void BoundHolds(Store& store, ManualClock& clock, uint64_t seed) {
  Rng rng(seed);
  const int64_t capacity = rng.Uniform(1, 300);
  const int64_t n = rng.Uniform(1, 500);
  const Micros period = milliseconds(rng.Uniform(10, 2000));
  const Limit limit = *Limit::Create(
      LimitSpec::Bucket(Algorithm::kTokenBucket, capacity, {.count = n, .period = period}));
  const std::string key = Tag() + "bound";
  const Micros start(clock.Now().count() / 1000);
  int64_t taken = 0;
  int64_t granted = 0;
  struct Held {
    LeaseGrant grant;
    int64_t units;
  };
  std::vector<Held> held;
  for (int step = 0; step < 400; ++step) {
    clock.Advance(Micros(rng.Uniform(0, period.count() / 2)));
    const int op = static_cast<int>(rng.Uniform(0, 9));
    if (op < 6) {
      const std::string consumer = Consumer(rng.Uniform(0, 5));
      const ShareEntry e{.key = key,
                         .limit = &limit,
                         .consumer = consumer,
                         .demand = rng.Uniform(0, 2 * n),
                         .weight = rng.Uniform(1, 3),
                         .ttl = Micros(rng.Uniform(1000, 3 * period.count())),
                         .fairness = rng.Chance(0.5) ? Fairness::kMaxMin : Fairness::kProportional};
      const Result<ShareResponse> r = store.Share({&e, 1});
      ASSERT_TRUE(r.ok()) << r.status().ToString();
      const Decision& d = r->decisions[0];
      taken += d.leased;
      granted += d.leased;
      if (d.leased > 0) held.push_back({{d.leased_at, d.reset_after}, d.leased});
    } else if (op < 8) {
      const ConsumeEntry c{.key = key, .limit = &limit, .cost = rng.Uniform(1, 5)};
      const Result<DecideResponse> r = store.Decide({.consumes = {&c, 1}});
      ASSERT_TRUE(r.ok());
      if (r->allowed) taken += c.cost;
    } else if (!held.empty()) {
      // Give back part of a grant: what it returned is what the state gained at this instant.
      const size_t i = static_cast<size_t>(rng.Uniform(0, std::ssize(held) - 1));
      const ConsumeEntry peek{.key = key, .limit = &limit, .cost = 0};
      const Result<DecideResponse> before = store.Decide({.consumes = {&peek, 1}});
      const GiveBackEntry g{.key = key,
                            .limit = &limit,
                            .units = rng.Uniform(0, held[i].units),
                            .grant = held[i].grant};
      const Result<GiveBackResponse> after = store.GiveBack({&g, 1});
      ASSERT_TRUE(before.ok() && after.ok());
      const int64_t returned = after->decisions[0].remaining - before->decisions[0].remaining;
      EXPECT_GE(returned, 0);
      EXPECT_LE(returned, g.units);
      taken -= returned;
      held.erase(held.begin() + static_cast<std::ptrdiff_t>(i));
    }
    const Micros now(clock.Now().count() / 1000);
    // B + floor(r·t): the bucket started full at `start`.
    const int64_t bound = capacity + (now - start).count() * n / period.count();
    ASSERT_LE(taken, bound) << "step " << step;
  }
  EXPECT_GT(granted, 0) << "the shares granted something";
}

TEST(ShareBound, TakenNeverExceedsTheBucketsBoundOnTheMemoryStore) {
  for (uint64_t seed = 1; seed <= 20; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    ManualClock clock;
    MemoryStore store(clock);
    ASSERT_NO_FATAL_FAILURE(BoundHolds(store, clock, seed));
  }
}

TEST(ShareBound, TakenNeverExceedsTheBucketsBoundOnRedis) {
  for (uint64_t seed = 1; seed <= 20; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    ManualClock clock;
    std::unique_ptr<Store> store = OpenRedis(clock);
    ASSERT_NE(store, nullptr);
    ASSERT_NO_FATAL_FAILURE(BoundHolds(*store, clock, seed));
  }
}

// On Redis's own time: the consumers' hash expires with its last consumer (2·ttl after its
// call), and an expired consumer's field goes at the next call.
TEST(ShareOnRedis, TheConsumersHashExpiresWithItsLastConsumer) {
  Result<std::unique_ptr<RedisStore>> store = RedisStore::Open(
      SystemClock::Instance(), {.url = Server() != nullptr ? Server()->url() : "redis://none:1",
                                .deadline = std::chrono::seconds(5)});
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  const Limit limit = *Limit::Create(LimitSpec::Bucket(
      Algorithm::kTokenBucket, 100, {.count = 100, .period = milliseconds(1000)}));
  const std::string key = Tag() + "ttl";
  const std::string hash = "caudal:{" + key + "}:sh";
  const ShareEntry a{
      .key = key, .limit = &limit, .consumer = "a", .demand = 5, .ttl = milliseconds(1500)};
  ASSERT_TRUE((*store)->Share({&a, 1}).ok());
  const int64_t pttl = std::stoll(*Server()->Command({"PTTL", hash}));
  EXPECT_GT(pttl, 2000);
  EXPECT_LE(pttl, 3000);
  EXPECT_EQ(*Server()->Command({"HEXISTS", hash, "a"}), "1");
  EXPECT_GT(std::stoll(*Server()->Command({"PTTL", "caudal:{" + key + "}"})), 0)
      << "the state a grant wrote expires too";
  // A consumer of a shorter ttl does not shorten the hash's life; a longer one extends it.
  const ShareEntry b{
      .key = key, .limit = &limit, .consumer = "b", .demand = 5, .ttl = milliseconds(100)};
  ASSERT_TRUE((*store)->Share({&b, 1}).ok());
  EXPECT_GT(std::stoll(*Server()->Command({"PTTL", hash})), 2000);
  const ShareEntry c{.key = key, .limit = &limit, .consumer = "c", .demand = 5, .ttl = seconds(5)};
  ASSERT_TRUE((*store)->Share({&c, 1}).ok());
  EXPECT_GT(std::stoll(*Server()->Command({"PTTL", hash})), 9000);
}

}  // namespace
}  // namespace caudal
