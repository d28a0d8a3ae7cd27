// Descriptor matching and the reference's stats keys, on configs from envoyproxy/ratelimit's
// test/config/ (cited per test); the expected keys are the ones its config tests assert.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <vector>

#include "config/ratelimit_config_yaml.h"

namespace caudal::envoy {
namespace {

RateLimitConfig LoadRules(std::string_view yaml) {
  auto c = ParseRateLimitConfigText(yaml, "test.yaml");
  EXPECT_TRUE(c.ok()) << c.status().ToString();
  return c.ok() ? std::move(c).value() : RateLimitConfig();
}

struct Entries {
  std::vector<DescriptorEntry> list;
  Entries(std::initializer_list<DescriptorEntry> e) : list(e) {}
};

uint32_t Rpu(const RateLimitConfig& c, std::string_view domain, Entries e) {
  const RateLimitRule* r = c.Match(domain, e.list);
  return r == nullptr ? UINT32_MAX : r->requests_per_unit;
}

std::string StatsKey(const RateLimitConfig& c, std::string_view domain, Entries e) {
  const RuleMatch m = c.MatchDetailed(domain, e.list);
  return m.rule == nullptr ? "<no match>" : m.stats_key;
}

constexpr uint32_t kNone = UINT32_MAX;

TEST(WildcardMatch, StarMatchesAnyRunIncludingNone) {
  EXPECT_TRUE(WildcardMatch("foo*", "foo"));
  EXPECT_TRUE(WildcardMatch("foo*", "foobar"));
  EXPECT_FALSE(WildcardMatch("foo*", "fo"));
  EXPECT_TRUE(WildcardMatch("bar*b", "barb"));
  EXPECT_TRUE(WildcardMatch("bar*b", "bar123b"));
  EXPECT_FALSE(WildcardMatch("bar*b", "bara"));
  EXPECT_FALSE(WildcardMatch("bar*b", "xbarb"));
  EXPECT_FALSE(WildcardMatch("ab*ba", "aba"));  // prefix and suffix may not overlap
  EXPECT_TRUE(WildcardMatch("foo*bar*baz", "foobarbaz"));
  EXPECT_TRUE(WildcardMatch("foo*bar*baz", "foo1bar2baz"));
  EXPECT_FALSE(WildcardMatch("foo*bar*baz", "foo123baz"));
  EXPECT_FALSE(WildcardMatch("foo*bar*baz", "foobazbar"));
  EXPECT_TRUE(WildcardMatch("*", ""));
  EXPECT_TRUE(WildcardMatch("*-prod", "eu-prod"));
  EXPECT_TRUE(WildcardMatch("a**b", "ab"));
  EXPECT_TRUE(WildcardMatch("exact", "exact"));
  EXPECT_FALSE(WildcardMatch("exact", "exactly"));
}

// envoyproxy/ratelimit test/config/wildcard.yaml.
constexpr std::string_view kWildcard = R"(
domain: test-domain
descriptors:
  - key: wild
    value: foo*
    rate_limit: {unit: minute, requests_per_unit: 20}
  - key: noWild
    value: foo
    rate_limit: {unit: minute, requests_per_unit: 20}
  - key: noVal
    rate_limit: {unit: minute, requests_per_unit: 20}
  - key: midWild
    value: bar*b
    rate_limit: {unit: minute, requests_per_unit: 20}
  - key: multiWild
    value: foo*bar*baz
    rate_limit: {unit: minute, requests_per_unit: 10}
  - key: nestedWild
    value: val1
    descriptors:
      - key: wild
        value: goo*
        rate_limit: {unit: minute, requests_per_unit: 20}
)";

TEST(RateLimitMatch, WildcardsAnywhereInAValue) {
  const auto c = LoadRules(kWildcard);
  const std::string_view d = "test-domain";
  EXPECT_EQ(Rpu(c, d, {{"wild", "foo1"}}), 20u);
  EXPECT_EQ(Rpu(c, d, {{"wild", "bar"}}), kNone);
  EXPECT_EQ(Rpu(c, d, {{"noWild", "foo1"}}), kNone);  // no eager match without a '*'
  EXPECT_EQ(Rpu(c, d, {{"nestedWild", "val1"}, {"wild", "goo2"}}), 20u);
  EXPECT_EQ(Rpu(c, d, {{"midWild", "barab"}}), 20u);
  EXPECT_EQ(Rpu(c, d, {{"midWild", "bar123b"}}), 20u);
  EXPECT_EQ(Rpu(c, d, {{"midWild", "barb"}}), 20u);
  EXPECT_EQ(Rpu(c, d, {{"midWild", "bara"}}), kNone);
  EXPECT_EQ(Rpu(c, d, {{"midWild", "xbarb"}}), kNone);
  EXPECT_EQ(Rpu(c, d, {{"multiWild", "foo123bar456baz"}}), 10u);
  EXPECT_EQ(Rpu(c, d, {{"multiWild", "foobarbaz"}}), 10u);
  EXPECT_EQ(Rpu(c, d, {{"multiWild", "foo123baz"}}), kNone);
  EXPECT_EQ(Rpu(c, d, {{"multiWild", "bar456baz"}}), kNone);
  // Stats keys name the pattern, so every matching value shares one.
  EXPECT_EQ(StatsKey(c, d, {{"noVal", "foo1"}}), "test-domain.noVal");
  EXPECT_EQ(StatsKey(c, d, {{"wild", "foo1"}}), "test-domain.wild_foo*");
  EXPECT_EQ(StatsKey(c, d, {{"nestedWild", "val1"}, {"wild", "goo2"}}),
            "test-domain.nestedWild_val1.wild_goo*");
  EXPECT_EQ(StatsKey(c, d, {{"midWild", "bar123b"}}), "test-domain.midWild_bar*b");
  EXPECT_EQ(StatsKey(c, d, {{"multiWild", "foobarbaz"}}), "test-domain.multiWild_foo*bar*baz");
}

TEST(RateLimitMatch, ExactValueThenFirstWildcardInFileOrderThenTheKeyDefault) {
  const auto c = LoadRules(R"(
domain: d
descriptors:
  - key: path
    value: "/foo*"
    rate_limit: {unit: minute, requests_per_unit: 20}
  - key: path
    value: "/foo/exact"
    rate_limit: {unit: minute, requests_per_unit: 7}
  - key: path
    value: "/f*"
    rate_limit: {unit: minute, requests_per_unit: 5}
  - key: path
    rate_limit: {unit: minute, requests_per_unit: 99}
)");
  EXPECT_EQ(Rpu(c, "d", {{"path", "/foo/bar"}}), 20u);  // both wildcards match: the first
  EXPECT_EQ(Rpu(c, "d", {{"path", "/foo/exact"}}), 7u);
  EXPECT_EQ(Rpu(c, "d", {{"path", "/fx"}}), 5u);
  EXPECT_EQ(Rpu(c, "d", {{"path", "/bar"}}), 99u);
  EXPECT_EQ(Rpu(c, "d", {{"path", ""}}), 99u);  // an empty value falls to the default
  EXPECT_EQ(Rpu(c, "d", {{"other", "/foo/bar"}}), kNone);
  EXPECT_EQ(Rpu(c, "unknown", {{"path", "/foo"}}), kNone);
  EXPECT_EQ(c.Match("d", std::vector<DescriptorEntry>{}), nullptr);
}

// The reference files descriptors under "key_value", so an entry (a, b) also finds a descriptor
// whose key is "a_b"; a key with a '*' is a wildcard over "key_value" too.
TEST(RateLimitMatch, CompositeKeysAsTheReferenceBuildsThem) {
  const auto c = LoadRules(R"(
domain: d
descriptors:
  - key: a_b
    rate_limit: {unit: minute, requests_per_unit: 3}
  - key: svc*
    rate_limit: {unit: minute, requests_per_unit: 4}
)");
  EXPECT_EQ(Rpu(c, "d", {{"a_b", "anything"}}), 3u);
  EXPECT_EQ(Rpu(c, "d", {{"a", "b"}}), 3u);
  EXPECT_EQ(Rpu(c, "d", {{"svc1", "x"}}), 4u);
  EXPECT_EQ(Rpu(c, "d", {{"sv", "x"}}), kNone);
}

// envoyproxy/ratelimit test/config/basic_config.yaml (part), with the stats keys its tests expect.
TEST(RateLimitMatch, StatsKeysFollowThePathTakenAndDetailedMetricAddsValues) {
  const auto c = LoadRules(R"(
domain: test-domain
descriptors:
  - key: key1
    value: value1
    descriptors:
      - key: subkey1
        rate_limit: {unit: second, requests_per_unit: 5}
      - key: subkey1
        value: subvalue1
        rate_limit: {unit: second, requests_per_unit: 10}
  - key: key2
    rate_limit: {unit: minute, requests_per_unit: 20}
  - key: key7
    detailed_metric: true
    rate_limit: {unit: minute, requests_per_unit: 70}
)");
  const std::string_view d = "test-domain";
  EXPECT_EQ(StatsKey(c, d, {{"key1", "value1"}, {"subkey1", "something"}}),
            "test-domain.key1_value1.subkey1");
  EXPECT_EQ(StatsKey(c, d, {{"key1", "value1"}, {"subkey1", "subvalue1"}}),
            "test-domain.key1_value1.subkey1_subvalue1");
  EXPECT_EQ(StatsKey(c, d, {{"key2", "something"}}), "test-domain.key2");
  EXPECT_EQ(StatsKey(c, d, {{"key7", "unspecified_value"}}), "test-domain.key7_unspecified_value");
  EXPECT_EQ(StatsKey(c, d, {{"key7", "another_value"}}), "test-domain.key7_another_value");
  EXPECT_EQ(StatsKey(c, d, {{"key2", "x"}, {"deeper", "y"}}), "<no match>");
  EXPECT_EQ(RateLimitConfig::OverrideStatsKey(
                d, std::vector<DescriptorEntry>{{"key1", "value1"}, {"subkey1", "something"}}),
            "test-domain.key1_value1.subkey1_something");
  EXPECT_EQ(RateLimitConfig::OverrideStatsKey(
                d, std::vector<DescriptorEntry>{{"key1", ""}, {"subkey1", "x"}}),
            "test-domain.key1.subkey1_x");
}

// value_to_metric: the request's value at that level, the key alone elsewhere (config_test.go's
// TestValueToMetric_* cases).
TEST(RateLimitMatch, ValueToMetricPutsTheRequestsValueInTheStatsKey) {
  const auto c = LoadRules(R"(
domain: d
descriptors:
  - key: route
    value_to_metric: true
    descriptors:
      - key: http_method
        value_to_metric: true
        descriptors:
          - key: subject_id
            rate_limit: {unit: minute, requests_per_unit: 60}
  - key: k1
    descriptors:
      - key: k2
        value_to_metric: true
        descriptors:
          - key: k3
            rate_limit: {unit: second, requests_per_unit: 1}
  - key: user
    value_to_metric: true
    descriptors:
      - key: action
        value: read*
        value_to_metric: true
        descriptors:
          - key: resource
            detailed_metric: false
            rate_limit: {unit: minute, requests_per_unit: 100}
  - key: leaf
    value_to_metric: true
    descriptors:
      - key: id
        detailed_metric: true
        rate_limit: {unit: minute, requests_per_unit: 1}
)");
  EXPECT_EQ(StatsKey(c, "d", {{"route", "draw"}, {"http_method", "GET"}, {"subject_id", "123"}}),
            "d.route_draw.http_method_GET.subject_id");
  EXPECT_EQ(StatsKey(c, "d", {{"route", ""}, {"http_method", "GET"}, {"subject_id", "123"}}),
            "d.route.http_method_GET.subject_id");
  EXPECT_EQ(StatsKey(c, "d", {{"k1", "X"}, {"k2", "Y"}, {"k3", "Z"}}), "d.k1.k2_Y.k3");
  EXPECT_EQ(StatsKey(c, "d", {{"user", "alice"}, {"action", "readfile"}, {"resource", "doc"}}),
            "d.user_alice.action_readfile.resource");
  // detailed_metric at the leaf wins: every value, value_to_metric or not.
  EXPECT_EQ(StatsKey(c, "d", {{"leaf", "a"}, {"id", "7"}}), "d.leaf_a.id_7");
}

// envoyproxy/ratelimit test/config/share_threshold.yaml (part): one counter, and one stats key,
// for every value a share_threshold wildcard matches.
TEST(RateLimitMatch, ShareThresholdCountsEveryMatchingValueAsThePattern) {
  const auto c = LoadRules(R"(
domain: test-domain
descriptors:
  - key: files
    value: files/*
    share_threshold: true
    rate_limit: {unit: minute, requests_per_unit: 100}
  - key: files
    value: top/*
    share_threshold: true
    descriptors:
      - key: files
        value: nested/*
        share_threshold: true
        rate_limit: {unit: minute, requests_per_unit: 300}
  - key: route
    value: api/*
    share_threshold: true
    value_to_metric: true
    descriptors:
      - key: method
        rate_limit: {unit: minute, requests_per_unit: 60}
  - key: service
    value: svc/*
    share_threshold: true
    descriptors:
      - key: endpoint
        detailed_metric: true
        rate_limit: {unit: minute, requests_per_unit: 80}
  - key: path
    value: path/*
    share_threshold: true
    descriptors:
      - key: file
        value: file/*
        descriptors:
          - key: type
            rate_limit: {unit: minute, requests_per_unit: 120}
  - key: file
    value: test1
    rate_limit: {unit: minute, requests_per_unit: 50}
  - key: file
    value: test*
    share_threshold: true
    rate_limit: {unit: minute, requests_per_unit: 100}
  - key: tenant
    value: t*prod
    share_threshold: true
    descriptors:
      - key: resource
        value: res*v2
        share_threshold: true
        rate_limit: {unit: minute, requests_per_unit: 60}
)");
  const std::string_view d = "test-domain";
  for (std::string_view value : {"files/a.pdf", "files/b.csv"}) {
    const std::vector<DescriptorEntry> e = {{"files", value}};
    const RuleMatch m = c.MatchDetailed(d, e);
    ASSERT_NE(m.rule, nullptr);
    EXPECT_EQ(m.stats_key, "test-domain.files_files/*");
    EXPECT_EQ(m.counter_values, std::vector<std::string_view>{"files/*"});
  }
  const std::vector<DescriptorEntry> nested = {{"files", "top/a"}, {"files", "nested/b"}};
  const RuleMatch n = c.MatchDetailed(d, nested);
  EXPECT_EQ(n.stats_key, "test-domain.files_top/*.files_nested/*");
  EXPECT_EQ(n.counter_values, (std::vector<std::string_view>{"top/*", "nested/*"}));
  EXPECT_EQ(StatsKey(c, d, {{"route", "api/v1"}, {"method", "GET"}}),
            "test-domain.route_api/*.method");
  EXPECT_EQ(StatsKey(c, d, {{"service", "svc/user"}, {"endpoint", "get"}}),
            "test-domain.service_svc/*.endpoint_get");
  const std::vector<DescriptorEntry> mixed = {
      {"path", "path/foo"}, {"file", "file/doc1"}, {"type", "pdf"}};
  const RuleMatch p = c.MatchDetailed(d, mixed);
  EXPECT_EQ(p.stats_key, "test-domain.path_path/*.file_file/*.type");
  // Only the share_threshold level shares: the other wildcard still counts each value apart.
  EXPECT_EQ(p.counter_values, (std::vector<std::string_view>{"path/*", "file/doc1", "pdf"}));
  // An exact value is not shared.
  const std::vector<DescriptorEntry> exact = {{"file", "test1"}};
  const RuleMatch t1 = c.MatchDetailed(d, exact);
  EXPECT_EQ(t1.rule->requests_per_unit, 50u);
  EXPECT_EQ(t1.stats_key, "test-domain.file_test1");
  EXPECT_EQ(t1.counter_values, std::vector<std::string_view>{"test1"});
  EXPECT_EQ(StatsKey(c, d, {{"file", "test23"}}), "test-domain.file_test*");
  EXPECT_EQ(StatsKey(c, d, {{"tenant", "t1prod"}, {"resource", "resAv2"}}),
            "test-domain.tenant_t*prod.resource_res*v2");
}

}  // namespace
}  // namespace caudal::envoy
