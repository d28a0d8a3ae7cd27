#include "support/redis_server.h"

#include <gtest/gtest.h>

#include <filesystem>

namespace caudal::testing {
namespace {

TEST(RedisServer, StartsAnswersRestartsAndStops) {
  Result<std::unique_ptr<RedisServer>> server = RedisServer::Start();
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  RedisServer& s = **server;
  EXPECT_GT(s.port(), 0);
  EXPECT_EQ(s.url(), "redis://127.0.0.1:" + std::to_string(s.port()));
  ASSERT_EQ(*s.Command({"SET", "k", "v"}), "OK");
  EXPECT_EQ(*s.Command({"GET", "k"}), "v");
  EXPECT_EQ(*s.Keys(), std::vector<std::string>{"k"});
  EXPECT_FALSE(s.Command({"NOSUCHCOMMAND"}).ok());

  s.Kill();
  EXPECT_FALSE(s.running());
  EXPECT_FALSE(s.Command({"PING"}).ok());
  ASSERT_TRUE(s.Restart().ok());
  EXPECT_EQ(*s.Command({"PING"}), "PONG");
  EXPECT_EQ(*s.Command({"GET", "k"}), "(nil)");  // nothing persisted
  s.Stop();
  EXPECT_FALSE(s.Command({"PING"}).ok());
}

// The server started is the one the environment names: Valkey's INFO names it (and still reports
// the Redis version it is compatible with), Redis's has no valkey_version.
TEST(RedisServer, StartsTheServerTheEnvironmentNames) {
  Result<std::unique_ptr<RedisServer>> server = RedisServer::Start();
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  Result<std::string> info = (*server)->Command({"INFO", "server"});
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  const bool valkey = RedisServerBinary() == "valkey-server";
  EXPECT_EQ(info->find("valkey_version:") != std::string::npos, valkey) << *info;
  EXPECT_NE(info->find("redis_version:"), std::string::npos) << *info;
  EXPECT_EQ(RedisCliBinary(), valkey ? "valkey-cli" : "redis-cli");
}

TEST(RedisServer, RequiresThePasswordItWasGiven) {
  Result<std::unique_ptr<RedisServer>> server =
      RedisServer::Start({.password = "s3cret", .acl_users = {"alice on >wonder ~* &* +@all"}});
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  EXPECT_EQ(*(*server)->Command({"PING"}), "PONG");  // Command() authenticates
  EXPECT_EQ(*(*server)->Command({"ACL", "WHOAMI"}), "default");
  EXPECT_NE((*server)->Command({"ACL", "LIST"})->find("user alice on"), std::string::npos);
}

TEST(RedisServer, ServesTlsWithAGeneratedCertificate) {
  Result<std::unique_ptr<RedisServer>> server = RedisServer::Start({.tls = true});
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  EXPECT_EQ((*server)->url().rfind("rediss://127.0.0.1:", 0), 0u);
  EXPECT_TRUE(std::filesystem::exists((*server)->tls_ca_file()));
}

}  // namespace
}  // namespace caudal::testing
