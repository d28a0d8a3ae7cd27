#include "caudal/engine/ip.h"

#include <gtest/gtest.h>

#include <string_view>

namespace caudal {
namespace {

TEST(IpAddress, ParsesAndPrintsBothFamilies) {
  EXPECT_EQ(IpAddress::Parse("203.0.113.7")->ToString(), "203.0.113.7");
  EXPECT_EQ(IpAddress::Parse("10.0.105.255")->ToString(), "10.0.105.255");
  EXPECT_EQ(IpAddress::Parse("2001:DB8:0:0::1")->ToString(), "2001:db8::1");
  EXPECT_EQ(IpAddress::Parse("::ffff:10.1.2.3")->family, IpFamily::kV4);
  for (const char* bad : {"", "1.2.3", "1.2.3.4.5", "256.1.1.1", "::g", " 1.2.3.4", "1.2.3.4/8",
                          "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"}) {
    EXPECT_FALSE(IpAddress::Parse(bad).ok()) << bad;
  }
}

TEST(IpAddress, RefusesTextHiddenAfterANul) {
  // inet_pton stops at a NUL: without a check, "1.2.3.4\0anything" would pass as 1.2.3.4.
  using namespace std::string_view_literals;
  for (std::string_view bad : {"1.2.3.4\0"sv, "1.2.3.4\0junk"sv, "::1\0:2"sv, "\0"sv}) {
    EXPECT_FALSE(IpAddress::Parse(bad).ok()) << bad.size();
    EXPECT_FALSE(CidrBlock::Parse(bad).ok()) << bad.size();
  }
  EXPECT_FALSE(CidrBlock::Parse("10.0.0.0/8\0"sv).ok());
}

TEST(IpAddress, MasksToThePrefix) {
  EXPECT_EQ(IpAddress::Parse("203.0.113.77")->Masked(24).ToString(), "203.0.113.0");
  EXPECT_EQ(IpAddress::Parse("203.0.113.77")->Masked(27).ToString(), "203.0.113.64");
  EXPECT_EQ(IpAddress::Parse("203.0.113.77")->Masked(0).ToString(), "0.0.0.0");
  EXPECT_EQ(IpAddress::Parse("2001:db8:aa:bb:cc::1")->Masked(64).ToString(), "2001:db8:aa:bb::");
  EXPECT_EQ(IpAddress::Parse("2001:db8::1")->Masked(128).ToString(), "2001:db8::1");
}

TEST(CidrBlock, ParsesAndMatches) {
  auto b = CidrBlock::Parse("10.0.0.0/8");
  ASSERT_TRUE(b.ok());
  EXPECT_TRUE(b->Contains(*IpAddress::Parse("10.200.1.1")));
  EXPECT_FALSE(b->Contains(*IpAddress::Parse("11.0.0.1")));
  EXPECT_FALSE(b->Contains(*IpAddress::Parse("::a00:1")));  // another family
  EXPECT_EQ(CidrBlock::Parse("127.0.0.1")->prefix, 32);
  EXPECT_EQ(CidrBlock::Parse("::1")->prefix, 128);
  EXPECT_FALSE(CidrBlock::Parse("10.0.0.1/8").ok());  // host bits set
  EXPECT_FALSE(CidrBlock::Parse("10.0.0.0/33").ok());
  EXPECT_FALSE(CidrBlock::Parse("10.0.0.0/").ok());
  EXPECT_FALSE(CidrBlock::Parse("10.0.0.0/8x").ok());
  EXPECT_FALSE(CidrBlock::Parse("nope/8").ok());
}

}  // namespace
}  // namespace caudal
