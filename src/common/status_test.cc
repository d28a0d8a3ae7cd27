#include "caudal/common/status.h"

#include <gtest/gtest.h>

namespace caudal {
namespace {

TEST(Status, OkByDefault) {
  EXPECT_TRUE(Status().ok());
  EXPECT_EQ(Status::Ok().ToString(), "OK");
}

TEST(Status, CarriesCodeAndMessage) {
  const Status s = Status::Unavailable("redis at 127.0.0.1:1 refused the connection");
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kUnavailable);
  EXPECT_EQ(s.ToString(), "UNAVAILABLE: redis at 127.0.0.1:1 refused the connection");
}

TEST(Result, HoldsValueOrError) {
  Result<int> good = 42;
  ASSERT_TRUE(good.ok());
  EXPECT_EQ(*good, 42);
  EXPECT_TRUE(good.status().ok());

  Result<int> bad = Status::InvalidArgument("no");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace caudal
