#include "config/calendar_rows.h"

#include "caudal/algorithms/calendar.h"

namespace caudal::config_internal {

const Table<WrittenCalendar>& CalendarTable() {
  using R = Rows<WrittenCalendar>;
  static const Table<WrittenCalendar> table(
      {
          {.name = "time_zone",
           .value = R::Custom(
               "time-zone name (`Europe/Madrid`, `UTC`)",
               [](const YamlReader& r, const YAML::Node& n, const std::string& path,
                  WrittenCalendar& out) -> Status {
                 auto zone = r.String(n, path);
                 if (!zone.ok()) return zone.status();
                 auto known = Calendar::Create(CalendarUnit::kDay, *zone);
                 if (!known.ok()) return r.Error(n, path, known.status().message());
                 out.time_zone = *zone;
                 return Status::Ok();
               },
               [](const WrittenCalendar& c) { return c.time_zone; }),
           .doc = "the zone whose local midnight starts each window, from the system's time-zone "
                  "database (tzdata): daylight-saving changes make days of 23 and 25 hours",
           .need = Need::kRequired},
      },
      {.doc = "A fixed window's calendar: each of its windows (a day, a week from Monday, a month "
              "or a year: a limit's `window`, a rule's `unit`) starts at local midnight in "
              "`time_zone` (algorithms.md, Calendar windows)."});
  return table;
}

}  // namespace caudal::config_internal
