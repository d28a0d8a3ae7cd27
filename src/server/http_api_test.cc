#include "server/http_api.h"

#include <gtest/gtest.h>

#include <boost/json/parse.hpp>
#include <string>
#include <string_view>
#include <utility>

#include "server/json_keys.h"

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

// A body whose meaning depends on which of two equal keys counts is refused, at any level.
TEST(ParseCheckBody, RefusesRepeatedKeys) {
  const std::pair<std::string_view, std::string_view> cases[] = {
      {R"({"descriptors": {"api_key": "a", "api_key": "b"}})", "descriptors.api_key"},
      {R"({"descriptors": {"api_key": "a"}, "descriptors": {"api_key": "b"}})", "descriptors"},
      {R"({"cost": 1, "descriptors": {"k": "v"}, "cost": 100})", "cost"},
      {R"({"descriptors": {"k": "v", "x": {"y": 1, "y": 2}}})", "descriptors.x.y"},
      {R"({"descriptors": {"k": "v", "k\u0000": "w", "k": "v"}})", "descriptors.k"},
  };
  for (const auto& [body, path] : cases) {
    const ParsedCheck p = ParseCheckBody(body);
    ASSERT_TRUE(p.error.has_value()) << body;
    EXPECT_EQ(p.error->code, "duplicate_field") << body;
    EXPECT_EQ(p.error->status, 400);
    EXPECT_TRUE(p.error->message.starts_with(std::string(path) + ": given more than once"))
        << p.error->message;
  }
  // Equal values in different objects, and keys equal only in a prefix, are not repeats.
  const ParsedCheck ok = ParseCheckBody(R"({"descriptors": {"api_key": "a", "api_keys": "a"}})");
  EXPECT_FALSE(ok.error.has_value()) << ok.error->message;
}

TEST(FindRepeatedKey, NamesTheFirstRepeatWithItsPath) {
  EXPECT_EQ(FindRepeatedKey(R"({"a": {"b": 1}, "c": [{"d": 1, "d": 2}]})", 8), "c[].d");
  EXPECT_EQ(FindRepeatedKey(R"({"a": {"b": 1, "c": 2}, "b": 1, "c": {"b": 1}})", 8), std::nullopt);
  // A key split across the parser's parts still compares whole (escapes make parts).
  EXPECT_EQ(FindRepeatedKey(R"({"a\u0062c": 1, "abc": 2})", 8), "abc");
  // Past kMaxKeysCompared keys an object is refused for its size anyway: no quadratic scan.
  std::string big = "{";
  for (size_t i = 0; i < kMaxKeysCompared + 10; ++i) big += "\"k" + std::to_string(i) + "\": 1,";
  big += "\"k70\": 2}";
  EXPECT_EQ(FindRepeatedKey(big, 8), std::nullopt);
  EXPECT_EQ(FindRepeatedKey("not json", 8), std::nullopt);
}

// One pass builds the value json::parse builds, refuses what it refuses (depth, trailing text),
// and still reports the repeat, which comes before any syntax error only in the text.
TEST(ParseJson, BuildsTheValueJsonParseBuildsInOnePass) {
  for (std::string_view text :
       {R"({"descriptors": {"api_key": "a\u00e9b", "n": [1, -2, 3.5e3, 18446744073709551615]},
           "cost": 7, "refund": false, "x": null})",
        R"([{"a": {"b": [true, "s"]}}])", R"("just a string")", R"( 42 )"}) {
    const ParsedJson parsed = ParseJson(text, 8);
    ASSERT_FALSE(parsed.error) << text << ": " << parsed.error.message();
    EXPECT_EQ(parsed.value, boost::json::parse(text)) << text;
    EXPECT_EQ(parsed.repeated, std::nullopt);
  }
  EXPECT_TRUE(ParseJson(R"({"a": 1} x)", 8).error);
  EXPECT_TRUE(ParseJson(R"({"a": {"b": {"c": 1}}})", 2).error);
  EXPECT_FALSE(ParseJson(R"({"a": {"b": {"c": 1}}})", 3).error);
  const ParsedJson repeated = ParseJson(R"({"a": 1, "a": 2, "b": {"c": 1, "c": 2}})", 8);
  ASSERT_FALSE(repeated.error);
  EXPECT_EQ(repeated.repeated, "a");  // the first repeat
  const ParsedJson broken = ParseJson(R"({"a": 1, "a": 2, )", 8);
  EXPECT_TRUE(broken.error);  // not JSON: that is what a body is refused for first
}

// Identities are compared byte by byte: bytes that other layers would read differently are
// refused, so that nothing is charged for them.
TEST(ParseCheckBody, RefusesIdentitiesWithNulControlOrIllFormedUtf8) {
  for (std::string_view body : {
           R"({"descriptors": {"api_key": "a\u0000b"}})",  // NUL, escaped
           R"({"descriptors": {"api_key": "a\u0001"}})",   // C0
           R"({"descriptors": {"api_key": "a\tb"}})",      // HTAB
           R"({"descriptors": {"api_key": "a\nb"}})",      // LF: a log line break
           R"({"descriptors": {"api_key": "a\u007f"}})",   // DEL
           R"({"descriptors": {"api_key": "a\u0085"}})",   // C1 (NEL)
       }) {
    const ParsedCheck p = ParseCheckBody(body);
    ASSERT_TRUE(p.error.has_value()) << body;
    EXPECT_EQ(p.error->code, "invalid_descriptors") << body;
    EXPECT_TRUE(p.error->message.starts_with("descriptors.api_key: a ")) << p.error->message;
  }
  // Raw ill-formed UTF-8 and lone surrogate escapes are not JSON text at all.
  for (std::string_view body : {"{\"descriptors\": {\"api_key\": \"a\xff\"}}",
                                "{\"descriptors\": {\"api_key\": \"\xed\xa0\x80\"}}",
                                R"({"descriptors": {"api_key": "\ud800"}})"}) {
    const ParsedCheck p = ParseCheckBody(body);
    ASSERT_TRUE(p.error.has_value()) << body;
    EXPECT_TRUE(p.error->code == "invalid_json" || p.error->code == "invalid_descriptors")
        << body << ": " << p.error->code;
  }
  const ParsedCheck ok = ParseCheckBody(R"({"descriptors": {"api_key": "caf\u00e9 \u2603 ok"}})");
  EXPECT_FALSE(ok.error.has_value()) << ok.error->message;
}

TEST(IdentityValueProblem, SaysWhatAndWhere) {
  EXPECT_EQ(IdentityValueProblem("key-1"), std::nullopt);
  EXPECT_EQ(IdentityValueProblem("\xc3\xa9\xe2\x98\x83\xf0\x9f\x98\x80 "), std::nullopt);
  EXPECT_EQ(IdentityValueProblem(std::string_view("ab\0c", 4)), "a NUL character (byte 2)");
  EXPECT_EQ(IdentityValueProblem("ab\x1b"), "a control character (byte 2)");
  EXPECT_EQ(IdentityValueProblem("\xc2\x9f"), "a control character (byte 0)");
  EXPECT_EQ(IdentityValueProblem("\xc2\xa0"), std::nullopt);  // NBSP: printable
  EXPECT_EQ(IdentityValueProblem("ok\xc3"), "not well-formed UTF-8 (byte 2)");
  EXPECT_EQ(IdentityValueProblem("\xc0\xaf"), "not well-formed UTF-8 (byte 0)");      // overlong
  EXPECT_EQ(IdentityValueProblem("\xed\xa0\x80"), "not well-formed UTF-8 (byte 0)");  // surrogate
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

TEST(FromStatus, MapsTheCodeToTheHttpStatusAndTheReasonToTheErrorCode) {
  struct Case {
    Status status;
    int http;
    std::string code;
  };
  const std::vector<Case> cases = {
      {Status::InvalidArgument("m").WithReason("invalid_cost"), 400, "invalid_cost"},
      {Status::NotFound("m").WithReason("unknown_policy"), 404, "unknown_policy"},
      {Status::ResourceExhausted("m").WithReason("too_many_overrides"), 409, "too_many_overrides"},
      {Status::Unavailable("m").WithReason("store_unavailable"), 503, "store_unavailable"},
      {Status::DeadlineExceeded("m"), 503, "deadline_exceeded"},
      {Status::Internal("m"), 500, "internal"},
      {Status::InvalidArgument("m"), 400, "invalid_argument"},
  };
  for (const Case& c : cases) {
    const ApiError e = FromStatus(c.status);
    EXPECT_EQ(e.status, c.http) << c.status.ToString();
    EXPECT_EQ(e.code, c.code) << c.status.ToString();
    EXPECT_EQ(e.message, "m");
  }
}

TEST(FromEngineError, TakesTheFieldTheEngineNamesAndElseTheDescriptors) {
  const ApiError cost =
      FromEngineError(Status::InvalidArgument("cost: 6 exceeds the capacity 5 of policy \"p\"")
                          .WithReason(engine_reason::kInvalidCost));
  EXPECT_EQ(cost.status, 400);
  EXPECT_EQ(cost.code, "invalid_cost");
  const ApiError descriptors = FromEngineError(Status::InvalidArgument("cost is not named here"));
  EXPECT_EQ(descriptors.status, 400);
  EXPECT_EQ(descriptors.code, "invalid_descriptors") << "the code, not the message's words";
  EXPECT_EQ(descriptors.message, "cost is not named here");
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
  spec.limits = {
      *Limit::Create(LimitSpec::Bucket(Algorithm::kGcra, 10, {5, std::chrono::seconds(1)}))};
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
  p.decisions = {Decision{.verdict = Verdict::kDenied,
                          .limit = 10,
                          .remaining = 0,
                          .reset_after = Micros(2'000'000),
                          .retry_after = Micros(200'001)}};
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

TEST(DecisionReply, AuthStatusesReplaceOnlyTheStatus) {
  PolicySpec spec;
  spec.name = "per-key";
  spec.identity = {"api_key"};
  spec.limits = {
      *Limit::Create(LimitSpec::Bucket(Algorithm::kGcra, 10, {5, std::chrono::seconds(1)}))};
  auto set = *PolicySet::Create({spec}, {});
  CheckResult r;
  r.keepalive = set;
  r.outcome = Outcome::kDenied;
  r.retry_after = Micros(2'500'000);
  PolicyResult p;
  p.policy = &set->policies()[0];
  p.name = p.policy->spec.name;
  p.allowed = false;
  p.limits = {&p.policy->spec.limits[0]};
  p.decisions = {Decision{.verdict = Verdict::kDenied,
                          .limit = 10,
                          .remaining = 0,
                          .reset_after = Micros(2'000'000),
                          .retry_after = Micros(2'500'000)}};
  r.results.push_back(p);
  const AuthStatuses nginx{.refused = 401, .unavailable = 403};
  const Reply refused = DecisionReply(r, Endpoint::kAuth, nginx);
  EXPECT_EQ(refused.status, 401);
  EXPECT_EQ(refused.headers.Get("Retry-After").value_or(""), "3");
  EXPECT_EQ(refused.headers.Get("RateLimit").value_or(""), "\"per-key\";r=0;t=2");
  EXPECT_NE(refused.body.find("\"status\":401"), std::string::npos) << refused.body;
  r.outcome = Outcome::kUnavailable;
  const Reply unavailable = DecisionReply(r, Endpoint::kAuth, nginx);
  EXPECT_EQ(unavailable.status, 403);
  EXPECT_EQ(unavailable.headers.Get("Retry-After").value_or(""), "1");
  EXPECT_NE(unavailable.body.find("store_unavailable"), std::string::npos);
  r.outcome = Outcome::kAllowed;
  EXPECT_EQ(DecisionReply(r, Endpoint::kAuth, nginx).status, 200);
}

TEST(ParseCheckBody, ReadsCostsPerDimensionAndRefusesWhatIsAmbiguousOrOutOfRange) {
  ParsedCheck p = ParseCheckBody(
      R"({"descriptors": {"api_key": "k"}, "costs": {"requests": 1, "input_tokens": 812,
          "usd_micros": 0}})");
  ASSERT_FALSE(p.error) << p.error->message;
  ASSERT_TRUE(p.request.costs.has_value());
  EXPECT_FALSE(p.request.cost.has_value());
  ASSERT_EQ(p.request.costs->size(), 3u);
  EXPECT_EQ((*p.request.costs)[1].dimension, "input_tokens");
  EXPECT_EQ((*p.request.costs)[1].units, 812);
  EXPECT_EQ((*p.request.costs)[2].units, 0);
  const std::pair<std::string_view, std::string_view> bad[] = {
      {R"({"descriptors": {"a": "b"}, "cost": 1, "costs": {"requests": 1}})", "cost and costs"},
      {R"({"descriptors": {"a": "b"}, "costs": 5})", "costs: expected an object"},
      {R"({"descriptors": {"a": "b"}, "costs": {}})", "costs: expected 1 to 16"},
      {R"({"descriptors": {"a": "b"}, "costs": {"input_tokens": -1}})", "costs.input_tokens"},
      {R"({"descriptors": {"a": "b"}, "costs": {"input_tokens": 1.5}})",
       "costs.input_tokens: expected an integer (got a number with a fraction)"},
      {R"({"descriptors": {"a": "b"}, "costs": {"input_tokens": "3"}})", "got a string"},
      {R"({"descriptors": {"a": "b"}, "costs": {"input_tokens": 1099511627777}})",
       "from 0 to 2^40"},
      {R"({"descriptors": {"a": "b"}, "costs": {"x": 18446744073709551615}})", "from 0 to 2^40"},
      {R"({"descriptors": {"a": "b"}, "costs": {"x": 1, "x": 2}})", "more than once"},
  };
  for (const auto& [body, message] : bad) {
    ParsedCheck q = ParseCheckBody(body);
    ASSERT_TRUE(q.error.has_value()) << body;
    EXPECT_EQ(q.error->status, 400);
    EXPECT_NE(q.error->message.find(message), std::string::npos) << q.error->message;
    EXPECT_TRUE(ParsesAsJson(ErrorReply(*q.error).body));
  }
}

TEST(DecisionReply, ListsTheClosestLimitOfEachDimensionWithItsQuotaUnit) {
  PolicySpec spec;
  spec.name = "gateway";
  spec.identity = {"api_key"};
  auto limit = [](int64_t n, std::vector<std::string> d) {
    LimitSpec s = LimitSpec::Bucket(Algorithm::kTokenBucket, n, {n, std::chrono::minutes(1)});
    s.dimension = std::move(d);
    return *Limit::Create(s);
  };
  spec.limits = {limit(60, {}), limit(100'000, {"input_tokens"}), limit(1000, {"input_tokens"}),
                 limit(50'000, {"output_tokens", "input_tokens"})};
  auto set = *PolicySet::Create({spec}, {});
  CheckResult r;
  r.keepalive = set;
  PolicyResult p;
  p.policy = &set->policies()[0];
  p.name = p.policy->spec.name;
  for (const Limit& l : p.policy->spec.limits) p.limits.push_back(&l);
  auto d = [](int64_t capacity, int64_t remaining) {
    return Decision{.limit = capacity, .remaining = remaining, .reset_after = Micros(1'500'000)};
  };
  // Of the two input-token limits the second is the closer to its limit (10% left, not 50%).
  p.decisions = {d(60, 59), d(100'000, 50'000), d(1000, 100), d(50'000, 49'000)};
  r.results.push_back(p);
  const Reply reply = DecisionReply(r, Endpoint::kCheck);
  auto header = [&](std::string_view name) { return reply.headers.Get(name).value_or(""); };
  EXPECT_EQ(
      header("RateLimit-Policy"),
      "\"gateway\";q=60;w=60, \"gateway/input-tokens\";q=1000;qu=\"input-tokens\";w=60, "
      "\"gateway/input-tokens+output-tokens\";q=50000;qu=\"input-tokens+output-tokens\";w=60");
  EXPECT_EQ(header("RateLimit"),
            "\"gateway\";r=59;t=2, \"gateway/input-tokens\";r=100;t=2, "
            "\"gateway/input-tokens+output-tokens\";r=49000;t=2");
  // The JSON names each limit's dimension and what it cost.
  EXPECT_NE(reply.body.find("\"dimension\":\"input_tokens+output_tokens\""), std::string::npos)
      << reply.body;
}

}  // namespace
}  // namespace caudal::http_api
