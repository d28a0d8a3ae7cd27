#include "store/siphash.h"

#include <gtest/gtest.h>

#include <set>
#include <string>

namespace caudal {
namespace {

// The reference key 00 01 … 0f of the SipHash paper and its test vectors.
constexpr SipKey kPaperKey{.k0 = 0x0706050403020100ULL, .k1 = 0x0f0e0d0c0b0a0908ULL};

std::string Bytes(int n) {
  std::string s;
  for (int i = 0; i < n; ++i) s.push_back(static_cast<char>(i));
  return s;
}

TEST(SipHash24, MatchesThePaperTestVectors) {
  EXPECT_EQ(SipHash24(kPaperKey, ""), 0x726fdb47dd0e0e31ULL);
  EXPECT_EQ(SipHash24(kPaperKey, Bytes(1)), 0x74f839c593dc67fdULL);
  EXPECT_EQ(SipHash24(kPaperKey, Bytes(15)), 0xa129ca6149be45e5ULL);  // the paper's example
}

TEST(SipHash24, DependsOnTheKeyAndEveryByte) {
  const SipKey other{.k0 = kPaperKey.k0, .k1 = kPaperKey.k1 ^ 1};
  EXPECT_NE(SipHash24(kPaperKey, "user:42"), SipHash24(other, "user:42"));
  std::set<uint64_t> seen;
  std::string s(24, 'a');
  for (size_t i = 0; i < s.size(); ++i) {
    std::string t = s;
    t[i] = 'b';
    seen.insert(SipHash24(kPaperKey, t));
  }
  seen.insert(SipHash24(kPaperKey, s));
  seen.insert(SipHash24(kPaperKey, s.substr(0, 23)));
  EXPECT_EQ(seen.size(), s.size() + 2);
}

TEST(SipHash24, RandomKeysDiffer) {
  const SipKey a = RandomSipKey();
  const SipKey b = RandomSipKey();
  EXPECT_FALSE(a.k0 == b.k0 && a.k1 == b.k1);
}

}  // namespace
}  // namespace caudal
