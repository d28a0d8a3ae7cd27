// The Store conformance suite against RedisStore, with `now` from the suite's ManualClock.
#include "support/store_conformance.h"

#include <gtest/gtest.h>

#include "caudal/redis/redis_store.h"
#include "support/manual_clock.h"
#include "support/shared_redis_server.h"

namespace caudal {
namespace {

using testing::RedisServer;

RedisServer* Server() { return testing::SharedRedisServer(); }

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
