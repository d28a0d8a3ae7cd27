// Reading envoyproxy/ratelimit's YAML: every field, YAML 1.1 scalars, and the errors (file, line,
// column, field). Matching and stats keys: ratelimit_match_test.cc.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <vector>

#include "config/ratelimit_config_yaml.h"

namespace caudal::envoy {
namespace {

using ::testing::HasSubstr;

RateLimitConfig Load(std::string_view yaml, RateLimitLoadOptions options = {}) {
  auto c = ParseRateLimitConfigText(yaml, "test.yaml", options);
  EXPECT_TRUE(c.ok()) << c.status().ToString();
  return c.ok() ? std::move(c).value() : RateLimitConfig();
}

std::string LoadError(std::string_view yaml) {
  auto c = ParseRateLimitConfigText(yaml, "test.yaml");
  EXPECT_FALSE(c.ok()) << "loaded: " << yaml;
  return c.ok() ? "" : c.status().message();
}

// One descriptor `k` whose body is `body` (indented under "  - key: k\n").
std::string Descriptor(std::string_view body) {
  return "domain: d\ndescriptors:\n  - key: k\n" + std::string(body);
}

const RateLimitRule* Match(const RateLimitConfig& c, std::string_view domain,
                           std::vector<DescriptorEntry> entries) {
  return c.Match(domain, entries);
}

TEST(RateLimitConfigYaml, ReadsEveryReferenceField) {
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
    quota_mode: true
    detailed_metric: true
  - key: b
    rate_limit:
      unlimited: true
  - key: w
    rate_limit: {unit: week, requests_per_unit: 1}
  - key: m
    rate_limit: {unit: month, requests_per_unit: 1}
  - key: y
    rate_limit: {unit: year, requests_per_unit: 1}
  - key: v
    value: "x*"
    value_to_metric: true
    share_threshold: true
    rate_limit: {unit: second, requests_per_unit: 0}
)");
  const auto* a = Match(c, "all", {{"a", "1"}});
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->name, "a_limit");
  EXPECT_EQ(a->unit, Unit::kHour);
  EXPECT_EQ(a->replaces, std::vector<std::string>{"b_limit"});
  EXPECT_TRUE(a->shadow_mode);
  EXPECT_TRUE(a->quota_mode);
  EXPECT_TRUE(a->detailed_metric);
  EXPECT_EQ(a->source, "test.yaml:4");
  const auto* b = Match(c, "all", {{"b", "1"}});
  EXPECT_TRUE(b->unlimited);
  EXPECT_FALSE(b->limit.has_value());
  const auto* w = Match(c, "all", {{"w", "1"}});
  EXPECT_EQ(w->unit, Unit::kWeek);
  EXPECT_EQ(static_cast<int>(w->unit), 7);  // the RLS API's WEEK
  EXPECT_EQ(w->limit->window(), std::chrono::hours(24 * 7));
  EXPECT_EQ(Match(c, "all", {{"m", "1"}})->limit->window(), std::chrono::hours(24 * 30));
  EXPECT_EQ(Match(c, "all", {{"y", "1"}})->limit->window(), std::chrono::hours(24 * 365));
  const auto* v = Match(c, "all", {{"v", "xyz"}});
  ASSERT_NE(v, nullptr);
  EXPECT_TRUE(v->blocks_all());
  EXPECT_FALSE(v->shadow_mode);
}

// envoyproxy/ratelimit test/config/metadata.yaml: arbitrary YAML, kept as protobuf Struct
// values (YAML 1.1 scalars: numbers become doubles, yes/no booleans, ~ null).
TEST(RateLimitConfigYaml, ARuleMayChooseItsLeases) {
  const auto c = Load(R"(
domain: d
descriptors:
  - key: a
    rate_limit: {unit: second, requests_per_unit: 5}
  - key: b
    rate_limit: {unit: second, requests_per_unit: 5, lease: off}
  - key: c
    rate_limit: {unit: second, requests_per_unit: 5, algorithm: gcra, lease: {max_share: 0.5}}
)");
  EXPECT_FALSE(Match(c, "d", {{"a", "1"}})->lease.has_value()) << "store.lease decides";
  EXPECT_EQ(Match(c, "d", {{"b", "1"}})->lease, LeaseTerms{});
  EXPECT_EQ(Match(c, "d", {{"c", "1"}})->lease,
            (LeaseTerms{.enabled = true, .max_share_ppm = 500'000}));
  EXPECT_THAT(
      LoadError(Descriptor("    rate_limit: {unit: second, requests_per_unit: 5, "
                           "lease: {ttl: 1h}}\n")),
      ::testing::HasSubstr("descriptors[0].rate_limit.lease.ttl: expected between 1ms and 10s"));
}

// always_charge: on the algorithms that count past their limit; refused, naming the field,
// where nothing is counted (unlimited, requests_per_unit 0), where the algorithm cannot overdraw
// (the sliding windows) and beside a lease (an always-charged rule never leases).
TEST(RateLimitConfigYaml, ARuleMayBeAlwaysCharged) {
  const auto c = Load(R"(
domain: d
descriptors:
  - key: a
    rate_limit: {unit: second, requests_per_unit: 5}
  - key: b
    rate_limit: {unit: second, requests_per_unit: 5, always_charge: true}
  - key: c
    rate_limit: {unit: minute, requests_per_unit: 5, algorithm: token_bucket, capacity: 50,
                 always_charge: true}
  - key: e
    rate_limit: {unit: minute, requests_per_unit: 5, algorithm: gcra, always_charge: yes,
                 lease: off}
  - key: f
    rate_limit: {unlimited: true, always_charge: false}
)");
  EXPECT_FALSE(Match(c, "d", {{"a", "1"}})->always_charge);
  EXPECT_TRUE(Match(c, "d", {{"b", "1"}})->always_charge);
  EXPECT_TRUE(Match(c, "d", {{"c", "1"}})->always_charge);
  EXPECT_EQ(Match(c, "d", {{"c", "1"}})->limit->algorithm(), Algorithm::kTokenBucket);
  EXPECT_TRUE(Match(c, "d", {{"e", "1"}})->always_charge);
  EXPECT_FALSE(Match(c, "d", {{"f", "1"}})->always_charge);

  EXPECT_EQ(LoadError(Descriptor("    rate_limit: {unlimited: true, always_charge: true}\n")),
            "test.yaml:4:50: descriptors[0].rate_limit.always_charge: means nothing when "
            "unlimited is true");
  EXPECT_EQ(LoadError(Descriptor("    rate_limit: {unit: second, requests_per_unit: 0, "
                                 "always_charge: true}\n")),
            "test.yaml:4:69: descriptors[0].rate_limit.always_charge: means nothing when "
            "requests_per_unit is 0 (nothing is counted)");
  for (const char* window : {"sliding_window_log", "sliding_window_counter"}) {
    EXPECT_THAT(
        LoadError(Descriptor(std::string("    rate_limit: {unit: second, requests_per_unit: 5, "
                                         "always_charge: true, algorithm: ") +
                             window + "}\n")),
        HasSubstr(
            std::string("descriptors[0].rate_limit.always_charge: an always_charge rule needs "
                        "an algorithm that "
                        "counts past its limit (token_bucket, gcra or fixed_window), not ") +
            window));
  }
  for (const char* lease : {"on", "{ttl: 1s}"}) {
    EXPECT_THAT(LoadError(Descriptor(std::string("    rate_limit: {unit: second, "
                                                 "requests_per_unit: 5, always_charge: true, "
                                                 "lease: ") +
                                     lease + "}\n")),
                HasSubstr("descriptors[0].rate_limit.lease: an always_charge rule never leases"));
  }
  EXPECT_THAT(LoadError(Descriptor("    rate_limit: {unit: second, requests_per_unit: 5, "
                                   "always_charge: maybe}\n")),
              HasSubstr("descriptors[0].rate_limit.always_charge"));
}

// A month is 30 days from the epoch, as the reference's; `calendar` makes it the calendar's.
TEST(RateLimitConfigYaml, ARuleMayCountCalendarWindows) {
  const auto c = Load(R"(
domain: d
descriptors:
  - key: m
    rate_limit: {unit: month, requests_per_unit: 1000}
  - key: cm
    rate_limit: {unit: month, requests_per_unit: 1000, calendar: {time_zone: UTC}}
  - key: cw
    rate_limit: {unit: week, requests_per_unit: 5, calendar: {time_zone: Europe/Madrid}}
)");
  const RateLimitRule* plain = Match(c, "d", {{"m", "x"}});
  ASSERT_TRUE(plain != nullptr && plain->limit.has_value());
  EXPECT_FALSE(plain->limit->calendar().has_value());
  EXPECT_EQ(plain->limit->window(), std::chrono::hours(24 * 30));
  const RateLimitRule* month = Match(c, "d", {{"cm", "x"}});
  ASSERT_TRUE(month != nullptr && month->limit.has_value());
  ASSERT_TRUE(month->limit->calendar().has_value());
  EXPECT_EQ(month->limit->calendar()->unit(), CalendarUnit::kMonth);
  EXPECT_EQ(month->limit->calendar()->time_zone(), "UTC");
  EXPECT_EQ(month->limit->capacity(), 1000);
  const RateLimitRule* week = Match(c, "d", {{"cw", "x"}});
  ASSERT_TRUE(week != nullptr && week->limit.has_value());
  EXPECT_EQ(week->limit->ToString(), "fixed_window limit=5 window=1 week calendar=Europe/Madrid");

  EXPECT_THAT(
      LoadError(Descriptor(
          "    rate_limit: {unit: hour, requests_per_unit: 1, calendar: {time_zone: UTC}}\n")),
      HasSubstr("calendar"));
  EXPECT_THAT(LoadError(Descriptor("    rate_limit: {unit: day, requests_per_unit: 1, calendar: "
                                   "{time_zone: Nowhere/Land}}\n")),
              HasSubstr("Nowhere/Land"));
  EXPECT_THAT(LoadError(Descriptor("    rate_limit: {unit: day, requests_per_unit: 1, algorithm: "
                                   "gcra, calendar: {time_zone: UTC}}\n")),
              HasSubstr("fixed_window"));
}

TEST(RateLimitConfigYaml, MetadataKeepsTheYamlStructure) {
  const auto c = Load(R"(
domain: test-domain
descriptors:
  - key: key1
    value: value1
    descriptors:
      - key: subkey1
        rate_limit:
          unit: second
          requests_per_unit: 5
        metadata:
          name: service_1
  - key: key2
    rate_limit:
      unit: minute
      requests_per_unit: 20
    metadata:
      service_with_quota:
        name: service_2
      kinds: [1, 2.5, yes, ~, "quoted", {nested: true}]
      1: one
)");
  const auto* sub = Match(c, "test-domain", {{"key1", "value1"}, {"subkey1", "x"}});
  ASSERT_NE(sub, nullptr);
  ASSERT_EQ(sub->metadata.count("name"), 1u);
  EXPECT_EQ(sub->metadata.at("name").kind, MetadataValue{std::string("service_1")}.kind);
  const auto* key2 = Match(c, "test-domain", {{"key2", "x"}});
  ASSERT_NE(key2, nullptr);
  const auto& service = std::get<Metadata>(key2->metadata.at("service_with_quota").kind);
  EXPECT_EQ(std::get<std::string>(service.at("name").kind), "service_2");
  const auto& kinds = std::get<MetadataValue::List>(key2->metadata.at("kinds").kind);
  ASSERT_EQ(kinds.size(), 6u);
  EXPECT_EQ(std::get<double>(kinds[0].kind), 1.0);
  EXPECT_EQ(std::get<double>(kinds[1].kind), 2.5);
  EXPECT_EQ(std::get<bool>(kinds[2].kind), true);
  EXPECT_TRUE(std::holds_alternative<std::monostate>(kinds[3].kind));
  EXPECT_EQ(std::get<std::string>(kinds[4].kind), "quoted");
  EXPECT_EQ(std::get<bool>(std::get<Metadata>(kinds[5].kind).at("nested").kind), true);
  EXPECT_EQ(std::get<std::string>(key2->metadata.at("1").kind), "one");
}

TEST(RateLimitConfigYaml, MetadataMergesAsTheReferenceMergesPassedDescriptors) {
  Metadata into = {{"a", {std::string("first")}}, {"s", {Metadata{{"x", {1.0}}}}}};
  const Metadata from = {
      {"a", {std::string("second")}}, {"b", {true}}, {"s", {Metadata{{"x", {2.0}}, {"y", {3.0}}}}}};
  MergeMetadata(into, from);
  EXPECT_EQ(std::get<std::string>(into.at("a").kind), "first");  // the first keeps its value
  EXPECT_EQ(std::get<bool>(into.at("b").kind), true);
  const auto& s = std::get<Metadata>(into.at("s").kind);  // structs merge
  EXPECT_EQ(std::get<double>(s.at("x").kind), 1.0);
  EXPECT_EQ(std::get<double>(s.at("y").kind), 3.0);
}

// Unquoted text means what YAML 1.1 (the reference's yaml.v2) makes of it.
TEST(RateLimitConfigYaml, ScalarsReadAsYaml11) {
  const auto c = Load(R"(
domain: 123
descriptors:
  - key: a
    value: 500
    shadow_mode: yes
    rate_limit: {unit: minute, requests_per_unit: 0x10}
  - key: b
    value: on
    shadow_mode: Off
    rate_limit: {unit: minute, requests_per_unit: 1_000}
  - key: c
    shadow_mode:
    rate_limit: {unit: minute, requests_per_unit: +7}
)");
  const auto* a = Match(c, "123", {{"a", "500"}});
  ASSERT_NE(a, nullptr);
  EXPECT_TRUE(a->shadow_mode);
  EXPECT_EQ(a->requests_per_unit, 16u);
  const auto* b = Match(c, "123", {{"b", "on"}});  // text where a string is wanted
  ASSERT_NE(b, nullptr);
  EXPECT_FALSE(b->shadow_mode);
  EXPECT_EQ(b->requests_per_unit, 1000u);
  EXPECT_FALSE(Match(c, "123", {{"c", "x"}})->shadow_mode);  // null reads as false
  EXPECT_EQ(Match(c, "123", {{"c", "x"}})->requests_per_unit, 7u);

  EXPECT_THAT(LoadError(Descriptor("    shadow_mode: 'true'\n")),
              HasSubstr("test.yaml:4:18: descriptors[0].shadow_mode: expected true or false"));
  EXPECT_THAT(LoadError(Descriptor("    rate_limit: {unit: second, requests_per_unit: '5'}\n")),
              HasSubstr("descriptors[0].rate_limit.requests_per_unit: expected an integer"));
  EXPECT_THAT(LoadError(Descriptor("    rate_limit: {unit: second, requests_per_unit: 5.0}\n")),
              HasSubstr("descriptors[0].rate_limit.requests_per_unit: expected an integer"));
  EXPECT_THAT(LoadError(Descriptor("    value: 1.5\n")),
              HasSubstr("test.yaml:4:12: descriptors[0].value: expected a string, got \"1.5\", "
                        "which YAML 1.1 reads as a floating-point number"));
  EXPECT_THAT(LoadError(Descriptor("    value: '1.5'\n    rate_limit: {unit: second, "
                                   "requests_per_unit: -1}\n")),
              HasSubstr("test.yaml:5:51: descriptors[0].rate_limit.requests_per_unit: expected an "
                        "integer from 0 to 4294967295 (got \"-1\")"));
  EXPECT_THAT(LoadError(Descriptor("    rate_limit: {unit: second, requests_per_unit: "
                                   "4294967296}\n")),
              HasSubstr("requests_per_unit: expected an integer"));
}

TEST(RateLimitConfigYaml, UnknownAndMisplacedFieldsAreRefusedWithFileLineAndField) {
  EXPECT_EQ(LoadError("domain: d\ndescriptors:\n  - key: a\n    value_regex: x\n"),
            "test.yaml:4:5: descriptors[0].value_regex: unknown field (expected one of: key, "
            "value, rate_limit, descriptors, shadow_mode, quota_mode, detailed_metric, "
            "value_to_metric, share_threshold, metadata)");
  EXPECT_THAT(LoadError(Descriptor("    rate_limit: {unit: second, requests_per_unit: 1, "
                                   "burst: 3}\n")),
              HasSubstr("test.yaml:4:54: descriptors[0].rate_limit.burst: unknown field"));
  EXPECT_THAT(LoadError("domain: d\nextra: 1\n"), HasSubstr("test.yaml:2:1: extra: unknown field"));
  // Fields the reference knows, where it would ignore them.
  EXPECT_THAT(LoadError(Descriptor("    unit: second\n")),
              HasSubstr("test.yaml:4:5: descriptors[0].unit: does not belong here (it goes in "
                        "rate_limit); envoyproxy/ratelimit would ignore it"));
  EXPECT_THAT(LoadError(Descriptor("    rate_limit: {unit: second, requests_per_unit: 1, "
                                   "shadow_mode: true}\n")),
              HasSubstr("descriptors[0].rate_limit.shadow_mode: does not belong here (it goes in "
                        "a descriptor)"));
  EXPECT_THAT(LoadError("domain: d\nname: config\n"),
              HasSubstr("test.yaml:2:1: name: does not belong here (it goes in rate_limit)"));
  EXPECT_THAT(LoadError(Descriptor("    shadow_mode: true\n    shadow_mode: false\n")),
              HasSubstr("test.yaml:5:5: descriptors[0].shadow_mode: given twice"));
}

TEST(RateLimitConfigYaml, InvalidValuesAreRefusedWithTheReferencesReasons) {
  EXPECT_EQ(LoadError(Descriptor("    rate_limit: {unit: fortnight, requests_per_unit: 1}\n")),
            "test.yaml:4:24: descriptors[0].rate_limit.unit: invalid rate limit unit 'fortnight' "
            "(expected second, minute, hour, day, week, month or year)");
  EXPECT_THAT(LoadError(Descriptor("    rate_limit: {unit: unknown, requests_per_unit: 1}\n")),
              HasSubstr("invalid rate limit unit 'unknown'"));
  EXPECT_THAT(LoadError(Descriptor("    rate_limit: {requests_per_unit: 1}\n")),
              HasSubstr("descriptors[0].rate_limit.unit: missing"));
  EXPECT_THAT(LoadError(Descriptor("    rate_limit: {unit: second}\n")),
              HasSubstr("descriptors[0].rate_limit.requests_per_unit: missing (envoyproxy/"
                        "ratelimit would read it as 0"));
  EXPECT_THAT(LoadError(Descriptor("    rate_limit: {unlimited: true, unit: second}\n")),
              HasSubstr("rate_limit.unit: should not specify rate limit unit when unlimited"));
  EXPECT_THAT(LoadError(Descriptor("    rate_limit: {unlimited: true, requests_per_unit: 5}\n")),
              HasSubstr("rate_limit.requests_per_unit: means nothing when unlimited is true"));
  EXPECT_THAT(LoadError(Descriptor("    rate_limit: {unit: second, requests_per_unit: 1, "
                                   "algorithm: x}\n")),
              HasSubstr("descriptors[0].rate_limit.algorithm"));
  EXPECT_THAT(LoadError(Descriptor("    rate_limit: {unit: second, requests_per_unit: 5, "
                                   "capacity: 9}\n")),
              HasSubstr("capacity applies to token_bucket and gcra"));
  EXPECT_THAT(LoadError(Descriptor("    rate_limit: {unit: second, requests_per_unit: 1, name: n, "
                                   "replaces: [{name: n}]}\n")),
              HasSubstr("rate_limit.replaces[0]: replaces should not contain name of same "
                        "descriptor"));
  EXPECT_THAT(LoadError(Descriptor("    rate_limit: {unit: second, requests_per_unit: 1, "
                                   "replaces: [{name: ~}]}\n")),
              HasSubstr("rate_limit.replaces[0]: should not have an empty replaces entry"));
  EXPECT_THAT(LoadError(Descriptor("    rate_limit: {unit: second, requests_per_unit: 1, "
                                   "replaces: [x]}\n")),
              HasSubstr("rate_limit.replaces[0]: expected a map with name"));
  EXPECT_THAT(LoadError("domain: d\ndescriptors:\n  - value: x\n"),
              HasSubstr("test.yaml:3:5: descriptors[0].key: descriptor has empty key"));
  EXPECT_THAT(LoadError(Descriptor("    share_threshold: true\n")),
              HasSubstr("test.yaml:4:22: descriptors[0].share_threshold: share_threshold can only "
                        "be used with wildcard values (containing '*'), but found key 'k'"));
  EXPECT_THAT(LoadError(Descriptor("    metadata: [a]\n")),
              HasSubstr("descriptors[0].metadata: expected a map"));
  EXPECT_THAT(LoadError("domain: d\ndescriptors:\n  - key: a\n    value: b\n  - key: a_b\n"),
              HasSubstr("test.yaml:5:5: descriptors[1]: duplicate descriptor composite key "
                        "'d.a_b'"));
  EXPECT_THAT(LoadError("domain: d\ndescriptors:\n  - key: a\n    descriptors:\n      - key: b\n"
                        "      - key: b\n"),
              HasSubstr("test.yaml:6:9: descriptors[0].descriptors[1]: duplicate descriptor "
                        "composite key 'd.a.b'"));
  EXPECT_THAT(LoadError("descriptors: []\n"),
              HasSubstr("test.yaml:1:1: domain: config file cannot have empty domain"));
  EXPECT_THAT(LoadError(""), HasSubstr("domain: config file cannot have empty domain"));
  EXPECT_THAT(LoadError("domain: [unclosed\n"), HasSubstr("test.yaml:2:1: malformed YAML"));
  EXPECT_THAT(LoadError("- just a list\n"), HasSubstr("test.yaml:1:1: expected a map"));
  EXPECT_THAT(LoadError("domain: d\ndescriptors:\n  - a\n"),
              HasSubstr("test.yaml:3:5: descriptors[0]: expected a map"));
  EXPECT_EQ(LoadError("domain: d\ndescriptors:\n  - key: caf\xC3\n"),
            "test.yaml:3:13: not valid UTF-8 (YAML text must be)");
}

TEST(RateLimitConfigYaml, ConfigsThatServeOnlyToBlockOrToNameStillLoad) {
  // envoyproxy/ratelimit test/config/basic_config.yaml's shapes: a value with no limit (allowed
  // through), a limit with children, an empty descriptors list.
  const auto c = Load(R"(
domain: test-domain
descriptors:
  - key: key2
    value: value3
  - key: key5
    value: value5
    rate_limit: {unit: day, requests_per_unit: 15}
    descriptors:
      - key: subkey5
        value: subvalue5
        rate_limit: {unit: day, requests_per_unit: 25}
  - key: empty
    descriptors:
)");
  EXPECT_EQ(Match(c, "test-domain", {{"key2", "value3"}}), nullptr);
  EXPECT_EQ(Match(c, "test-domain", {{"key5", "value5"}})->requests_per_unit, 15u);
  EXPECT_EQ(
      Match(c, "test-domain", {{"key5", "value5"}, {"subkey5", "subvalue5"}})->requests_per_unit,
      25u);
  EXPECT_EQ(Match(c, "test-domain", {{"key5", "value5"}, {"subkey5", "other"}}), nullptr);
  EXPECT_EQ(Match(c, "test-domain", {{"empty", "x"}}), nullptr);
}

class TempDir {
 public:
  TempDir()
      : path_(std::filesystem::temp_directory_path() /
              ("caudal-envoy-config-" + std::to_string(::getpid()) + "-" +
               ::testing::UnitTest::GetInstance()->current_test_info()->name())) {
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  const std::filesystem::path& path() const { return path_; }
  void Write(const std::string& name, std::string_view text) const {
    std::ofstream(path_ / name) << text;
  }

 private:
  std::filesystem::path path_;
};

TEST(RateLimitConfigYaml, LoadsADirectoryOneDomainPerFileAndRefusesDuplicates) {
  TempDir dir;
  dir.Write("a.yaml",
            "domain: a\ndescriptors:\n  - key: k\n    rate_limit: "
            "{unit: second, requests_per_unit: 1}\n");
  dir.Write("b.yml", "domain: b\n");
  dir.Write("notes.txt", "not yaml: [");
  auto c = LoadRateLimitConfig(dir.path().string());
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->DomainCount(), 2u);
  EXPECT_NE(c->Match("a", std::vector<DescriptorEntry>{{"k", "v"}}), nullptr);
  EXPECT_TRUE(c->HasDomain("b"));

  dir.Write("c.yaml", "domain: a\n");
  auto dup = LoadRateLimitConfig(dir.path().string());
  ASSERT_FALSE(dup.ok());
  EXPECT_THAT(dup.status().message(),
              HasSubstr("c.yaml:1:9: domain: duplicate domain 'a' in config file (already "
                        "defined in "));
  EXPECT_THAT(dup.status().message(), HasSubstr("a.yaml)"));

  auto single = LoadRateLimitConfig((dir.path() / "a.yaml").string());
  ASSERT_TRUE(single.ok());
  EXPECT_EQ(single->DomainCount(), 1u);
  EXPECT_FALSE(LoadRateLimitConfig((dir.path() / "missing.yaml").string()).ok());
}

// envoyproxy/ratelimit test/config/merge_domain_key{1,2}.yaml, with MERGE_DOMAIN_CONFIG.
TEST(RateLimitConfigYaml, MergesFilesOfOneDomainWhenAsked) {
  TempDir dir;
  dir.Write("merge_domain_key1.yaml",
            "domain: test-domain\ndescriptors:\n  - key: key1\n"
            "    value: value1\n    rate_limit:\n      unit: minute\n"
            "      requests_per_unit: 10\n");
  dir.Write("merge_domain_key2.yaml",
            "domain: test-domain\ndescriptors:\n  - key: key2\n"
            "    value: value2\n    rate_limit:\n      unit: minute\n"
            "      requests_per_unit: 20\n");
  EXPECT_FALSE(LoadRateLimitConfig(dir.path().string()).ok());
  auto merged = LoadRateLimitConfig(dir.path().string(), {.merge_domains = true});
  ASSERT_TRUE(merged.ok()) << merged.status().ToString();
  EXPECT_EQ(merged->Match("test-domain", std::vector<DescriptorEntry>{{"key1", "value1"}})
                ->requests_per_unit,
            10u);
  EXPECT_EQ(merged->Match("test-domain", std::vector<DescriptorEntry>{{"key2", "value2"}})
                ->requests_per_unit,
            20u);
  // The same descriptor in both files is still a duplicate, named in the second file.
  dir.Write("merge_domain_key3.yaml",
            "domain: test-domain\ndescriptors:\n  - key: key1\n"
            "    value: value1\n");
  auto dup = LoadRateLimitConfig(dir.path().string(), {.merge_domains = true});
  ASSERT_FALSE(dup.ok());
  EXPECT_THAT(dup.status().message(),
              HasSubstr("merge_domain_key3.yaml:3:5: descriptors[0]: duplicate descriptor "
                        "composite key 'test-domain.key1_value1'"));
}

// A Kubernetes ConfigMap volume: each file is a symbolic link through `..data`, itself a link to
// the current timestamped directory.
TEST(RateLimitConfigYaml, LoadsAConfigMapVolumeThroughItsLinks) {
  namespace fs = std::filesystem;
  TempDir dir;
  fs::create_directory(dir.path() / "..2024_01_01_00_00_00.1");
  dir.Write("..2024_01_01_00_00_00.1/basic.yaml", "domain: basic\n");
  fs::create_directory_symlink("..2024_01_01_00_00_00.1", dir.path() / "..data");
  fs::create_symlink("..data/basic.yaml", dir.path() / "basic.yaml");
  auto c = LoadRateLimitConfig(dir.path().string());
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->DomainCount(), 1u);
  EXPECT_TRUE(c->HasDomain("basic"));
}

}  // namespace
}  // namespace caudal::envoy
