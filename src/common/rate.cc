#include <charconv>
#include <limits>

#include "caudal/common/clock.h"

namespace caudal {
namespace {

struct Unit {
  std::string_view suffix;
  int64_t micros;
};

// Longest suffixes first so "ms" is not read as "m" + garbage.
constexpr Unit kUnits[] = {
    {"us", 1},
    {"ms", 1'000},
    {"s", 1'000'000},
    {"m", 60'000'000},
    {"h", 3'600'000'000},
    {"d", 86'400'000'000},
    {"w", 604'800'000'000},
    {"y", 31'536'000'000'000},
};

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

Status Bad(std::string_view what, std::string_view text, std::string_view why) {
  std::string m;
  m += what;
  m += " \"";
  m += text;
  m += "\": ";
  m += why;
  return Status::InvalidArgument(std::move(m));
}

// Parses the digits at the front of s; sets *rest to what follows. Fails on no digits/overflow.
bool ParseCount(std::string_view s, int64_t* value, std::string_view* rest) {
  const char* end = s.data() + s.size();
  const auto [ptr, ec] = std::from_chars(s.data(), end, *value);
  if (ec != std::errc() || ptr == s.data()) return false;
  *rest = std::string_view(ptr, static_cast<size_t>(end - ptr));
  return true;
}

Result<Micros> ParseDurationImpl(std::string_view original, std::string_view s,
                                 bool count_optional) {
  int64_t count = 1;
  std::string_view unit = s;
  if (!s.empty() && s.front() >= '0' && s.front() <= '9') {
    if (!ParseCount(s, &count, &unit)) return Bad("duration", original, "number too large");
  } else if (!count_optional) {
    return Bad("duration", original,
               "expected a whole number followed by a unit (us, ms, s, m, h, d, w, y)");
  }
  for (const Unit& u : kUnits) {
    if (unit == u.suffix) {
      if (count > std::numeric_limits<int64_t>::max() / u.micros) {
        return Bad("duration", original, "too long");
      }
      return Micros(count * u.micros);
    }
  }
  if (unit.empty()) return Bad("duration", original, "missing unit (us, ms, s, m, h, d, w, y)");
  return Bad("duration", original, "unknown unit (expected us, ms, s, m, h, d, w or y)");
}

}  // namespace

Result<Micros> ParseDuration(std::string_view text) {
  return ParseDurationImpl(text, Trim(text), /*count_optional=*/false);
}

Result<Rate> ParseRate(std::string_view text) {
  const std::string_view s = Trim(text);
  const size_t slash = s.find('/');
  if (slash == std::string_view::npos) {
    return Bad("rate", text, "expected <count>/<duration>, e.g. 100/1m");
  }
  const std::string_view count_text = Trim(s.substr(0, slash));
  int64_t count = 0;
  std::string_view rest;
  if (!ParseCount(count_text, &count, &rest) || !rest.empty()) {
    return Bad("rate", text, "the count before '/' must be a whole number");
  }
  if (count <= 0) return Bad("rate", text, "the count must be positive");
  auto period = ParseDurationImpl(text, Trim(s.substr(slash + 1)), /*count_optional=*/true);
  if (!period.ok()) return period.status();
  if (period->count() <= 0) return Bad("rate", text, "the period must be positive");
  return Rate{.count = count, .period = *period};
}

std::string FormatDuration(Micros d) {
  const int64_t us = d.count();
  if (us == 0) return "0s";
  for (auto it = std::rbegin(kUnits); it != std::rend(kUnits); ++it) {
    if (us % it->micros == 0) return std::to_string(us / it->micros) + std::string(it->suffix);
  }
  return std::to_string(us) + "us";
}

std::string FormatRate(const Rate& r) {
  return std::to_string(r.count) + "/" + FormatDuration(r.period);
}

}  // namespace caudal
