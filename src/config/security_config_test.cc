#include <gtest/gtest.h>

#include "caudal/config/config.h"

namespace caudal {
namespace {

constexpr const char* kPolicies = "policies: []\n";

Result<Config> Parse(const std::string& yaml) { return ParseConfig(yaml + kPolicies, "s.yaml"); }

TEST(SecurityConfig, PlaintextAndOpenByDefault) {
  auto c = Parse("");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_FALSE(c->server.tls.enabled());
  EXPECT_FALSE(c->server.auth.enabled());
  EXPECT_TRUE(c->store.tls.ca_file.empty());
}

TEST(SecurityConfig, ParsesServerTlsAuthAndStoreTls) {
  auto c = Parse(R"(server:
  tls: {cert_file: s.pem, key_file: s.key, client_ca_file: ca.pem, client_cert: optional,
        listeners: [grpc]}
  auth: {token_file: token, allowed_clients: [envoy, spiffe://mesh/ns/edge], metrics: protected}
store:
  url: rediss://redis.internal:6380
  tls: {ca_file: rca.pem, cert_file: c.pem, key_file: c.key, server_name: redis.example}
)");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  const ServerTlsConfig& tls = c->server.tls;
  EXPECT_EQ(tls.cert_file, "s.pem");
  EXPECT_EQ(tls.key_file, "s.key");
  EXPECT_EQ(tls.client_ca_file, "ca.pem");
  EXPECT_EQ(tls.client_cert, ClientCertMode::kOptional);
  EXPECT_FALSE(tls.http);
  EXPECT_TRUE(tls.grpc);
  EXPECT_EQ(c->server.auth.token_file, "token");
  EXPECT_EQ(c->server.auth.allowed_clients,
            (std::vector<std::string>{"envoy", "spiffe://mesh/ns/edge"}));
  EXPECT_TRUE(c->server.auth.protect_metrics);
  EXPECT_EQ(c->store.tls.ca_file, "rca.pem");
  EXPECT_EQ(c->store.tls.cert_file, "c.pem");
  EXPECT_EQ(c->store.tls.key_file, "c.key");
  EXPECT_EQ(c->store.tls.server_name, "redis.example");
}

TEST(SecurityConfig, ClientCaAloneRequiresClientCertificatesOnBothListeners) {
  auto c = Parse("server: {tls: {cert_file: s.pem, key_file: s.key, client_ca_file: ca.pem}}\n");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->server.tls.client_cert, ClientCertMode::kRequire);
  EXPECT_TRUE(c->server.tls.http);
  EXPECT_TRUE(c->server.tls.grpc);
}

struct Bad {
  const char* yaml;
  const char* error;  // the exact prefix
};

class SecurityConfigErrors : public ::testing::TestWithParam<Bad> {};

TEST_P(SecurityConfigErrors, NameTheFieldAndWhatIsExpected) {
  auto c = Parse(GetParam().yaml);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(c.status().message().rfind(GetParam().error, 0), 0u) << c.status().message();
}

INSTANTIATE_TEST_SUITE_P(
    All, SecurityConfigErrors,
    ::testing::Values(
        Bad{"server: {tls: {cert_file: s.pem}}\n",
            "s.yaml:1:15: server.tls: expected both cert_file and key_file"},
        Bad{"server: {tls: {cert_file: s.pem, key_file: ''}}\n",
            "s.yaml:1:44: server.tls.key_file: empty path"},
        Bad{"server: {tls: {cert_file: a, key_file: b, client_cert: require}}\n",
            "s.yaml:1:56: server.tls.client_cert: require needs client_ca_file"},
        Bad{"server: {tls: {cert_file: a, key_file: b, client_ca_file: c, client_cert: maybe}}\n",
            "s.yaml:1:75: server.tls.client_cert: expected none, optional or require"},
        Bad{"server: {tls: {cert_file: a, key_file: b, client_ca_file: c, client_cert: none}}\n",
            "s.yaml:1:75: server.tls.client_cert: none with a client_ca_file"},
        Bad{"server: {tls: {cert_file: a, key_file: b, listeners: [http, http]}}\n",
            "s.yaml:1:61: server.tls.listeners[1]: expected http or grpc, each once"},
        Bad{"server: {tls: {cert_file: a, key_file: b, listeners: [https]}}\n",
            "s.yaml:1:55: server.tls.listeners[0]: expected http or grpc"},
        Bad{"server: {tls: {cert_file: a, key_file: b, listeners: []}}\n",
            "s.yaml:1:54: server.tls.listeners: expected [http], [grpc] or [http, grpc]"},
        Bad{"server: {tls: {cert: a}}\n", "s.yaml:1:16: server.tls.cert: unknown field"},
        Bad{"server: {auth: {allowed_clients: [envoy]}}\n",
            "s.yaml:1:16: server.auth.allowed_clients: needs server.tls.client_ca_file"},
        Bad{"server: {auth: {allowed_clients: ['']}}\n",
            "s.yaml:1:35: server.auth.allowed_clients[0]: expected a certificate CN or SAN"},
        Bad{"server: {auth: {metrics: closed}}\n",
            "s.yaml:1:26: server.auth.metrics: expected open or protected"},
        Bad{"server: {auth: {token: abc}}\n", "s.yaml:1:17: server.auth.token: unknown field"},
        Bad{"store: {url: 'rediss://r:6380', tls: {cert_file: c.pem}}\n",
            "s.yaml:1:38: store.tls: expected cert_file and key_file together"},
        Bad{"store: {url: 'rediss://r:6380', tls: {server_name: 'a b'}}\n",
            "s.yaml:1:52: store.tls.server_name: expected a host name"},
        Bad{"store: {url: 'redis://r:6379', tls: {ca_file: ca.pem}}\n",
            "s.yaml:1:37: store.tls: needs a TLS store.url"}));

TEST(SecurityConfig, PathsAreRelativeToTheConfigFile) {
  const std::string dir = ::testing::TempDir();
  const std::string path = dir + "/security_config_test.yaml";
  {
    std::FILE* f = std::fopen(path.c_str(), "w");
    ASSERT_NE(f, nullptr);
    std::fputs(
        "server:\n  tls: {cert_file: s.pem, key_file: /abs/s.key}\n  auth: {token_file: t}\n"
        "store: {url: 'redis-cluster://r:7000?tls=true', tls: {ca_file: ca.pem}}\npolicies: []\n",
        f);
    std::fclose(f);
  }
  auto c = LoadConfigFile(path);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  const std::string base = path.substr(0, path.rfind('/') + 1);
  EXPECT_EQ(c->server.tls.cert_file, base + "s.pem");
  EXPECT_EQ(c->server.tls.key_file, "/abs/s.key");
  EXPECT_EQ(c->server.auth.token_file, base + "t");
  EXPECT_EQ(c->store.tls.ca_file, base + "ca.pem");
}

}  // namespace
}  // namespace caudal
