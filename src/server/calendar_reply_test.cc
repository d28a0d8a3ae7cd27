// A calendar quota through the HTTP reply: Retry-After, the RateLimit header's t and the body's
// retry_after_ms and reset_after_ms count to the real next boundary (local midnight on the first,
// in the policy's time zone), decided by an Engine on a MemoryStore at a manual clock.
#include <gtest/gtest.h>

#include <chrono>
#include <string>

#include "caudal/engine/engine.h"
#include "caudal/store/memory_store.h"
#include "server/http_api.h"
#include "support/manual_clock.h"

namespace caudal::http_api {
namespace {

namespace c = std::chrono;

Micros Utc(int y, unsigned m, unsigned d, int h) {
  const c::sys_days day{c::year{y} / c::month{m} / c::day{d}};
  return c::duration_cast<Micros>(day.time_since_epoch()) + c::hours(h);
}

TEST(CalendarReply, RetryAfterCountsToTheFirstOfTheMonthInItsTimeZone) {
  // 2026-03-31 12:00 UTC is 08:00 in New York (EDT); April starts there at 04:00 UTC on April 1.
  ManualClock clock{Utc(2026, 3, 31, 12)};
  MemoryStore store(clock);
  Engine engine(store, clock, {});
  PolicySpec spec;
  spec.name = "monthly";
  spec.identity = {"api_key"};
  spec.limits = {*Limit::Create(
      LimitSpec::CalendarWindow(2, *Calendar::Create(CalendarUnit::kMonth, "America/New_York")))};
  ASSERT_TRUE(engine.SetPolicies(*PolicySet::Create({spec}, {})).ok());

  constexpr int64_t kToApril = 16 * 3600;  // seconds
  auto check = [&] {
    return *engine.Check({.descriptors = {{"api_key", "k"}}, .cost = std::nullopt});
  };
  const Reply first = DecisionReply(check(), Endpoint::kCheck);
  EXPECT_EQ(first.status, 200);
  EXPECT_NE(first.body.find("\"reset_after_ms\":" + std::to_string(kToApril * 1000)),
            std::string::npos)
      << first.body;
  EXPECT_EQ(DecisionReply(check(), Endpoint::kCheck).status, 200);
  const Reply refused = DecisionReply(check(), Endpoint::kCheck);
  EXPECT_EQ(refused.status, 429);
  EXPECT_EQ(refused.headers.Get("Retry-After").value_or(""), std::to_string(kToApril));
  EXPECT_EQ(refused.headers.Get("RateLimit").value_or(""),
            "\"monthly\";r=0;t=" + std::to_string(kToApril));
  EXPECT_NE(refused.body.find("\"retry_after_ms\":" + std::to_string(kToApril * 1000)),
            std::string::npos)
      << refused.body;

  clock.Advance(c::seconds(kToApril) - Micros(1));
  EXPECT_EQ(DecisionReply(check(), Endpoint::kCheck).status, 429) << "still March in New York";
  clock.Advance(Micros(1));
  const Reply april = DecisionReply(check(), Endpoint::kCheck);
  EXPECT_EQ(april.status, 200);
  // April in New York: 30 days, all of them EDT.
  EXPECT_NE(april.body.find("\"reset_after_ms\":" + std::to_string(int64_t{30} * 86'400'000)),
            std::string::npos)
      << april.body;
}

}  // namespace
}  // namespace caudal::http_api
