// UTF-8 validation (RFC 3629): what protobuf's string fields and YAML text must hold.
#pragma once

#include <cstddef>
#include <string_view>

namespace caudal {

// Length of the well-formed UTF-8 sequence at the start of `s` (1 to 4), or 0 when `s` is empty
// or does not start with one (overlong forms, surrogates and code points past U+10FFFF are not).
size_t Utf8SequenceLength(std::string_view s);

// The offset of the first byte of `s` that does not start a well-formed sequence, or s.size()
// when all of `s` is valid UTF-8.
size_t FirstInvalidUtf8(std::string_view s);

inline bool IsValidUtf8(std::string_view s) { return FirstInvalidUtf8(s) == s.size(); }

// A character that ends a line or drives a terminal: C0 controls (NUL, CR, LF, ESC...), DEL, C1
// controls (U+0080..U+009F, CSI among them) and the line and paragraph separators U+2028 and
// U+2029. The length of the one at the start of `s` (1 to 3 bytes), or 0 when `s` starts with
// any other character (or is empty, or is not UTF-8 there). Writers of logs and metrics escape
// or replace these.
size_t ControlCharacterLength(std::string_view s);
// The code point of that control character (Preconditions: ControlCharacterLength(s) > 0).
char32_t ControlCharacter(std::string_view s);

}  // namespace caudal
