#include "redis/redis_url.h"

#include <gtest/gtest.h>

namespace caudal::redis {
namespace {

RedisUrl ParseUrl(std::string_view s) {
  Result<RedisUrl> r = ParseRedisUrl(s);
  EXPECT_TRUE(r.ok()) << s << ": " << r.status().ToString();
  return r.ok() ? *r : RedisUrl{};
}

std::string Error(std::string_view s) {
  Result<RedisUrl> r = ParseRedisUrl(s);
  EXPECT_FALSE(r.ok()) << s;
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << s;
  return r.status().message();
}

TEST(RedisUrl, ParsesEveryPart) {
  EXPECT_EQ(ParseUrl("redis://app:pw@cache.local:6380/3"), (RedisUrl{.transport = Transport::kPlain,
                                                                     .user = "app",
                                                                     .password = "pw",
                                                                     .host = "cache.local",
                                                                     .port = 6380,
                                                                     .db = 3}));
  EXPECT_EQ(ParseUrl("rediss://10.0.0.7:7000"),
            (RedisUrl{.transport = Transport::kTls, .host = "10.0.0.7", .port = 7000}));
}

TEST(RedisUrl, DefaultsPortDbAndUser) {
  const RedisUrl u = ParseUrl("redis://:s3cret@localhost");
  EXPECT_EQ(u.user, "");
  EXPECT_EQ(u.password, "s3cret");
  EXPECT_EQ(u.port, 6379);
  EXPECT_EQ(u.db, 0);
  EXPECT_EQ(ParseUrl("redis://h/").db, 0);
  EXPECT_EQ(ParseUrl("redis://h:1/1000000").db, kMaxDbIndex);
}

TEST(RedisUrl, AcceptsBracketedIpv6) {
  const RedisUrl u = ParseUrl("redis://[::1]:6390/1");
  EXPECT_EQ(u.host, "::1");
  EXPECT_EQ(u.port, 6390);
  EXPECT_EQ(ParseUrl("redis://[fe80::2]").port, 6379);
}

TEST(RedisUrl, DecodesPercentEncodedCredentialsAndAllowsSpecialCharacters) {
  const RedisUrl u = ParseUrl("redis://us%3Aer:p%40ss/w@h:1");
  EXPECT_EQ(u.user, "us:er");
  EXPECT_EQ(u.password, "p@ss/w");
  EXPECT_EQ(u.host, "h");
}

TEST(RedisUrl, RedactsThePassword) {
  EXPECT_EQ(ParseUrl("redis://app:hunter2@h:1/2").Redacted(), "redis://app:***@h:1/2");
  EXPECT_EQ(ParseUrl("rediss://[::1]").Redacted(), "rediss://[::1]:6379/0");
}

TEST(RedisUrl, RefusesMalformedUrlsNamingThePart) {
  EXPECT_NE(Error("").find("expected redis://"), std::string::npos);
  EXPECT_NE(Error("localhost:6379").find("expected redis://"), std::string::npos);
  EXPECT_NE(Error("http://h:1").find("unknown scheme \"http\""), std::string::npos);
  EXPECT_NE(Error("redis://").find("missing host"), std::string::npos);
  EXPECT_NE(Error("redis://:1").find("missing host"), std::string::npos);
  EXPECT_NE(Error("redis://h:").find("empty port"), std::string::npos);
  EXPECT_NE(Error("redis://h:0").find("port"), std::string::npos);
  EXPECT_NE(Error("redis://h:65536").find("port"), std::string::npos);
  EXPECT_NE(Error("redis://h:12ab").find("\"12ab\""), std::string::npos);
  EXPECT_NE(Error("redis://h:1/x").find("database"), std::string::npos);
  EXPECT_NE(Error("redis://h:1/-1").find("database"), std::string::npos);
  EXPECT_NE(Error("redis://h:1/1000001").find("database"), std::string::npos);
  EXPECT_NE(Error("redis://h:1/0?timeout=1").find("query"), std::string::npos);
  EXPECT_NE(Error("redis://h h:1").find("invalid character"), std::string::npos);
  EXPECT_NE(Error("redis://[::1:1").find("unterminated"), std::string::npos);
  EXPECT_NE(Error("redis://[::1]x").find("after \"]\""), std::string::npos);
  EXPECT_NE(Error("redis://[]:1").find("empty host"), std::string::npos);
  EXPECT_NE(Error("redis://bob@h").find("no password"), std::string::npos);
  EXPECT_NE(Error("redis://bob:@h").find("empty password"), std::string::npos);
  EXPECT_NE(Error("redis://:pw%4@h").find("percent"), std::string::npos);
}

TEST(RedisUrl, ErrorsNeverRepeatThePassword) {
  for (const char* url :
       {"redis://u:topsecret@h:99999", "redis://u:topsecret@h:1/x", "redis://u:topsecret@h h"}) {
    EXPECT_EQ(Error(url).find("topsecret"), std::string::npos) << url;
  }
}

}  // namespace
}  // namespace caudal::redis

namespace caudal::redis {
namespace {

TEST(ClusterUrl, ParsesSeedsCredentialsAndTls) {
  Result<ClusterUrl> u = ParseClusterUrl("redis-cluster://app:p%40w@10.0.0.1:7000,[::1],h:7002");
  ASSERT_TRUE(u.ok()) << u.status().ToString();
  EXPECT_EQ(u->user, "app");
  EXPECT_EQ(u->password, "p@w");
  EXPECT_EQ(u->seeds, (std::vector<Endpoint>{{"10.0.0.1", 7000}, {"::1", 6379}, {"h", 7002}}));
  EXPECT_EQ(u->transport, Transport::kPlain);
  EXPECT_EQ(u->Node({"10.0.0.9", 7005}), (RedisUrl{.transport = Transport::kPlain,
                                                   .user = "app",
                                                   .password = "p@w",
                                                   .host = "10.0.0.9",
                                                   .port = 7005,
                                                   .db = 0}));
  EXPECT_EQ(u->Redacted(), "redis-cluster://app:***@10.0.0.1:7000,[::1]:6379,h:7002");
  EXPECT_EQ(ParseClusterUrl("redis-cluster://h?tls=true")->transport, Transport::kTls);
}

TEST(ClusterUrl, RefusesWhatItCannotUse) {
  auto error = [](std::string_view s) {
    Result<ClusterUrl> u = ParseClusterUrl(s);
    EXPECT_FALSE(u.ok()) << s;
    return u.ok() ? std::string() : u.status().message();
  };
  EXPECT_NE(error("redis://h:1").find("redis-cluster://"), std::string::npos);
  EXPECT_NE(error("redis-cluster://h:1/2").find("database 0"), std::string::npos);
  EXPECT_NE(error("redis-cluster://h:1,").find("missing host"), std::string::npos);
  EXPECT_NE(error("redis-cluster://h:99999").find("port"), std::string::npos);
  EXPECT_NE(error("redis-cluster://h?tls=maybe").find("tls"), std::string::npos);
  EXPECT_NE(error("redis-cluster://h?verify=no").find("unknown query parameter"),
            std::string::npos);
  std::string many = "redis-cluster://";
  for (size_t i = 0; i <= kMaxSeeds; ++i) many += (i > 0 ? ",h" : "h");
  EXPECT_NE(error(many).find("at most 64 hosts"), std::string::npos);
  const std::string secret = error("redis-cluster://:hunter2@h:1,bad host");
  EXPECT_EQ(secret.find("hunter2"), std::string::npos) << secret;
}

TEST(SentinelUrl, ParsesSentinelsMasterNameDbAndSentinelCredentials) {
  Result<SentinelUrl> u = ParseSentinelUrl(
      "redis-sentinel://:pw@s1,s2:26380/mymaster/2?sentinel_user=mon&sentinel_password=s%26c");
  ASSERT_TRUE(u.ok()) << u.status().ToString();
  EXPECT_EQ(u->sentinels, (std::vector<Endpoint>{{"s1", 26379}, {"s2", 26380}}));
  EXPECT_EQ(u->master_name, "mymaster");
  EXPECT_EQ(u->db, 2);
  EXPECT_EQ(u->Primary({"10.0.0.5", 6379}).password, "pw");
  EXPECT_EQ(u->Primary({"10.0.0.5", 6379}).db, 2);
  EXPECT_EQ(u->Sentinel({"s1", 26379}).user, "mon");
  EXPECT_EQ(u->Sentinel({"s1", 26379}).password, "s&c");
  const std::string redacted = u->Redacted();
  EXPECT_EQ(redacted,
            "redis-sentinel://:***@s1:26379,s2:26380/mymaster/2?sentinel_user=mon&"
            "sentinel_password=***");
  EXPECT_EQ(ParseSentinelUrl("redis-sentinel://s/m")->db, 0);
}

TEST(SentinelUrl, RefusesWhatItCannotUse) {
  auto error = [](std::string_view s) {
    Result<SentinelUrl> u = ParseSentinelUrl(s);
    EXPECT_FALSE(u.ok()) << s;
    return u.ok() ? std::string() : u.status().message();
  };
  EXPECT_NE(error("redis-sentinel://s1,s2").find("primary's name"), std::string::npos);
  EXPECT_NE(error("redis-sentinel://s1/m/x").find("database"), std::string::npos);
  EXPECT_NE(error("redis-sentinel://s1/m?sentinel_user=u").find("sentinel_password"),
            std::string::npos);
  EXPECT_NE(error("redis-sentinel://s1/m?x=1").find("unknown query parameter"), std::string::npos);
  EXPECT_NE(error("redis-sentinel://s1/m?tls").find("name=value"), std::string::npos);
}

TEST(AddressMap, DialsWhatItNamesElsewhereAndTheRestAsNamed) {
  Result<AddressMap> map = ParseAddressMap(
      {{"10.0.0.5:6379", "127.0.0.1:7001"}, {"node-b.internal:6380", "[::1]:7002"}});
  ASSERT_TRUE(map.ok()) << map.status().ToString();
  ClusterUrl cluster = *ParseClusterUrl("redis-cluster://10.0.0.5:6379");
  cluster.address_map = *map;
  const RedisUrl a = cluster.Node({"10.0.0.5", 6379});
  EXPECT_EQ(a.host, "10.0.0.5") << "the node keeps its name (TLS verifies it, logs show it)";
  EXPECT_EQ(a.port, 6379);
  EXPECT_EQ(a.dial.host, "127.0.0.1");
  EXPECT_EQ(a.dial.port, 7001);
  EXPECT_EQ(cluster.Node({"node-b.internal", 6380}).dial.host, "::1");
  EXPECT_EQ(cluster.Node({"node-b.internal", 6380}).dial.port, 7002);
  // Exact matches only: another port of a mapped host is dialled as named.
  EXPECT_TRUE(cluster.Node({"10.0.0.5", 6380}).dial.host.empty());
  EXPECT_TRUE(cluster.Node({"10.0.0.6", 6379}).dial.host.empty());

  SentinelUrl sentinel = *ParseSentinelUrl("redis-sentinel://10.0.0.5:6379/m");
  sentinel.address_map = *map;
  EXPECT_EQ(sentinel.Primary({"10.0.0.5", 6379}).dial.port, 7001);
  EXPECT_EQ(sentinel.Sentinel({"10.0.0.5", 6379}).dial.port, 7001);
  EXPECT_TRUE(sentinel.Primary({"10.0.0.7", 6379}).dial.host.empty());
}

TEST(AddressMap, RefusesWhatItCannotDialNamingTheEntry) {
  auto error = [](std::vector<std::pair<std::string, std::string>> pairs) {
    Result<AddressMap> map = ParseAddressMap(pairs);
    EXPECT_FALSE(map.ok());
    return map.ok() ? std::string() : map.status().message();
  };
  EXPECT_NE(error({{"10.0.0.5", "127.0.0.1:7001"}}).find("\"10.0.0.5\" has no port"),
            std::string::npos);
  EXPECT_NE(error({{"10.0.0.5:6379", "127.0.0.1"}}).find("has no port"), std::string::npos);
  EXPECT_NE(error({{"10.0.0.5:99999", "127.0.0.1:1"}}).find("port must be a number"),
            std::string::npos);
  EXPECT_NE(error({{"bad host:1", "127.0.0.1:1"}}).find("invalid character"), std::string::npos);
  EXPECT_NE(error({{"h:1", "a:1"}, {"h:1", "b:1"}}).find("\"h:1\" given twice"), std::string::npos);
  std::vector<std::pair<std::string, std::string>> many;
  for (size_t i = 0; i <= kMaxAddressMap; ++i)
    many.emplace_back("h:" + std::to_string(i + 1), "g:1");
  EXPECT_NE(error(many).find("at most 1024 entries"), std::string::npos);
  EXPECT_TRUE(ParseAddressMap({}).ok());
}

}  // namespace
}  // namespace caudal::redis
