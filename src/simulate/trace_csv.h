// Reading recorded traffic: one request per CSV row, `timestamp_ms[,key[,cost]]`.
//
//   timestamp_ms  milliseconds since the Unix epoch (or any origin), a whole number or up to
//                 three decimals (microseconds), between 0 and kMaxTraceTimestampMs
//   key           optional; rows without one share the key "" (the field is trimmed; quotes are
//                 not supported, so a key cannot contain a comma)
//   cost          optional whole number, 0 to kMaxCost, default 1
//
// The first line may be a header (it is one when it starts with a letter or a quote).
// Blank lines and lines starting with '#' are skipped; "\r\n" endings are accepted. Rows need not
// be in time order: they are replayed in timestamp order, ties in file order.
//
// Errors are kInvalidArgument values whose message starts "<name>:<line>: " for a bad row (the
// line number is 1-based and counts every line), or "<name>: " for the whole input (no rows, more
// than kMaxRequests rows, unreadable). Nothing is thrown; lines are read with a bounded buffer.
#pragma once

#include <istream>
#include <string>
#include <string_view>

#include "simulate/traffic.h"

namespace caudal::simulate {

inline constexpr size_t kMaxTraceLineLength = 4096;
// 2^53 µs: year 2255, and exact in the doubles of the Redis scripts.
inline constexpr int64_t kMaxTraceTimestampMs = (int64_t{1} << 53) / 1000;

// `name` labels error messages (usually the file name).
Result<Traffic> ParseTraceCsv(std::istream& in, std::string_view name);

// Opens `path` and parses it; kInvalidArgument "<path>: cannot open: <reason>" when unreadable.
Result<Traffic> ReadTraceCsv(const std::string& path);

}  // namespace caudal::simulate
