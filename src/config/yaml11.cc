#include "config/yaml11.h"

#include <array>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <limits>

namespace caudal::config_internal {
namespace {

constexpr std::array<std::string_view, 11> kTrue = {"y",    "Y",    "yes", "Yes", "YES", "true",
                                                    "True", "TRUE", "on",  "On",  "ON"};
constexpr std::array<std::string_view, 11> kFalse = {"n",     "N",     "no",  "No",  "NO", "false",
                                                     "False", "FALSE", "off", "Off", "OFF"};

template <size_t N>
bool OneOf(std::string_view s, const std::array<std::string_view, N>& words) {
  for (std::string_view w : words) {
    if (s == w) return true;
  }
  return false;
}

bool IsDigitIn(char c, int base) {
  if (base == 16) return std::isxdigit(static_cast<unsigned char>(c)) != 0;
  return c >= '0' && c < static_cast<char>('0' + base);
}

// Go's strconv.ParseInt(s, 0, 64) after yaml.v2 dropped the underscores: an optional sign, then
// 0x / 0o / 0b / a leading 0 (octal) or decimal digits.
bool ParseGoInt(std::string_view s, int64_t* out) {
  bool negative = false;
  if (!s.empty() && (s[0] == '+' || s[0] == '-')) {
    negative = s[0] == '-';
    s.remove_prefix(1);
  }
  int base = 10;
  if (s.size() > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
    base = 16;
    s.remove_prefix(2);
  } else if (s.size() > 2 && s[0] == '0' && (s[1] == 'o' || s[1] == 'O')) {
    base = 8;
    s.remove_prefix(2);
  } else if (s.size() > 2 && s[0] == '0' && (s[1] == 'b' || s[1] == 'B')) {
    base = 2;
    s.remove_prefix(2);
  } else if (s.size() > 1 && s[0] == '0') {
    base = 8;
    s.remove_prefix(1);
  }
  if (s.empty()) return false;
  for (char c : s) {
    if (!IsDigitIn(c, base)) return false;
  }
  uint64_t magnitude = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), magnitude, base);
  if (ec != std::errc() || end != s.data() + s.size()) return false;
  const uint64_t max = negative ? uint64_t{1} << 63 : uint64_t{std::numeric_limits<int64_t>::max()};
  if (magnitude > max) return false;
  *out = negative ? static_cast<int64_t>(0 - magnitude) : static_cast<int64_t>(magnitude);
  return true;
}

// yaml.v2's float syntax: [-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?
bool IsYamlFloat(std::string_view s) {
  size_t i = 0;
  const auto digits = [&] {
    const size_t start = i;
    while (i < s.size() && s[i] >= '0' && s[i] <= '9') ++i;
    return i - start;
  };
  if (i < s.size() && (s[i] == '+' || s[i] == '-')) ++i;
  if (i < s.size() && s[i] == '.') {
    ++i;
    if (digits() == 0) return false;
  } else {
    if (digits() == 0) return false;
    if (i < s.size() && s[i] == '.') {
      ++i;
      digits();
    }
  }
  if (i < s.size() && (s[i] == 'e' || s[i] == 'E')) {
    ++i;
    if (i < s.size() && (s[i] == '+' || s[i] == '-')) ++i;
    if (digits() == 0) return false;
  }
  return i == s.size();
}

}  // namespace

Yaml11Scalar ResolvePlain(std::string_view text) {
  using Kind = Yaml11Scalar::Kind;
  if (text.empty() || text == "~" || text == "null" || text == "Null" || text == "NULL") {
    return {.kind = Kind::kNull};
  }
  if (OneOf(text, kTrue)) return {.kind = Kind::kBool, .boolean = true};
  if (OneOf(text, kFalse)) return {.kind = Kind::kBool, .boolean = false};
  for (std::string_view inf : {".inf", ".Inf", ".INF", "+.inf", "+.Inf", "+.INF"}) {
    if (text == inf) return {.kind = Kind::kFloat, .number = HUGE_VAL};
  }
  for (std::string_view inf : {"-.inf", "-.Inf", "-.INF"}) {
    if (text == inf) return {.kind = Kind::kFloat, .number = -HUGE_VAL};
  }
  if (text == ".nan" || text == ".NaN" || text == ".NAN") {
    return {.kind = Kind::kFloat, .number = std::numeric_limits<double>::quiet_NaN()};
  }
  const char c = text[0];
  if (!((c >= '0' && c <= '9') || c == '+' || c == '-' || c == '.')) return {};
  std::string plain;
  for (char ch : text) {
    if (ch != '_') plain += ch;
  }
  if (int64_t v = 0; ParseGoInt(plain, &v)) {
    return {.kind = Kind::kInt, .integer = v, .number = static_cast<double>(v)};
  }
  if (IsYamlFloat(plain)) {
    // Integers past int64 land here too, as yaml.v2 reads them: not an int the config accepts.
    return {.kind = Kind::kFloat, .number = std::strtod(plain.c_str(), nullptr)};
  }
  return {};
}

Yaml11Scalar Resolve(const YAML::Node& n) {
  if (n.IsNull()) return {.kind = Yaml11Scalar::Kind::kNull};
  if (!n.IsScalar() || n.Tag() != "?") return {};
  return ResolvePlain(n.Scalar());
}

std::string GoText(const Yaml11Scalar& s, std::string_view text) {
  using Kind = Yaml11Scalar::Kind;
  switch (s.kind) {
    case Kind::kNull:
      return "<nil>";
    case Kind::kBool:
      return s.boolean ? "true" : "false";
    case Kind::kInt:
      return std::to_string(s.integer);
    case Kind::kFloat: {
      if (std::isnan(s.number)) return "NaN";
      if (std::isinf(s.number)) return s.number > 0 ? "+Inf" : "-Inf";
      char buf[64];
      const auto [end, ec] = std::to_chars(buf, buf + sizeof buf, s.number);
      return ec == std::errc() ? std::string(buf, end) : std::string(text);
    }
    case Kind::kString:
      break;
  }
  return std::string(text);
}

}  // namespace caudal::config_internal
