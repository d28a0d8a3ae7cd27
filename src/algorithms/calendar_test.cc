// Calendar windows (calendar.h) and the fixed window that counts them: month ends, leap years,
// daylight-saving days of 23 and 25 hours, zones with a non-hour offset, ISO weeks across a year
// boundary. Expected instants are written as UTC dates with std::chrono's civil calendar, apart
// from the time-zone database the code under test reads.
#include "caudal/algorithms/calendar.h"

#include <gtest/gtest.h>

#include <array>
#include <chrono>

#include "algorithms/fixed_window.h"
#include "caudal/algorithms/limit.h"

namespace caudal {
namespace {

namespace c = std::chrono;
using c::hours;
using c::minutes;

// y-m-d h:mm UTC, as µs since the epoch.
Micros Utc(int y, unsigned m, unsigned d, int h = 0, int min = 0) {
  const c::sys_days day{c::year{y} / c::month{m} / c::day{d}};
  return c::duration_cast<Micros>(day.time_since_epoch()) + hours(h) + minutes(min);
}

Calendar Zone(CalendarUnit unit, std::string_view zone) {
  auto cal = Calendar::Create(unit, zone);
  EXPECT_TRUE(cal.ok()) << cal.status().message();
  return *cal;
}

CalendarWindow Win(Micros start, Micros end) { return {.start = start, .end = end}; }

TEST(Calendar, AMonthInMadridStartsAtLocalMidnightOnTheFirst) {
  const Calendar month = Zone(CalendarUnit::kMonth, "Europe/Madrid");
  // Winter: UTC+1, so local midnight is 23:00 UTC the day before.
  const CalendarWindow jan = Win(Utc(2025, 12, 31, 23), Utc(2026, 1, 31, 23));
  EXPECT_EQ(month.WindowAt(Utc(2026, 1, 15)), jan);
  EXPECT_EQ(month.WindowAt(Utc(2026, 1, 31, 23) - Micros(1)), jan) << "Jan 31, 23:59:59.999999";
  EXPECT_EQ(month.WindowAt(Utc(2026, 1, 31, 23)), Win(Utc(2026, 1, 31, 23), Utc(2026, 2, 28, 23)))
      << "Feb 1, 00:00 local: February, 28 days";
  // Summer time starts on March 29: April starts at UTC+2.
  EXPECT_EQ(month.WindowAt(Utc(2026, 3, 30)), Win(Utc(2026, 2, 28, 23), Utc(2026, 3, 31, 22)));
  EXPECT_EQ(month.time_zone(), "Europe/Madrid");
}

TEST(Calendar, FebruaryHas29DaysInLeapYearsOnly) {
  const Calendar month = Calendar::Utc(CalendarUnit::kMonth);
  EXPECT_EQ(month.WindowAt(Utc(2028, 2, 29, 12)), Win(Utc(2028, 2, 1), Utc(2028, 3, 1)));
  EXPECT_EQ(month.WindowAt(Utc(2027, 2, 28, 12)), Win(Utc(2027, 2, 1), Utc(2027, 3, 1)));
  // 2100 is divisible by 100 and not by 400: not a leap year.
  EXPECT_EQ(month.WindowAt(Utc(2100, 2, 28, 23, 59)), Win(Utc(2100, 2, 1), Utc(2100, 3, 1)));
  EXPECT_EQ(month.WindowAt(Utc(2100, 3, 1)).start, Utc(2100, 3, 1));
  const Calendar year = Calendar::Utc(CalendarUnit::kYear);
  const CalendarWindow y2028 = year.WindowAt(Utc(2028, 7, 1));
  EXPECT_EQ(y2028, Win(Utc(2028, 1, 1), Utc(2029, 1, 1)));
  EXPECT_EQ(y2028.end - y2028.start, hours(24 * 366));
  const CalendarWindow y2100 = year.WindowAt(Utc(2100, 7, 1));
  EXPECT_EQ(y2100.end - y2100.start, hours(24 * 365));
}

TEST(Calendar, DaylightSavingDaysLast23And25HoursExactly) {
  const Calendar madrid = Zone(CalendarUnit::kDay, "Europe/Madrid");
  // 2026-03-29: 02:00 CET becomes 03:00 CEST (01:00 UTC).
  const CalendarWindow spring = madrid.WindowAt(Utc(2026, 3, 29, 12));
  EXPECT_EQ(spring, Win(Utc(2026, 3, 28, 23), Utc(2026, 3, 29, 22)));
  EXPECT_EQ(spring.end - spring.start, hours(23));
  // 2026-10-25: 03:00 CEST becomes 02:00 CET.
  const CalendarWindow autumn = madrid.WindowAt(Utc(2026, 10, 25, 12));
  EXPECT_EQ(autumn, Win(Utc(2026, 10, 24, 22), Utc(2026, 10, 25, 23)));
  EXPECT_EQ(autumn.end - autumn.start, hours(25));

  const Calendar ny = Zone(CalendarUnit::kDay, "America/New_York");
  // 2026-03-08: 02:00 EST becomes 03:00 EDT; 2026-11-01: 02:00 EDT becomes 01:00 EST.
  const CalendarWindow ny_spring = ny.WindowAt(Utc(2026, 3, 8, 12));
  EXPECT_EQ(ny_spring, Win(Utc(2026, 3, 8, 5), Utc(2026, 3, 9, 4)));
  EXPECT_EQ(ny_spring.end - ny_spring.start, hours(23));
  const CalendarWindow ny_autumn = ny.WindowAt(Utc(2026, 11, 1, 12));
  EXPECT_EQ(ny_autumn, Win(Utc(2026, 11, 1, 4), Utc(2026, 11, 2, 5)));
  EXPECT_EQ(ny_autumn.end - ny_autumn.start, hours(25));
  // The instant after the change still belongs to its day, to the µs.
  EXPECT_EQ(ny.WindowAt(Utc(2026, 11, 2, 5) - Micros(1)), ny_autumn);
  EXPECT_EQ(ny.WindowAt(Utc(2026, 11, 2, 5)).start, Utc(2026, 11, 2, 5));
}

TEST(Calendar, ZonesWithNonHourOffsets) {
  // Asia/Kolkata is UTC+5:30 and Asia/Kathmandu UTC+5:45, all year.
  EXPECT_EQ(Zone(CalendarUnit::kDay, "Asia/Kolkata").WindowAt(Utc(2026, 6, 15, 20)),
            Win(Utc(2026, 6, 15, 18, 30), Utc(2026, 6, 16, 18, 30)));
  EXPECT_EQ(Zone(CalendarUnit::kMonth, "Asia/Kathmandu").WindowAt(Utc(2026, 6, 30, 18, 14)),
            Win(Utc(2026, 5, 31, 18, 15), Utc(2026, 6, 30, 18, 15)));
  EXPECT_EQ(Zone(CalendarUnit::kMonth, "Asia/Kathmandu").WindowAt(Utc(2026, 6, 30, 18, 15)).start,
            Utc(2026, 6, 30, 18, 15));
  // Australia/Adelaide: UTC+10:30 in summer (January), UTC+9:30 in winter (July).
  const Calendar adelaide = Zone(CalendarUnit::kMonth, "Australia/Adelaide");
  EXPECT_EQ(adelaide.WindowAt(Utc(2026, 1, 10)),
            Win(Utc(2025, 12, 31, 13, 30), Utc(2026, 1, 31, 13, 30)));
  EXPECT_EQ(adelaide.WindowAt(Utc(2026, 7, 10)),
            Win(Utc(2026, 6, 30, 14, 30), Utc(2026, 7, 31, 14, 30)));
}

TEST(Calendar, WeeksStartOnMondayAcrossAYearBoundary) {
  // 2026-12-31 is a Thursday: its ISO week runs from Monday 2026-12-28 to Monday 2027-01-04.
  EXPECT_EQ(Calendar::Utc(CalendarUnit::kWeek).WindowAt(Utc(2026, 12, 31, 9)),
            Win(Utc(2026, 12, 28), Utc(2027, 1, 4)));
  EXPECT_EQ(Zone(CalendarUnit::kWeek, "Europe/Madrid").WindowAt(Utc(2027, 1, 3, 23) - Micros(1)),
            Win(Utc(2026, 12, 27, 23), Utc(2027, 1, 3, 23)));
  EXPECT_EQ(Zone(CalendarUnit::kWeek, "Europe/Madrid").WindowAt(Utc(2027, 1, 3, 23)).start,
            Utc(2027, 1, 3, 23))
      << "Monday 00:00 in Madrid";
  // A Monday is the first day of its own week.
  EXPECT_EQ(Calendar::Utc(CalendarUnit::kWeek).WindowAt(Utc(2027, 1, 4)).start, Utc(2027, 1, 4));
}

TEST(Calendar, AYearStartsOnJanuaryFirstLocally) {
  const Calendar year = Zone(CalendarUnit::kYear, "America/New_York");
  EXPECT_EQ(year.WindowAt(Utc(2027, 1, 1, 4)), Win(Utc(2026, 1, 1, 5), Utc(2027, 1, 1, 5)))
      << "still 2026 in New York";
  EXPECT_EQ(year.WindowAt(Utc(2027, 1, 1, 5)).start, Utc(2027, 1, 1, 5));
}

TEST(Calendar, BoundsAroundHoldThePreviousCurrentAndNextWindows) {
  const Calendar month = Zone(CalendarUnit::kMonth, "Europe/Madrid");
  const CalendarBounds b = month.BoundsAround(Utc(2026, 3, 15));
  EXPECT_EQ(b, (CalendarBounds{Utc(2026, 1, 31, 23), Utc(2026, 2, 28, 23), Utc(2026, 3, 31, 22),
                               Utc(2026, 4, 30, 22)}));
  EXPECT_EQ(PickWindow(b, Utc(2026, 2, 28, 23) - Micros(1)),
            Win(Utc(2026, 1, 31, 23), Utc(2026, 2, 28, 23)));
  EXPECT_EQ(PickWindow(b, Utc(2026, 3, 31, 22)), Win(Utc(2026, 3, 31, 22), Utc(2026, 4, 30, 22)));
  // Past the last boundary: the last window (a clock more than a window away from the caller's).
  EXPECT_EQ(PickWindow(b, Utc(2026, 6, 1)), Win(Utc(2026, 3, 31, 22), Utc(2026, 4, 30, 22)));
}

TEST(Calendar, AnUnknownTimeZoneIsAnErrorNamingIt) {
  auto cal = Calendar::Create(CalendarUnit::kMonth, "Europe/Atlantis");
  ASSERT_FALSE(cal.ok());
  EXPECT_EQ(cal.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(cal.status().message().find("Europe/Atlantis"), std::string::npos);
}

TEST(Calendar, ParsesTheSpelledOutWindowsOnly) {
  EXPECT_EQ(*ParseCalendarWindow("1 month"), CalendarUnit::kMonth);
  EXPECT_EQ(*ParseCalendarWindow("1 week"), CalendarUnit::kWeek);
  EXPECT_EQ(*ParseCalendarWindow("1 day"), CalendarUnit::kDay);
  EXPECT_EQ(*ParseCalendarWindow("1 year"), CalendarUnit::kYear);
  EXPECT_FALSE(ParseCalendarWindow("2 months").ok());
  EXPECT_FALSE(ParseCalendarWindow("1d").ok());
}

// The limit: only fixed_window takes a calendar; its window() is the nominal length.
TEST(CalendarLimit, OnlyAFixedWindowCountsCalendarWindows) {
  const Calendar month = Zone(CalendarUnit::kMonth, "Europe/Madrid");
  auto l = Limit::Create(LimitSpec::CalendarWindow(1000, month));
  ASSERT_TRUE(l.ok()) << l.status().message();
  EXPECT_EQ(l->window(), hours(24 * 30));
  EXPECT_EQ(l->calendar(), month);
  EXPECT_EQ(l->ToString(), "fixed_window limit=1000 window=1 month calendar=Europe/Madrid");
  EXPECT_NE(*l, *Limit::Create(LimitSpec::Window(Algorithm::kFixedWindow, 1000, hours(24 * 30))));
  EXPECT_NE(*l,
            *Limit::Create(LimitSpec::CalendarWindow(1000, Calendar::Utc(CalendarUnit::kMonth))));

  LimitSpec swc = LimitSpec::CalendarWindow(1000, month);
  swc.algorithm = Algorithm::kSlidingWindowCounter;
  auto refused = Limit::Create(swc);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("calendar"), std::string::npos);
  EXPECT_NE(refused.status().message().find("sliding_window_counter"), std::string::npos);
}

// Time going back into an earlier window: judged in the stored (later) window until its own
// end, which the state holds (the Redis scripts know no time zone).
TEST(CalendarLimit, TimeGoingBackIsJudgedInTheStoredWindowToItsEnd) {
  const Limit l =
      *Limit::Create(LimitSpec::CalendarWindow(5, Zone(CalendarUnit::kMonth, "America/New_York")));
  // March 2026 in New York: from 05:00 UTC on the 1st (EST) to 04:00 UTC on April 1 (EDT).
  const Step march = fixed_window::Decide(l, nullptr, Utc(2026, 3, 20), 3);
  EXPECT_EQ(march.next.w[2], Utc(2026, 4, 1, 4).count());
  const Step back = fixed_window::Decide(l, &march.next, Utc(2026, 2, 10), 2);
  EXPECT_TRUE(back.decision.allowed());
  EXPECT_EQ(back.decision.remaining, 0);
  EXPECT_EQ(back.decision.reset_after, Utc(2026, 4, 1, 4) - Utc(2026, 2, 10));
  EXPECT_EQ(back.next.w, (std::array<int64_t, 3>{march.next.w[0], 5, march.next.w[2]}));
}

// The fixed window on a calendar: the count lasts until the real next boundary, which
// retry_after and reset_after count to, exactly.
TEST(CalendarLimit, AFixedWindowResetsAtTheCalendarBoundary) {
  const Limit l =
      *Limit::Create(LimitSpec::CalendarWindow(2, Zone(CalendarUnit::kDay, "Europe/Madrid")));
  // The 23-hour day of 2026-03-29 in Madrid: [03-28 23:00Z, 03-29 22:00Z).
  const Micros t = Utc(2026, 3, 29, 1);
  Step s = fixed_window::Decide(l, nullptr, t, 2);
  ASSERT_TRUE(s.decision.allowed());
  EXPECT_EQ(s.next.w[0], Utc(2026, 3, 28, 23).count());
  EXPECT_EQ(s.next.w[2], Utc(2026, 3, 29, 22).count()) << "a calendar's state holds its end";
  EXPECT_EQ(s.decision.reset_after, hours(21));
  const Step denied = fixed_window::Decide(l, &s.next, t, 1);
  EXPECT_EQ(denied.decision.verdict, Verdict::kDenied);
  EXPECT_EQ(denied.decision.retry_after, hours(21));
  EXPECT_FALSE(
      fixed_window::Decide(l, &s.next, Utc(2026, 3, 29, 22) - Micros(1), 1).decision.allowed());
  const Step next = fixed_window::Decide(l, &s.next, Utc(2026, 3, 29, 22), 2);
  EXPECT_TRUE(next.decision.allowed());
  EXPECT_EQ(next.next.w[0], Utc(2026, 3, 29, 22).count());
  EXPECT_EQ(next.decision.reset_after, hours(24));

  // A lease's units given back count only in the window they were taken in.
  const Step back = fixed_window::GiveBack(l, &s.next, t, 2, t, s.decision.reset_after);
  EXPECT_EQ(back.decision.remaining, 2);
  const Step late =
      fixed_window::GiveBack(l, &next.next, Utc(2026, 3, 29, 22), 2, t, s.decision.reset_after);
  EXPECT_EQ(late.decision.remaining, 0) << "units of the day before stay where they were counted";
}

}  // namespace
}  // namespace caudal
