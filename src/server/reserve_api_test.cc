// POST /v1/reserve and /v1/settle as translation: bodies read or refused with the field named,
// replies carrying the reservation, and each settle outcome its status.
#include "server/reserve_api.h"

#include <gtest/gtest.h>

#include <boost/json.hpp>

namespace caudal::http_api {
namespace {

namespace json = boost::json;
using std::chrono::seconds;

TEST(ReserveApi, ReadsACheckBodyWithATtl) {
  ParsedCheck p = ParseReserveBody(R"({"descriptors": {"user": "u1"}, "cost": 800, "ttl": "90s"})");
  ASSERT_FALSE(p.error) << p.error->message;
  EXPECT_EQ(p.request.cost, 800);
  EXPECT_EQ(p.request.reserve, seconds(90));
  ParsedCheck d = ParseReserveBody(R"({"descriptors": {"user": "u1"}})");
  ASSERT_FALSE(d.error);
  EXPECT_EQ(d.request.reserve, kDefaultReservationTtl);
}

TEST(ReserveApi, RefusesBadReserveBodies) {
  const std::pair<const char*, const char*> bad[] = {
      {R"({"descriptors": {"user": "u1"}, "ttl": "0s"})", "invalid_ttl"},
      {R"({"descriptors": {"user": "u1"}, "ttl": "25h"})", "invalid_ttl"},
      {R"({"descriptors": {"user": "u1"}, "ttl": 60})", "invalid_ttl"},
      {R"({"descriptors": {"user": "u1"}, "refund": true})", "unknown_field"},
      {R"({"descriptors": {"user": "u1"}, "cost": -1})", "invalid_cost"},
      {R"({"cost": 5})", "missing_descriptors"},
  };
  for (const auto& [body, code] : bad) {
    SCOPED_TRACE(body);
    ParsedCheck p = ParseReserveBody(body);
    ASSERT_TRUE(p.error);
    EXPECT_EQ(p.error->status, 400);
    EXPECT_EQ(p.error->code, code);
  }
}

TEST(ReserveApi, AnAdmittedReserveAnswersItsReservation) {
  CheckResult r;
  r.reservation = "abc";
  r.reservation_ttl = seconds(60);
  const Reply reply = ReserveReply(r);
  EXPECT_EQ(reply.status, 200);
  const json::value body = json::parse(reply.body);
  EXPECT_EQ(body.at("reservation").as_string(), "abc");
  EXPECT_EQ(body.at("expires_in_ms").as_int64(), 60'000);
}

TEST(ReserveApi, ReadsAndRefusesSettleBodies) {
  ParsedSettle ok = ParseSettleBody(R"({"reservation": "x", "cost": 0})");
  ASSERT_FALSE(ok.error);
  EXPECT_EQ(ok.cost, 0);
  const std::pair<const char*, const char*> bad[] = {
      {R"({"cost": 5})", "missing_reservation"},
      {R"({"reservation": 5, "cost": 5})", "invalid_reservation"},
      {R"({"reservation": "x"})", "missing_cost"},
      {R"({"reservation": "x", "cost": -1})", "invalid_cost"},
      {R"({"reservation": "x", "cost": 1099511627777})", "invalid_cost"},
      {R"({"reservation": "x", "cost": 1.5})", "invalid_cost"},
      {R"({"reservation": "x", "cost": 1, "ttl": "1s"})", "unknown_field"},
  };
  for (const auto& [body, code] : bad) {
    SCOPED_TRACE(body);
    ParsedSettle p = ParseSettleBody(body);
    ASSERT_TRUE(p.error);
    EXPECT_EQ(p.error->code, code);
  }
}

TEST(ReserveApi, EachSettleOutcomeHasItsStatus) {
  const Limit limit = *Limit::Create(
      LimitSpec::Bucket(Algorithm::kTokenBucket, 1000, {.count = 1000, .period = seconds(60)}));
  SettleResult settled{
      .outcome = Reservation::kSettled,
      .limits = {
          {.policy = "tokens", .limit = &limit, .decision = {.limit = 1000, .remaining = 269}}}};
  const Reply ok = SettleReply(settled);
  EXPECT_EQ(ok.status, 200);
  const json::value body = json::parse(ok.body);
  EXPECT_EQ(body.at("outcome").as_string(), "settled");
  EXPECT_EQ(body.at("policies").as_array()[0].at("remaining").as_int64(), 269);
  settled.outcome = Reservation::kRepeated;
  EXPECT_EQ(json::parse(SettleReply(settled).body).at("outcome").as_string(), "repeated");
  EXPECT_EQ(SettleReply(SettleResult{.outcome = Reservation::kUnknown}).status, 404);
  EXPECT_EQ(SettleReply(SettleResult{.outcome = Reservation::kConflict}).status, 409);
  const Reply bad_id = SettleReply(Status::InvalidArgument("reservation: not a reservation id")
                                       .WithReason(engine_reason::kInvalidReservation));
  EXPECT_EQ(bad_id.status, 400);
  EXPECT_EQ(json::parse(bad_id.body).at("error").at("code").as_string(), "invalid_reservation");
  const Reply down = SettleReply(Status::Unavailable("down"));
  EXPECT_EQ(down.status, 503);
  EXPECT_TRUE(down.headers.Get("Retry-After"));
}

// A settle charges at most the limit above the estimate: the answer splits the overrun into
// what was charged and what was not.
TEST(ReserveApi, ASettleSaysWhatOfItsOverrunWasNotCharged) {
  const Limit limit = *Limit::Create(
      LimitSpec::Bucket(Algorithm::kTokenBucket, 1000, {.count = 1000, .period = seconds(60)}));
  const auto policy = [&](int64_t overrun) {
    const SettleResult r{
        .outcome = Reservation::kSettled,
        .limits = {{.policy = "tokens",
                    .limit = &limit,
                    .decision = {.limit = 1000, .remaining = 0, .overrun = overrun}}}};
    return json::parse(SettleReply(r).body).at("policies").as_array()[0];
  };
  EXPECT_EQ(policy(1500).at("overrun").as_int64(), 1000);
  EXPECT_EQ(policy(1500).at("uncharged").as_int64(), 500);
  EXPECT_EQ(policy(700).at("overrun").as_int64(), 700);
  EXPECT_EQ(policy(700).at("uncharged").as_int64(), 0);
}

}  // namespace
}  // namespace caudal::http_api
