#include "simulate/trace_csv.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <sstream>

#include "caudal/engine/engine.h"
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

Result<CostTrace> ParseCosts(const std::string& text) {
  std::istringstream in(text);
  return ParseCostTraceCsv(in, "c.csv");
}

std::string CostErrorOf(const std::string& text) {
  auto r = ParseCosts(text);
  EXPECT_FALSE(r.ok()) << "parsed: " << text;
  return r.ok() ? "" : r.status().message();
}

TEST(CostTraceCsv, ReadsTheHeadersDimensionsAndEachRowsCellsInTimeOrder) {
  auto t = ParseCosts(
      "# usage, exported\r\n"
      "timestamp_ms, key, requests, input_tokens ,usd_micros\r\n"
      "\n"
      "2000.5,bob,1,,0\n"
      "1000,alice,1,1099511627776,25\n"
      "2000.5,alice,,7,\n");
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(t->name, "c.csv");
  EXPECT_EQ(t->header_line, 2);
  EXPECT_EQ(t->dimensions, (std::vector<std::string>{"requests", "input_tokens", "usd_micros"}));
  EXPECT_EQ(t->keys, (std::vector<std::string>{"bob", "alice"}));
  ASSERT_EQ(t->rows.size(), 3u);
  const CostTrace::Row& first = t->rows[0];
  EXPECT_EQ(first.at_us, 1'000'000);
  EXPECT_EQ(first.line, 5);
  EXPECT_EQ(t->keys[first.key], "alice");
  EXPECT_EQ(t->Units(first, 0), 1);
  EXPECT_EQ(t->Units(first, 1), kMaxCost);
  EXPECT_EQ(t->Units(first, 2), 25);
  // Ties keep the file's order.
  EXPECT_EQ(t->rows[1].line, 4);
  EXPECT_EQ(t->Units(t->rows[1], 1), kNotNamed);
  EXPECT_EQ(t->Units(t->rows[1], 2), 0);
  EXPECT_EQ(t->rows[2].line, 6);
  EXPECT_EQ(t->Units(t->rows[2], 0), kNotNamed);
  EXPECT_EQ(t->Units(t->rows[2], 1), 7);
  EXPECT_EQ(t->start, Micros(1'000'000));
  EXPECT_EQ(t->end, Micros(2'000'500));
}

TEST(CostTraceCsv, ABadHeaderIsRefused) {
  EXPECT_THAT(CostErrorOf("1,a,2\n"),
              StartsWith("c.csv:1: expected a header timestamp_ms,key,<dimension>..."));
  EXPECT_THAT(CostErrorOf("timestamp_ms,key\n1,a\n"), StartsWith("c.csv:1: expected a header"));
  EXPECT_THAT(CostErrorOf("key,timestamp_ms,requests\n"), StartsWith("c.csv:1: expected a header"));
  EXPECT_THAT(CostErrorOf("timestamp_ms,key,Input\n"),
              StartsWith("c.csv:1: column 3: dimension: \"Input\" is not a dimension name"));
  EXPECT_THAT(CostErrorOf("timestamp_ms,key,requests,\n"),
              StartsWith("c.csv:1: column 4: dimension: \"\" is not"));
  EXPECT_THAT(CostErrorOf("timestamp_ms,key,a,b,a\n"),
              StartsWith("c.csv:1: column \"a\" is named twice"));
  std::string many = "timestamp_ms,key";
  for (int i = 0; i < 17; ++i) many += ",d" + std::to_string(i);
  EXPECT_THAT(CostErrorOf(many + "\n"), StartsWith("c.csv:1: at most 16 dimensions' columns"));
  EXPECT_THAT(CostErrorOf("\"timestamp_ms\",key,requests\n"), StartsWith("c.csv:1: quoted"));
  EXPECT_THAT(CostErrorOf("# nothing\n"), StartsWith("c.csv: no header"));
  EXPECT_THAT(CostErrorOf("timestamp_ms,key,requests\n# none\n"), StartsWith("c.csv: no requests"));
}

TEST(CostTraceCsv, ABadRowNamesItsLine) {
  const std::string h = "timestamp_ms,key,input_tokens,output_tokens\n";
  EXPECT_THAT(CostErrorOf(h + "1,a,1,2\n2,a,-1,2\n"),
              StartsWith("c.csv:3: input_tokens \"-1\" is not a whole number between 0 and "
                         "1099511627776"));
  EXPECT_THAT(CostErrorOf(h + "1,a,1.5,2\n"), StartsWith("c.csv:2: input_tokens \"1.5\""));
  EXPECT_THAT(CostErrorOf(h + "1,a,1,1099511627777\n"),
              StartsWith("c.csv:2: output_tokens \"1099511627777\""));
  EXPECT_THAT(CostErrorOf(h + "1,a,1,99999999999999999999999\n"),
              StartsWith("c.csv:2: output_tokens"));
  EXPECT_THAT(CostErrorOf(h + "1,a,1e3,2\n"), StartsWith("c.csv:2: input_tokens \"1e3\""));
  EXPECT_THAT(CostErrorOf(h + "1,a,,\n"),
              StartsWith("c.csv:2: no cost: every dimension's cell is empty"));
  EXPECT_THAT(CostErrorOf(h + "1,a,1\n"), StartsWith("c.csv:2: expected 4 fields, as the header "
                                                     "names (got 3)"));
  EXPECT_THAT(CostErrorOf(h + "1,a,1,2,3\n"), StartsWith("c.csv:2: expected 4 fields"));
  EXPECT_THAT(CostErrorOf(h + "1,,1,2\n"), StartsWith("c.csv:2: key: expected 1 to 256 bytes"));
  EXPECT_THAT(CostErrorOf(h + "1," + std::string(kMaxDescriptorValueLength + 1, 'k') + ",1,2\n"),
              StartsWith("c.csv:2: key: expected 1 to 256 bytes"));
  EXPECT_THAT(CostErrorOf(h + "x,a,1,2\n"), StartsWith("c.csv:2: timestamp \"x\""));
  EXPECT_THAT(CostErrorOf(h + std::string(kMaxTraceLineLength + 1, '1') + "\n"),
              StartsWith("c.csv:2: line longer than 4096 bytes"));
}

TEST(CostTraceCsv, MissingFileIsAClearError) {
  auto t = ReadCostTraceCsv("/nonexistent/usage.csv");
  ASSERT_FALSE(t.ok());
  EXPECT_THAT(t.status().message(), HasSubstr("/nonexistent/usage.csv: cannot open"));
}

}  // namespace
}  // namespace caudal::simulate
