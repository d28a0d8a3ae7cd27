// The rows of a calendar window's `calendar`, shared by a policy's limits (`policies[].limits[]`)
// and an Envoy rule (`rate_limit.calendar`): `{time_zone: Europe/Madrid}`, a zone of the system's
// time-zone database, checked when read (an unknown zone is an error naming it).
#pragma once

#include <string>

#include "config/field_table.h"
#include "config/field_values.h"

namespace caudal::config_internal {

// A `calendar` as written.
struct WrittenCalendar {
  std::string time_zone = "UTC";
};

// calendar.time_zone.
const Table<WrittenCalendar>& CalendarTable();

}  // namespace caudal::config_internal
