// Cat: builds a message from pieces by appending (strings, string_views, literals, integers).
// It avoids `"literal" + std::string` chains, which also trip GCC 12's -Wrestrict at -O3.
#pragma once

#include <charconv>
#include <concepts>
#include <string>
#include <string_view>

namespace caudal {

namespace cat_internal {
inline void Append(std::string& out, std::string_view s) { out.append(s); }
inline void Append(std::string& out, char c) { out.push_back(c); }
template <std::integral T>
requires(!std::same_as<T, char> && !std::same_as<T, bool>) void Append(std::string& out, T v) {
  char digits[24];  // any 64-bit integer with its sign
  const auto [end, ec] = std::to_chars(digits, digits + sizeof digits, v);
  out.append(digits, end);
}
}  // namespace cat_internal

template <typename... Parts>
std::string Cat(const Parts&... parts) {
  std::string out;
  (cat_internal::Append(out, parts), ...);
  return out;
}

// "\"text\"", for quoting user input in messages.
inline std::string Quoted(std::string_view s) { return Cat('"', s, '"'); }

}  // namespace caudal
