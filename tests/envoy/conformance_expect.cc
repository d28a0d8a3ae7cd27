#include "envoy/conformance_expect.h"

#include <gmock/gmock.h>
#include <google/protobuf/struct.pb.h>
#include <google/protobuf/util/message_differencer.h>
#include <gtest/gtest.h>

#include <algorithm>

#include "config/yaml11.h"

namespace caudal::envoy::conformance {
namespace {

using ::google::protobuf::Value;

void ExpectStatus(const YAML::Node& want, const RateLimitResponse::DescriptorStatus& got,
                  bool repeated) {
  ExpectKeys(
      want, "status",
      {"code", "requests_per_unit", "unit", "name", "no_limit", "remaining", "reset_seconds"});
  if (want["code"]) {
    EXPECT_EQ(RateLimitResponse::Code_Name(got.code()), want["code"].as<std::string>());
  }
  if (want["requests_per_unit"]) {
    EXPECT_EQ(got.current_limit().requests_per_unit(), want["requests_per_unit"].as<uint32_t>());
  }
  if (want["unit"]) {
    EXPECT_EQ(RateLimitResponse::RateLimit::Unit_Name(got.current_limit().unit()),
              want["unit"].as<std::string>());
  }
  if (want["name"]) {
    EXPECT_EQ(got.current_limit().name(), want["name"].as<std::string>());
  }
  if (want["no_limit"]) {
    EXPECT_EQ(!got.has_current_limit(), want["no_limit"].as<bool>());
  }
  if (want["remaining"]) {
    EXPECT_FALSE(repeated) << "'remaining' changes between repeats; give it on a single request";
    EXPECT_EQ(got.limit_remaining(), want["remaining"].as<uint32_t>());
  }
  if (want["reset_seconds"]) {
    // The reference answers whole seconds: the unit less the time since the window began.
    EXPECT_EQ(got.duration_until_reset().seconds(), want["reset_seconds"].as<int64_t>());
    EXPECT_EQ(got.duration_until_reset().nanos(), 0) << "duration_until_reset is not whole seconds";
  }
}

// A YAML value as google.protobuf.Value holds it (numbers are doubles, as in the reference's
// dynamic metadata).
Value ToValue(const YAML::Node& n) {
  Value v;
  if (n.IsNull()) {
    v.set_null_value(::google::protobuf::NULL_VALUE);
  } else if (n.IsSequence()) {
    auto* list = v.mutable_list_value();
    for (const auto& item : n) *list->add_values() = ToValue(item);
  } else if (n.IsMap()) {
    auto* fields = v.mutable_struct_value()->mutable_fields();
    for (const auto& kv : n) (*fields)[kv.first.as<std::string>()] = ToValue(kv.second);
  } else {
    using Kind = config_internal::Yaml11Scalar::Kind;
    const config_internal::Yaml11Scalar s = config_internal::Resolve(n);
    switch (s.kind) {
      case Kind::kNull:
        v.set_null_value(::google::protobuf::NULL_VALUE);
        break;
      case Kind::kBool:
        v.set_bool_value(s.boolean);
        break;
      case Kind::kInt:
      case Kind::kFloat:
        v.set_number_value(s.number);
        break;
      case Kind::kString:
        v.set_string_value(n.Scalar());
        break;
    }
  }
  return v;
}

// Each top-level field the case names must be in the reply's dynamic_metadata, equal throughout;
// fields it does not name are not compared.
void ExpectDynamicMetadata(const YAML::Node& want, const RateLimitResponse& got) {
  ASSERT_TRUE(want.IsMap()) << "dynamic_metadata: expected a map";
  ASSERT_TRUE(got.has_dynamic_metadata()) << "the reply has no dynamic_metadata";
  const auto& fields = got.dynamic_metadata().fields();
  for (const auto& kv : want) {
    const std::string key = kv.first.as<std::string>();
    SCOPED_TRACE("dynamic_metadata." + key);
    auto it = fields.find(key);
    ASSERT_NE(it, fields.end()) << "missing";
    const Value expected = ToValue(kv.second);
    EXPECT_TRUE(::google::protobuf::util::MessageDifferencer::Equals(expected, it->second))
        << "expected " << expected.ShortDebugString() << "\n     got "
        << it->second.ShortDebugString();
  }
}

void ValidateRequest(const YAML::Node& r) {
  ExpectKeys(r, "request", {"domain", "hits_addend", "descriptors"});
  for (const auto& d : r["descriptors"]) {
    ExpectKeys(d, "descriptor", {"entries", "hits_addend", "is_negative_hits", "limit"});
    if (d["limit"]) ExpectKeys(d["limit"], "limit", {"requests_per_unit", "unit"});
  }
}

void ValidateExpect(const YAML::Node& e) {
  ExpectKeys(e, "expect", {"overall", "statuses", "error", "message", "dynamic_metadata"});
}

void ValidateConfigSpec(const YAML::Node& s, std::string_view where,
                        std::initializer_list<std::string_view> more) {
  std::vector<std::string_view> allowed = {"config", "files", "load_options"};
  allowed.insert(allowed.end(), more.begin(), more.end());
  for (const auto& kv : s) {
    const std::string key = kv.first.as<std::string>();
    EXPECT_TRUE(std::find(allowed.begin(), allowed.end(), key) != allowed.end())
        << where << ": unknown key '" << key << "'";
  }
  if (s["load_options"]) ExpectKeys(s["load_options"], "load_options", {"merge_domains"});
}

}  // namespace

void ExpectKeys(const YAML::Node& n, std::string_view where,
                std::initializer_list<std::string_view> allowed) {
  if (!n.IsMap()) {
    ADD_FAILURE() << where << ": expected a map";
    return;
  }
  for (const auto& kv : n) {
    const std::string key = kv.first.as<std::string>();
    EXPECT_TRUE(std::find(allowed.begin(), allowed.end(), key) != allowed.end())
        << where << ": unknown key '" << key << "'";
  }
}

void ValidateFile(const YAML::Node& file) {
  ValidateConfigSpec(
      file, "file", {"why", "options", "start", "descriptor_modes", "cases", "rejects", "accepts"});
  if (file["options"]) {
    ExpectKeys(file["options"], "options",
               {"descriptor_mode", "headers", "response_dynamic_metadata"});
  }
  for (const auto& c : file["cases"]) {
    ExpectKeys(c, "case",
               {"name", "advance", "repeat", "load", "request", "expect", "expect_all_or_nothing",
                "expect_consume_each", "stats", "stats_all_or_nothing", "stats_consume_each"});
    if (c["load"]) ValidateConfigSpec(c["load"], "load", {});
    ValidateRequest(c["request"]);
    for (const char* e : {"expect", "expect_all_or_nothing", "expect_consume_each"}) {
      if (c[e]) ValidateExpect(c[e]);
    }
  }
  for (const auto& r : file["rejects"]) ValidateConfigSpec(r, "rejects", {"name", "error"});
  for (const auto& a : file["accepts"]) ValidateConfigSpec(a, "accepts", {"name", "domains"});
}

RateLimitRequest ToRequest(const YAML::Node& n) {
  RateLimitRequest r;
  r.set_domain(n["domain"].as<std::string>(""));
  if (n["hits_addend"]) r.set_hits_addend(n["hits_addend"].as<uint32_t>());
  for (const auto& d : n["descriptors"]) {
    auto* desc = r.add_descriptors();
    for (const auto& e : d["entries"]) {
      const std::string kv = e.as<std::string>();
      const size_t eq = kv.find('=');
      auto* entry = desc->add_entries();
      entry->set_key(kv.substr(0, eq));
      entry->set_value(eq == std::string::npos ? "" : kv.substr(eq + 1));
    }
    if (d["hits_addend"]) desc->mutable_hits_addend()->set_value(d["hits_addend"].as<uint64_t>());
    if (d["is_negative_hits"]) desc->set_is_negative_hits(d["is_negative_hits"].as<bool>());
    if (d["limit"]) {
      desc->mutable_limit()->set_requests_per_unit(d["limit"]["requests_per_unit"].as<uint32_t>());
      ::envoy::type::v3::RateLimitUnit unit{};
      EXPECT_TRUE(
          ::envoy::type::v3::RateLimitUnit_Parse(d["limit"]["unit"].as<std::string>(), &unit));
      desc->mutable_limit()->set_unit(unit);
    }
  }
  return r;
}

void CheckReply(const YAML::Node& expect, const grpc::Status& status,
                const RateLimitResponse& response, bool repeated) {
  if (expect["error"]) {
    const std::string code = expect["error"].as<std::string>();
    grpc::StatusCode want = grpc::StatusCode::UNKNOWN;
    ASSERT_TRUE(code == "INVALID_ARGUMENT" || code == "UNAVAILABLE") << "error: " << code;
    want = code == "INVALID_ARGUMENT" ? grpc::StatusCode::INVALID_ARGUMENT
                                      : grpc::StatusCode::UNAVAILABLE;
    EXPECT_EQ(status.error_code(), want) << status.error_message();
    if (expect["message"]) {
      EXPECT_THAT(status.error_message(),
                  ::testing::HasSubstr(expect["message"].as<std::string>()));
    }
    return;
  }
  ASSERT_TRUE(status.ok()) << status.error_message();
  if (expect["overall"]) {
    EXPECT_EQ(RateLimitResponse::Code_Name(response.overall_code()),
              expect["overall"].as<std::string>());
  }
  if (expect["dynamic_metadata"]) ExpectDynamicMetadata(expect["dynamic_metadata"], response);
  if (!expect["statuses"]) return;
  ASSERT_EQ(response.statuses_size(), static_cast<int>(expect["statuses"].size()));
  for (int i = 0; i < response.statuses_size(); ++i) {
    SCOPED_TRACE("status " + std::to_string(i));
    ExpectStatus(expect["statuses"][i], response.statuses(i), repeated);
  }
}

void CheckStats(const YAML::Node& stats, std::string_view prometheus_text) {
  ASSERT_TRUE(stats.IsMap()) << "stats: expected a map";
  for (const auto& kv : stats) {
    const std::string name = kv.first.as<std::string>();
    SCOPED_TRACE("stats." + name);
    const size_t dot = name.rfind('.');
    ASSERT_NE(dot, std::string::npos) << "expected <stat key>.<statistic>";
    const std::string series = "caudal_rule_hits_total{api=\"rls\",policy=\"" +
                               name.substr(0, dot) + "\",stat=\"" + name.substr(dot + 1) + "\"} ";
    const size_t at = prometheus_text.find(series);
    ASSERT_NE(at, std::string_view::npos) << "no series " << series << "in\n" << prometheus_text;
    const size_t begin = at + series.size();
    const std::string_view value =
        prometheus_text.substr(begin, prometheus_text.find('\n', begin) - begin);
    EXPECT_EQ(value, kv.second.as<std::string>());
  }
}

}  // namespace caudal::envoy::conformance
