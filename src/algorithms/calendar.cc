#include "caudal/algorithms/calendar.h"

#include <date/tz.h>

#include <exception>
#include <string>

#include "common/cat.h"

namespace caudal {
namespace {

namespace d = date;
using LocalMicros = d::local_time<std::chrono::microseconds>;

// The local day on which the window holding local day `day` starts.
d::local_days FirstDay(CalendarUnit unit, d::local_days day) {
  const d::year_month_day ymd{day};
  switch (unit) {
    case CalendarUnit::kDay:
      return day;
    case CalendarUnit::kWeek:  // ISO: weeks start on Monday
      return day - (d::weekday{day} - d::Monday);
    case CalendarUnit::kMonth:
      return d::local_days{ymd.year() / ymd.month() / 1};
    case CalendarUnit::kYear:
      return d::local_days{ymd.year() / d::January / 1};
  }
  return day;
}

// The local day on which the window starting on `first` ends.
d::local_days NextFirstDay(CalendarUnit unit, d::local_days first) {
  const d::year_month_day ymd{first};
  switch (unit) {
    case CalendarUnit::kDay:
      return first + d::days{1};
    case CalendarUnit::kWeek:
      return first + d::days{7};
    case CalendarUnit::kMonth:
      return d::local_days{(ymd.year() / ymd.month() + d::months{1}) / 1};
    case CalendarUnit::kYear:
      return d::local_days{(ymd.year() + d::years{1}) / d::January / 1};
  }
  return first;
}

}  // namespace

std::string_view CalendarUnitName(CalendarUnit unit) {
  switch (unit) {
    case CalendarUnit::kDay:
      return "day";
    case CalendarUnit::kWeek:
      return "week";
    case CalendarUnit::kMonth:
      return "month";
    case CalendarUnit::kYear:
      return "year";
  }
  return "unknown";
}

Result<CalendarUnit> ParseCalendarWindow(std::string_view text) {
  for (CalendarUnit u :
       {CalendarUnit::kDay, CalendarUnit::kWeek, CalendarUnit::kMonth, CalendarUnit::kYear}) {
    if (text == Cat("1 ", CalendarUnitName(u))) return u;
  }
  return Status::InvalidArgument(
      Cat("calendar window \"", text, "\": expected 1 day, 1 week, 1 month or 1 year"));
}

Result<Calendar> Calendar::Create(CalendarUnit unit, std::string_view time_zone) {
  try {
    return Calendar(unit, d::locate_zone(time_zone));
  } catch (const std::exception&) {
    return Status::InvalidArgument(
        Cat("unknown time zone \"", time_zone,
            "\" (expected a name of the system's time-zone database, such as Europe/Madrid or "
            "UTC)"));
  }
}

Calendar Calendar::Utc(CalendarUnit unit) {
  static const d::time_zone* const utc = d::locate_zone("UTC");
  return Calendar(unit, utc);
}

std::string_view Calendar::time_zone() const { return zone_->name(); }

Micros Calendar::nominal() const {
  using std::chrono::hours;
  switch (unit_) {
    case CalendarUnit::kDay:
      return hours(24);
    case CalendarUnit::kWeek:
      return hours(24 * 7);
    case CalendarUnit::kMonth:
      return hours(24 * 30);
    case CalendarUnit::kYear:
      return hours(24 * 365);
  }
  return hours(24);
}

CalendarWindow Calendar::WindowAt(Micros t) const {
  const d::sys_time<std::chrono::microseconds> sys{t};
  const d::local_days today = d::floor<d::days>(zone_->to_local(sys));
  const d::local_days first = FirstDay(unit_, today);
  // A midnight the clocks skip starts its window when they jump (choose: the gap's instant); one
  // they pass twice, at the first.
  auto at = [this](d::local_days day) {
    return zone_->to_sys(LocalMicros(day), d::choose::earliest).time_since_epoch();
  };
  return {.start = at(first), .end = at(NextFirstDay(unit_, first))};
}

CalendarBounds Calendar::BoundsAround(Micros t) const {
  const CalendarWindow now = WindowAt(t);
  return {WindowAt(now.start - Micros(1)).start, now.start, now.end, WindowAt(now.end).end};
}

CalendarWindow PickWindow(const CalendarBounds& b, Micros t) {
  if (t < b[1]) return {b[0], b[1]};
  if (t < b[2]) return {b[1], b[2]};
  return {b[2], b[3]};
}

}  // namespace caudal
