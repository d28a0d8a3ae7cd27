#include "redis/sentinel_protocol.h"

#include <gtest/gtest.h>

#include "common/cat.h"
#include "redis/resp_test_util.h"

namespace caudal::redis {
namespace {

using testing::Bulk;
using testing::Parse;

TEST(SentinelProtocol, ReadsTheMastersAddress) {
  const Reply addr = Parse(Cat("*2\r\n", Bulk("10.0.0.5"), Bulk("6380")));
  Result<std::optional<Endpoint>> r = ParseMasterAddr(*addr);
  ASSERT_TRUE(r.ok());
  ASSERT_TRUE(r->has_value());
  EXPECT_EQ(**r, (Endpoint{"10.0.0.5", 6380}));
  const Reply unknown = Parse("*-1\r\n");
  EXPECT_FALSE(ParseMasterAddr(*unknown)->has_value());
  const Reply error = Parse("-NOAUTH Authentication required.\r\n");
  EXPECT_EQ(ParseMasterAddr(*error).status().code(), StatusCode::kUnavailable);
  for (const std::string& bad : {Cat("*1\r\n", Bulk("h")), Cat("*2\r\n", Bulk("h"), Bulk("0")),
                                 Cat("*2\r\n", Bulk("h"), Bulk("x")),
                                 Cat("*2\r\n", Bulk(""), Bulk("1")), std::string(":5\r\n")}) {
    const Reply r2 = Parse(bad);
    EXPECT_EQ(ParseMasterAddr(*r2).status().code(), StatusCode::kInternal) << bad;
  }
}

TEST(SentinelProtocol, FollowsSwitchMasterForItsNameOnly) {
  const Reply message = Parse(Cat("*3\r\n", Bulk("message"), Bulk("+switch-master"),
                                  Bulk("mymaster 127.0.0.1 6379 127.0.0.1 6380")));
  EXPECT_EQ(ParseSwitchMaster(*message, "mymaster"), (Endpoint{"127.0.0.1", 6380}));
  EXPECT_FALSE(ParseSwitchMaster(*message, "other").has_value());
  const Reply subscribed =
      Parse(Cat("*3\r\n", Bulk("subscribe"), Bulk("+switch-master"), ":1\r\n"));
  EXPECT_FALSE(ParseSwitchMaster(*subscribed, "mymaster").has_value());
  const Reply truncated =
      Parse(Cat("*3\r\n", Bulk("message"), Bulk("+switch-master"), Bulk("mymaster 1.2.3.4 1")));
  EXPECT_FALSE(ParseSwitchMaster(*truncated, "mymaster").has_value());
  const Reply bad_port =
      Parse(Cat("*3\r\n", Bulk("message"), Bulk("+switch-master"), Bulk("mymaster h 1 h 99999")));
  EXPECT_FALSE(ParseSwitchMaster(*bad_port, "mymaster").has_value());
}

}  // namespace
}  // namespace caudal::redis
