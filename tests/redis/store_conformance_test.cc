// The Store conformance suite against RedisStore, with `now` from the suite's ManualClock.
#include "support/store_conformance.h"

#include <gtest/gtest.h>

#include "caudal/redis/redis_store.h"
#include "support/grouping_store.h"
#include "support/manual_clock.h"
#include "support/shared_redis_server.h"

namespace caudal {
namespace {

std::unique_ptr<Store> MakeRedisStore(ManualClock& clock) {
  return testing::OpenSharedRedisStore(clock);
}

// Again with the keys of compact algorithms grouped (testing::GroupKeys): their state in one value
// per group, read and written once per call.
INSTANTIATE_TEST_SUITE_P(
    Redis, StoreConformanceTest,
    ::testing::Values(StoreConformanceParam{.name = "redis", .make = MakeRedisStore},
                      StoreConformanceParam{.name = "redis_grouped",
                                            .make =
                                                [](ManualClock& c) {
                                                  return testing::GroupKeys(MakeRedisStore(c));
                                                }}),
    StoreConformanceParamName);

}  // namespace
}  // namespace caudal
