// Redis over TLS with the options a deployment sets (store.tls): a CA file, a client certificate
// and key for a server that requires one (--tls-auth-clients yes), and the server name used for
// SNI and verification; and the failures each gets wrong, which must stop the store at start
// with the reason rather than look like an outage. The renewal of those files (SIGHUP), and the
// Cluster and Sentinel stores over TLS.
#include "redis/redis_tls.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <thread>

#include "caudal/redis/redis_store.h"
#include "redis/redis_test_util.h"
#include "support/redis_cluster.h"
#include "support/redis_sentinel.h"
#include "support/redis_server.h"

namespace caudal {
namespace {

using std::chrono::seconds;

// The directory of the test server's CA (ca.crt, ca.key), where the client certificates go too.
std::string Dir(const testing::RedisServer& server) {
  const std::string ca = server.tls_ca_file();
  return ca.substr(0, ca.rfind('/'));
}

// Runs openssl commands in `dir`; true on success.
bool Openssl(const std::string& dir, const std::string& commands) {
  const std::string cmd = "cd '" + dir + "' && (" + commands + ") >openssl-client.log 2>&1";
  return std::system(cmd.c_str()) == 0;
}

// client.crt/key signed by the server's CA; stranger.crt/key signed by a CA Redis does not know.
void MakeClientCertificates(const std::string& dir) {
  constexpr const char* kKey =
      "openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes ";
  ASSERT_TRUE(
      Openssl(dir, std::string(kKey) +
                       "-keyout client.key -out client.csr -subj /CN=caudal && "
                       "openssl x509 -req -in client.csr -CA ca.crt -CAkey ca.key -CAcreateserial "
                       "-out client.crt -days 2 && "
                       "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes "
                       "-keyout other-ca.key -out other-ca.crt -days 2 -subj /CN=other-ca && " +
                       kKey +
                       "-keyout stranger.key -out stranger.csr -subj /CN=caudal && "
                       "openssl x509 -req -in stranger.csr -CA other-ca.crt -CAkey other-ca.key "
                       "-CAcreateserial -out stranger.crt -days 2"))
      << dir;
}

std::unique_ptr<testing::RedisServer> StartMutualTls() {
  return StartServer({.tls = true, .extra_args = {"--tls-auth-clients", "yes"}});
}

TEST(RedisTls, ClientCertificateWhenRedisRequiresOne) {
  auto server = StartMutualTls();
  const std::string dir = Dir(*server);
  MakeClientCertificates(dir);
  auto store = MustOpen({.url = server->url(),
                         .tls_ca_file = server->tls_ca_file(),
                         .tls_cert_file = dir + "/client.crt",
                         .tls_key_file = dir + "/client.key"});
  EXPECT_TRUE(store->Ping().ok());
  EXPECT_TRUE(DecideOne(*store, "k", Bucket(Algorithm::kGcra, 5, {5, seconds(1)}), 1).allowed());
}

TEST(RedisTls, NoClientCertificateIsAClearErrorAtStart) {
  auto server = StartMutualTls();
  const Status s = RedisStore::Open(SystemClock::Instance(), {.url = server->url(),
                                                              .connect_timeout = seconds(5),
                                                              .tls_ca_file = server->tls_ca_file()})
                       .status();
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();
  EXPECT_NE(s.message().find("store.tls.cert_file"), std::string::npos) << s.message();
}

TEST(RedisTls, ClientCertificateFromAnotherCaIsAClearErrorAtStart) {
  auto server = StartMutualTls();
  const std::string dir = Dir(*server);
  MakeClientCertificates(dir);
  const Status s =
      RedisStore::Open(SystemClock::Instance(), {.url = server->url(),
                                                 .connect_timeout = seconds(5),
                                                 .tls_ca_file = server->tls_ca_file(),
                                                 .tls_cert_file = dir + "/stranger.crt",
                                                 .tls_key_file = dir + "/stranger.key"})
          .status();
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();
  EXPECT_NE(s.message().find("refused the client certificate"), std::string::npos) << s.message();
}

TEST(RedisTls, WrongCaIsAClearErrorAtStart) {
  auto server = StartServer({.tls = true});
  const std::string dir = Dir(*server);
  MakeClientCertificates(dir);
  const Status s = RedisStore::Open(SystemClock::Instance(),
                                    {.url = server->url(), .tls_ca_file = dir + "/other-ca.crt"})
                       .status();
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();
  EXPECT_NE(s.message().find("certificate verify failed"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("store.tls.ca_file"), std::string::npos) << s.message();
}

TEST(RedisTls, ServerNameReplacesTheHostForVerification) {
  auto server = StartServer({.tls = true});  // its certificate: IP:127.0.0.1, DNS:localhost
  // Reached by address, verified by name.
  auto store = MustOpen(
      {.url = server->url(), .tls_ca_file = server->tls_ca_file(), .tls_server_name = "localhost"});
  EXPECT_TRUE(store->Ping().ok());
  const Status s = RedisStore::Open(SystemClock::Instance(), {.url = server->url(),
                                                              .tls_ca_file = server->tls_ca_file(),
                                                              .tls_server_name = "redis.example"})
                       .status();
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();
  EXPECT_NE(s.message().find("store.tls.server_name"), std::string::npos) << s.message();
}

TEST(RedisTls, UnloadableClientFilesAreRefusedBeforeConnecting) {
  auto server = StartServer({.tls = true});
  const std::string dir = Dir(*server);
  MakeClientCertificates(dir);
  const Status missing =
      RedisStore::Open(SystemClock::Instance(), {.url = server->url(),
                                                 .tls_ca_file = server->tls_ca_file(),
                                                 .tls_cert_file = "/nonexistent/client.crt",
                                                 .tls_key_file = dir + "/client.key"})
          .status();
  EXPECT_EQ(missing.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(missing.message().find("/nonexistent/client.crt"), std::string::npos);
  const Status mismatched =
      RedisStore::Open(SystemClock::Instance(), {.url = server->url(),
                                                 .tls_ca_file = server->tls_ca_file(),
                                                 .tls_cert_file = dir + "/client.crt",
                                                 .tls_key_file = dir + "/stranger.key"})
          .status();
  EXPECT_EQ(mismatched.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(mismatched.message().find("stranger.key\": key values mismatch"), std::string::npos)
      << mismatched.message();
}

// Pings until `ok` says the answer is the one awaited, for up to 10 s (reconnection backoff).
template <typename Pred>
Status PingUntil(Store& store, Pred ok) {
  Status last;
  for (int i = 0; i < 500; ++i) {
    last = store.Ping();
    if (ok(last)) return last;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return last;
}

TEST(RedisTls, AReloadedClientCertificateServesTheNextConnections) {
  auto server = StartMutualTls();
  const std::string dir = Dir(*server);
  MakeClientCertificates(dir);
  RedisTlsReload reload;
  auto store = MustOpen({.url = server->url(),
                         .tls_ca_file = server->tls_ca_file(),
                         .tls_cert_file = dir + "/client.crt",
                         .tls_key_file = dir + "/client.key",
                         .tls_reload = &reload});
  EXPECT_EQ(reload.stores(), 1u);
  ASSERT_TRUE(store->Ping().ok());

  // A bad pair is refused by Load, before anything changes.
  Result<RedisTlsContext> bad = RedisTlsReload::Load({.tls_ca_file = server->tls_ca_file(),
                                                      .tls_cert_file = dir + "/stranger.crt",
                                                      .tls_key_file = dir + "/client.key"});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("client.key\": key values mismatch"), std::string::npos)
      << bad.status().message();

  // A certificate Redis does not trust: the open connections keep deciding with theirs...
  Result<RedisTlsContext> stranger = RedisTlsReload::Load({.tls_ca_file = server->tls_ca_file(),
                                                           .tls_cert_file = dir + "/stranger.crt",
                                                           .tls_key_file = dir + "/stranger.key"});
  ASSERT_TRUE(stranger.ok()) << stranger.status().ToString();
  reload.Use(*stranger);
  EXPECT_TRUE(store->Ping().ok());
  EXPECT_TRUE(DecideOne(*store, "k", Bucket(Algorithm::kGcra, 5, {5, seconds(1)}), 1).allowed());
  // ...and the ones made after Redis restarts present it, and are refused.
  ASSERT_TRUE(server->Restart().ok());
  const Status refused = PingUntil(*store, [](const Status& s) {
    return s.message().find("client certificate") != std::string::npos;
  });
  EXPECT_NE(refused.message().find("client certificate"), std::string::npos) << refused.ToString();

  // The good one again: the store reconnects with it.
  Result<RedisTlsContext> renewed = RedisTlsReload::Load({.tls_ca_file = server->tls_ca_file(),
                                                          .tls_cert_file = dir + "/client.crt",
                                                          .tls_key_file = dir + "/client.key"});
  ASSERT_TRUE(renewed.ok()) << renewed.status().ToString();
  reload.Use(*renewed);
  EXPECT_TRUE(PingUntil(*store, [](const Status& s) { return s.ok(); }).ok());
  store.reset();
  EXPECT_EQ(reload.stores(), 0u);  // a closed store unregisters
}

// Decides 48 keys, each once, all allowed; true when every decision was.
bool DecideKeys(Store& store) {
  bool all = true;
  for (int i = 0; i < 48; ++i) {
    all &= DecideOne(store, "key-" + std::to_string(i),
                     Bucket(Algorithm::kTokenBucket, 5, {5, seconds(1)}), 1)
               .allowed();
  }
  return all;
}

// Keys in the server's database 0 (asked on its plaintext port).
int64_t KeyCount(const testing::RedisServer& server) {
  Result<std::string> n = server.Command({"DBSIZE"});
  return n.ok() ? std::stoll(*n) : -1;
}

TEST(RedisTls, ClusterStoreOverTls) {
  auto cluster = testing::RedisCluster::Start({.primaries = 3, .tls = true});
  ASSERT_TRUE(cluster.ok()) << cluster.status().ToString();
  const std::string url = (*cluster)->url();
  ASSERT_NE(url.find("?tls=true"), std::string::npos) << url;
  auto store = RedisClusterStore::Open(
      SystemClock::Instance(),
      {.url = url, .deadline = seconds(2), .tls_ca_file = (*cluster)->node(0).tls_ca_file()});
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  EXPECT_TRUE((*store)->Ping().ok());
  EXPECT_TRUE(DecideKeys(**store));
  // Every primary decided some: the slot map's TLS ports were followed to each of them.
  for (size_t i = 0; i < (*cluster)->size(); ++i) {
    EXPECT_GT(KeyCount((*cluster)->node(i)), 0) << "node " << i;
  }
  // A client that does not trust the cluster's CA never gets to decide.
  const std::string dir = Dir((*cluster)->node(0));
  MakeClientCertificates(dir);
  const Status wrong_ca =
      RedisClusterStore::Open(
          SystemClock::Instance(),
          {.url = url, .connect_timeout = seconds(5), .tls_ca_file = dir + "/other-ca.crt"})
          .status();
  EXPECT_FALSE(wrong_ca.ok());
  EXPECT_NE(wrong_ca.message().find("certificate verify failed"), std::string::npos)
      << wrong_ca.ToString();
}

TEST(RedisTls, SentinelStoreOverTls) {
  auto sentinels = testing::RedisSentinels::Start({.sentinels = 2, .tls = true});
  ASSERT_TRUE(sentinels.ok()) << sentinels.status().ToString();
  const std::string url = (*sentinels)->url();
  ASSERT_NE(url.find("?tls=true"), std::string::npos) << url;
  auto store = RedisSentinelStore::Open(
      SystemClock::Instance(),
      {.url = url, .deadline = seconds(2), .tls_ca_file = (*sentinels)->server(0).tls_ca_file()});
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  EXPECT_TRUE((*store)->Ping().ok());
  EXPECT_TRUE(DecideKeys(**store));
  // The primary the sentinels named decided them, over its TLS port.
  EXPECT_EQ(KeyCount((*sentinels)->server(0)), 48);
}

}  // namespace
}  // namespace caudal
