#include "observe/log_throttle.h"

#include <gtest/gtest.h>

#include "support/manual_clock.h"

namespace caudal {
namespace {

using std::chrono::milliseconds;

TEST(LogThrottle, OneLinePerKeyPerIntervalWithTheCountHeldBack) {
  ManualClock clock;
  LogThrottle throttle(clock, {.interval = std::chrono::seconds(1)});
  EXPECT_EQ(throttle.Admit("a"), 0u);
  for (int i = 0; i < 5; ++i) EXPECT_FALSE(throttle.Admit("a").has_value());
  EXPECT_EQ(throttle.Admit("b"), 0u);  // keys are throttled apart
  clock.Advance(milliseconds(999));
  EXPECT_FALSE(throttle.Admit("a").has_value());
  clock.Advance(milliseconds(1));
  EXPECT_EQ(throttle.Admit("a"), 6u);  // the 6 held back since the last line
  EXPECT_FALSE(throttle.Admit("a").has_value());
  clock.Advance(std::chrono::seconds(5));
  EXPECT_EQ(throttle.Admit("a"), 1u);
  EXPECT_EQ(throttle.Admit("b"), 0u);
}

TEST(LogThrottle, AFullTableMakesRoomFromIdleKeysAndNeverSilencesANewOne) {
  ManualClock clock;
  LogThrottle throttle(clock, {.interval = std::chrono::seconds(1), .max_keys = 2});
  EXPECT_EQ(throttle.Admit("a"), 0u);
  EXPECT_EQ(throttle.Admit("b"), 0u);
  EXPECT_EQ(throttle.Admit("c"), 0u);  // full and nobody idle: through, untracked
  EXPECT_EQ(throttle.Admit("c"), 0u);
  EXPECT_FALSE(throttle.Admit("a").has_value());  // tracked keys stay throttled
  clock.Advance(std::chrono::seconds(1));
  EXPECT_EQ(throttle.Admit("c"), 0u);  // a and b were idle for an interval: c takes a slot
  EXPECT_FALSE(throttle.Admit("c").has_value());
}

}  // namespace
}  // namespace caudal
