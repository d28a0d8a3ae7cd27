// Calendar: the windows of a calendar quota — a day, an ISO week (from Monday), a month or a
// year, each starting at local midnight in one time zone of the system's time-zone database
// (tzdata), so that a day across a daylight-saving change lasts 23 or 25 hours, exactly.
//
// A fixed_window limit with a Calendar (LimitSpec::CalendarWindow) counts per calendar window
// rather than per multiple of W since the epoch. The store decides which window holds its own
// time from four consecutive boundaries handed to it near the caller's time (CalendarBounds):
// the memory store computes its windows directly, the Redis scripts pick among the boundaries.
//
// A Calendar is immutable, cheap to copy and safe to use from any number of threads.
#pragma once

#include <array>
#include <cstdint>
#include <string_view>

#include "caudal/common/clock.h"
#include "caudal/common/status.h"

namespace date {
class time_zone;
}

namespace caudal {

enum class CalendarUnit : uint8_t { kDay, kWeek, kMonth, kYear };

// "day", "week", "month", "year".
std::string_view CalendarUnitName(CalendarUnit unit);
// "1 day", "1 week", "1 month", "1 year": a calendar window as configs write it;
// kInvalidArgument for anything else.
Result<CalendarUnit> ParseCalendarWindow(std::string_view text);

// A window [start, end), µs since the epoch.
struct CalendarWindow {
  Micros start{0};
  Micros end{0};
  friend bool operator==(const CalendarWindow&, const CalendarWindow&) = default;
};

// Four consecutive window boundaries: the windows [b0, b1), [b1, b2) and [b2, b3), the middle one
// holding the time they were computed around. What a store is handed, so that it can pick the
// window holding its own time when that is within a window of the caller's.
using CalendarBounds = std::array<Micros, 4>;

class Calendar {
 public:
  // kInvalidArgument naming `time_zone` when the system's time-zone database has no zone of that
  // name ("Europe/Madrid", "UTC", "Asia/Kolkata").
  static Result<Calendar> Create(CalendarUnit unit, std::string_view time_zone);
  // UTC windows (the default calendar of a `1 month` window written without a time zone).
  static Calendar Utc(CalendarUnit unit);

  CalendarUnit unit() const { return unit_; }
  std::string_view time_zone() const;
  // The unit's nominal length (1d, 7d, 30d, 365d): what a calendar limit's window() reports
  // where a length is needed (a header's window, a TTL floor); never used to place a window.
  Micros nominal() const;

  // The window holding `t`. Precondition: t within the range of µs timestamps (years 1970-2112).
  CalendarWindow WindowAt(Micros t) const;
  // The boundaries of the window before t's, t's, and the one after.
  CalendarBounds BoundsAround(Micros t) const;

  friend bool operator==(const Calendar& a, const Calendar& b) {
    return a.unit_ == b.unit_ && a.zone_ == b.zone_;
  }

 private:
  Calendar(CalendarUnit unit, const date::time_zone* zone) : unit_(unit), zone_(zone) {}
  CalendarUnit unit_;
  const date::time_zone* zone_;  // owned by the process's time-zone database, never freed
};

// The window of `bounds` holding `t`: the first whose end is after t, the last when none is (the
// Redis scripts' choice, lua/fixed_window.lua).
CalendarWindow PickWindow(const CalendarBounds& bounds, Micros t);

}  // namespace caudal
