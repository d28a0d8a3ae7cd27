// The Store conformance suite against RedisStore, with `now` from the suite's ManualClock.
#include "support/store_conformance.h"

#include <gtest/gtest.h>

#include "caudal/redis/redis_store.h"
#include "support/manual_clock.h"
#include "support/redis_server.h"

namespace caudal {
namespace {

using testing::RedisServer;

// One redis-server for the whole binary (the suite tags every key per test), owned by a global
// environment so it is stopped and its directory removed at the end.
std::unique_ptr<RedisServer>& ServerSlot() {
  static std::unique_ptr<RedisServer> server;
  return server;
}

RedisServer* Server() {
  std::unique_ptr<RedisServer>& slot = ServerSlot();
  if (!slot) {
    Result<std::unique_ptr<RedisServer>> s = RedisServer::Start();
    if (!s.ok()) ADD_FAILURE() << s.status().ToString();
    if (s.ok()) slot = std::move(*s);
  }
  return slot.get();
}

class ServerEnvironment : public ::testing::Environment {
 public:
  void TearDown() override { ServerSlot().reset(); }
};
const auto* const kEnvironment = ::testing::AddGlobalTestEnvironment(new ServerEnvironment);

std::unique_ptr<Store> MakeRedisStore(ManualClock& clock) {
  // A generous deadline: the suite checks decisions, not latency (and runs under sanitizers).
  Result<std::unique_ptr<RedisStore>> store =
      RedisStore::Open(SystemClock::Instance(),
                       {.url = Server() != nullptr ? Server()->url() : "redis://unavailable:1",
                        .deadline = std::chrono::seconds(5),
                        .decision_clock = &clock});
  EXPECT_TRUE(store.ok()) << store.status().ToString();
  return store.ok() ? std::move(*store) : nullptr;
}

INSTANTIATE_TEST_SUITE_P(Redis, StoreConformanceTest,
                         ::testing::Values(StoreConformanceParam{.name = "redis",
                                                                 .make = MakeRedisStore}),
                         StoreConformanceParamName);

}  // namespace
}  // namespace caudal
