#include "simulate/trace_csv.h"

#include <algorithm>
#include <array>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <fstream>
#include <unordered_map>

#include "caudal/engine/engine.h"
#include "caudal/store/store.h"

namespace caudal::simulate {
namespace {

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r'))
    s.remove_suffix(1);
  return s;
}

bool IsDigit(char c) { return c >= '0' && c <= '9'; }
bool StartsHeader(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '"'; }

// Whole digits only (no sign, no spaces); false on overflow or anything else.
bool ParseDigits(std::string_view s, int64_t* out) {
  if (s.empty() || !std::all_of(s.begin(), s.end(), IsDigit)) return false;
  const auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), *out);
  return ec == std::errc() && ptr == s.data() + s.size();
}

// "1700000000123" or "12.5" (at most three decimals) milliseconds, as microseconds.
bool ParseTimestampUs(std::string_view s, int64_t* us) {
  const size_t dot = s.find('.');
  const std::string_view whole = s.substr(0, dot);
  std::string_view frac = dot == std::string_view::npos ? std::string_view() : s.substr(dot + 1);
  if (dot != std::string_view::npos && (frac.empty() || frac.size() > 3)) return false;
  int64_t ms = 0;
  int64_t f = 0;
  if (!ParseDigits(whole, &ms) || ms > kMaxTraceTimestampMs) return false;
  if (!frac.empty() && !ParseDigits(frac, &f)) return false;
  for (size_t i = frac.size(); i < 3; ++i) f *= 10;
  *us = ms * 1000 + f;
  return true;
}

Status LineError(std::string_view name, int64_t line, const std::string& what) {
  return Status::InvalidArgument(std::string(name) + ":" + std::to_string(line) + ": " + what);
}

// Calls `row(line, text)` for each line of `in` that is neither blank nor a comment, trimmed,
// with its 1-based number, until one returns an error; lines are read with a bounded buffer.
template <typename Fn>
Status ForEachLine(std::istream& in, std::string_view name, Fn row) {
  std::array<char, kMaxTraceLineLength + 2> buf;
  for (int64_t line = 1;; ++line) {
    in.getline(buf.data(), static_cast<std::streamsize>(buf.size()));
    const auto got = static_cast<size_t>(in.gcount());
    if (in.bad()) return Status::InvalidArgument(std::string(name) + ": read error");
    const size_t len = in.eof() ? got : got - 1;  // gcount includes the extracted '\n'
    if ((in.fail() && !in.eof()) || len > kMaxTraceLineLength) {  // no newline within the buffer
      return LineError(name, line,
                       "line longer than " + std::to_string(kMaxTraceLineLength) + " bytes");
    }
    if (got == 0 && in.eof()) break;
    const std::string_view text = Trim(std::string_view(buf.data(), len));
    if (!text.empty() && text.front() != '#') {
      if (Status s = row(line, text); !s.ok()) return s;
    }
    if (in.eof()) break;
  }
  return Status::Ok();
}

// `text` split at its commas, each field trimmed; false past `max` fields.
bool SplitFields(std::string_view text, size_t max, std::vector<std::string_view>* fields) {
  fields->clear();
  while (true) {
    if (fields->size() == max) return false;
    const size_t comma = text.find(',');
    fields->push_back(Trim(text.substr(0, comma)));
    if (comma == std::string_view::npos) return true;
    text.remove_prefix(comma + 1);
  }
}

std::string TimestampError(std::string_view field) {
  return "timestamp \"" + std::string(field) + "\" is not a number of milliseconds between 0 and " +
         std::to_string(kMaxTraceTimestampMs) + " (at most three decimals)";
}

struct Parser {
  std::string_view name;
  Traffic traffic;
  std::unordered_map<std::string, uint32_t> key_ids;

  Status LineError(int64_t line, const std::string& what) const {
    return simulate::LineError(name, line, what);
  }

  uint32_t KeyId(std::string_view key) {
    auto [it, inserted] =
        key_ids.try_emplace(std::string(key), static_cast<uint32_t>(traffic.keys.size()));
    if (inserted) traffic.keys.emplace_back(key);
    return it->second;
  }

  // Parses one non-blank, non-comment, non-header line.
  Status Row(int64_t line, std::string_view text) {
    if (text.find('"') != std::string_view::npos) {
      return LineError(line, "quoted fields are not supported (keys cannot contain commas)");
    }
    std::array<std::string_view, 3> fields;
    size_t n = 0;
    while (true) {
      const size_t comma = text.find(',');
      if (n == fields.size()) {
        return LineError(line, "expected timestamp_ms[,key[,cost]], got more than 3 fields");
      }
      fields[n++] = Trim(text.substr(0, comma));
      if (comma == std::string_view::npos) break;
      text.remove_prefix(comma + 1);
    }
    Request r;
    if (!ParseTimestampUs(fields[0], &r.at_us)) return LineError(line, TimestampError(fields[0]));
    const std::string_view key = n > 1 ? fields[1] : std::string_view();
    if (key.size() > kMaxKeyLength) {
      return LineError(line, "key longer than " + std::to_string(kMaxKeyLength) + " bytes");
    }
    if (n > 2 && (!ParseDigits(fields[2], &r.cost) || r.cost > kMaxCost)) {
      return LineError(line, "cost \"" + std::string(fields[2]) +
                                 "\" is not a whole number between 0 and " +
                                 std::to_string(kMaxCost));
    }
    if (static_cast<int64_t>(traffic.requests.size()) == kMaxRequests) {
      return LineError(line, "more than " + std::to_string(kMaxRequests) +
                                 " requests; the simulator stops there");
    }
    r.key = KeyId(key);
    traffic.requests.push_back(r);
    return Status::Ok();
  }
};

// The header and rows of a CostTrace.
struct CostParser {
  CostTrace trace;
  std::unordered_map<std::string, uint32_t> key_ids;
  std::vector<std::string_view> fields;

  Status LineError(int64_t line, const std::string& what) const {
    return simulate::LineError(trace.name, line, what);
  }

  Status Line(int64_t line, std::string_view text) {
    if (text.find('"') != std::string_view::npos) {
      return LineError(line, "quoted fields are not supported (keys cannot contain commas)");
    }
    return trace.header_line == 0 ? Header(line, text) : Row(line, text);
  }

  Status Header(int64_t line, std::string_view text) {
    const size_t max = 2 + kMaxCostDimensions;
    const bool fit = SplitFields(text, max, &fields);
    if (fields.size() < 3 || fields[0] != "timestamp_ms" || fields[1] != "key") {
      return LineError(line, "expected a header timestamp_ms,key,<dimension>... (got \"" +
                                 std::string(text.substr(0, 80)) + "\")");
    }
    if (!fit) {
      return LineError(line, "at most " + std::to_string(kMaxCostDimensions) +
                                 " dimensions' columns (a request's costs name no more)");
    }
    for (size_t i = 2; i < fields.size(); ++i) {
      const std::string_view d = fields[i];
      if (Status s = ValidateDimensionName(d); !s.ok()) {
        return LineError(line, "column " + std::to_string(i + 1) + ": " + s.message());
      }
      if (std::find(trace.dimensions.begin(), trace.dimensions.end(), d) !=
          trace.dimensions.end()) {
        return LineError(line, "column \"" + std::string(d) + "\" is named twice");
      }
      trace.dimensions.emplace_back(d);
    }
    trace.header_line = line;
    return Status::Ok();
  }

  Status Row(int64_t line, std::string_view text) {
    const size_t columns = 2 + trace.dimensions.size();
    if (!SplitFields(text, columns, &fields) || fields.size() != columns) {
      return LineError(
          line, "expected " + std::to_string(columns) + " fields, as the header names (got " +
                    (fields.size() == columns ? "more" : std::to_string(fields.size())) + ")");
    }
    CostTrace::Row r{.at_us = 0, .key = 0, .line = line, .first = trace.units.size()};
    if (!ParseTimestampUs(fields[0], &r.at_us)) return LineError(line, TimestampError(fields[0]));
    const std::string_view key = fields[1];
    if (key.empty() || key.size() > kMaxDescriptorValueLength) {
      return LineError(line, "key: expected 1 to " + std::to_string(kMaxDescriptorValueLength) +
                                 " bytes (it is the value of each identity field)");
    }
    if (static_cast<int64_t>(trace.rows.size()) == kMaxCostTraceRows) {
      return LineError(line, "more than " + std::to_string(kMaxCostTraceRows) +
                                 " requests; the simulator stops there");
    }
    bool named = false;
    for (size_t i = 0; i < trace.dimensions.size(); ++i) {
      const std::string_view cell = fields[2 + i];
      int64_t units = kNotNamed;
      if (!cell.empty() && (!ParseDigits(cell, &units) || units > kMaxCost)) {
        return LineError(line, trace.dimensions[i] + " \"" + std::string(cell.substr(0, 40)) +
                                   "\" is not a whole number between 0 and " +
                                   std::to_string(kMaxCost));
      }
      named = named || units != kNotNamed;
      trace.units.push_back(units);
    }
    if (!named) return LineError(line, "no cost: every dimension's cell is empty");
    auto [it, inserted] =
        key_ids.try_emplace(std::string(key), static_cast<uint32_t>(trace.keys.size()));
    if (inserted) trace.keys.emplace_back(key);
    r.key = it->second;
    trace.rows.push_back(r);
    return Status::Ok();
  }
};

}  // namespace

Result<Traffic> ParseTraceCsv(std::istream& in, std::string_view name) {
  Parser p{.name = name, .traffic = {}, .key_ids = {}};
  const Status read = ForEachLine(in, name, [&](int64_t line, std::string_view text) {
    const bool header = line == 1 && StartsHeader(text.front());
    return header ? Status::Ok() : p.Row(line, text);
  });
  if (!read.ok()) return read;
  if (p.traffic.requests.empty()) {
    return Status::InvalidArgument(std::string(name) + ": no requests (expected rows of " +
                                   "timestamp_ms[,key[,cost]])");
  }
  auto& reqs = p.traffic.requests;
  std::stable_sort(reqs.begin(), reqs.end(),
                   [](const Request& a, const Request& b) { return a.at_us < b.at_us; });
  p.traffic.start = Micros(reqs.front().at_us);
  p.traffic.end = Micros(reqs.back().at_us);
  return std::move(p.traffic);
}

Result<Traffic> ReadTraceCsv(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return Status::InvalidArgument(path + ": cannot open: " + std::strerror(errno));
  }
  return ParseTraceCsv(in, path);
}

Result<CostTrace> ParseCostTraceCsv(std::istream& in, std::string_view name) {
  CostParser p;
  p.trace.name = std::string(name);
  const Status read = ForEachLine(
      in, name, [&](int64_t line, std::string_view text) { return p.Line(line, text); });
  if (!read.ok()) return read;
  if (p.trace.header_line == 0) {
    return Status::InvalidArgument(std::string(name) +
                                   ": no header (expected timestamp_ms,key,<dimension>...)");
  }
  if (p.trace.rows.empty()) return Status::InvalidArgument(std::string(name) + ": no requests");
  auto& rows = p.trace.rows;
  std::stable_sort(rows.begin(), rows.end(), [](const CostTrace::Row& a, const CostTrace::Row& b) {
    return a.at_us < b.at_us;
  });
  p.trace.start = Micros(rows.front().at_us);
  p.trace.end = Micros(rows.back().at_us);
  return std::move(p.trace);
}

Result<CostTrace> ReadCostTraceCsv(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return Status::InvalidArgument(path + ": cannot open: " + std::strerror(errno));
  }
  return ParseCostTraceCsv(in, path);
}

}  // namespace caudal::simulate
