#include <gtest/gtest.h>

#include "caudal/common/clock.h"

namespace caudal {
namespace {

using std::chrono::hours;
using std::chrono::milliseconds;
using std::chrono::minutes;
using std::chrono::seconds;

TEST(ParseDuration, ReadsEveryUnit) {
  EXPECT_EQ(*ParseDuration("7us"), Micros(7));
  EXPECT_EQ(*ParseDuration("250ms"), milliseconds(250));
  EXPECT_EQ(*ParseDuration("5s"), seconds(5));
  EXPECT_EQ(*ParseDuration(" 1m "), minutes(1));
  EXPECT_EQ(*ParseDuration("2h"), hours(2));
  EXPECT_EQ(*ParseDuration("1d"), hours(24));
  EXPECT_EQ(*ParseDuration("1w"), hours(24 * 7));
  EXPECT_EQ(*ParseDuration("1y"), hours(24 * 365));
}

TEST(ParseDuration, RefusesMalformedInputWithTheText) {
  for (const char* bad : {"", "s", "10", "10x", "1.5s", "-1s", "10 s", "99999999999999999999s"}) {
    const auto r = ParseDuration(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(r.status().message().find(std::string("\"") + bad + "\""), std::string::npos)
        << r.status().message();
  }
  EXPECT_FALSE(ParseDuration("9223372036854775807y").ok());  // overflows µs
}

TEST(ParseRate, ReadsCountPerPeriod) {
  const Rate r = *ParseRate("100/1m");
  EXPECT_EQ(r.count, 100);
  EXPECT_EQ(r.period, minutes(1));
  EXPECT_EQ(*ParseRate("5/s"), (Rate{5, seconds(1)}));
  EXPECT_EQ(*ParseRate("10/500ms"), (Rate{10, milliseconds(500)}));
}

TEST(ParseRate, RefusesMalformedRates) {
  for (const char* bad : {"100", "/1m", "0/1m", "-5/1m", "1.5/1m", "10/", "10/0s", "10/1q"}) {
    EXPECT_FALSE(ParseRate(bad).ok()) << bad;
  }
}

TEST(ParseRate, AllowsBlanksAroundThePartsOnly) {
  EXPECT_EQ(*ParseRate(" 5 / 1s "), (Rate{5, seconds(1)}));
  EXPECT_EQ(*ParseRate("\t5/\t1s"), (Rate{5, seconds(1)}));
  for (const char* bad : {"+5/1s", "5/+1s", "5/1 s", "5/1s junk", "5/1h30m", "5//1s", "5/1s/2",
                          "0x10/1s", "5/-1s", "99999999999999999999/1s"}) {
    const auto r = ParseRate(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(r.status().message().find(std::string("\"") + bad + "\""), std::string::npos)
        << r.status().message();
  }
}

TEST(ParseDuration, ReadsTheLargestValuesExactly) {
  EXPECT_EQ(*ParseDuration("9223372036854775807us"), Micros(INT64_MAX));
  EXPECT_EQ(*ParseDuration("292471y"), hours(24 * 365) * 292'471);
  EXPECT_FALSE(ParseDuration("292472y").ok());  // 2^63 µs is about 292,471 years
  EXPECT_EQ(*ParseDuration("0000000000000000000000001s"), seconds(1));
  for (const char* text : {"9223372036854775807us", "292471y", "1w", "3600s"}) {
    const Micros d = *ParseDuration(text);
    EXPECT_EQ(*ParseDuration(FormatDuration(d)), d) << text;
  }
}

TEST(FormatDuration, RoundTrips) {
  for (const char* text : {"1ms", "90s", "1m", "1d", "1500ms", "7us"}) {
    const Micros d = *ParseDuration(text);
    EXPECT_EQ(*ParseDuration(FormatDuration(d)), d) << text;
  }
  EXPECT_EQ(FormatDuration(seconds(90)), "90s");
  EXPECT_EQ(FormatRate({100, minutes(1)}), "100/1m");
}

}  // namespace
}  // namespace caudal
