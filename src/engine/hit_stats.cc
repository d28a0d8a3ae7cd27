#include "engine/hit_stats.h"

#include <algorithm>
#include <cmath>

#include "common/utf8.h"

namespace caudal::engine_internal {

int64_t NearLimitThreshold(int64_t limit) {
  constexpr float kNearLimitRatio = 0.8f;  // the reference's NEAR_LIMIT_RATIO default
  const float product = static_cast<float>(limit) * kNearLimitRatio;
  return static_cast<int64_t>(std::floor(static_cast<double>(product)));
}

HitSplit SplitHits(int64_t limit, int64_t before, int64_t hits, bool shadow) {
  HitSplit s;
  const int64_t near = NearLimitThreshold(limit);
  const int64_t after = before + hits;
  if (after <= limit) {
    s.within_limit = static_cast<uint64_t>(hits);
    if (after > near) s.near_limit = static_cast<uint64_t>(before >= near ? hits : after - near);
    return s;
  }
  if (before >= limit) {
    s.over_limit = static_cast<uint64_t>(hits);
  } else {
    s.over_limit = static_cast<uint64_t>(after - limit);
    s.near_limit = static_cast<uint64_t>(limit - std::max(near, before));
  }
  if (shadow) s.shadow_mode = s.over_limit;
  return s;
}

namespace {

bool IsDigit(char c) { return c >= '0' && c <= '9'; }

// The end of an IPv4-shaped run starting at `i` (group `group` of four), or npos. Groups take
// as many digits as they can (at most 3) and give some back when the rest needs them, as the
// reference's regular expression (\d{1,3}\.\d{1,3}\.\d{1,3}\.\d{1,3}) does.
size_t MatchIpv4(const std::string& s, size_t i, int group) {
  size_t digits = 0;
  while (digits < 3 && i + digits < s.size() && IsDigit(s[i + digits])) ++digits;
  for (; digits > 0; --digits) {
    const size_t end = i + digits;
    if (group == 3) return end;
    if (end < s.size() && s[end] == '.') {
      const size_t rest = MatchIpv4(s, end + 1, group + 1);
      if (rest != std::string::npos) return rest;
    }
  }
  return std::string::npos;
}

}  // namespace

void SanitizeStatName(std::string& name) {
  // A control character is one '_' too: the name becomes a Prometheus label value, whose text
  // format escapes only backslash, quote and newline (some parsers refuse other escapes), and
  // such a character would pass raw to whatever reads /metrics.
  size_t out = 0;
  for (size_t i = 0; i < name.size();) {
    const size_t control = ControlCharacterLength(std::string_view(name).substr(i));
    const char c = name[i];
    name[out++] = control > 0 || c == ':' || c == '|' ? '_' : c;
    i += std::max<size_t>(control, 1);
  }
  name.resize(out);
  for (size_t i = 0; i < name.size();) {
    const size_t end = IsDigit(name[i]) ? MatchIpv4(name, i, 0) : std::string::npos;
    if (end == std::string::npos) {
      ++i;
      continue;
    }
    std::replace(name.begin() + static_cast<std::ptrdiff_t>(i),
                 name.begin() + static_cast<std::ptrdiff_t>(end), '.', '_');
    i = end;
  }
}

}  // namespace caudal::engine_internal
