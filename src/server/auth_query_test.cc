// /v1/auth's query: the statuses a proxy asks for, and every way of asking wrongly.
#include "server/auth_query.h"

#include <gtest/gtest.h>

#include <string>

namespace caudal::http_api {
namespace {

TEST(ParseAuthQuery, DefaultsTo429And503) {
  for (const char* target : {"/v1/auth", "/v1/auth?", "/v1/auth?&"}) {
    const ParsedAuthQuery q = ParseAuthQuery(target);
    ASSERT_FALSE(q.error.has_value()) << target << ": " << q.error->message;
    EXPECT_EQ(q.statuses.refused, 429);
    EXPECT_EQ(q.statuses.unavailable, 503);
  }
}

TEST(ParseAuthQuery, ReadsBothStatuses) {
  const ParsedAuthQuery q = ParseAuthQuery("/v1/auth?refused_status=401&unavailable_status=403");
  ASSERT_FALSE(q.error.has_value()) << q.error->message;
  EXPECT_EQ(q.statuses.refused, 401);
  EXPECT_EQ(q.statuses.unavailable, 403);
  const ParsedAuthQuery one = ParseAuthQuery("/v1/auth?unavailable_status=599");
  ASSERT_FALSE(one.error.has_value());
  EXPECT_EQ(one.statuses.refused, 429);
  EXPECT_EQ(one.statuses.unavailable, 599);
}

TEST(ParseAuthQuery, ReadsTheQueryDecoded) {
  const ParsedAuthQuery q =
      ParseAuthQuery("/v1/auth?refused%5Fstatus=4%301&unavailable_status=403");
  ASSERT_FALSE(q.error.has_value()) << q.error->message;
  EXPECT_EQ(q.statuses.refused, 401);
  EXPECT_EQ(q.statuses.unavailable, 403);
}

TEST(ParseAuthQuery, RefusesStatusesOutside400To599) {
  // What was sent, and the value it decodes to, which the message quotes.
  const std::pair<const char*, const char*> cases[] = {
      {"200", "200"},
      {"399", "399"},
      {"600", "600"},
      {"4O1", "4O1"},
      {"", ""},
      {"+401", " 401"},
      {"%2B401", "+401"},
      {"0401", "0401"},
      {"401+", "401 "},
      {"-401", "-401"},
      {"99999999999999999999", "99999999999999999999"}};
  for (const auto& [bad, decoded] : cases) {
    const ParsedAuthQuery q = ParseAuthQuery(std::string("/v1/auth?refused_status=") + bad);
    ASSERT_TRUE(q.error.has_value()) << bad;
    EXPECT_EQ(q.error->status, 400);
    EXPECT_EQ(q.error->code, "invalid_parameter");
    EXPECT_EQ(q.error->message, std::string("refused_status: expected a status from 400 to 599 "
                                            "(got \"") +
                                    decoded + "\")");
  }
  const ParsedAuthQuery bare = ParseAuthQuery("/v1/auth?unavailable_status");
  ASSERT_TRUE(bare.error.has_value());
  EXPECT_EQ(bare.error->code, "invalid_parameter");
}

TEST(ParseAuthQuery, RefusesARepeatedOrUnknownParameterOrAMalformedQuery) {
  for (const char* target : {"/v1/auth?refused_status=401&refused_status=403",
                             "/v1/auth?refused_status=401&refused%5fstatus=401"}) {
    const ParsedAuthQuery twice = ParseAuthQuery(target);
    ASSERT_TRUE(twice.error.has_value()) << target;
    EXPECT_EQ(twice.error->code, "duplicate_parameter");
    EXPECT_EQ(twice.error->message,
              "parameter \"refused_status\": given twice (ambiguous; refused)");
  }
  const ParsedAuthQuery bad = ParseAuthQuery("/v1/auth?refused_status=4%0");
  ASSERT_TRUE(bad.error.has_value());
  EXPECT_EQ(bad.error->code, "invalid_parameter");
  const ParsedAuthQuery typo = ParseAuthQuery("/v1/auth?refused_statu=401");
  ASSERT_TRUE(typo.error.has_value());
  EXPECT_EQ(typo.error->code, "unknown_parameter");
  EXPECT_EQ(typo.error->message,
            "\"refused_statu\": unknown parameter (expected refused_status and "
            "unavailable_status)");
}

TEST(RefuseCheckQuery, AnyParameterIsUnknown) {
  for (const char* target : {"/v1/check", "/v1/check?", "/v1/check?&&"}) {
    EXPECT_FALSE(RefuseCheckQuery(target).has_value()) << target;
  }
  for (const char* target :
       {"/v1/check?x=1", "/v1/check?&x", "/v1/check?cost=5&y=2", "/v1/check?="}) {
    const std::optional<ApiError> e = RefuseCheckQuery(target);
    ASSERT_TRUE(e.has_value()) << target;
    EXPECT_EQ(e->status, 400);
    EXPECT_EQ(e->code, "unknown_parameter");
  }
  EXPECT_EQ(RefuseCheckQuery("/v1/check?co%73t=5")->message,
            "\"cost\": unknown parameter (/v1/check takes none: descriptors go in the body)");
  // A malformed query is refused as such.
  EXPECT_EQ(RefuseCheckQuery("/v1/check?x=%")->code, "invalid_parameter");
  EXPECT_EQ(RefuseCheckQuery("/v1/check?x=1&x=2")->code, "duplicate_parameter");
}

}  // namespace
}  // namespace caudal::http_api
