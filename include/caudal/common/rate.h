// Durations and rates as written in configs and on the command line.
//
// A rate is an exact rational, "count per period" ("100/1m"), never a double: 100 per 60 s admits
// exactly 100·k after k·60 s, for any k. Durations are whole microseconds, the unit every
// algorithm (and the Redis scripts, whose numbers are doubles exact below 2^53) works in.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "caudal/common/clock.h"
#include "caudal/common/status.h"

namespace caudal {

struct Rate {
  int64_t count = 0;  // how many
  Micros period{0};   // per how long
  friend bool operator==(const Rate&, const Rate&) = default;
};

// Parses "<integer><unit>" with unit one of us, ms, s, m, h, d, w, y (y = 365 d), e.g. "250ms",
// "1m", "1d". Whitespace around the whole is allowed; anything else is kInvalidArgument with a
// message that quotes the input. Values that overflow int64 microseconds are refused.
Result<Micros> ParseDuration(std::string_view text);

// Parses "<count>/<duration>" ("100/1m", "5/1s"); a bare unit after the slash means one of it
// ("100/m"). The count must be a positive integer.
Result<Rate> ParseRate(std::string_view text);

// The shortest spelling that ParseDuration reads back as `d` ("90s", "1500ms", "1d").
std::string FormatDuration(Micros d);
// "100/1m".
std::string FormatRate(const Rate& r);

}  // namespace caudal
