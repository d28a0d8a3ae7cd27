#include "common/port.h"

#include <gtest/gtest.h>

namespace caudal {
namespace {

TEST(ParsePort, TakesDecimalPortsFromMinTo65535) {
  EXPECT_EQ(ParsePort("6379"), 6379);
  EXPECT_EQ(ParsePort("1"), 1);
  EXPECT_EQ(ParsePort("65535"), 65535);
  EXPECT_EQ(ParsePort("0", 0), 0);
  EXPECT_EQ(ParsePort("0"), std::nullopt);
  EXPECT_EQ(ParsePort("80", 81), std::nullopt);
}

TEST(ParsePort, RefusesAnythingButDigitsInRange) {
  for (std::string_view bad :
       {"", "65536", "99999999999", "-1", "+80", " 80", "80 ", "8o", "0x50", "80.0", "\xd9\xa1"}) {
    EXPECT_EQ(ParsePort(bad, 0), std::nullopt) << bad;
  }
}

}  // namespace
}  // namespace caudal
