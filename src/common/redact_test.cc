#include "common/redact.h"

#include <gtest/gtest.h>

namespace caudal {
namespace {

TEST(RedactUrl, HidesThePasswordWhole) {
  EXPECT_EQ(RedactUrl("redis://app:s3cret@cache:6379/0"), "redis://app:***@cache:6379/0");
  EXPECT_EQ(RedactUrl("rediss://:s3cret@cache"), "rediss://:***@cache");
  EXPECT_EQ(RedactUrl("redis://u:p@ss/w@rd@h:1"), "redis://u:***@h:1");
  EXPECT_EQ(RedactUrl("redis-cluster://u:pw@a:1,b:2"), "redis-cluster://u:***@a:1,b:2");
}

TEST(RedactUrl, LeavesUrlsWithoutAPasswordAlone) {
  EXPECT_EQ(RedactUrl("memory://"), "memory://");
  EXPECT_EQ(RedactUrl("redis://cache:6379"), "redis://cache:6379");
  EXPECT_EQ(RedactUrl("redis://app@cache"), "redis://app@cache");
  EXPECT_EQ(RedactUrl("not a url"), "not a url");
}

}  // namespace
}  // namespace caudal
