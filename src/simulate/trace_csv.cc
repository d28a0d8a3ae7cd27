#include "simulate/trace_csv.h"

#include <algorithm>
#include <array>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <fstream>
#include <unordered_map>

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

struct Parser {
  std::string_view name;
  Traffic traffic;
  std::unordered_map<std::string, uint32_t> key_ids;

  Status LineError(int64_t line, const std::string& what) const {
    return Status::InvalidArgument(std::string(name) + ":" + std::to_string(line) + ": " + what);
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
    if (!ParseTimestampUs(fields[0], &r.at_us)) {
      return LineError(line, "timestamp \"" + std::string(fields[0]) +
                                 "\" is not a number of milliseconds between 0 and " +
                                 std::to_string(kMaxTraceTimestampMs) +
                                 " (at most three decimals)");
    }
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

}  // namespace

Result<Traffic> ParseTraceCsv(std::istream& in, std::string_view name) {
  Parser p{.name = name, .traffic = {}, .key_ids = {}};
  std::array<char, kMaxTraceLineLength + 2> buf;
  for (int64_t line = 1;; ++line) {
    in.getline(buf.data(), static_cast<std::streamsize>(buf.size()));
    const auto got = static_cast<size_t>(in.gcount());
    if (in.bad()) return Status::InvalidArgument(std::string(name) + ": read error");
    const size_t len = in.eof() ? got : got - 1;  // gcount includes the extracted '\n'
    if ((in.fail() && !in.eof()) || len > kMaxTraceLineLength) {  // no newline within the buffer
      return p.LineError(line,
                         "line longer than " + std::to_string(kMaxTraceLineLength) + " bytes");
    }
    if (got == 0 && in.eof()) break;
    const std::string_view text = Trim(std::string_view(buf.data(), len));
    const bool header = line == 1 && !text.empty() && StartsHeader(text.front());
    if (!text.empty() && text.front() != '#' && !header) {
      if (Status s = p.Row(line, text); !s.ok()) return s;
    }
    if (in.eof()) break;
  }
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

}  // namespace caudal::simulate
