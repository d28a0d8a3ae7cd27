#include "redis/change_feed.h"

#include <gtest/gtest.h>

#include "common/cat.h"
#include "redis/resp_test_util.h"

namespace caudal::redis {
namespace {

constexpr std::string_view kChannel = "caudal:{overrides}:changes";

using testing::Bulk;
using testing::Parse;

FeedFrame Frame(std::string_view kind, std::string_view channel, const std::string& last) {
  return ParseFeedFrame(*Parse(Cat("*3\r\n", Bulk(kind), Bulk(channel), last)), kChannel);
}

TEST(ChangeFeed, ReadsTheVersionOfAMessageOnItsChannel) {
  const FeedFrame f = Frame("message", kChannel, Bulk("42"));
  EXPECT_EQ(f.kind, FeedFrame::Kind::kMessage);
  EXPECT_EQ(f.version, 42u);
  EXPECT_EQ(Frame("message", kChannel, Bulk("18446744073709551615")).version,
            18446744073709551615u);
}

TEST(ChangeFeed, AMessageThatNamesNoVersionIsAHintWithoutOne) {
  for (const std::string& text :
       {Bulk(""), Bulk("4x"), Bulk("-1"), Bulk(" 4"), Bulk("18446744073709551616"),
        Bulk("000000000000000000001"), std::string(":7\r\n")}) {
    const FeedFrame f = Frame("message", kChannel, text);
    EXPECT_EQ(f.kind, FeedFrame::Kind::kMessage) << text;
    EXPECT_FALSE(f.version.has_value()) << text;
  }
}

TEST(ChangeFeed, OnlyItsChannelsFramesCount) {
  EXPECT_EQ(Frame("subscribe", kChannel, ":1\r\n").kind, FeedFrame::Kind::kSubscribed);
  EXPECT_EQ(Frame("message", "other:{overrides}:changes", Bulk("3")).kind, FeedFrame::Kind::kOther);
  EXPECT_EQ(Frame("unsubscribe", kChannel, ":0\r\n").kind, FeedFrame::Kind::kOther);
  EXPECT_EQ(ParseFeedFrame(*Parse(Cat("*2\r\n", Bulk("pong"), Bulk(""))), kChannel).kind,
            FeedFrame::Kind::kOther);
  EXPECT_EQ(ParseFeedFrame(*Parse("+OK\r\n"), kChannel).kind, FeedFrame::Kind::kOther);
}

}  // namespace
}  // namespace caudal::redis
