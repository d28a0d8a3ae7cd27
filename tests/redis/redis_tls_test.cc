// Redis over TLS with the options a deployment sets (store.tls): a CA file, a client certificate
// and key for a server that requires one (--tls-auth-clients yes), and the server name used for
// SNI and verification; and the failures each gets wrong, which must stop the store at start
// with the reason rather than look like an outage.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "caudal/redis_store.h"
#include "redis/redis_test_util.h"
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
  const Status s = RedisStore::Open({.url = server->url(),
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
  const Status s = RedisStore::Open({.url = server->url(),
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
  const Status s =
      RedisStore::Open({.url = server->url(), .tls_ca_file = dir + "/other-ca.crt"}).status();
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
  const Status s = RedisStore::Open({.url = server->url(),
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
  const Status missing = RedisStore::Open({.url = server->url(),
                                           .tls_ca_file = server->tls_ca_file(),
                                           .tls_cert_file = "/nonexistent/client.crt",
                                           .tls_key_file = dir + "/client.key"})
                             .status();
  EXPECT_EQ(missing.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(missing.message().find("/nonexistent/client.crt"), std::string::npos);
  const Status mismatched = RedisStore::Open({.url = server->url(),
                                              .tls_ca_file = server->tls_ca_file(),
                                              .tls_cert_file = dir + "/client.crt",
                                              .tls_key_file = dir + "/stranger.key"})
                                .status();
  EXPECT_EQ(mismatched.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(mismatched.message().find("stranger.key\": key values mismatch"), std::string::npos)
      << mismatched.message();
}

}  // namespace
}  // namespace caudal
