#include "caudal/envoy/ratelimit_config_yaml.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <vector>

namespace caudal::envoy {
namespace {

using ::testing::HasSubstr;

RateLimitConfig Load(std::string_view yaml) {
  auto c = ParseRateLimitConfigText(yaml, "test.yaml");
  EXPECT_TRUE(c.ok()) << c.status().ToString();
  return std::move(c).value();
}

std::string LoadError(std::string_view yaml) {
  auto c = ParseRateLimitConfigText(yaml, "test.yaml");
  EXPECT_FALSE(c.ok()) << "loaded: " << yaml;
  return c.ok() ? "" : c.status().message();
}

const RateLimitRule* Match(const RateLimitConfig& c, std::string_view domain,
                           std::vector<DescriptorEntry> entries) {
  return c.Match(domain, entries);
}

// The reference's documented example: a default per key, overridden for one value.
constexpr std::string_view kPerIp = R"(
domain: edge_proxy_per_ip
descriptors:
  - key: remote_address
    rate_limit:
      unit: second
      requests_per_unit: 10
  - key: remote_address
    value: 50.0.0.5
    rate_limit:
      unit: second
      requests_per_unit: 0
)";

TEST(RateLimitConfig, ExactValueBeatsTheKeyDefault) {
  const auto c = Load(kPerIp);
  const auto* def = Match(c, "edge_proxy_per_ip", {{"remote_address", "10.0.0.1"}});
  ASSERT_NE(def, nullptr);
  EXPECT_EQ(def->requests_per_unit, 10u);
  ASSERT_TRUE(def->limit.has_value());
  EXPECT_EQ(def->limit->algorithm(), Algorithm::kFixedWindow);
  EXPECT_EQ(def->limit->capacity(), 10);
  EXPECT_EQ(def->limit->window(), std::chrono::seconds(1));
  const auto* banned = Match(c, "edge_proxy_per_ip", {{"remote_address", "50.0.0.5"}});
  ASSERT_NE(banned, nullptr);
  EXPECT_TRUE(banned->blocks_all());
  EXPECT_EQ(Match(c, "edge_proxy_per_ip", {{"other", "x"}}), nullptr);
  EXPECT_EQ(Match(c, "unknown", {{"remote_address", "1"}}), nullptr);
  EXPECT_TRUE(c.HasDomain("edge_proxy_per_ip"));
  EXPECT_FALSE(c.HasDomain("unknown"));
}

// The reference's messaging example: nested descriptors, a limit only at the leaf.
constexpr std::string_view kMessaging = R"(
domain: messaging
descriptors:
  - key: message_type
    value: marketing
    descriptors:
      - key: to_number
        rate_limit:
          unit: day
          requests_per_unit: 5
  - key: to_number
    rate_limit:
      unit: day
      requests_per_unit: 100
)";

TEST(RateLimitConfig, NestedDescriptorsApplyOnlyAtTheRequestsLastEntry) {
  const auto c = Load(kMessaging);
  const auto* leaf =
      Match(c, "messaging", {{"message_type", "marketing"}, {"to_number", "2061234567"}});
  ASSERT_NE(leaf, nullptr);
  EXPECT_EQ(leaf->requests_per_unit, 5u);
  EXPECT_EQ(leaf->unit, Unit::kDay);
  EXPECT_EQ(Match(c, "messaging", {{"message_type", "marketing"}}), nullptr);
  EXPECT_EQ(Match(c, "messaging", {{"to_number", "2061234567"}})->requests_per_unit, 100u);
  // Deeper than the configuration: no limit, as in the reference.
  EXPECT_EQ(Match(c, "messaging", {{"to_number", "1"}, {"extra", "x"}}), nullptr);
  EXPECT_EQ(Match(c, "messaging", {{"message_type", "other"}, {"to_number", "1"}}), nullptr);
}

TEST(RateLimitConfig, WildcardValuesMatchByPrefixAfterExactValues) {
  const auto c = Load(R"(
domain: wild
descriptors:
  - key: path
    value: /foo*
    rate_limit: {unit: minute, requests_per_unit: 20}
  - key: path
    value: /foo/exact
    rate_limit: {unit: minute, requests_per_unit: 7}
  - key: path
    rate_limit: {unit: minute, requests_per_unit: 99}
)");
  EXPECT_EQ(Match(c, "wild", {{"path", "/foo/bar"}})->requests_per_unit, 20u);
  EXPECT_EQ(Match(c, "wild", {{"path", "/foo"}})->requests_per_unit, 20u);
  EXPECT_EQ(Match(c, "wild", {{"path", "/foo/exact"}})->requests_per_unit, 7u);
  EXPECT_EQ(Match(c, "wild", {{"path", "/bar"}})->requests_per_unit, 99u);
  EXPECT_EQ(Match(c, "wild", {{"other", "/foo/bar"}}), nullptr);
}

TEST(RateLimitConfig, ReadsEveryReferenceField) {
  const auto c = Load(R"(
domain: all
descriptors:
  - key: a
    rate_limit:
      unit: HOUR
      requests_per_unit: 3
      name: a_limit
      replaces:
        - name: b_limit
    shadow_mode: true
    detailed_metric: true
  - key: b
    rate_limit:
      unlimited: true
  - key: m
    rate_limit: {unit: month, requests_per_unit: 1}
  - key: y
    rate_limit: {unit: year, requests_per_unit: 1}
)");
  const auto* a = Match(c, "all", {{"a", "1"}});
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->name, "a_limit");
  EXPECT_EQ(a->unit, Unit::kHour);
  EXPECT_EQ(a->replaces, std::vector<std::string>{"b_limit"});
  EXPECT_TRUE(a->shadow_mode);
  EXPECT_TRUE(a->detailed_metric);
  EXPECT_EQ(a->source, "test.yaml:4");
  const auto* b = Match(c, "all", {{"b", "1"}});
  EXPECT_TRUE(b->unlimited);
  EXPECT_FALSE(b->limit.has_value());
  EXPECT_EQ(Match(c, "all", {{"m", "1"}})->limit->window(), std::chrono::hours(24 * 30));
  EXPECT_EQ(Match(c, "all", {{"y", "1"}})->limit->window(), std::chrono::hours(24 * 365));
}

TEST(RateLimitConfig, CaudalAlgorithmsAreAnExtensionDefaultingToFixedWindow) {
  const auto c = Load(R"(
domain: algo
descriptors:
  - key: tb
    rate_limit: {unit: second, requests_per_unit: 10, algorithm: token_bucket, capacity: 50}
  - key: gcra
    rate_limit: {unit: minute, requests_per_unit: 60, algorithm: gcra}
  - key: swc
    rate_limit: {unit: minute, requests_per_unit: 60, algorithm: sliding_window_counter}
)");
  const auto& tb = *Match(c, "algo", {{"tb", "x"}})->limit;
  EXPECT_EQ(tb.algorithm(), Algorithm::kTokenBucket);
  EXPECT_EQ(tb.capacity(), 50);
  EXPECT_EQ(tb.rate(), (Rate{.count = 10, .period = std::chrono::seconds(1)}));
  const auto& g = *Match(c, "algo", {{"gcra", "x"}})->limit;
  EXPECT_EQ(g.algorithm(), Algorithm::kGcra);
  EXPECT_EQ(g.capacity(), 60);
  EXPECT_EQ(Match(c, "algo", {{"swc", "x"}})->limit->algorithm(),
            Algorithm::kSlidingWindowCounter);
}

TEST(RateLimitConfig, UnknownFieldsAreRefusedByNameWithFileAndLine) {
  EXPECT_EQ(LoadError("domain: d\ndescriptors:\n  - key: a\n    value_regex: x\n"),
            "test.yaml:4: field 'value_regex': unknown field in descriptor; caudal does not "
            "support it (known: key, value, rate_limit, descriptors, shadow_mode, "
            "detailed_metric)");
  EXPECT_THAT(LoadError("domain: d\ndescriptors:\n  - key: a\n    rate_limit: {unit: second, "
                        "requests_per_unit: 1, burst: 3}\n"),
              HasSubstr("test.yaml:4: field 'burst': unknown field in rate_limit"));
  EXPECT_THAT(LoadError("domain: d\nextra: 1\n"), HasSubstr("test.yaml:2: field 'extra'"));
}

TEST(RateLimitConfig, InvalidValuesAreRefusedWithTheField) {
  const auto err = [](std::string_view descriptor) {
    return LoadError("domain: d\ndescriptors:\n  - " + std::string(descriptor) + "\n");
  };
  EXPECT_THAT(err("key: a\n    rate_limit: {unit: fortnight, requests_per_unit: 1}"),
              HasSubstr("test.yaml:4: field 'unit': invalid unit 'fortnight'"));
  EXPECT_THAT(err("key: a\n    rate_limit: {unit: week, requests_per_unit: 1}"),
              HasSubstr("field 'unit': 'week'"));
  EXPECT_THAT(err("key: a\n    rate_limit: {requests_per_unit: 1}"), HasSubstr("'unit': missing"));
  EXPECT_THAT(err("key: a\n    rate_limit: {unit: second, requests_per_unit: -1}"),
              HasSubstr("'requests_per_unit': must be an integer"));
  EXPECT_THAT(err("key: a\n    rate_limit: {unit: second, requests_per_unit: 4294967296}"),
              HasSubstr("'requests_per_unit': must be an integer"));
  EXPECT_THAT(err("key: a\n    rate_limit: {unlimited: true, unit: second}"),
              HasSubstr("'unit': must not be set when unlimited"));
  EXPECT_THAT(err("key: a\n    rate_limit: {unit: second, requests_per_unit: 1, algorithm: x}"),
              HasSubstr("'algorithm'"));
  EXPECT_THAT(err("key: a\n    rate_limit: {unit: second, requests_per_unit: 5, capacity: 9}"),
              HasSubstr("capacity applies to token_bucket and gcra"));
  EXPECT_THAT(err("key: a\n    rate_limit: {unit: second, requests_per_unit: 1, name: n, "
                  "replaces: [{name: n}]}"),
              HasSubstr("cannot replace itself"));
  EXPECT_THAT(err("key: a\n    rate_limit: {unit: second, requests_per_unit: 1, "
                  "replaces: [{name: ''}]}"),
              HasSubstr("empty name"));
  EXPECT_THAT(err("value: x"), HasSubstr("field 'key': a descriptor needs a non-empty key"));
  EXPECT_THAT(err("key: a\n    shadow_mode: maybe"), HasSubstr("'shadow_mode': must be true"));
  EXPECT_THAT(err("key: a\n  - key: a"), HasSubstr("test.yaml:4: duplicate descriptor key 'a'"));
  EXPECT_THAT(LoadError("descriptors: []\n"), HasSubstr("field 'domain': missing or empty"));
  EXPECT_THAT(LoadError("domain: [unclosed\n"), HasSubstr("test.yaml:2: malformed YAML"));
  EXPECT_THAT(LoadError("- just a list\n"), HasSubstr("must be a mapping"));
}

TEST(RateLimitConfig, LoadsADirectoryOneDomainPerFileAndRefusesDuplicates) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() /
                       ("caudal-envoy-config-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  std::ofstream(dir / "a.yaml") << "domain: a\ndescriptors:\n  - key: k\n    rate_limit: "
                                   "{unit: second, requests_per_unit: 1}\n";
  std::ofstream(dir / "b.yml") << "domain: b\n";
  std::ofstream(dir / "notes.txt") << "not yaml: [";
  auto c = LoadRateLimitConfig(dir.string());
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->DomainCount(), 2u);
  EXPECT_NE(c->Match("a", std::vector<DescriptorEntry>{{"k", "v"}}), nullptr);
  EXPECT_TRUE(c->HasDomain("b"));

  std::ofstream(dir / "c.yaml") << "domain: a\n";
  auto dup = LoadRateLimitConfig(dir.string());
  ASSERT_FALSE(dup.ok());
  EXPECT_THAT(dup.status().message(), HasSubstr("c.yaml:1: field 'domain': domain 'a' is "
                                                "already defined in"));
  EXPECT_THAT(dup.status().message(), HasSubstr("a.yaml"));

  auto single = LoadRateLimitConfig((dir / "a.yaml").string());
  ASSERT_TRUE(single.ok());
  EXPECT_EQ(single->DomainCount(), 1u);
  EXPECT_FALSE(LoadRateLimitConfig((dir / "missing.yaml").string()).ok());
  fs::remove_all(dir);
}

}  // namespace
}  // namespace caudal::envoy
