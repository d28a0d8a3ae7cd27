#include "server/http_api.h"

#include <gtest/gtest.h>

#include <boost/json/parse.hpp>
#include <string>
#include <string_view>

namespace caudal::http_api {
namespace {

IpAddress Ip(const char* s) { return *IpAddress::Parse(s); }

TEST(ClientAddress, TrustsForwardedForOnlyFromTrustedPeers) {
  const std::vector<CidrBlock> trusted = {*CidrBlock::Parse("10.0.0.0/8")};
  EXPECT_EQ(ClientAddress(Ip("192.0.2.1"), "198.51.100.1", trusted).ToString(), "192.0.2.1");
  EXPECT_EQ(ClientAddress(Ip("10.1.1.1"), "198.51.100.1", trusted).ToString(), "198.51.100.1");
  EXPECT_EQ(ClientAddress(Ip("10.1.1.1"), "6.6.6.6, 198.51.100.1 , 10.2.2.2", trusted).ToString(),
            "198.51.100.1");
  EXPECT_EQ(ClientAddress(Ip("10.1.1.1"), "10.3.3.3,10.2.2.2", trusted).ToString(), "10.3.3.3");
  EXPECT_EQ(ClientAddress(Ip("10.1.1.1"), "junk, 10.2.2.2", trusted).ToString(), "10.2.2.2");
  EXPECT_EQ(ClientAddress(Ip("10.1.1.1"), "", trusted).ToString(), "10.1.1.1");
  EXPECT_EQ(ClientAddress(Ip("10.1.1.1"), "2001:db8::5", trusted).ToString(), "2001:db8::5");
}

TEST(CeilSeconds, RoundsUpAndNeverToZeroForAWait) {
  EXPECT_EQ(CeilSeconds(Micros(0)), 0);
  EXPECT_EQ(CeilSeconds(Micros(1)), 1);
  EXPECT_EQ(CeilSeconds(Micros(1'000'000)), 1);
  EXPECT_EQ(CeilSeconds(Micros(1'000'001)), 2);
}

TEST(ParseCheckBody, ReadsDescriptorsAndCost) {
  ParsedCheck p = ParseCheckBody(R"({"descriptors": {"api_key": "k1", "ip": "::1"}, "cost": 3})");
  ASSERT_FALSE(p.error.has_value()) << p.error->message;
  ASSERT_EQ(p.request.descriptors.size(), 2u);
  EXPECT_EQ(p.request.descriptors[1].name, "ip");
  EXPECT_EQ(p.request.cost, 3);
  p = ParseCheckBody(R"({"descriptors": {"a": "b"}})");
  EXPECT_FALSE(p.request.cost.has_value());
  p = ParseCheckBody(R"({"descriptors": {"a": "b"}, "cost": 1e3})");
  ASSERT_TRUE(p.error.has_value());
  EXPECT_EQ(p.error->code, "invalid_cost");
  p = ParseCheckBody(std::string(40, '[') + std::string(40, ']'));
  ASSERT_TRUE(p.error.has_value());
  EXPECT_EQ(p.error->code, "invalid_json");
}

// Error messages quote what the client sent; the reply must stay valid JSON (RFC 8259 §8.1: UTF-8)
// whatever bytes that was.
bool ParsesAsJson(const std::string& text) {
  boost::json::error_code ec;
  boost::json::parse(text, ec);
  return !ec;
}

TEST(ErrorReply, StaysValidJsonWhateverBytesTheMessageQuotes) {
  for (std::string_view bad : {"path \"/\xff\xfe\"", "\xc3", "\xe0\x80\x80", "\xed\xa0\x80",
                               "\xf4\x90\x80\x80", "ok \xc3\xa9 then \x80"}) {
    const Reply r = ErrorReply({.status = 404, .code = "not_found", .message = std::string(bad)});
    EXPECT_TRUE(ParsesAsJson(r.body)) << r.body;
    EXPECT_NE(r.body.find("\xef\xbf\xbd"), std::string::npos) << r.body;  // U+FFFD
  }
  const Reply fine = ErrorReply({.code = "x", .message = "caf\xc3\xa9 \xf0\x9f\x98\x80"});
  EXPECT_NE(fine.body.find("caf\xc3\xa9 \xf0\x9f\x98\x80"), std::string::npos) << fine.body;
}

TEST(ParseCheckBody, CutsLongNamesBetweenCharacters) {
  // 63 ASCII bytes, then "é" across bytes 64 and 65: a cut at 64 bytes would split it.
  const std::string name = std::string(63, 'e') + "\xc3\xa9" + "tail";
  for (const std::string& body :
       {R"({"descriptors": {")" + name + R"(": 1}})", R"({")" + name + R"(": 1})"}) {
    const ParsedCheck p = ParseCheckBody(body);
    ASSERT_TRUE(p.error.has_value()) << body;
    EXPECT_NE(p.error->message.find(std::string(63, 'e')), std::string::npos);
    EXPECT_EQ(p.error->message.find("\xc3"), std::string::npos) << p.error->message;
    EXPECT_TRUE(ParsesAsJson(ErrorReply(*p.error).body));
  }
}

TEST(DecisionReply, RefusalCarriesHeadersAndProblem) {
  PolicySpec spec;
  spec.name = "per-key";
  spec.identity = {"api_key"};
  spec.limits = {*Limit::Create(LimitSpec::Bucket(Algorithm::kGcra, 10, {5, std::chrono::seconds(1)}))};
  auto set = *PolicySet::Create({spec}, {});
  CheckResult r;
  r.keepalive = set;
  r.outcome = Outcome::kDenied;
  r.retry_after = Micros(200'001);
  PolicyResult p;
  p.policy = &set->policies()[0];
  p.name = p.policy->spec.name;
  p.allowed = false;
  p.limits = {&p.policy->spec.limits[0]};
  p.decisions = {Decision{.verdict = Verdict::kDenied, .limit = 10, .remaining = 0,
                       .reset_after = Micros(2'000'000), .retry_after = Micros(200'001)}};
  r.results.push_back(p);
  const Reply reply = DecisionReply(r, Endpoint::kAuth);
  EXPECT_EQ(reply.status, 429);
  EXPECT_EQ(reply.content_type, "application/problem+json");
  auto header = [&](std::string_view name) { return reply.headers.Get(name).value_or(""); };
  EXPECT_EQ(header("RateLimit-Policy"), "\"per-key\";q=10;w=2");
  EXPECT_EQ(header("RateLimit"), "\"per-key\";r=0;t=2");
  EXPECT_EQ(header("Retry-After"), "1");
  EXPECT_NE(reply.body.find("\"violated_policies\":[\"per-key\"]"), std::string::npos);
}

}  // namespace
}  // namespace caudal::http_api
