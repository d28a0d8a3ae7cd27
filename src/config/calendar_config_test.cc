// A limit's calendar window as configs write it: `window: 1 month` with `calendar: {time_zone}`
// (policies[].limits[], docs/configuration.md), and its errors.
#include <gtest/gtest.h>

#include <string>

#include "caudal/config/config.h"
#include "common/cat.h"

namespace caudal {
namespace {

Result<Config> Limits(std::string_view limits) {
  return ParseConfig(
      Cat("policies:\n  - name: p\n    identity: [key]\n    limits: [", limits, "]\n"), "t.yaml");
}

const Limit& First(const Config& c) { return c.policies->policies()[0].spec.limits[0]; }

TEST(CalendarConfig, ReadsACalendarWindowInItsTimeZone) {
  auto c = Limits(
      "{algorithm: fixed_window, limit: 10000000, window: 1 month, calendar: {time_zone: "
      "Europe/Madrid}}");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  const Limit& l = First(*c);
  ASSERT_TRUE(l.calendar().has_value());
  EXPECT_EQ(l.calendar()->unit(), CalendarUnit::kMonth);
  EXPECT_EQ(l.calendar()->time_zone(), "Europe/Madrid");
  EXPECT_EQ(l.capacity(), 10'000'000);
}

TEST(CalendarConfig, ACalendarWindowWithoutACalendarIsInUtc) {
  for (const auto& [text, unit] :
       {std::pair{"1 day", CalendarUnit::kDay}, std::pair{"1 week", CalendarUnit::kWeek},
        std::pair{"1 month", CalendarUnit::kMonth}, std::pair{"1 year", CalendarUnit::kYear}}) {
    auto c = Limits(Cat("{algorithm: fixed_window, limit: 5, window: ", text, "}"));
    ASSERT_TRUE(c.ok()) << text << ": " << c.status().ToString();
    ASSERT_TRUE(First(*c).calendar().has_value()) << text;
    EXPECT_EQ(First(*c).calendar()->unit(), unit);
    EXPECT_EQ(First(*c).calendar()->time_zone(), "UTC");
  }
}

TEST(CalendarConfig, AWindowWrittenAsADurationKeepsItsMeaning) {
  for (const char* text : {"1d", "1w", "1y", "30d"}) {
    auto c = Limits(Cat("{algorithm: fixed_window, limit: 5, window: ", text, "}"));
    ASSERT_TRUE(c.ok()) << text << ": " << c.status().ToString();
    EXPECT_FALSE(First(*c).calendar().has_value()) << text << ": multiples of W since the epoch";
  }
}

// Each error names the field (and the zone, or the algorithm) at fault.
TEST(CalendarConfig, RefusesWhatCannotBeACalendarWindow) {
  struct Case {
    std::string_view limit;
    std::vector<std::string_view> says;
  };
  const Case cases[] = {
      {"{algorithm: fixed_window, limit: 5, window: 1 month, calendar: {time_zone: Mars/Olympus}}",
       {"time_zone", "Mars/Olympus"}},
      {"{algorithm: fixed_window, limit: 5, window: 1h, calendar: {time_zone: UTC}}",
       {"calendar", "1 month"}},
      {"{algorithm: sliding_window_counter, limit: 5, window: 1 month}",
       {"window", "fixed_window", "sliding_window_counter"}},
      {"{algorithm: fixed_window, limit: 5, window: 2 months}", {"window", "1 month"}},
      {"{algorithm: fixed_window, limit: 5, window: 1 month, calendar: {zone: UTC}}",
       {"calendar", "zone"}},
      {"{algorithm: token_bucket, capacity: 5, refill: 5/1m, calendar: {time_zone: UTC}}",
       {"calendar"}},
  };
  for (const Case& k : cases) {
    auto c = Limits(k.limit);
    ASSERT_FALSE(c.ok()) << k.limit;
    EXPECT_EQ(c.status().code(), StatusCode::kInvalidArgument);
    for (std::string_view word : k.says) {
      EXPECT_NE(c.status().message().find(word), std::string::npos)
          << k.limit << " -> " << c.status().message();
    }
  }
}

TEST(CalendarConfig, AShareCannotDivideACalendarWindow) {
  auto c = ParseConfig(
      "policies:\n  - name: p\n    identity: [key]\n    share: {}\n    limits: [{algorithm: "
      "fixed_window, limit: 5, window: 1 month}]\n",
      "t.yaml");
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("calendar window"), std::string::npos)
      << c.status().message();
}

}  // namespace
}  // namespace caudal
