#include "redis/native_count.h"

#include <gtest/gtest.h>
#include <hiredis/hiredis.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "redis/resp.h"
#include "redis/resp_test_util.h"

namespace caudal::redis {
namespace {

using std::chrono::seconds;

using testing::Parse;  // the replies a server would send, parsed by the store's own parser

// RESP's pieces, appended (GCC 12 misreports `"literal" + std::string` here: -Wrestrict).
void Add(std::string& out, char type, const std::string& text) {
  out += type;
  out.append(text).append("\r\n");
}
void Bulk(std::string& out, const std::string& text) {
  Add(out, '$', std::to_string(text.size()));
  out.append(text).append("\r\n");
}

// The call's replies gathered: each entry's count and PEXPIRE's 1.
std::string Replies(const std::vector<int64_t>& counts) {
  std::string out;
  Add(out, '*', std::to_string(2 * counts.size()));
  for (int64_t c : counts) {
    Add(out, ':', std::to_string(c));
    Add(out, ':', "1");
  }
  return out;
}

EncodedRequest Request(std::vector<EntryRef> entries) {
  return EncodeRequest(entries, "caudal:", Micros(0));
}

class NativeCountTest : public ::testing::Test {
 protected:
  const Limit minute_ =
      *Limit::Create(LimitSpec::Window(Algorithm::kFixedWindow, 10, std::chrono::minutes(1)));
  EntryRef Count(std::string_view key, int64_t cost, EntryOp op = EntryOp::kCharge) {
    return {.key = key, .limit = &minute_, .cost = cost, .op = op, .native_count = true};
  }
};

TEST_F(NativeCountTest, ACallIsThePipelineOfTheReferencesCommands) {
  EncodedRequest a = Request({Count("a", 2)});
  EncodedRequest b = Request({Count("b", 3, EntryOp::kRefund)});
  EncodedRequest* requests[] = {&a, &b};
  const int64_t now = 1'699'999'995'250'000;  // 15.25 s into a minute
  const std::vector<std::string> cmds = BuildNativeCall(requests, now, 0);
  ASSERT_EQ(cmds.size(), 4u);  // no MULTI, TIME or EXEC: two commands per entry
  const std::string key_a = "caudal:{a}|w1699999980000000";
  EXPECT_NE(cmds[0].find("INCRBY"), std::string::npos);
  EXPECT_NE(cmds[0].find(key_a), std::string::npos);
  // 44.75 s to the window's end, rounded up to ms, and the margin.
  EXPECT_NE(cmds[1].find("PEXPIRE"), std::string::npos);
  std::string ttl;
  Bulk(ttl, std::to_string(44'750 + kNativeExpiryMarginMs));
  EXPECT_NE(cmds[1].find(ttl), std::string::npos) << cmds[1];
  EXPECT_NE(cmds[2].find("EVAL"), std::string::npos) << "a refund never goes below 0";
  EXPECT_NE(cmds[2].find("caudal:{b}|w1699999980000000"), std::string::npos);
  EXPECT_NE(cmds[3].find("PEXPIRE"), std::string::npos);
  EXPECT_EQ(a.native[0].start_us, 1'699'999'980'000'000);
  EXPECT_EQ(a.native_now_us, now);
  EXPECT_EQ(b.native_now_us, now);
}

TEST_F(NativeCountTest, TheRepliesBecomeTheScriptsIntegers) {
  EncodedRequest a = Request({Count("a", 4), Count("b", 11)});  // b never fits
  EncodedRequest c = Request({Count("c", 1)});
  EncodedRequest* requests[] = {&a, &c};
  const int64_t now = 1'699'999'995'250'000;
  BuildNativeCall(requests, now, 0);
  const Reply replies = Parse(Replies({4, 11, 12}));
  std::vector<int64_t> ints;
  const EncodedRequest* in[] = {&a, &c};
  ASSERT_TRUE(NativeReplyToInts(in, *replies, ints).ok());
  const int64_t reset = 45'000'000 - 250'000;  // from the time the call was sent at
  const std::vector<int64_t> want = {0,        // a: refused (b never fits)
                                     0,     6,  reset,
                                     0,  // a: allowed, 6 left
                                     2,     -1, reset,
                                     0,  // b: never fits, overdrawn by 1
                                     0,  // c
                                     1,     -2, reset,
                                     reset,  // c: denied until the window ends
                                     now};   // the call's time
  EXPECT_EQ(ints, want);
}

TEST_F(NativeCountTest, AReplyOfAnotherShapeFailsTheCall) {
  EncodedRequest a = Request({Count("a", 1)});
  EncodedRequest* requests[] = {&a};
  BuildNativeCall(requests, 1'699'999'995'000'000, 0);
  const EncodedRequest* in[] = {&a};
  std::vector<int64_t> ints;
  const std::string bad[] = {
      "-ERR boom\r\n",                                 // not an array
      "*1\r\n:1\r\n",                                  // too short
      "*3\r\n:1\r\n:1\r\n:1\r\n",                      // too long
      "*2\r\n-ERR value is not an integer\r\n:1\r\n",  // the counter is not a number
      "*2\r\n:1\r\n-ERR wrong type\r\n",               // PEXPIRE refused
      "*2\r\n$1\r\n1\r\n:1\r\n"};                      // a count that is not an integer
  for (const std::string& b : bad) {
    const Reply r = Parse(b);
    const Status s = NativeReplyToInts(in, *r, ints);
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

TEST(NativeClock, IsStaleOnceItsLastObservationIsOlderThanTheRefresh) {
  NativeClock c;
  EXPECT_TRUE(c.Stale(0));
  c.Observe(5'000'000, 1'000, 2'000);
  EXPECT_FALSE(c.Stale(2'000 + kNativeClockRefreshUs));
  EXPECT_TRUE(c.Stale(2'001 + kNativeClockRefreshUs));
  EXPECT_TRUE(c.Stale(1'999)) << "a local clock stepped back";
}

}  // namespace
}  // namespace caudal::redis
