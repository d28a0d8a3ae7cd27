// The caudal Redis module (src/redis/module/) on a real redis-server: it writes, byte for byte,
// what the fast script writes and answers what it answers; its writes reach a replica that has
// no module; it refuses malformed calls with nothing written; and a store sends it the calls it
// takes, and goes back to the script when it is gone.
#include <gtest/gtest.h>
#include <hiredis/hiredis.h>

#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "algorithms/algorithm.h"
#include "caudal/redis/redis_store.h"
#include "redis/hash_slot.h"
#include "redis/lua_protocol.h"
#include "redis/redis_test_util.h"
#include "redis/script.h"
#include "support/redis_cluster.h"
#include "support/redis_server.h"

namespace caudal::redis {
namespace {

using caudal::testing::RedisServer;

std::unique_ptr<RedisServer> StartWithModule(std::vector<std::string> more = {}) {
  std::vector<std::string> args = {"--loadmodule", CAUDAL_REDIS_MODULE};
  args.insert(args.end(), more.begin(), more.end());
  Result<std::unique_ptr<RedisServer>> s = RedisServer::Start({.extra_args = args});
  EXPECT_TRUE(s.ok()) << s.status().ToString();
  return s.ok() ? std::move(*s) : nullptr;
}

// A blocking connection: a call's reply as integers (an error as its text), a value's bytes.
class Link {
 public:
  explicit Link(const RedisServer& server)
      : c_(redisConnect("127.0.0.1", server.port()), &redisFree) {}

  struct Answer {
    std::vector<int64_t> ints;
    std::string error;  // empty: not an error
  };
  Answer Run(const std::vector<std::string_view>& argv) {
    std::vector<const char*> ptrs;
    std::vector<size_t> lens;
    for (const std::string_view a : argv) {
      ptrs.push_back(a.data());
      lens.push_back(a.size());
    }
    auto* r = static_cast<redisReply*>(
        redisCommandArgv(c_.get(), static_cast<int>(argv.size()), ptrs.data(), lens.data()));
    Answer out;
    if (r == nullptr) {
      out.error = "connection lost";
      return out;
    }
    if (r->type == REDIS_REPLY_ERROR) out.error.assign(r->str, r->len);
    if (r->type == REDIS_REPLY_INTEGER) out.ints.push_back(r->integer);
    for (size_t i = 0; r->type == REDIS_REPLY_ARRAY && i < r->elements; ++i) {
      out.ints.push_back(r->element[i]->integer);
    }
    freeReplyObject(r);
    return out;
  }
  std::string Get(std::string_view key) {
    auto* r = static_cast<redisReply*>(
        redisCommand(c_.get(), "GET %b", key.data(), static_cast<size_t>(key.size())));
    std::string out = r && r->type == REDIS_REPLY_STRING ? std::string(r->str, r->len) : "(nil)";
    if (r) freeReplyObject(r);
    return out;
  }
  int64_t Pttl(std::string_view key) {
    const Answer a = Run({"PTTL", key});
    return a.ints.empty() ? -3 : a.ints[0];
  }

 private:
  std::unique_ptr<redisContext, void (*)(redisContext*)> c_;
};

// Random calls of plain consumes, as the store builds them: one-entry requests on keys of their
// own, requests of a policy's four members (a group whose value holds just them), and requests of
// members of a few groups drawn from 91 (enough that a group overflows kMaxGroupMembers); costs
// from 0 to several (sent apart); limits of the four compact algorithms and two calendar windows,
// small enough that many are refused.
class Calls {
 public:
  explicit Calls(uint64_t seed) : rng_(seed) {
    for (const Algorithm a : {Algorithm::kFixedWindow, Algorithm::kSlidingWindowCounter,
                              Algorithm::kTokenBucket, Algorithm::kGcra}) {
      for (int i = 0; i < 4; ++i) {
        const int64_t cap = Uniform(1, 12);
        const Micros period(Uniform(1, 5) * 1'000'000);
        limits_.push_back(*Limit::Create(IsWindowAlgorithm(a)
                                             ? LimitSpec::Window(a, cap, period)
                                             : LimitSpec::Bucket(a, cap, {Uniform(1, 7), period})));
      }
    }
    // Calendar windows: a day in a zone of a non-hour offset, a month with daylight saving.
    limits_.push_back(*Limit::Create(LimitSpec::CalendarWindow(
        Uniform(2, 9), *Calendar::Create(CalendarUnit::kDay, "Asia/Kolkata"))));
    limits_.push_back(*Limit::Create(LimitSpec::CalendarWindow(
        Uniform(2, 9), *Calendar::Create(CalendarUnit::kMonth, "Europe/Madrid"))));
  }

  struct Built {
    std::vector<EncodedRequest> encoded;
    std::vector<std::string> keys;  // the Redis keys the call names
  };
  Built Next(Micros now) {
    Built b;
    const int64_t n = Uniform(1, 5);
    for (int64_t r = 0; r < n; ++r) {
      std::vector<std::string> names;
      std::vector<EntryRef> entries;
      const int64_t kind = Uniform(0, 2);
      if (kind == 0) {
        names.push_back("k" + std::to_string(Uniform(0, 30)));
      } else if (kind == 1) {  // a policy's members, always the same, in the same order
        const std::string group = "p" + std::to_string(Uniform(0, 20));
        for (const std::string_view member : {"requests", "input", "output", "money"}) {
          names.push_back("#" + std::string(member) + "#{" + group + "}");
        }
      } else {
        const std::string group = "g" + std::to_string(Uniform(0, 3));
        std::set<int64_t> members;
        const int64_t m = Uniform(1, 6);
        while (static_cast<int64_t>(members.size()) < m) members.insert(Uniform(0, 90));
        for (const int64_t member : members) {
          names.push_back("#m" + std::to_string(member) + "#{" + group + "}");
        }
      }
      for (const std::string& name : names) {
        // A key keeps its limit, as the engine's keys name theirs (src/engine/store_key.h): a
        // state is only ever read by its own limit's algorithm.
        const size_t l = std::hash<std::string>()(name) % limits_.size();
        const Limit& limit = limits_[l];
        const int64_t cost = Uniform(0, 9) == 0 ? Uniform(4, 14) : Uniform(0, 2);
        entries.push_back({.key = name, .limit = &limit, .cost = cost});
      }
      b.encoded.push_back(EncodeRequest(entries, "caudal:", now));
      for (const std::string& key : b.encoded.back().keys) b.keys.push_back(key);
    }
    return b;
  }

  int64_t Uniform(int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(rng_);
  }

 private:
  std::mt19937_64 rng_;
  std::vector<Limit> limits_;
};

// The same calls, at the same times, to the fast script on one server and to the module on
// another: the same replies, the same values byte for byte, the same TTLs (to the ms it takes to
// read them), call after call, whether a key is new, kept, refused, or a group past its bound.
TEST(RedisModule, WritesWhatTheScriptWritesAndAnswersAlike) {
  Result<std::unique_ptr<RedisServer>> plain = RedisServer::Start();
  ASSERT_TRUE(plain.ok()) << plain.status().ToString();
  std::unique_ptr<RedisServer> native = StartWithModule();
  ASSERT_TRUE(native);
  Link script(**plain), module(*native);
  ASSERT_TRUE(script.Run({"FUNCTION", "LOAD", kConsumeLibrary}).error.empty());
  Calls calls(7);
  int64_t now = 1'800'000'000'000'000;
  std::set<std::string> seen;
  int64_t refused = 0, brief = 0;
  for (int i = 0; i < 1500; ++i) {
    now += calls.Uniform(0, 9) == 0 ? calls.Uniform(1, 8) * 1'000'000 : calls.Uniform(0, 300'000);
    const Calls::Built b = calls.Next(Micros(now));
    std::vector<const EncodedRequest*> ptrs;
    for (const EncodedRequest& e : b.encoded) ptrs.push_back(&e);
    ASSERT_TRUE(ForConsumeScript(ptrs, KeyPlacement::kDeclared));
    CallArgv to_script, to_module;
    BuildCall("FCALL", kConsumeFunction, TimeSource::kGiven, now, ptrs, to_script,
              KeyPlacement::kDeclared, true);
    BuildCall(kModuleCommand, kConsumeFunction, TimeSource::kGiven, now, ptrs, to_module,
              KeyPlacement::kDeclared, true);
    const Link::Answer want = script.Run(to_script.argv);
    const Link::Answer got = module.Run(to_module.argv);
    ASSERT_EQ(want.error, "") << "call " << i;
    ASSERT_EQ(got.error, "") << "call " << i;
    ASSERT_EQ(got.ints, want.ints) << "call " << i;
    for (const std::string& key : b.keys) {
      seen.insert(key);
      ASSERT_EQ(module.Get(key), script.Get(key)) << "call " << i << ", key " << key;
      const int64_t a = script.Pttl(key), m = module.Pttl(key);
      ASSERT_EQ(a < 0, m < 0) << key;
      ASSERT_LE(std::abs(a - m), 50) << "call " << i << ", key " << key;
    }
    // What the stream went through: refusals and allowed group requests answered briefly.
    size_t p = 0;
    for (const EncodedRequest& e : b.encoded) {
      const int64_t first = want.ints[p];
      refused += first == 0 ? 1 : 0;
      brief += first == kAllowedBrief ? 1 : 0;
      p += 1 + (first == kAllowedBrief ? 2 : 4) * (e.keys.size());
    }
  }
  EXPECT_GT(refused, 100);
  EXPECT_GT(brief, 100);
  // A group past kMaxGroupMembers members was cut back to it, identically.
  int64_t largest = 0;
  for (const std::string& key : seen) {
    const std::string v = module.Get(key);
    if (v.size() > 17 && v[0] == 2) largest = std::max<int64_t>(largest, (v.size() - 17) / 40);
  }
  EXPECT_EQ(largest, kMaxGroupMembers);
}

// A replica without the module receives the module's writes as SETs (with their expiry): the
// same values, and TTLs.
TEST(RedisModule, AReplicaWithoutTheModuleGetsItsWrites) {
  std::unique_ptr<RedisServer> primary = StartWithModule();
  ASSERT_TRUE(primary);
  Result<std::unique_ptr<RedisServer>> replica = RedisServer::Start(
      {.extra_args = {"--replicaof", "127.0.0.1", std::to_string(primary->port())}});
  ASSERT_TRUE(replica.ok()) << replica.status().ToString();
  Link to_primary(*primary), to_replica(**replica);
  // The replica in sync first, so that what follows reaches it as the stream of writes.
  for (int i = 0; i < 1000; ++i) {
    const Result<std::string> info = (*replica)->Command({"INFO", "replication"});
    if (info.ok() && info->find("master_link_status:up") != std::string::npos) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  Calls calls(11);
  int64_t now = 1'800'000'000'000'000;
  std::set<std::string> keys;
  for (int i = 0; i < 200; ++i) {
    now += calls.Uniform(0, 300'000);
    const Calls::Built b = calls.Next(Micros(now));
    std::vector<const EncodedRequest*> ptrs;
    for (const EncodedRequest& e : b.encoded) ptrs.push_back(&e);
    CallArgv argv;
    BuildCall(kModuleCommand, kConsumeFunction, TimeSource::kGiven, now, ptrs, argv,
              KeyPlacement::kDeclared, true);
    ASSERT_EQ(to_primary.Run(argv.argv).error, "");
    keys.insert(b.keys.begin(), b.keys.end());
  }
  const Link::Answer waited = to_primary.Run({"WAIT", "1", "30000"});
  ASSERT_EQ(waited.ints, std::vector<int64_t>{1}) << waited.error;
  int64_t present = 0;
  for (const std::string& key : keys) {
    const std::string value = to_primary.Get(key);
    EXPECT_EQ(to_replica.Get(key), value) << key;
    if (value == "(nil)") continue;
    ++present;
    const int64_t p = to_primary.Pttl(key), r = to_replica.Pttl(key);
    EXPECT_GT(r, 0) << key;
    EXPECT_LE(std::abs(p - r), 1000) << key;
  }
  EXPECT_GT(present, 20);
}

// Every malformed call is refused with a clear error and nothing written, and the server keeps
// serving; CAUDAL.PROTOCOL names the protocol the store must speak.
TEST(RedisModule, RefusesMalformedCallsWithNothingWritten) {
  std::unique_ptr<RedisServer> server = StartWithModule();
  ASSERT_TRUE(server);
  Link link(*server);
  ASSERT_EQ(*server->Command({"CAUDAL.PROTOCOL"}), kConsumeFunction);
  const auto words = [](std::initializer_list<int64_t> numbers) {
    std::string out;
    for (const int64_t n : numbers) {
      for (int b = 0; b < 8; ++b) out += static_cast<char>((static_cast<uint64_t>(n) >> (8 * b)));
    }
    return out;
  };
  const int64_t bucket = static_cast<int64_t>(Algorithm::kTokenBucket);
  const std::string good = words({1, bucket, 10, 1, 1'000'000, 1});
  const std::string now = "1800000000000000";
  const std::string proto(kConsumeFunction);
  ASSERT_EQ(*server->Command({"SET", "caudal:{list}", "x"}), "OK");
  ASSERT_EQ(*server->Command({"DEL", "caudal:{list}"}), "1");
  ASSERT_EQ(*server->Command({"RPUSH", "caudal:{list}", "x"}), "1");
  // A group value that claims more members than it holds.
  std::string liar(1, '\2');
  for (const double d : {1e18, 3.0}) {
    uint64_t u;
    std::memcpy(&u, &d, 8);
    for (int b = 0; b < 8; ++b) liar += static_cast<char>(u >> (8 * b));
  }
  liar += std::string(40, '\0');
  ASSERT_EQ(*server->Command({"SET", "caudal:{liar}", liar}), "OK");
  const int64_t member = bucket + kGroupFlag;
  struct Case {
    std::vector<std::string> argv;
    std::string error;  // a part of the error's text
  };
  const std::vector<Case> cases = {
      {{"CAUDAL.CONSUME", "caudal_consume_0000000000000000", "1", "caudal:{k}", now, "0", good},
       "another build's protocol"},
      {{"CAUDAL.CONSUME", proto, "x", "caudal:{k}", now, "0", good}, "malformed key count"},
      {{"CAUDAL.CONSUME", proto, "-1", "caudal:{k}", now, "0", good}, "malformed key count"},
      {{"CAUDAL.CONSUME", proto, "9", "caudal:{k}", now, "0", good}, "malformed key count"},
      {{"CAUDAL.CONSUME", proto, "0", now, "0", good}, "keys must be declared"},
      {{"CAUDAL.CONSUME", proto, "1", "caudal:{k}", "soon", "0", good}, "malformed time"},
      {{"CAUDAL.CONSUME", proto, "1", "caudal:{k}", now, "0", "short"}, "malformed request"},
      {{"CAUDAL.CONSUME", proto, "1", "caudal:{k}", now, "0", words({2, bucket, 10, 1, 1, 1})},
       "malformed request"},
      {{"CAUDAL.CONSUME", proto, "1", "caudal:{k}", now, "0", words({1, bucket, 10, 1, 1, -1})},
       "not a plain consume"},
      {{"CAUDAL.CONSUME", proto, "1", "caudal:{k}", now, "0",
        words({1, static_cast<int64_t>(Algorithm::kSlidingWindowLog), 10, 10, 1'000'000, 1})},
       "not a plain consume"},
      {{"CAUDAL.CONSUME", proto, "1", "caudal:{k}", now, "0",
        words({1, bucket + kChargeFlag, 10, 1, 1, 1})},
       "not a plain consume"},
      {{"CAUDAL.CONSUME", proto, "1", "caudal:{k}", now, "0", words({1, bucket, 0, 1, 1, 1})},
       "out of bounds"},
      // Calendar boundaries on a bucket, and boundaries out of order.
      {{"CAUDAL.CONSUME", proto, "1", "caudal:{k}", now, "0",
        words({1, bucket + kCalendarFlag, 10, 1, 1'000'000, 1, 1, 2, 3, 4})},
       "not a plain consume"},
      {{"CAUDAL.CONSUME", proto, "1", "caudal:{k}", now, "0",
        words({1, static_cast<int64_t>(Algorithm::kFixedWindow) + kCalendarFlag, 10, 10,
               2'592'000'000'000, 1, 1, 3, 2, 4})},
       "malformed request"},
      {{"CAUDAL.CONSUME", proto, "1", "caudal:{g}", now, "0",
        words({2 + kOneKeyRequest + kCostsApart, member, 10, 1, 1, 0, 7, member, 10, 1, 1, 0, 8})},
       "costs are missing"},
      {{"CAUDAL.CONSUME", proto, "1", "caudal:{g}", now, "0",
        words({2 + kOneKeyRequest + kCostsApart, member, 10, 1, 1, 0, 7, member, 10, 1, 1, 0, 8}),
        words({1})},
       "costs are missing"},
      {{"CAUDAL.CONSUME", proto, "1", "caudal:{g}", now, "0",
        words({2 + kOneKeyRequest + kCostsApart, member, 10, 1, 1, 0, 7, member, 10, 1, 1, 0, 8}),
        words({1, -2})},
       "not a plain consume"},
      {{"CAUDAL.CONSUME", proto, "1", "caudal:{g}", now, "0",
        words({2 + kOneKeyRequest, member, 10, 1, 1, 1, 7, member, 10, 1, 1})},
       "malformed request"},
      // (An algorithm number near INT64_MIN, which the fuzzer found overflowed.)
      {{"CAUDAL.CONSUME", proto, "1", "caudal:{g}", now, "0",
        words({2 + kOneKeyRequest, INT64_MIN + 3, 10, 1, 1, 1, 7, member, 10, 1, 1, 1, 8})},
       "not a plain consume"},
      {{"CAUDAL.CONSUME", proto, "1", "caudal:{list}", now, "0", good}, "WRONGTYPE"},
      {{"CAUDAL.CONSUME", proto, "1", "caudal:{liar}", now, "0",
        words(
            {2 + kOneKeyRequest, member, 10, 1, 1'000'000, 1, 7, member, 10, 1, 1'000'000, 1, 8})},
       "malformed group value"},
  };
  const std::string dbsize = *server->Command({"DBSIZE"});
  for (const Case& c : cases) {
    const Result<std::string> reply = server->Command(c.argv);
    ASSERT_FALSE(reply.ok()) << c.error;
    EXPECT_NE(reply.status().message().find(c.error), std::string::npos)
        << reply.status().ToString();
    EXPECT_EQ(*server->Command({"DBSIZE"}), dbsize) << c.error;
  }
  EXPECT_EQ(*server->Command({"GET", "caudal:{liar}"}), liar);
  EXPECT_EQ(*server->Command({"PING"}), "PONG");
  // A good call still decides.
  const Link::Answer ok = link.Run({"CAUDAL.CONSUME", proto, "1", "caudal:{k}", now, "0", good});
  EXPECT_EQ(ok.error, "");
  EXPECT_EQ(ok.ints.size(), 6u);
}

// A store on a server holding the module sends it the calls of plain consumes (a calendar
// window's too), and when the module goes (MODULE UNLOAD) the script takes over with
// nothing lost: the count goes on exactly.
TEST(RedisModule, TheStoreSendsItPlainConsumesAndFallsBackToTheScript) {
  std::unique_ptr<RedisServer> server = StartWithModule({"--enable-module-command", "local"});
  ASSERT_TRUE(server);
  std::unique_ptr<RedisStore> opened = MustOpen({.url = server->url()});
  ASSERT_TRUE(opened);
  RedisStore* store[] = {opened.get()};
  const Limit window =
      *Limit::Create(LimitSpec::Window(Algorithm::kFixedWindow, 10, std::chrono::hours(1)));
  const auto decide = [&](std::string_view key, int64_t cost) {
    const ConsumeEntry e{.key = key, .limit = &window, .cost = cost};
    Result<DecideResponse> d = (*store)->Decide({.consumes = {&e, 1}});
    EXPECT_TRUE(d.ok()) << d.status().ToString();
    return d.ok() && d->allowed;
  };
  const auto stat = [&](std::string_view command) {
    const std::string info = *server->Command({"INFO", "commandstats"});
    const std::string row = "cmdstat_" + std::string(command) + ":calls=";
    const size_t at = info.find(row);
    return at == std::string::npos ? 0 : std::stoll(info.substr(at + row.size()));
  };
  for (int i = 0; i < 5; ++i) EXPECT_TRUE(decide("w", 1));
  EXPECT_EQ(stat("caudal.consume"), 5);
  EXPECT_EQ(stat("fcall"), 0);
  EXPECT_EQ((*store)->Stats().module_calls, 5u);
  // A calendar window too.
  const Limit month = *Limit::Create(
      LimitSpec::CalendarWindow(10, *Calendar::Create(CalendarUnit::kMonth, "Europe/Madrid")));
  const ConsumeEntry m{.key = "month", .limit = &month, .cost = 4};
  const Result<DecideResponse> d = (*store)->Decide({.consumes = {&m, 1}});
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ(d->decisions[0].remaining, 6);
  EXPECT_EQ(stat("caudal.consume"), 6);
  EXPECT_EQ(stat("fcall"), 0);
  // The module goes: the next call fails over to the script, and the count goes on.
  ASSERT_EQ(*server->Command({"MODULE", "UNLOAD", "caudal"}), "OK");
  for (int i = 0; i < 5; ++i) EXPECT_TRUE(decide("w", 1)) << i;
  EXPECT_FALSE(decide("w", 1)) << "the eleventh of ten";
  EXPECT_EQ(stat("fcall"), 6);
  // The first call after, on each connection that had the module, was refused as unknown and sent
  // again to the script.
  EXPECT_GE((*store)->Stats().module_calls, 7u);
  EXPECT_LE((*store)->Stats().module_calls, 6u + RedisStoreOptions{}.connections);
}

// On a Redis Cluster whose nodes load the module: the store's calls on one slot go to it (its
// keys declared, which the cluster checks through the module's getkeys), and a slot's migration
// is followed as for the script: ASK while it moves, MOVED after, the count exact throughout.
TEST(RedisModule, OnAClusterItFollowsAskAndMoved) {
  using caudal::testing::RedisCluster;
  using Step = RedisCluster::MigrationStep;
  Result<std::unique_ptr<RedisCluster>> cluster =
      RedisCluster::Start({.extra_args = {"--loadmodule", CAUDAL_REDIS_MODULE}});
  ASSERT_TRUE(cluster.ok()) << cluster.status().ToString();
  RedisCluster& c = **cluster;
  Result<std::unique_ptr<RedisClusterStore>> opened = RedisClusterStore::Open(
      SystemClock::Instance(), {.url = c.url(), .deadline = std::chrono::seconds(2)});
  ASSERT_TRUE(opened.ok()) << opened.status().ToString();
  RedisClusterStore& store = **opened;
  const Limit bucket = Bucket(Algorithm::kTokenBucket, 1000, {1, std::chrono::hours(1)});
  const auto slot_of = [](const std::string& key) {
    return HashSlot(StateKey("caudal:", key, Algorithm::kTokenBucket));
  };
  std::string key;
  for (int i = 0; key.empty(); ++i) {
    const std::string k = "moving" + std::to_string(i);
    const Result<size_t> owner = c.PrimaryOf(slot_of(k));
    if (owner.ok() && *owner == 0) key = k;
  }
  const int slot = slot_of(key);
  const auto module_calls = [&](size_t node) {
    const std::string info = *c.node(node).Command({"INFO", "commandstats"});
    const size_t at = info.find("cmdstat_caudal.consume:calls=");
    return at == std::string::npos ? 0 : std::stoll(info.substr(at + 29));
  };
  ASSERT_EQ(DecideOne(store, key, bucket, 10).remaining, 990);
  EXPECT_EQ(module_calls(0), 1);
  ASSERT_TRUE(c.MigrateSlot(slot, 1, Step::kOpen).ok());
  EXPECT_EQ(DecideOne(store, key, bucket, 10).remaining, 980);
  std::string fresh;  // a key of the same slot, new: ASK to the target
  for (int i = 0; fresh.empty(); ++i) {
    const std::string k = "{" + key + "}" + std::to_string(i);
    if (slot_of(k) == slot) fresh = k;
  }
  EXPECT_EQ(DecideOne(store, fresh, bucket, 1).remaining, 999);
  EXPECT_GE(store.Stats().asked, 1u);
  EXPECT_GE(module_calls(1), 1) << "the ASKING call went to the target's module";
  ASSERT_TRUE(c.MigrateSlot(slot, 1, Step::kMoveKeys).ok());
  EXPECT_EQ(DecideOne(store, key, bucket, 10).remaining, 970);
  ASSERT_TRUE(c.MigrateSlot(slot, 1, Step::kFinish).ok());
  EXPECT_EQ(DecideOne(store, key, bucket, 10).remaining, 960);
  EXPECT_EQ(DecideOne(store, key, bucket, 10).remaining, 950);
  EXPECT_GE(store.Stats().moved, 1u);
  EXPECT_EQ(store.Stats().timeouts, 0u);
  EXPECT_EQ(store.Stats().module_calls, store.Stats().calls) << "every call went to the module";
}

}  // namespace
}  // namespace caudal::redis
