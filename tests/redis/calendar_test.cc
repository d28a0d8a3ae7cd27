// Calendar windows through RedisStore on a real redis-server: the pipeline hands the script the
// boundaries near its clock and the script decides at its own time — a given clock's, to the µs
// on a 23-hour day; Redis's TIME in production, to the real end of the UTC month.
#include <gtest/gtest.h>

#include <chrono>
#include <string>

#include "caudal/redis/redis_store.h"
#include "redis/redis_test_util.h"
#include "support/manual_clock.h"

namespace caudal {
namespace {

namespace c = std::chrono;

Micros Utc(int y, unsigned m, unsigned d, int h = 0) {
  const c::sys_days day{c::year{y} / c::month{m} / c::day{d}};
  return c::duration_cast<Micros>(day.time_since_epoch()) + c::hours(h);
}

TEST(RedisCalendar, ADayInMadridEndsAtLocalMidnightToTheMicrosecond) {
  auto server = StartServer();
  // 2026-03-29 in Madrid lasts 23 hours: [03-28 23:00 UTC, 03-29 22:00 UTC).
  ManualClock clock{Utc(2026, 3, 29, 22) - Micros(1)};
  auto store = MustOpen({.url = server->url(), .decision_clock = &clock});
  const Limit day = *Limit::Create(
      LimitSpec::CalendarWindow(1, *Calendar::Create(CalendarUnit::kDay, "Europe/Madrid")));
  ASSERT_TRUE(DecideOne(*store, "k", day, 1).allowed());
  const Decision refused = DecideOne(*store, "k", day, 1);
  EXPECT_EQ(refused.verdict, Verdict::kDenied);
  EXPECT_EQ(refused.retry_after, Micros(1));
  clock.Advance(Micros(1));
  const Decision next = DecideOne(*store, "k", day, 1);
  EXPECT_TRUE(next.allowed());
  EXPECT_EQ(next.reset_after, c::hours(24));
  // The state lives at least until its window's end (a given clock's writes get an hour more:
  // lua_protocol.h).
  EXPECT_GE(std::stoll(*server->Command({"PTTL", "caudal:{k}"})), 24 * 3'600'000);
}

TEST(RedisCalendar, OnRedisTimeAMonthEndsOnTheFirstInUtc) {
  auto server = StartServer();
  auto store = MustOpen({.url = server->url()});
  const Calendar utc = Calendar::Utc(CalendarUnit::kMonth);
  const Limit month = *Limit::Create(LimitSpec::CalendarWindow(1, utc));
  // Redis's TIME lies between two reads of this machine's clock (the same clock here). Two calls
  // a moment apart cannot both straddle a month's boundary: the second is judged if the first did.
  for (const std::string key : {"m1", "m2"}) {
    const Micros before = c::duration_cast<Micros>(SystemClock::Instance().Now());
    const Decision d = DecideOne(*store, key, month, 1);
    const Micros after = c::duration_cast<Micros>(SystemClock::Instance().Now());
    const Micros end = utc.WindowAt(before).end;
    if (end != utc.WindowAt(after).end) continue;  // the boundary fell within the call
    ASSERT_TRUE(d.allowed());
    EXPECT_LE(d.reset_after, end - before);
    EXPECT_GE(d.reset_after, end - after);
    EXPECT_EQ(DecideOne(*store, key, month, 1).verdict, Verdict::kDenied);
    return;
  }
  ADD_FAILURE() << "two calls in a row straddled a month's boundary";
}

}  // namespace
}  // namespace caudal
