#include "simulate/report.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <boost/json.hpp>

namespace caudal::simulate {
namespace {

using std::chrono::minutes;
using ::testing::ContainsRegex;
using ::testing::HasSubstr;

Simulation Sample() {
  Simulation sim;
  sim.window = minutes(1);
  sim.runs = {
      {.algorithm = Algorithm::kFixedWindow,
       .offered = 2200,
       .admitted = 1100,
       .rejected = 1100,
       .max_in_window = 200,
       .bound = 100,
       .series = {}},
      {.algorithm = Algorithm::kTokenBucket,
       .offered = 2200,
       .admitted = 1050,
       .rejected = 1150,
       .max_in_window = 199,
       .bound = 200,
       .series = {}},
  };
  sim.skipped = {"sliding_window_log: too big"};
  return sim;
}

TEST(Report, TableHasOneAlignedRowPerAlgorithm) {
  const std::string table = RenderTable(Sample());
  EXPECT_THAT(table, ContainsRegex("algorithm +offered +admitted +rejected +max in 1m +bound\n"));
  EXPECT_THAT(table, ContainsRegex("fixed_window +2200 +1100 +1100 +200 +100  OVER 2.00x\n"));
  EXPECT_THAT(table, ContainsRegex("token_bucket +2200 +1050 +1150 +199 +200  ok\n"));
  EXPECT_THAT(table, HasSubstr("skipped sliding_window_log: too big\n"));
  // Right-aligned numbers: every row's line is as long as the header's up to the bound column.
  const size_t header_end = table.find("bound") + 5;
  const size_t row = table.find("fixed_window");
  EXPECT_EQ(table.substr(row + header_end - 3, 3), "100");
}

TEST(Report, ASlightExcessIsNotPrintedAsOneTimesTheBound) {
  Simulation sim = Sample();
  sim.runs[0].max_in_window = 1001;
  sim.runs[0].bound = 1000;
  EXPECT_THAT(RenderTable(sim), HasSubstr("OVER by 1\n"));
  sim.runs[0].max_in_window = 100001;
  sim.runs[0].bound = 100000;
  EXPECT_THAT(RenderTable(sim), HasSubstr("OVER by 1\n"));
  sim.runs[0].max_in_window = 101;
  sim.runs[0].bound = 100;
  EXPECT_THAT(RenderTable(sim), HasSubstr("OVER 1.01x\n"));
}

TEST(Report, JsonIsAnArrayOfOneObjectPerAlgorithm) {
  const boost::json::value v = boost::json::parse(RenderJson(Sample()));
  const auto& arr = v.as_array();
  ASSERT_EQ(arr.size(), 2u);
  const auto& fixed = arr[0].as_object();
  EXPECT_EQ(fixed.at("algorithm").as_string(), "fixed_window");
  EXPECT_EQ(fixed.at("offered").as_int64(), 2200);
  EXPECT_EQ(fixed.at("admitted").as_int64(), 1100);
  EXPECT_EQ(fixed.at("rejected").as_int64(), 1100);
  EXPECT_EQ(fixed.at("max_in_window").as_int64(), 200);
  EXPECT_EQ(fixed.at("bound").as_int64(), 100);
  EXPECT_FALSE(fixed.at("within_bound").as_bool());
  EXPECT_TRUE(arr[1].as_object().at("within_bound").as_bool());
}

TEST(Report, JsonOfNoRunsIsAnEmptyArray) {
  const boost::json::value v = boost::json::parse(RenderJson(Simulation{}));
  EXPECT_TRUE(v.as_array().empty());
}

TEST(Report, JsonQuoteEscapesWhatJsonRequires) {
  const std::string nasty = std::string("a\"b\\c\nd\te") + '\x01';
  const std::string quoted = JsonQuote(nasty);
  EXPECT_EQ(quoted, "\"a\\\"b\\\\c\\nd\\te\\u0001\"");
  EXPECT_EQ(boost::json::parse(quoted).as_string(), nasty);
}

}  // namespace
}  // namespace caudal::simulate
