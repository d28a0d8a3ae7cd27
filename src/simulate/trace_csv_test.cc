#include "simulate/trace_csv.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <sstream>

#include "caudal/store/store.h"

namespace caudal::simulate {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

Result<Traffic> Parse(const std::string& text) {
  std::istringstream in(text);
  return ParseTraceCsv(in, "t.csv");
}

std::string ErrorOf(const std::string& text) {
  auto r = Parse(text);
  EXPECT_FALSE(r.ok()) << "parsed: " << text;
  return r.ok() ? "" : r.status().message();
}

TEST(TraceCsv, ReadsTimestampKeyAndCostWithDefaults) {
  auto t = Parse("timestamp_ms,key,cost\n1000,alice,3\n1001,bob\n1002\n1003,alice,0\n");
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(t->keys, (std::vector<std::string>{"alice", "bob", ""}));
  ASSERT_EQ(t->requests.size(), 4u);
  EXPECT_EQ(t->requests[0].at_us, 1'000'000);
  EXPECT_EQ(t->requests[0].cost, 3);
  EXPECT_EQ(t->requests[1].key, 1u);
  EXPECT_EQ(t->requests[1].cost, 1);
  EXPECT_EQ(t->requests[2].key, 2u);
  EXPECT_EQ(t->requests[3].key, 0u);
  EXPECT_EQ(t->requests[3].cost, 0);
  EXPECT_EQ(t->start, Micros(1'000'000));
  EXPECT_EQ(t->end, Micros(1'003'000));
}

TEST(TraceCsv, AcceptsCrlfBlankLinesCommentsSpacesAndDecimals) {
  auto t = Parse("# a comment\r\n\r\n 12.5 , k , 2 \r\n13.25,k\r\n14\n");
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  ASSERT_EQ(t->requests.size(), 3u);
  EXPECT_EQ(t->requests[0].at_us, 12'500);
  EXPECT_EQ(t->requests[0].cost, 2);
  EXPECT_EQ(t->requests[1].at_us, 13'250);
  EXPECT_EQ(t->keys[0], "k");
  EXPECT_EQ(t->requests[2].at_us, 14'000);
}

TEST(TraceCsv, ReplaysInTimeOrderKeepingFileOrderForTies) {
  auto t = Parse("30,c\n10,a\n20,b1\n20,b2\n");
  ASSERT_TRUE(t.ok());
  std::vector<std::string> order;
  for (const Request& r : t->requests) order.push_back(t->keys[r.key]);
  EXPECT_EQ(order, (std::vector<std::string>{"a", "b1", "b2", "c"}));
}

TEST(TraceCsv, LastLineWithoutNewline) {
  auto t = Parse("1\n2");
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->requests.size(), 2u);
}

TEST(TraceCsv, MalformedLinesNameTheFileAndLine) {
  EXPECT_THAT(ErrorOf("1\n2\nabc\n"), StartsWith("t.csv:3: timestamp \"abc\""));
  EXPECT_THAT(ErrorOf("1\n-5,a\n"), StartsWith("t.csv:2: timestamp \"-5\""));
  EXPECT_THAT(ErrorOf("1.2345\n"), StartsWith("t.csv:1: timestamp \"1.2345\""));
  EXPECT_THAT(ErrorOf("1.\n"), StartsWith("t.csv:1: timestamp"));
  EXPECT_THAT(ErrorOf("99999999999999999999\n"), StartsWith("t.csv:1: timestamp"));
  EXPECT_THAT(ErrorOf("# c\n\n1,a,1,extra\n"),
              StartsWith("t.csv:3: expected timestamp_ms[,key[,cost]]"));
  EXPECT_THAT(ErrorOf("1,a,x\n"), StartsWith("t.csv:1: cost \"x\""));
  EXPECT_THAT(ErrorOf("1,a,-1\n"), StartsWith("t.csv:1: cost \"-1\""));
  EXPECT_THAT(ErrorOf("1,a,2000000000000\n"), StartsWith("t.csv:1: cost"));
  EXPECT_THAT(ErrorOf("1,\"a,b\",1\n"), StartsWith("t.csv:1: quoted fields"));
  EXPECT_THAT(ErrorOf("1," + std::string(kMaxKeyLength + 1, 'k') + "\n"),
              StartsWith("t.csv:1: key longer than 512 bytes"));
  EXPECT_THAT(ErrorOf("1\n" + std::string(kMaxTraceLineLength + 1, '1') + "\n"),
              StartsWith("t.csv:2: line longer than 4096 bytes"));
  EXPECT_THAT(ErrorOf("1\n" + std::string(3 * kMaxTraceLineLength, '1')),
              StartsWith("t.csv:2: line longer than 4096 bytes"));
}

TEST(TraceCsv, OnlyTheFirstLineCanBeAHeader) {
  EXPECT_THAT(ErrorOf("1\ntimestamp_ms,key\n"), StartsWith("t.csv:2: timestamp \"timestamp_ms\""));
}

TEST(TraceCsv, AKeyOfExactlyTheMaximumLengthIsAccepted) {
  auto t = Parse("1," + std::string(kMaxKeyLength, 'k') + "\n");
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(t->keys[0].size(), kMaxKeyLength);
}

TEST(TraceCsv, EmptyOrHeaderOnlyHasNoRequests) {
  EXPECT_THAT(ErrorOf(""), StartsWith("t.csv: no requests"));
  EXPECT_THAT(ErrorOf("timestamp_ms,key,cost\n# nothing\n"), StartsWith("t.csv: no requests"));
}

TEST(TraceCsv, MissingFileIsAClearError) {
  auto t = ReadTraceCsv("/nonexistent/trace.csv");
  ASSERT_FALSE(t.ok());
  EXPECT_THAT(t.status().message(), HasSubstr("/nonexistent/trace.csv: cannot open"));
}

}  // namespace
}  // namespace caudal::simulate
