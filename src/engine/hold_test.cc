#include "engine/hold.h"

#include <gtest/gtest.h>

#include <set>

namespace caudal::engine_internal {
namespace {

TEST(Hold, RoundTripsItsIdAndKeys) {
  const HoldId id = NewHoldId();
  const std::string key1 = "caudal:p:0:cc5,1/6000000:{5:alice}";
  const std::string key2(kMaxKeyLength, '\xff');
  const std::string text = EncodeHold(id, {key1, key2});
  auto d = DecodeHold(text);
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ(d->id, id);
  ASSERT_EQ(d->keys.size(), 2u);
  EXPECT_EQ(d->keys[0], key1);
  EXPECT_EQ(d->keys[1], key2);
  for (const char c : text) {
    EXPECT_TRUE(std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.')
        << "a header-safe, URL-safe id";
  }
}

TEST(Hold, FreshIdsAreDistinctAndWithinTheStoresWords) {
  std::set<std::pair<int64_t, int64_t>> seen;
  for (int i = 0; i < 1000; ++i) {
    const HoldId id = NewHoldId();
    ASSERT_GE(id.hi, 0);
    ASSERT_LT(id.hi, kHoldIdWordLimit);
    ASSERT_GE(id.lo, 0);
    ASSERT_LT(id.lo, kHoldIdWordLimit);
    EXPECT_TRUE(seen.insert({id.hi, id.lo}).second);
  }
}

// `s` with its character at `at` replaced by `c`.
std::string With(std::string s, size_t at, char c) {
  s[at] = c;
  return s;
}

TEST(Hold, RefusesWhatEncodeHoldCouldNotHaveWritten) {
  const std::string good = EncodeHold({.hi = 1, .lo = 2}, {"k"});
  ASSERT_TRUE(DecodeHold(good).ok());
  std::vector<std::string> keys;
  for (size_t i = 0; i <= kMaxHeldSlots; ++i) keys.push_back("key" + std::to_string(i));
  const std::vector<std::string_view> many(keys.begin(), keys.end());
  const std::string max_slots =
      EncodeHold({}, std::vector<std::string_view>(many.begin(), many.end() - 1));
  ASSERT_TRUE(DecodeHold(max_slots).ok());
  for (const std::string& bad : {
           std::string(),
           good.substr(0, 26),          // no keys part
           With(good, 26, ','),         // no dot
           With(good, 3, 'G'),          // not hex
           With(good, 3, 'A'),          // upper-case hex
           good + "=",                  // padding
           good + "A",                  // a stray character
           EncodeHold({}, {}),          // no keys
           EncodeHold({}, {"k", "k"}),  // a key twice
           EncodeHold({}, many),        // too many keys
           EncodeHold({}, {std::string(kMaxKeyLength + 1, 'k')}),
           std::string(kMaxHoldIdLength + 1, 'a'),
       }) {
    SCOPED_TRACE(bad);
    auto d = DecodeHold(bad);
    ASSERT_FALSE(d.ok());
    EXPECT_EQ(d.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(d.status().message().find("hold"), std::string::npos);
  }
}

}  // namespace
}  // namespace caudal::engine_internal
