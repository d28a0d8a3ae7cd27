#include "redis/hash_slot.h"

#include <gtest/gtest.h>

namespace caudal::redis {
namespace {

TEST(HashSlot, Crc16IsXmodem) {
  EXPECT_EQ(Crc16("123456789"), 0x31C3);  // the CRC16/XMODEM check value
  EXPECT_EQ(Crc16(""), 0);
}

// Slots as `CLUSTER KEYSLOT` gives them (Redis 7.0).
TEST(HashSlot, MatchesRedisCluster) {
  EXPECT_EQ(HashSlot("123456789"), 12739);
  EXPECT_EQ(HashSlot("foo"), 12182);
  EXPECT_EQ(HashSlot("bar"), 5061);
  EXPECT_EQ(HashSlot("somekey"), 11058);
  EXPECT_EQ(HashSlot("caudal:{a}"), 15495);
  EXPECT_EQ(HashSlot("{user1000}.following"), 3443);
}

TEST(HashSlot, HashesTheFirstNonEmptyTagOnly) {
  EXPECT_EQ(HashSlot("foo{hash_tag}"), 2515);
  EXPECT_EQ(HashSlot("bar{hash_tag}"), 2515);
  EXPECT_EQ(HashSlot("foo{bar}{zap}"), HashSlot("bar"));
  EXPECT_EQ(HashSlot("foo{{bar}}zap"), 4015);  // the tag is "{bar"
  EXPECT_EQ(HashSlot("foo{}{bar}"), 8363);     // an empty first tag: the whole key
  EXPECT_EQ(HashSlot("foo{}{bar}"), Crc16("foo{}{bar}") & 16383);
  EXPECT_EQ(HashSlot("{unclosed"), Crc16("{unclosed") & 16383);
}

}  // namespace
}  // namespace caudal::redis
