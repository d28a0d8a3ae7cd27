#include "common/utf8.h"

namespace caudal {

size_t Utf8SequenceLength(std::string_view s) {
  if (s.empty()) return 0;
  const auto b = [&](size_t i) { return static_cast<unsigned char>(s[i]); };
  const unsigned char c = b(0);
  if (c < 0x80) return 1;
  size_t len = 0;
  if (c >= 0xC2 && c <= 0xDF) len = 2;
  if (c >= 0xE0 && c <= 0xEF) len = 3;
  if (c >= 0xF0 && c <= 0xF4) len = 4;
  if (len == 0 || s.size() < len) return 0;
  for (size_t i = 1; i < len; ++i) {
    if ((b(i) & 0xC0) != 0x80) return 0;
  }
  // The second byte's narrower ranges: no overlong forms, no surrogates, nothing past U+10FFFF.
  if ((c == 0xE0 && b(1) < 0xA0) || (c == 0xED && b(1) > 0x9F) || (c == 0xF0 && b(1) < 0x90) ||
      (c == 0xF4 && b(1) > 0x8F)) {
    return 0;
  }
  return len;
}

size_t FirstInvalidUtf8(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    // ASCII runs are the common case: no sequence to decode.
    if (static_cast<unsigned char>(s[i]) < 0x80) {
      ++i;
      continue;
    }
    const size_t n = Utf8SequenceLength(s.substr(i));
    if (n == 0) return i;
    i += n;
  }
  return s.size();
}

size_t ControlCharacterLength(std::string_view s) {
  if (s.empty()) return 0;
  const auto b = [&](size_t i) { return static_cast<unsigned char>(s[i]); };
  if (b(0) < 0x20 || b(0) == 0x7F) return 1;
  if (b(0) == 0xC2 && s.size() >= 2 && b(1) >= 0x80 && b(1) <= 0x9F) return 2;
  if (b(0) == 0xE2 && s.size() >= 3 && b(1) == 0x80 && (b(2) == 0xA8 || b(2) == 0xA9)) return 3;
  return 0;
}

char32_t ControlCharacter(std::string_view s) {
  const auto b = [&](size_t i) { return static_cast<unsigned char>(s[i]); };
  switch (ControlCharacterLength(s)) {
    case 1:
      return b(0);
    case 2:
      return b(1);  // U+0080..U+009F: 0xC2 then the code point itself
    default:
      return 0x2000 + (b(2) & 0x3F);
  }
}

}  // namespace caudal
