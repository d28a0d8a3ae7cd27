#include "caudal/config/config.h"

#include <gtest/gtest.h>

#include "common/cat.h"

namespace caudal {
namespace {

using std::chrono::milliseconds;
using std::chrono::minutes;

TEST(Config, ReadsTheExamples) {
  for (const char* name : {"caudal.yaml", "caudal-redis.yaml"}) {
    auto c = LoadConfigFile(std::string(CAUDAL_SOURCE_DIR) + "/examples/" + name);
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    EXPECT_FALSE(c->policies->policies().empty());
  }
}

TEST(Config, ParsesEveryField) {
  auto c = ParseConfig(R"(
store:
  url: redis://10.0.0.1:6379
  timeout: 20ms
  on_failure: local
  instances: 4
  max_keys: 5000
server:
  http: "[::1]:9000"
  trusted_proxies: [10.0.0.0/8, "::1"]
  descriptor_headers: {api_key: X-Key, user: X-User}
  max_connections: 50
  header_timeout: 2s
  body_timeout: 3s
  idle_timeout: 30s
  threads: 2
policies:
  - name: p1
    identity: [api_key, ip]
    ip_prefix: {v4: 24, v6: 56}
    cost: 2
    shadow: true
    count_rejected: true
    on_failure: allow
    limits:
      - {algorithm: token_bucket, capacity: 100, refill: 100/1m}
      - {algorithm: sliding_window_log, limit: 10, window: 1s}
)",
                       "t.yaml");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->store.url, "redis://10.0.0.1:6379");
  EXPECT_EQ(c->store.timeout, milliseconds(20));
  EXPECT_EQ(c->store.on_failure, FailureMode::kLocal);
  EXPECT_EQ(c->store.instances, 4);
  EXPECT_EQ(c->store.max_keys, 5000);
  EXPECT_EQ(c->server.http, "[::1]:9000");
  ASSERT_EQ(c->server.trusted_proxies.size(), 2u);
  EXPECT_EQ(c->server.trusted_proxies[1].ToString(), "::1/128");
  ASSERT_EQ(c->server.descriptor_headers.size(), 2u);
  EXPECT_EQ(c->server.descriptor_headers[1].descriptor, "user");
  EXPECT_EQ(c->server.descriptor_headers[1].header, "X-User");
  EXPECT_EQ(c->server.max_connections, 50);
  EXPECT_EQ(c->server.header_timeout, std::chrono::seconds(2));
  EXPECT_EQ(c->server.threads, 2);
  const auto& p = c->policies->policies()[0];
  EXPECT_EQ(p.spec.identity, (std::vector<std::string>{"api_key", "ip"}));
  EXPECT_EQ(p.spec.ip_prefix, (IpPrefix{.v4 = 24, .v6 = 56}));
  EXPECT_EQ(p.spec.cost, 2);
  EXPECT_TRUE(p.shadow());
  EXPECT_EQ(p.spec.count_rejected, RejectedCounting::kCounted);
  EXPECT_EQ(p.on_failure, FailureMode::kAllow);
  ASSERT_EQ(p.spec.limits.size(), 2u);
  EXPECT_EQ(p.spec.limits[0].rate(), (Rate{100, minutes(1)}));
  EXPECT_EQ(p.spec.limits[1].algorithm(), Algorithm::kSlidingWindowLog);
  EXPECT_EQ(p.local_limits[0].capacity(), 25);
}

TEST(Config, LeasesAreOffUnlessStoreLeaseSetsThemAndAPolicyMayChooseItsOwn) {
  constexpr std::string_view kLimits =
      "limits: [{algorithm: token_bucket, capacity: 10, refill: 10/1s}]";
  auto off = ParseConfig(
      Cat("store: {url: 'redis://r:6379'}\npolicies: [{name: p, identity: [k], ", kLimits, "}]\n"),
      "t.yaml");
  ASSERT_TRUE(off.ok()) << off.status().ToString();
  EXPECT_FALSE(off->store.lease.enabled);
  EXPECT_FALSE(off->policies->policies()[0].lease.enabled);

  auto c = ParseConfig(Cat("store: {url: 'redis://r:6379', lease: {ttl: 1s, max_share: 0.25}}\n",
                           "policies:\n", "  - {name: a, identity: [k], ", kLimits, "}\n",
                           "  - {name: b, identity: [k], lease: off, ", kLimits, "}\n",
                           "  - {name: c, identity: [k], lease: {ttl: 50ms}, ", kLimits, "}\n"),
                       "t.yaml");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  const LeaseTerms store{.enabled = true, .ttl = std::chrono::seconds(1), .max_share_ppm = 250'000};
  EXPECT_EQ(c->store.lease, store);
  const auto& policies = c->policies->policies();
  EXPECT_EQ(policies[0].lease, store) << "store.lease, the default";
  EXPECT_FALSE(policies[1].lease.enabled) << "lease: off";
  EXPECT_EQ(policies[2].lease, (LeaseTerms{.enabled = true, .ttl = milliseconds(50)}))
      << "its own terms, the others at their defaults";

  auto bad = ParseConfig("store: {lease: {max_share: 0.5%}}\npolicies: []\n", "t.yaml");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(),
            "t.yaml:1:28: store.lease.max_share: expected a share above 0 and at most 1 such as "
            "0.1, at most 6 decimals (got \"0.5%\")");
}

TEST(Config, ReadsAShareAndItsTiersWeights) {
  auto c = ParseConfig(R"(
policies:
  - name: provider-tokens
    identity: [tenant]
    share: {fairness: proportional, window: 5s}
    limits: [{algorithm: token_bucket, capacity: 2000000, refill: 2000000/1m}]
    overrides:
      - {match: {tenant: acme}, weight: 4}
  - name: defaults
    identity: [tenant]
    share: {}
    limits: [{algorithm: fixed_window, limit: 5, window: 1s}]
  - name: own
    identity: [tenant]
    limits: [{algorithm: gcra, capacity: 5, refill: 5/s}]
)",
                       "t.yaml");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  const auto policies = c->policies->policies();
  ASSERT_EQ(policies.size(), 3u);
  ASSERT_TRUE(policies[0].share().has_value());
  EXPECT_EQ(policies[0].share()->fairness, Fairness::kProportional);
  EXPECT_EQ(policies[0].share()->window, std::chrono::seconds(5));
  EXPECT_EQ(policies[0].spec.overrides[0].weight, 4);
  EXPECT_TRUE(policies[0].spec.overrides[0].limits.empty());
  EXPECT_EQ(policies[0].tiers[0].weight, 4);
  EXPECT_EQ(policies[1].share(),
            (ShareTerms{.fairness = Fairness::kMaxMin, .window = std::chrono::seconds(2)}));
  EXPECT_FALSE(policies[2].share().has_value());
}

TEST(Config, DefaultsWhenSectionsAreOmitted) {
  auto c = ParseConfig("policies: []\n", "t.yaml");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->store.url, "memory://");
  EXPECT_EQ(c->store.on_failure, FailureMode::kDeny);
  EXPECT_EQ(c->server.http, "127.0.0.1:8080");
  EXPECT_TRUE(c->server.trusted_proxies.empty());
}

TEST(Config, ReadsThePerClientConnectionCap) {
  auto c = ParseConfig(
      "server:\n  max_connections_per_client: 64\n  client_prefix: {v4: 24, v6: 48}\npolicies: "
      "[]\n",
      "t.yaml");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->server.max_connections_per_client, 64);
  EXPECT_EQ(c->server.client_prefix, (IpPrefix{.v4 = 24, .v6 = 48}));
  auto d = ParseConfig("policies: []\n", "t.yaml");
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->server.max_connections_per_client, 0);  // a quarter of max_connections
  EXPECT_EQ(d->server.client_prefix, (IpPrefix{.v4 = 32, .v6 = 64}));
}

TEST(Config, ReadsTheStatusPageSwitch) {
  auto on = ParseConfig("policies: []\n", "t.yaml");
  ASSERT_TRUE(on.ok());
  EXPECT_TRUE(on->server.status_page);  // the listener is loopback by default
  auto off = ParseConfig("server: {status_page: false}\npolicies: []\n", "t.yaml");
  ASSERT_TRUE(off.ok()) << off.status().ToString();
  EXPECT_FALSE(off->server.status_page);
}

TEST(Config, ReadsTheEnvoyService) {
  auto c = ParseConfig(
      "server: {grpc: '127.0.0.1:8081'}\nenvoy_config: ratelimit/\n"
      "envoy: {descriptor_mode: consume_each, deny_as: unavailable, "
      "headers: none, max_concurrent_calls: 64, response_dynamic_metadata: true}\n"
      "policies: []\n",
      "t.yaml");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->server.grpc, "127.0.0.1:8081");
  EXPECT_EQ(c->envoy.config, "ratelimit/");
  EXPECT_EQ(c->envoy.descriptor_mode, DescriptorMode::kConsumeEach);
  EXPECT_EQ(c->envoy.deny_as, envoy::DenyAs::kUnavailable);
  EXPECT_EQ(c->envoy.headers, envoy::HeaderMode::kNone);
  EXPECT_EQ(c->envoy.max_concurrent_calls, 64);
  EXPECT_TRUE(c->envoy.response_dynamic_metadata);
  auto d = ParseConfig("policies: []\n", "t.yaml");
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->server.grpc, "");  // not served unless asked for
  EXPECT_EQ(d->envoy.descriptor_mode, DescriptorMode::kAllOrNothing);
  EXPECT_EQ(d->envoy.deny_as, envoy::DenyAs::kOverLimit);
  EXPECT_FALSE(d->envoy.response_dynamic_metadata);
  // A config that serves only Envoy needs no policies.
  auto e = ParseConfig("server: {grpc: '127.0.0.1:8081'}\nenvoy_config: ratelimit/\n", "t.yaml");
  ASSERT_TRUE(e.ok()) << e.status().ToString();
  EXPECT_TRUE(e->policies->policies().empty());
}

struct BadCase {
  const char* yaml;
  const char* error;  // the exact prefix: file:line:column: field
};

class ConfigErrors : public ::testing::TestWithParam<BadCase> {};

TEST_P(ConfigErrors, NameFileLineColumnAndField) {
  auto c = ParseConfig(GetParam().yaml, "bad.yaml");
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(c.status().message().rfind(GetParam().error, 0), 0u) << c.status().message();
}

constexpr const char* kPolicyHead = "policies:\n  - name: p\n    identity: [api_key]\n";

INSTANTIATE_TEST_SUITE_P(
    All, ConfigErrors,
    ::testing::Values(
        BadCase{"policies: [\n", "bad.yaml:2:1: not valid YAML"},
        BadCase{"server: {grpc: nowhere}\npolicies: []\n", "bad.yaml:1:16: server.grpc: expected"},
        BadCase{"envoy: {descriptor_mode: some}\npolicies: []\n",
                "bad.yaml:1:26: envoy.descriptor_mode: expected all_or_nothing or consume_each"},
        BadCase{"envoy: {refunds: true}\npolicies: []\n",
                "bad.yaml:1:9: envoy.refunds: unknown field"},
        BadCase{"store: {}\n", "bad.yaml:1:1: policies: missing"},
        BadCase{"polices: []\n", "bad.yaml:1:1: polices: unknown field (expected one of: store"},
        BadCase{"store: {url: http://x}\npolicies: []\n",
                "bad.yaml:1:14: store.url: \"http://x\" is not a store URL (expected memory://"},
        BadCase{"store: {timeout: fast}\npolicies: []\n",
                "bad.yaml:1:18: store.timeout: expected a duration"},
        BadCase{"store: {on_failure: open}\npolicies: []\n",
                "bad.yaml:1:21: store.on_failure: expected allow, deny or local"},
        BadCase{"store: {instances: 0}\npolicies: []\n",
                "bad.yaml:1:20: store.instances: expected an integer from 1"},
        BadCase{"server: {http: 'localhost'}\npolicies: []\n",
                "bad.yaml:1:16: server.http: expected host:port"},
        BadCase{"server: {trusted_proxies: [10.0.0.1/8]}\npolicies: []\n",
                "bad.yaml:1:28: server.trusted_proxies[0]: \"10.0.0.1/8\" has host bits set"},
        BadCase{"server: {status_page: yes}\npolicies: []\n",
                "bad.yaml:1:23: server.status_page: expected true or false (got \"yes\")"},
        BadCase{"server: {max_connections_per_client: 0}\npolicies: []\n",
                "bad.yaml:1:38: server.max_connections_per_client: expected an integer from 1"},
        BadCase{"server: {idempotency: {window: 5s}}\npolicies: []\n",
                "bad.yaml:1:23: server.idempotency.in_progress: must not be longer than window"},
        BadCase{"server: {idempotency: {window: 5s, in_progress: 6s}}\npolicies: []\n",
                "bad.yaml:1:49: server.idempotency.in_progress: must not be longer than window"},
        BadCase{"server: {client_prefix: {v4: 33}}\npolicies: []\n",
                "bad.yaml:1:30: server.client_prefix.v4: expected an integer from 0 to 32"},
        BadCase{"server: {client_prefix: {v5: 1}}\npolicies: []\n",
                "bad.yaml:1:26: server.client_prefix.v5: unknown field"},
        BadCase{"server: {descriptor_headers: {ip: X-Real-IP}}\npolicies: []\n",
                "bad.yaml:1:31: server.descriptor_headers.ip: expected a descriptor name"},
        BadCase{"policies:\n  - name: p\n    identity: [api_key]\n",
                "bad.yaml:2:5: policies[0]: missing limits"},
        BadCase{"policies:\n  - name: p\n    identity: []\n    limits: [{algorithm: gcra, "
                "capacity: 1, refill: 1/s}]\n",
                "bad.yaml:3:15: policies[0].identity: expected 1 to 8"},
        BadCase{"policies:\n  - name: p q\n    identity: [a]\n    limits: [{algorithm: gcra, "
                "capacity: 1, refill: 1/s}]\n",
                "bad.yaml:2:11: policies[0].name: expected 1 to 64 characters"},
        BadCase{"policies:\n  - name: p\n    identity: [api_key]\n    limits:\n      - {algorithm: "
                "leaky, capacity: 1}\n",
                "bad.yaml:5:21: policies[0].limits[0].algorithm: unknown algorithm \"leaky\""},
        BadCase{"policies:\n  - name: p\n    identity: [api_key]\n    limits:\n      - {algorithm: "
                "token_bucket, capacity: 1, refill: fast}\n",
                "bad.yaml:5:56: policies[0].limits[0].refill: expected \"<count>/<duration>\""},
        BadCase{"policies:\n  - name: p\n    identity: [api_key]\n    limits:\n      - {algorithm: "
                "token_bucket, capacity: x, refill: 1/s}\n",
                "bad.yaml:5:45: policies[0].limits[0].capacity: expected an integer from 1"},
        BadCase{"policies:\n  - name: p\n    identity: [api_key]\n    limits:\n      - {algorithm: "
                "token_bucket, limit: 1, window: 1s}\n",
                "bad.yaml:5:35: policies[0].limits[0].limit: unknown field (expected one of: "
                "algorithm, capacity, refill, dimension)"},
        BadCase{"policies:\n  - name: p\n    identity: [api_key]\n    cost: 5\n    limits:\n      "
                "- {algorithm: fixed_window, limit: 2, window: 1s}\n",
                "bad.yaml:4:11: policies[0].cost: the default cost must be between 1 and the "
                "smallest capacity"},
        BadCase{"policies:\n  - name: p\n    identity: [api_key]\n    shadow: yes\n    limits: "
                "[{algorithm: gcra, capacity: 1, refill: 1/s}]\n",
                "bad.yaml:4:13: policies[0].shadow: expected true or false"},
        BadCase{
            "policies:\n  - {name: p, identity: [a], limits: [{algorithm: gcra, capacity: 1, "
            "refill: 1/s}]}\n"
            "  - {name: p, identity: [b], limits: [{algorithm: gcra, capacity: 1, refill: 1/s}]}\n",
            "bad.yaml:3:12: policies[1].name: \"p\" is already the name of policies[0]"},
        BadCase{"store: {on_failure: local, instances: 2}\npolicies:\n  - {name: p, identity: [a], "
                "limits: [{algorithm: gcra, capacity: 1, refill: 1/365d}]}\n",
                "bad.yaml:3:39: policies[0].limits[0]: divided among 2 instances"},
        BadCase{"policies:\n  - name: p\n    identity: [api_key]\n    identity: [ip]\n    limits: "
                "[{algorithm: gcra, capacity: 1, refill: 1/s}]\n",
                "bad.yaml:4:5: policies[0].identity: given twice"},
        BadCase{"policies:\n  - name: p\n    identity: [api_key]\n    limits: [{algorithm: gcra, "
                "capacity: 1, refill: 1/s}]\n    overrides:\n      - match: {plan: \"\"}\n"
                "        limits: [{algorithm: gcra, capacity: 5, refill: 5/s}]\n",
                "bad.yaml:6:23: policies[0].overrides[0].match.plan: expected a value of 1 to 256"},
        BadCase{"policies:\n  - name: p\n    identity: [ip]\n    limits: [{algorithm: gcra, "
                "capacity: 1, refill: 1/s}]\n    overrides:\n      - match: {ip: 10.0.0.0/33}\n"
                "        limits: [{algorithm: gcra, capacity: 5, refill: 5/s}]\n",
                "bad.yaml:6:21: policies[0].overrides[0].match.ip: expected an IP address or a "
                "CIDR block"},
        BadCase{"policies:\n  - name: p\n    identity: [api_key]\n    cost: 2\n    limits: "
                "[{algorithm: gcra, capacity: 4, refill: 1/s}]\n    overrides:\n      - match: "
                "{api_key: k1}\n        limits:\n          - {algorithm: gcra, capacity: 9, "
                "refill: 9/s}\n          - {algorithm: gcra, capacity: 1, refill: 1/s}\n",
                "bad.yaml:10:13: policies[0].overrides[0].limits[1]: a capacity of 1 is below the "
                "policy's cost (2)"},
        BadCase{"policies:\n  - name: p\n    identity: [api_key]\n    limits: [{algorithm: gcra, "
                "capacity: 1, refill: 1/s}]\n    overrides:\n      - match: {plan: pro}\n",
                "bad.yaml:6:9: policies[0].overrides[0]: missing limits"},
        // share: where it cannot apply, its tiers' weights, its own fields.
        BadCase{"policies:\n  - name: p\n    identity: [api_key]\n    share: {}\n    limits: "
                "[{algorithm: sliding_window_log, limit: 5, window: 1s}]\n",
                "bad.yaml:5:14: policies[0].limits[0]: share divides a rate among identities and "
                "cannot divide a sliding_window_log limit (token_bucket, gcra or fixed_window can "
                "be shared)"},
        BadCase{"policies:\n  - name: p\n    identity: [api_key]\n    share: {}\n    limits: "
                "[{algorithm: sliding_window_counter, limit: 5, window: 1s}]\n",
                "bad.yaml:5:14: policies[0].limits[0]: share divides a rate among identities and "
                "cannot divide a sliding_window_counter limit"},
        BadCase{"policies:\n  - name: p\n    identity: [api_key]\n    share: {}\n    limits: "
                "[{algorithm: concurrency, limit: 5, hold: 1s}]\n",
                "bad.yaml:5:14: policies[0].limits[0]: share divides a rate among identities and "
                "cannot divide a concurrency limit"},
        BadCase{"policies:\n  - name: p\n    identity: [api_key]\n    limits: [{algorithm: gcra, "
                "capacity: 1, refill: 1/s}]\n    overrides:\n      - {match: {plan: pro}, "
                "limits: [{algorithm: gcra, capacity: 5, refill: 5/s}], weight: 2}\n",
                "bad.yaml:6:93: policies[0].overrides[0].weight: only a policy with share takes a "
                "weight"},
        BadCase{"policies:\n  - name: p\n    identity: [api_key]\n    share: {}\n    limits: "
                "[{algorithm: gcra, capacity: 1, refill: 1/s}]\n    overrides:\n      - {match: "
                "{plan: pro}, limits: [{algorithm: gcra, capacity: 5, refill: 5/s}], weight: 2}\n",
                "bad.yaml:7:38: policies[0].overrides[0].limits: a policy with share divides its "
                "own limits among its identities: an override gives a weight, not limits"},
        BadCase{"policies:\n  - name: p\n    identity: [api_key]\n    share: {}\n    limits: "
                "[{algorithm: gcra, capacity: 1, refill: 1/s}]\n    overrides:\n      - {match: "
                "{plan: pro}}\n",
                "bad.yaml:7:9: policies[0].overrides[0].weight: missing: an override of a policy "
                "with share gives a weight (1 to 4096)"},
        BadCase{"policies:\n  - name: p\n    identity: [api_key]\n    share: {}\n    limits: "
                "[{algorithm: gcra, capacity: 1, refill: 1/s}]\n    overrides:\n      - {match: "
                "{plan: pro}, weight: 4097}\n",
                "bad.yaml:7:38: policies[0].overrides[0].weight: expected an integer from 1 to "
                "4096"},
        BadCase{"policies:\n  - name: p\n    identity: [api_key]\n    share: {fairness: fair}\n"
                "    limits: [{algorithm: gcra, capacity: 1, refill: 1/s}]\n",
                "bad.yaml:4:23: policies[0].share.fairness: expected max_min or proportional (got "
                "\"fair\")"},
        BadCase{"policies:\n  - name: p\n    identity: [api_key]\n    share: {window: 99ms}\n"
                "    limits: [{algorithm: gcra, capacity: 1, refill: 1/s}]\n",
                "bad.yaml:4:21: policies[0].share.window: expected between 100ms and 1h"},
        BadCase{"policies:\n  - name: p\n    identity: [api_key]\n    share: {window: 61m}\n"
                "    limits: [{algorithm: gcra, capacity: 1, refill: 1/s}]\n",
                "bad.yaml:4:21: policies[0].share.window: expected between 100ms and 1h"},
        BadCase{"policies:\n  - name: p\n    identity: [api_key]\n    share: {ttl: 1s}\n"
                "    limits: [{algorithm: gcra, capacity: 1, refill: 1/s}]\n",
                "bad.yaml:4:13: policies[0].share.ttl: unknown field (expected one of: fairness, "
                "window)"},
        BadCase{"policies:\n  - name: p\n    identity: [api_key]\n    limits: [{algorithm: gcra, "
                "capacity: 1, refill: 1/s}]\n    overrides:\n      - match: [plan]\n"
                "        limits: [{algorithm: gcra, capacity: 5, refill: 5/s}]\n",
                "bad.yaml:6:16: policies[0].overrides[0].match: expected a map of descriptor"}));

TEST(ConfigFile, MissingFileIsNotFound) {
  auto c = LoadConfigFile("/nonexistent/caudal.yaml");
  EXPECT_EQ(c.status().code(), StatusCode::kNotFound);
}

TEST(HostPort, ParsesAndRefuses) {
  EXPECT_EQ(ParseHostPort("127.0.0.1:8080")->second, 8080);
  EXPECT_EQ(ParseHostPort("[::1]:0")->first, "::1");
  EXPECT_EQ(ParseHostPort("localhost:80")->first, "localhost");
  for (const char* bad : {"", ":80", "127.0.0.1", "127.0.0.1:", "127.0.0.1:65536", "example.com:80",
                          "[1.2.3.4]:80", "::1:80"}) {
    EXPECT_FALSE(ParseHostPort(bad).ok()) << bad;
  }
}

}  // namespace
}  // namespace caudal
