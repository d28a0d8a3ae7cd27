#include "redis/native_count.h"

#include <gtest/gtest.h>
#include <hiredis/hiredis.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "redis/resp.h"

namespace caudal::redis {
namespace {

using std::chrono::seconds;

// The replies a server would send, parsed by the store's own parser.
Reply Parse(const std::string& bytes) {
  ReplyParser parser;
  parser.Feed(bytes.data(), bytes.size());
  Result<std::optional<Reply>> r = parser.Next();
  EXPECT_TRUE(r.ok() && r->has_value());
  return std::move(**r);
}

// RESP's pieces, appended (GCC 12 misreports `"literal" + std::string` here: -Wrestrict).
void Add(std::string& out, char type, const std::string& text) {
  out += type;
  out.append(text).append("\r\n");
}
void Bulk(std::string& out, const std::string& text) {
  Add(out, '$', std::to_string(text.size()));
  out.append(text).append("\r\n");
}

// EXEC's reply: TIME (seconds, µs), then each entry's count and PEXPIRE's 1.
std::string ExecReply(int64_t time_us, const std::vector<int64_t>& counts) {
  std::string out;
  Add(out, '*', std::to_string(1 + 2 * counts.size()));
  Add(out, '*', "2");
  Bulk(out, std::to_string(time_us / 1'000'000));
  Bulk(out, std::to_string(time_us % 1'000'000));
  for (int64_t c : counts) {
    Add(out, ':', std::to_string(c));
    Add(out, ':', "1");
  }
  return out;
}

EncodedRequest Request(std::vector<EntryRef> entries) { return EncodeRequest(entries, "caudal:"); }

class NativeCountTest : public ::testing::Test {
 protected:
  const Limit minute_ =
      *Limit::Create(LimitSpec::Window(Algorithm::kFixedWindow, 10, std::chrono::minutes(1)));
  EntryRef Count(std::string_view key, int64_t cost, EntryOp op = EntryOp::kCharge) {
    return {.key = key, .limit = &minute_, .cost = cost, .op = op, .native_count = true};
  }
};

TEST_F(NativeCountTest, ACallIsOneTransactionOfTheReferencesCommands) {
  EncodedRequest a = Request({Count("a", 2)});
  EncodedRequest b = Request({Count("b", 3, EntryOp::kRefund)});
  EncodedRequest* requests[] = {&a, &b};
  const int64_t now = 1'699'999'995'250'000;  // 15.25 s into a minute
  const std::vector<std::string> cmds = BuildNativeCall(requests, now, 0);
  ASSERT_EQ(cmds.size(), 7u);
  EXPECT_EQ(cmds[0], "*1\r\n$5\r\nMULTI\r\n");
  EXPECT_EQ(cmds[1], "*1\r\n$4\r\nTIME\r\n");
  const std::string key_a = "caudal:{a}|w1699999980000000";
  EXPECT_NE(cmds[2].find("INCRBY"), std::string::npos);
  EXPECT_NE(cmds[2].find(key_a), std::string::npos);
  // 44.75 s to the window's end, rounded up to ms, and the margin.
  EXPECT_NE(cmds[3].find("PEXPIRE"), std::string::npos);
  std::string ttl;
  Bulk(ttl, std::to_string(44'750 + kNativeExpiryMarginMs));
  EXPECT_NE(cmds[3].find(ttl), std::string::npos) << cmds[3];
  EXPECT_NE(cmds[4].find("EVAL"), std::string::npos) << "a refund never goes below 0";
  EXPECT_NE(cmds[4].find("caudal:{b}|w1699999980000000"), std::string::npos);
  EXPECT_EQ(cmds[6], "*1\r\n$4\r\nEXEC\r\n");
  EXPECT_EQ(a.native[0].start_us, 1'699'999'980'000'000);
}

TEST_F(NativeCountTest, TheRepliesBecomeTheScriptsIntegers) {
  EncodedRequest a = Request({Count("a", 4), Count("b", 11)});  // b never fits
  EncodedRequest c = Request({Count("c", 1)});
  EncodedRequest* requests[] = {&a, &c};
  const int64_t now = 1'699'999'995'000'000;
  BuildNativeCall(requests, now, 0);
  const Reply exec = Parse(ExecReply(now + 250'000, {4, 11, 12}));
  std::vector<int64_t> ints;
  const EncodedRequest* in[] = {&a, &c};
  ASSERT_TRUE(NativeReplyToInts(in, *exec, std::nullopt, ints).ok());
  const int64_t reset = 45'000'000 - 250'000;  // TIME's, to the window's end
  const std::vector<int64_t> want = {0,        // a: refused (b never fits)
                                     0,
                                     6,
                                     reset,
                                     0,  // a: allowed, 6 left
                                     2,
                                     -1,
                                     reset,
                                     0,  // b: never fits, overdrawn by 1
                                     0,  // c
                                     1,
                                     -2,
                                     reset,
                                     reset,           // c: denied until the window ends
                                     now + 250'000};  // the call's time
  EXPECT_EQ(ints, want);
  // A given clock's time, not TIME's.
  ASSERT_TRUE(NativeReplyToInts(in, *exec, now, ints).ok());
  EXPECT_EQ(ints.back(), now);
  EXPECT_EQ(ints[3], 45'000'000);
}

TEST_F(NativeCountTest, AReplyOfAnotherShapeFailsTheCall) {
  EncodedRequest a = Request({Count("a", 1)});
  EncodedRequest* requests[] = {&a};
  BuildNativeCall(requests, 1'699'999'995'000'000, 0);
  const EncodedRequest* in[] = {&a};
  std::vector<int64_t> ints;
  const std::string bad[] = {
      "-EXECABORT Transaction discarded because of previous errors.\r\n",
      "*-1\r\n",                                   // an aborted transaction
      "*2\r\n*2\r\n$1\r\n1\r\n$1\r\n0\r\n:1\r\n",  // too short
      "*3\r\n:5\r\n:1\r\n:1\r\n",                  // TIME not a time
      "*3\r\n*2\r\n$1\r\n1\r\n$1\r\n0\r\n-ERR value is not an integer\r\n:1\r\n",
      "*3\r\n*2\r\n$2\r\nx1\r\n$1\r\n0\r\n:1\r\n:1\r\n"};  // TIME not digits
  for (const std::string& b : bad) {
    const Reply r = Parse(b);
    const Status s = NativeReplyToInts(in, *r, std::nullopt, ints);
    EXPECT_EQ(s.code(), StatusCode::kUnavailable) << b;
  }
}

TEST(NativeClock, TakesTheOffsetHalfWayThroughTheRoundTrip) {
  NativeClock c;
  EXPECT_FALSE(c.known());
  c.Observe(/*redis_us=*/5'000'600, /*sent_us=*/1'000, /*received_us=*/2'000);
  EXPECT_TRUE(c.known());
  EXPECT_EQ(c.Now(1'500), 5'000'600);
  EXPECT_EQ(c.error_us(), 500);
}

}  // namespace
}  // namespace caudal::redis
