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
      {.doc = "A fixed_window's calendar: its `window` (`1 day`, `1 week` from Monday, `1 month`, "
              "`1 year`) starts at local midnight in `time_zone` (algorithms.md, Calendar "
              "windows)."});
  return table;
}

}  // namespace caudal::config_internal
