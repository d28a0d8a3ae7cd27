// One redis-server for a whole test binary, started at its first use and stopped (its directory
// removed) by a global test environment at the end. Tests sharing it tag their keys per test.
#pragma once

#include <gtest/gtest.h>

#include <memory>

#include "caudal/redis/redis_store.h"
#include "support/manual_clock.h"
#include "support/redis_server.h"

namespace caudal::testing {

inline std::unique_ptr<RedisServer>& SharedRedisServerSlot() {
  static std::unique_ptr<RedisServer> server;
  return server;
}

// The binary's server, or null (a test failure recorded) when it cannot start.
inline RedisServer* SharedRedisServer() {
  std::unique_ptr<RedisServer>& slot = SharedRedisServerSlot();
  if (!slot) {
    Result<std::unique_ptr<RedisServer>> s = RedisServer::Start();
    if (!s.ok()) ADD_FAILURE() << s.status().ToString();
    if (s.ok()) slot = std::move(*s);
  }
  return slot.get();
}

class SharedRedisServerEnvironment : public ::testing::Environment {
 public:
  void TearDown() override { SharedRedisServerSlot().reset(); }
};
inline ::testing::Environment* const kSharedRedisServerEnvironment =
    ::testing::AddGlobalTestEnvironment(new SharedRedisServerEnvironment);

// A RedisStore on the binary's server deciding on `clock`, with a generous deadline (the suites
// check decisions, not latency, and run under sanitizers); null (a failure recorded) otherwise.
inline std::unique_ptr<Store> OpenSharedRedisStore(ManualClock& clock) {
  RedisServer* server = SharedRedisServer();
  Result<std::unique_ptr<RedisStore>> store = RedisStore::Open(
      SystemClock::Instance(), {.url = server != nullptr ? server->url() : "redis://unavailable:1",
                                .deadline = std::chrono::seconds(5),
                                .decision_clock = &clock});
  EXPECT_TRUE(store.ok()) << store.status().ToString();
  return store.ok() ? std::move(*store) : nullptr;
}

}  // namespace caudal::testing
