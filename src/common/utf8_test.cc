#include "common/utf8.h"

#include <gtest/gtest.h>

#include <string>

namespace caudal {
namespace {

TEST(Utf8, AcceptsWellFormedText) {
  EXPECT_TRUE(IsValidUtf8(""));
  EXPECT_TRUE(IsValidUtf8("plain ascii"));
  EXPECT_TRUE(IsValidUtf8("caf\xC3\xA9"));                   // é, two bytes
  EXPECT_TRUE(IsValidUtf8("\xE2\x82\xAC"));                  // €, three bytes
  EXPECT_TRUE(IsValidUtf8("\xF0\x9F\x98\x80"));              // U+1F600, four bytes
  EXPECT_TRUE(IsValidUtf8("\xF4\x8F\xBF\xBF"));              // U+10FFFF, the last code point
  EXPECT_TRUE(IsValidUtf8(std::string("nul\0inside", 10)));  // NUL is valid UTF-8
}

TEST(Utf8, FindsTheFirstMalformedByte) {
  EXPECT_EQ(FirstInvalidUtf8("ab\xFF"), 2u);
  EXPECT_EQ(FirstInvalidUtf8("ok \xC3"), 3u);           // truncated sequence
  EXPECT_EQ(FirstInvalidUtf8("\x80"), 0u);              // lone continuation byte
  EXPECT_EQ(FirstInvalidUtf8("\xC0\xAF"), 0u);          // overlong '/'
  EXPECT_EQ(FirstInvalidUtf8("\xE0\x80\xAF"), 0u);      // overlong, three bytes
  EXPECT_EQ(FirstInvalidUtf8("x\xED\xA0\x80"), 1u);     // surrogate U+D800
  EXPECT_EQ(FirstInvalidUtf8("\xF4\x90\x80\x80"), 0u);  // past U+10FFFF
  EXPECT_EQ(FirstInvalidUtf8("\xC3\xA9\xC3("), 2u);     // bad continuation
  EXPECT_EQ(Utf8SequenceLength(""), 0u);
  EXPECT_EQ(Utf8SequenceLength("\xE2\x82\xAC!"), 3u);
}

TEST(Utf8, FindsControlCharactersOfEveryKind) {
  EXPECT_EQ(ControlCharacterLength(std::string("\0x", 2)), 1u);
  for (const char* c : {"\r", "\n", "\x1b[31m", "\x07", "\x7f"}) {
    EXPECT_EQ(ControlCharacterLength(c), 1u) << c;
  }
  EXPECT_EQ(ControlCharacterLength("\xC2\x9B"), 2u);  // U+009B, CSI
  EXPECT_EQ(ControlCharacter("\xC2\x9B"), U'\u009B');
  EXPECT_EQ(ControlCharacterLength("\xE2\x80\xA8"), 3u);  // U+2028, LINE SEPARATOR
  EXPECT_EQ(ControlCharacter("\xE2\x80\xA9"), U'\u2029');
  EXPECT_EQ(ControlCharacter("\x7f"), U'\x7f');
  for (const char* c : {"", "a", " ", "~", "\xC2\xA0", "\xC3\xA9", "\xE2\x80\xA7", "\xE2\x82\xAC",
                        "\xC2", "\xE2\x80"}) {
    EXPECT_EQ(ControlCharacterLength(c), 0u) << c;
  }
}

}  // namespace
}  // namespace caudal
