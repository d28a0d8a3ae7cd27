#include "redis/resp.h"

#include <gtest/gtest.h>
#include <hiredis/hiredis.h>

#include <vector>

namespace caudal::redis {
namespace {

TEST(Resp, FormatsCommandsAsRespArrays) {
  std::string out;
  const std::vector<std::string_view> argv = {"SET", "k", std::string_view("a\0b", 3)};
  AppendCommand(argv, out);
  EXPECT_EQ(out, std::string("*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$3\r\na\0b\r\n", 29));
  AppendCommand(std::vector<std::string_view>{"PING"}, out);
  EXPECT_EQ(out.substr(29), "*1\r\n$4\r\nPING\r\n");
}

TEST(Resp, ParsesRepliesSplitAcrossReads) {
  ReplyParser p;
  const std::string stream = "+OK\r\n:42\r\n*2\r\n:-7\r\n$3\r\nabc\r\n-ERR boom\r\n";
  std::vector<Reply> replies;
  for (char c : stream) {  // one byte at a time: the worst split
    p.Feed(&c, 1);
    for (;;) {
      Result<std::optional<Reply>> r = p.Next();
      ASSERT_TRUE(r.ok());
      if (!r->has_value()) break;
      replies.push_back(std::move(**r));
    }
  }
  ASSERT_EQ(replies.size(), 4u);
  EXPECT_EQ(Text(*replies[0]), "OK");
  EXPECT_EQ(replies[1]->integer, 42);
  ASSERT_EQ(replies[2]->elements, 2u);
  EXPECT_EQ(replies[2]->element[0]->integer, -7);
  EXPECT_EQ(Text(*replies[2]->element[1]), "abc");
  EXPECT_TRUE(IsError(*replies[3]));
  EXPECT_FALSE(IsError(*replies[0]));
  EXPECT_EQ(Text(*replies[3]), "ERR boom");
}

TEST(Resp, ReportsAStreamThatIsNotResp) {
  ReplyParser p;
  p.Feed("HTTP/1.1 400\r\n", 14);
  EXPECT_EQ(p.Next().status().code(), StatusCode::kInternal);
}

// What Redis (or a hop between) sends is untrusted: an array header alone would make hiredis
// allocate a pointer per declared element, and a bulk string header makes it buffer that much.
TEST(Resp, RefusesAnArrayLongerThanTheBound) {
  ReplyParser p({.max_elements = 8});
  const std::string ok = "*8\r\n:1\r\n:2\r\n:3\r\n:4\r\n:5\r\n:6\r\n:7\r\n:8\r\n";
  p.Feed(ok.data(), ok.size());
  auto reply = p.Next();
  ASSERT_TRUE(reply.ok() && reply->has_value());
  EXPECT_EQ((**reply)->elements, 8u);
  const std::string huge = "*533333333\r\n";  // 4 GB of pointers, from 13 bytes
  p.Feed(huge.data(), huge.size());
  reply = p.Next();
  ASSERT_EQ(reply.status().code(), StatusCode::kInternal);
  EXPECT_NE(reply.status().message().find("533333333 elements"), std::string::npos)
      << reply.status().message();
}

// A bulk string is refused at its length, before its bytes: nothing of it is kept, however many
// of them follow (a misbehaving server declaring 100 MiB).
TEST(Resp, RefusesAnOversizedBulkStringAtItsLengthWithoutBuffering) {
  ReplyParser p;
  const std::string head = "$104857600\r\n";
  p.Feed(head.data(), head.size());
  const std::string chunk(64 * 1024, 'x');
  for (int i = 0; i < 64; ++i) p.Feed(chunk.data(), chunk.size());
  EXPECT_EQ(p.buffered(), 0u);
  const Result<std::optional<Reply>> reply = p.Next();
  ASSERT_EQ(reply.status().code(), StatusCode::kInternal);
  EXPECT_EQ(reply.status().message(),
            "reply from redis: a bulk string of 104857600 bytes, more than 1048576");
  EXPECT_EQ(p.Next().status().message(), reply.status().message());  // the stream stays failed
}

// The bound holds at every split of the header, and for the bytes a reply is made of: a status
// line without its end, elements of nested arrays that together pass the bound.
TEST(Resp, RefusesOversizedPartsWhereverTheReadsSplitThem) {
  const struct {
    std::string stream;
    std::string message;
  } cases[] = {
      {":1\r\n$2000\r\n", "a bulk string of 2000 bytes, more than 1024"},
      {"*2\r\n$3\r\nabc\r\n$99999999999999999999999\r\n",
       "a bulk string of 4611686018427387904 bytes, more than 1024"},
      {"+" + std::string(1100, 'k'), "a line of more than 1024 bytes"},
      {"*3\r\n*4\r\n:1\r\n:2\r\n:3\r\n:4\r\n*4\r\n", "more than 8 elements in one reply"},
      {"*9\r\n", "an array of 9 elements, more than 8"},
  };
  for (const auto& c : cases) {
    for (size_t split = 1; split < c.stream.size(); split += 3) {
      ReplyParser p({.max_elements = 8, .max_bulk_bytes = 1024});
      p.Feed(c.stream.data(), split);
      p.Feed(c.stream.data() + split, c.stream.size() - split);
      Result<std::optional<Reply>> r = p.Next();
      while (r.ok() && r->has_value()) r = p.Next();  // the replies before the breach
      ASSERT_FALSE(r.ok()) << c.stream << " split at " << split;
      EXPECT_EQ(r.status().message(), "reply from redis: " + c.message);
    }
  }
}

// Within the bounds, the framing follows every kind of reply (nested arrays, nils, a bulk
// string holding CRLF and '*') and every reply is whole, read one byte at a time.
TEST(Resp, FollowsNestedRepliesWithinTheBounds) {
  ReplyParser p({.max_elements = 8, .max_bulk_bytes = 16});
  const std::string stream =
      "*3\r\n*2\r\n:1\r\n$-1\r\n*0\r\n$6\r\n*2\r\n$9\r\n"  // 5 elements
      "*-1\r\n"
      "*2\r\n*2\r\n:1\r\n:2\r\n*2\r\n:3\r\n:4\r\n"  // 6 elements: the count starts again
      "+" +
      std::string(16, 's') + "\r\n";
  std::vector<Reply> replies;
  for (char c : stream) {
    p.Feed(&c, 1);
    for (Result<std::optional<Reply>> r = p.Next();; r = p.Next()) {
      ASSERT_TRUE(r.ok()) << r.status().message();
      if (!r->has_value()) break;
      replies.push_back(std::move(**r));
    }
  }
  ASSERT_EQ(replies.size(), 4u);
  EXPECT_EQ(Text(*replies[0]->element[2]), "*2\r\n$9");
  EXPECT_EQ(replies[1]->type, REDIS_REPLY_NIL);
  EXPECT_EQ(replies[2]->element[1]->element[1]->integer, 4);
  EXPECT_EQ(Text(*replies[3]), std::string(16, 's'));
  EXPECT_EQ(p.buffered(), 0u);
}

TEST(Resp, RefusesAReplyThatOutgrowsTheBufferBound) {
  ReplyParser p({.max_pending_bytes = 1024});
  const std::string head = "$100000\r\n";
  p.Feed(head.data(), head.size());
  const std::string chunk(512, 'x');
  Result<std::optional<Reply>> reply = p.Next();
  for (int i = 0; i < 4 && reply.ok(); ++i) {
    EXPECT_FALSE(reply->has_value());
    p.Feed(chunk.data(), chunk.size());
    reply = p.Next();
  }
  ASSERT_EQ(reply.status().code(), StatusCode::kInternal);
  EXPECT_NE(reply.status().message().find("1024 bytes"), std::string::npos)
      << reply.status().message();
}

TEST(Resp, ArrayOfHoldsTheRepliesInOrderAndFreesThemWithIt) {
  ReplyParser p;
  const std::string stream = ":3\r\n*1\r\n$2\r\nok\r\n-ERR no\r\n";
  p.Feed(stream.data(), stream.size());
  std::vector<Reply> replies;
  for (int i = 0; i < 3; ++i) {
    Result<std::optional<Reply>> r = p.Next();
    ASSERT_TRUE(r.ok() && r->has_value());
    replies.push_back(std::move(**r));
  }
  const Reply all = ArrayOf(std::move(replies));  // AddressSanitizer checks the freeing
  ASSERT_EQ(all->type, REDIS_REPLY_ARRAY);
  ASSERT_EQ(all->elements, 3u);
  EXPECT_EQ(all->element[0]->integer, 3);
  EXPECT_EQ(Text(*all->element[1]->element[0]), "ok");
  EXPECT_TRUE(IsError(*all->element[2]));
  EXPECT_EQ(ArrayOf({})->elements, 0u);
}

}  // namespace
}  // namespace caudal::redis
