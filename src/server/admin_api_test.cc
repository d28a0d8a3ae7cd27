// The admin API's translation without sockets: the admin token check, the path and query, a
// PUT's body, and the JSON of an override.
#include "server/admin_api.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace caudal::admin_api {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

TEST(RefuseAdmin, IsOffWithoutATokenAndRefusesAnyOtherCredential) {
  EXPECT_EQ(RefuseAdmin("", "Bearer anything", 1)->status, 404);
  EXPECT_FALSE(RefuseAdmin("s3cret", "Bearer s3cret", 1).has_value());
  EXPECT_FALSE(RefuseAdmin("s3cret", "bearer  s3cret ", 1).has_value()) << "the scheme's case";
  for (std::string_view bad : {"", "Bearer", "Bearer s3cre", "Bearer s3cret2", "Basic s3cret"}) {
    auto r = RefuseAdmin("s3cret", bad, bad.empty() ? 0 : 1);
    ASSERT_TRUE(r.has_value()) << bad;
    EXPECT_EQ(r->status, 401) << bad;
    EXPECT_THAT(r->body, Not(HasSubstr("s3cret")));
    EXPECT_TRUE(r->headers.Get("WWW-Authenticate").has_value());
  }
  EXPECT_EQ(RefuseAdmin("s3cret", "Bearer s3cret", 2)->status, 400) << "two headers: ambiguous";
}

TEST(ParseAdminTarget, DecodesThePolicyAndTheQueryInOrder) {
  ParsedPath p =
      ParseAdminTarget("/v1/admin/policies/per%2Dtenant/state?tenant=acme+corp&ip=%3A%3A1");
  ASSERT_FALSE(p.error) << p.error->message;
  EXPECT_EQ(p.path.policy, "per-tenant");
  EXPECT_TRUE(p.path.state);
  ASSERT_EQ(p.path.params.size(), 2u);
  using Param = std::pair<std::string, std::string>;
  EXPECT_EQ(p.path.params[0], Param("tenant", "acme corp"));
  EXPECT_EQ(p.path.params[1], Param("ip", "::1"));
  EXPECT_FALSE(ParseAdminTarget("/v1/admin/policies/p/overrides").path.state);

  EXPECT_EQ(ParseAdminTarget("/v1/admin/policies/p/other").error->status, 404);
  EXPECT_EQ(ParseAdminTarget("/v1/admin/elsewhere").error->status, 404);
  EXPECT_EQ(ParseAdminTarget("/v1/admin/policies/p/state?a=1&a=2").error->code,
            "duplicate_parameter");
  EXPECT_EQ(ParseAdminTarget("/v1/admin/policies/p/state?a=%").error->code, "invalid_parameter");
  EXPECT_EQ(ParseAdminTarget("/v1/admin/policies/p/state?a=%00").error->code, "invalid_parameter");
  EXPECT_EQ(ParseAdminTarget("/v1/admin/policies/p/state?a=").error->code, "invalid_parameter");
  EXPECT_EQ(ParseAdminTarget("/v1/admin/policies/p/state?a=%C3%28").error->code,
            "invalid_parameter");
}

TEST(ParseOverrideBody, ReadsLimitsAsTheConfigSpellsThemAndNamesTheFieldAtFault) {
  ParsedOverride o = ParseOverrideBody(
      R"({"limits": [{"algorithm": "fixed_window", "limit": 100, "window": "1m"},
                     {"algorithm": "gcra", "capacity": 5, "refill": "5/1s"}],
          "expires_in": "2h"})");
  ASSERT_FALSE(o.error) << o.error->message;
  ASSERT_EQ(o.limits.size(), 2u);
  EXPECT_EQ(o.limits[0].ToString(), "fixed_window limit=100 window=1m");
  EXPECT_EQ(o.limits[1].algorithm(), Algorithm::kGcra);
  EXPECT_EQ(o.expires_in, std::chrono::hours(2));
  EXPECT_FALSE(ParseOverrideBody(R"({"limits": [{"algorithm": "gcra", "capacity": 5,
                                                 "refill": "5/1s"}]})")
                   .expires_in.has_value());

  const auto error = [](std::string_view body) {
    ParsedOverride p = ParseOverrideBody(body);
    return p.error ? p.error->code + " " + p.error->message : std::string("none");
  };
  EXPECT_THAT(error(R"({"limits": [{"algorithm": "gcra", "capacity": 5, "window": "1s"}]})"),
              HasSubstr("unknown_field limits[0].window"));
  EXPECT_THAT(error(R"({"limits": [{"algorithm": "gcra", "capacity": 0, "refill": "1/s"}]})"),
              HasSubstr("invalid_limits limits[0].capacity"));
  EXPECT_THAT(error(R"({"limits": [{"algorithm": "leaky", "capacity": 1, "refill": "1/s"}]})"),
              HasSubstr("invalid_limits limits[0].algorithm"));
  EXPECT_THAT(error(R"({"limits": [{"algorithm": "gcra", "capacity": 1}]})"),
              HasSubstr("invalid_limits limits[0].refill: required"));
  EXPECT_THAT(error(R"({"limits": [{"algorithm": "gcra", "capacity": 1, "refill": "1/s"}],
                        "expires_in": "400d"})"),
              HasSubstr("invalid_expires_in"));
  EXPECT_THAT(error(R"({"limits": [{"algorithm": "gcra", "capacity": 1, "refill": "1/s"}],
                        "expires_in": 60})"),
              HasSubstr("invalid_expires_in"));
  EXPECT_THAT(error(R"({"limits": "x"})"), HasSubstr("missing_limits"));
  EXPECT_THAT(error(R"({"expires_in": "1h"})"), HasSubstr("missing_limits"));
}

TEST(ParseOverrideBody, ReadsAWeightAloneAndRefusesOneOutOfRange) {
  ParsedOverride o = ParseOverrideBody(R"({"weight": 4096, "expires_in": "1h"})");
  ASSERT_FALSE(o.error) << o.error->message;
  EXPECT_EQ(o.weight, 4096);
  EXPECT_TRUE(o.limits.empty());
  EXPECT_EQ(o.expires_in, std::chrono::hours(1));
  // With limits too it is read whole: whether the policy takes a weight or limits is the
  // Admin's to say (ValidateOverrideTerms).
  o = ParseOverrideBody(R"({"limits": [{"algorithm": "gcra", "capacity": 1, "refill": "1/s"}],
                            "weight": 1})");
  ASSERT_FALSE(o.error) << o.error->message;
  EXPECT_EQ(o.weight, 1);
  EXPECT_EQ(o.limits.size(), 1u);
  EXPECT_FALSE(ParseOverrideBody(R"({"limits": [{"algorithm": "gcra", "capacity": 1,
                                                 "refill": "1/s"}]})")
                   .weight.has_value());

  for (std::string_view bad : {R"({"weight": 0})", R"({"weight": 4097})", R"({"weight": 2.5})",
                               R"({"weight": "2"})", R"({"weight": null})"}) {
    ParsedOverride p = ParseOverrideBody(bad);
    ASSERT_TRUE(p.error) << bad;
    EXPECT_EQ(p.error->status, 400) << bad;
    EXPECT_EQ(p.error->code, "invalid_weight") << bad;
    EXPECT_THAT(p.error->message, HasSubstr("weight: expected an integer from 1 to 4096")) << bad;
  }
  ParsedOverride empty = ParseOverrideBody(R"({"weight": 2, "limits": []})");
  ASSERT_TRUE(empty.error);
  EXPECT_EQ(empty.error->code, "missing_limits");
  ParsedOverride unknown = ParseOverrideBody(R"({"weights": 2})");
  ASSERT_TRUE(unknown.error);
  EXPECT_EQ(unknown.error->code, "unknown_field");
  EXPECT_THAT(unknown.error->message, HasSubstr("expected limits, weight and expires_in"));
}

TEST(OverrideJson, SpellsLimitsAsTheBodyDoesAndNullsANeverEndingExpiry) {
  const Limit bucket = *Limit::Create(
      LimitSpec::Bucket(Algorithm::kTokenBucket, 5000, {5000, std::chrono::minutes(1)}));
  OverrideView v{.spec = {.kind = OverrideKind::kPolicy,
                          .policy = "per-tenant",
                          .identity = {{"tenant", "acme"}},
                          .identity_key = "4:acme",
                          .limits = {bucket},
                          .expires_at = {},
                          .set_by = "127.0.0.1"},
                 .expires_in = {}};
  EXPECT_EQ(OverrideJson(v),
            R"({"policy":"per-tenant","kind":"policy","identity":{"tenant":"acme"},)"
            R"("limits":[{"algorithm":"token_bucket","capacity":5000,"refill":"5000/1m"}],)"
            R"("weight":null,"expires_at":null,"expires_in_ms":null,"set_by":"127.0.0.1"})");
  v.spec.expires_at = std::chrono::seconds(1'748'782'800) + std::chrono::milliseconds(5);
  v.expires_in = std::chrono::milliseconds(3'599'000);
  EXPECT_THAT(OverrideJson(v), HasSubstr(R"("expires_at":"2025-06-01T13:00:00.005Z")"));
  EXPECT_THAT(OverrideJson(v), HasSubstr(R"("expires_in_ms":3599000)"));
  v.spec.limits.clear();
  v.spec.weight = 4;
  EXPECT_THAT(OverrideJson(v), HasSubstr(R"("limits":[],"weight":4,)"));
}

// A calendar limit's state spells its window as the config does, with its time zone, and says
// that an override cannot take one (its limits take durations).
TEST(StateJson, SpellsACalendarWindowAsTheConfigDoes) {
  const Limit month = *Limit::Create(
      LimitSpec::CalendarWindow(100, *Calendar::Create(CalendarUnit::kMonth, "Europe/Madrid")));
  const StateView v{.policy = "monthly",
                    .kind = OverrideKind::kPolicy,
                    .identity = {{"tenant", "acme"}},
                    .limits_from = "limits",
                    .limits = {{.limit = month,
                                .remaining = 99,
                                .reset_after = std::chrono::hours(1),
                                .retry_after = {}}}};
  EXPECT_THAT(StateJson(v),
              HasSubstr(R"({"algorithm":"fixed_window","limit":100,)"
                        R"("window":"1 month","calendar":{"time_zone":"Europe/Madrid"}})"));
  const ParsedOverride calendar = ParseOverrideBody(
      R"({"limits": [{"algorithm": "fixed_window", "limit": 5, "window": "1 month"}]})");
  ASSERT_TRUE(calendar.error.has_value());
  EXPECT_THAT(calendar.error->message, HasSubstr("window"));
}

}  // namespace
}  // namespace caudal::admin_api
