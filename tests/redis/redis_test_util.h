// Helpers shared by the Redis store's integration tests.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "caudal/redis/redis_store.h"
#include "support/redis_server.h"

namespace caudal {

inline std::unique_ptr<testing::RedisServer> StartServer(testing::RedisServerOptions o = {}) {
  Result<std::unique_ptr<testing::RedisServer>> s = testing::RedisServer::Start(std::move(o));
  EXPECT_TRUE(s.ok()) << s.status().ToString();
  return s.ok() ? std::move(*s) : nullptr;
}

// Tests check decisions, not latency: unless a test sets its own deadline, a busy machine gets
// two seconds instead of the production default of a few milliseconds.
inline std::unique_ptr<RedisStore> MustOpen(RedisStoreOptions o) {
  if (o.deadline == RedisStoreOptions{}.deadline) o.deadline = std::chrono::seconds(2);
  Result<std::unique_ptr<RedisStore>> s = RedisStore::Open(SystemClock::Instance(), std::move(o));
  EXPECT_TRUE(s.ok()) << s.status().ToString();
  return s.ok() ? std::move(*s) : nullptr;
}

inline Limit Window(Algorithm a, int64_t limit, Micros w) {
  return *Limit::Create(LimitSpec::Window(a, limit, w));
}

inline Limit Bucket(Algorithm a, int64_t capacity, Rate refill) {
  return *Limit::Create(LimitSpec::Bucket(a, capacity, refill));
}

inline Decision DecideOne(Store& store, std::string_view key, const Limit& limit, int64_t cost) {
  const ConsumeEntry e{.key = key, .limit = &limit, .cost = cost};
  Result<DecideResponse> r = store.Decide({.consumes = {&e, 1}});
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? r->decisions.at(0) : Decision{.verdict = Verdict::kDenied};
}

// SCAN + PTTL: every key has a TTL (none is left behind forever), at most `max_ttl` rounded up
// to whole milliseconds, plus the eighth a compact state's TTL is given beyond its need
// (decide.lua's compact_write).
inline void ExpectEveryKeyHasATtl(const testing::RedisServer& server, Micros max_ttl) {
  Result<std::vector<std::string>> keys = server.Keys();
  ASSERT_TRUE(keys.ok()) << keys.status().ToString();
  const int64_t needed_ms = (max_ttl.count() + 999) / 1000;
  const int64_t max_ms = needed_ms + needed_ms / 8;
  for (const std::string& k : *keys) {
    Result<std::string> ttl = server.Command({"PTTL", k});
    ASSERT_TRUE(ttl.ok()) << ttl.status().ToString();
    const int64_t ms = std::stoll(*ttl);
    EXPECT_NE(ms, -1) << k << " has no TTL";  // -2: expired between SCAN and PTTL
    EXPECT_LE(ms, max_ms) << k;
  }
}

}  // namespace caudal
