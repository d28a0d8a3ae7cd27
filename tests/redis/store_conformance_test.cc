// The Store conformance suite against RedisStore, with `now` from the suite's ManualClock.
#include "support/store_conformance.h"

#include <gtest/gtest.h>

#include "caudal/redis/redis_store.h"
#include "support/manual_clock.h"
#include "support/shared_redis_server.h"

namespace caudal {
namespace {

std::unique_ptr<Store> MakeRedisStore(ManualClock& clock) {
  return testing::OpenSharedRedisStore(clock);
}

INSTANTIATE_TEST_SUITE_P(Redis, StoreConformanceTest,
                         ::testing::Values(StoreConformanceParam{.name = "redis",
                                                                 .make = MakeRedisStore}),
                         StoreConformanceParamName);

}  // namespace
}  // namespace caudal
