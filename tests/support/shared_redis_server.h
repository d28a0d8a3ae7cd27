// One redis-server for a whole test binary, started at its first use and stopped (its directory
// removed) by a global test environment at the end. Tests sharing it tag their keys per test.
#pragma once

#include <gtest/gtest.h>

#include <memory>

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

}  // namespace caudal::testing
