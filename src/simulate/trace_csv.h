// Reading recorded traffic: one request per CSV row, `timestamp_ms[,key[,cost]]` (a Traffic, which
// every algorithm replays), or `timestamp_ms,key,<dimension>...` (a CostTrace, below, which a
// config's policies replay).
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

#include <cstdint>
#include <istream>
#include <string>
#include <string_view>
#include <vector>

#include "simulate/traffic.h"

namespace caudal::simulate {

inline constexpr size_t kMaxTraceLineLength = 4096;
// 2^53 µs: year 2255, and exact in the doubles of the Redis scripts.
inline constexpr int64_t kMaxTraceTimestampMs = (int64_t{1} << 53) / 1000;

// `name` labels error messages (usually the file name).
Result<Traffic> ParseTraceCsv(std::istream& in, std::string_view name);

// Opens `path` and parses it; kInvalidArgument "<path>: cannot open: <reason>" when unreadable.
Result<Traffic> ReadTraceCsv(const std::string& path);

// A trace of costs per dimension (caudal/engine/engine.h's CheckRequest::costs), one request a
// row. Its first line that is neither blank nor a comment is a header naming the columns:
//
//   timestamp_ms,key,requests,input_tokens,output_tokens
//
// timestamp_ms as above; key is the value of every identity field, 1..kMaxDescriptorValueLength
// bytes; then 1..kMaxCostDimensions columns, each a dimension's name (ValidateDimensionName), once.
// A row has as many fields as the header. A cell is a whole number of units, 0 to kMaxCost, or
// empty: the request does not name that dimension (it costs 0 there, as in the HTTP API); a row
// names at least one. Comments, blank lines, "\r\n", order and errors as above; at most
// kMaxCostTraceRows rows, so that a trace holds at most 16 million cells.
inline constexpr int64_t kMaxCostTraceRows = 1'000'000;
inline constexpr int64_t kNotNamed = -1;  // an empty cell

struct CostTrace {
  struct Row {
    int64_t at_us = 0;
    uint32_t key = 0;  // into keys
    int64_t line = 0;  // in the file, 1-based: what an error about the request names
    size_t first = 0;  // its cells: units[first .. first + dimensions.size())
  };
  std::string name;                     // what errors name (the file's)
  int64_t header_line = 0;              // the header's line
  std::vector<std::string> dimensions;  // the cost columns' names, in the header's order
  std::vector<std::string> keys;
  std::vector<Row> rows;       // in timestamp order, ties in file order; at least one
  std::vector<int64_t> units;  // a row's cells, each 0..kMaxCost or kNotNamed
  Micros start{0};             // the first row's time and the last's
  Micros end{0};

  int64_t Units(const Row& row, size_t column) const { return units[row.first + column]; }
};

Result<CostTrace> ParseCostTraceCsv(std::istream& in, std::string_view name);
// Opens `path` and parses it; kInvalidArgument "<path>: cannot open: <reason>" when unreadable.
Result<CostTrace> ReadCostTraceCsv(const std::string& path);

}  // namespace caudal::simulate
