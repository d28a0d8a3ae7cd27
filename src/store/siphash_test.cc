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

// SipHash-1-3 under the all-zero key, as CPython computes it (its bytes hash is SipHash-1-3 of
// the bytes under a key that PYTHONHASHSEED=0 leaves zero; hash(b"") alone is special-cased):
// an independent implementation, over every length of the last block and several blocks.
TEST(SipHash13, MatchesAnIndependentImplementation) {
  constexpr SipKey kZero{};
  EXPECT_EQ(SipHash13(kZero, "siphash"), 0x8264ceeccb16bcbeULL);
  EXPECT_EQ(SipHash13(kZero, "user:42"), 0x223dd74fb15f308dULL);
  EXPECT_EQ(SipHash13(kZero, Bytes(1)), 0x68a914128e01e473ULL);
  EXPECT_EQ(SipHash13(kZero, Bytes(7)), 0x2f098ab0c751325aULL);
  EXPECT_EQ(SipHash13(kZero, Bytes(8)), 0xead411e67ebe2eeaULL);
  EXPECT_EQ(SipHash13(kZero, Bytes(15)), 0xf30eb725bb91c9eaULL);
  EXPECT_EQ(SipHash13(kZero, Bytes(16)), 0x8972188433a5c5b7ULL);
  EXPECT_EQ(SipHash13(kZero, Bytes(63)), 0x385d3e39e5f37359ULL);
  // Its rounds are not SipHash-2-4's.
  EXPECT_NE(SipHash13(kPaperKey, Bytes(15)), SipHash24(kPaperKey, Bytes(15)));
}

// Either half of the key, and every byte of the input, its position and its length, change the
// hash.
void ExpectDependsOnTheKeyAndEveryByte(uint64_t (*hash)(const SipKey&, std::string_view)) {
  for (const SipKey other : {SipKey{.k0 = kPaperKey.k0 ^ 1, .k1 = kPaperKey.k1},
                             SipKey{.k0 = kPaperKey.k0, .k1 = kPaperKey.k1 ^ 1}}) {
    EXPECT_NE(hash(kPaperKey, "user:42"), hash(other, "user:42"));
  }
  std::set<uint64_t> seen;
  std::string s(24, 'a');
  for (size_t i = 0; i < s.size(); ++i) {
    std::string t = s;
    t[i] = 'b';
    seen.insert(hash(kPaperKey, t));
  }
  seen.insert(hash(kPaperKey, s));
  seen.insert(hash(kPaperKey, s.substr(0, 23)));
  EXPECT_EQ(seen.size(), s.size() + 2);
}

TEST(SipHash13, DependsOnTheKeyAndEveryByte) { ExpectDependsOnTheKeyAndEveryByte(SipHash13); }

TEST(SipHash24, DependsOnTheKeyAndEveryByte) { ExpectDependsOnTheKeyAndEveryByte(SipHash24); }

TEST(SipHash24, RandomKeysDiffer) {
  const SipKey a = RandomSipKey();
  const SipKey b = RandomSipKey();
  EXPECT_FALSE(a.k0 == b.k0 && a.k1 == b.k1);
}

}  // namespace
}  // namespace caudal
