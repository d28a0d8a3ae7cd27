#include "common/port.h"

#include <charconv>

namespace caudal {

std::optional<uint16_t> ParsePort(std::string_view text, uint16_t min) {
  unsigned v = 0;
  const char* end = text.data() + text.size();
  if (text.empty() || text.front() < '0' || text.front() > '9') return std::nullopt;
  const auto [ptr, ec] = std::from_chars(text.data(), end, v);
  if (ec != std::errc() || ptr != end || v < min || v > 65535) return std::nullopt;
  return static_cast<uint16_t>(v);
}

}  // namespace caudal
