#include "caudal/algorithms/limit.h"

#include <gtest/gtest.h>

#include <limits>

namespace caudal {
namespace {

using std::chrono::hours;
using std::chrono::milliseconds;
using std::chrono::minutes;
using std::chrono::seconds;

TEST(Limit, ReducesTheRateToLowestTerms) {
  const Limit l =
      *Limit::Create(LimitSpec::Bucket(Algorithm::kTokenBucket, 100, {100, minutes(1)}));
  EXPECT_EQ(l.refill_count(), 1);
  EXPECT_EQ(l.refill_period_us(), 600'000);
  EXPECT_EQ(l.ToString(), "token_bucket capacity=100 refill=100/1m");
}

TEST(Limit, AcceptsTheWholeDocumentedRange) {
  EXPECT_TRUE(Limit::Create(LimitSpec::Bucket(Algorithm::kGcra, kMaxCapacity,
                                              {kMaxRateCount, milliseconds(1)}))
                  .ok());
  EXPECT_TRUE(Limit::Create(LimitSpec::Bucket(Algorithm::kGcra, kMaxCapacity,
                                              {kMaxRateCount, hours(24 * 365)}))
                  .ok());
  EXPECT_TRUE(
      Limit::Create(LimitSpec::Window(Algorithm::kFixedWindow, kMaxCapacity, hours(24 * 365)))
          .ok());
  EXPECT_TRUE(
      Limit::Create(LimitSpec::Window(Algorithm::kSlidingWindowCounter, 1, milliseconds(1))).ok());
}

TEST(Limit, RefusesOutOfRangeSpecsNamingTheField) {
  auto err = [](const LimitSpec& s) { return Limit::Create(s).status().message(); };
  EXPECT_NE(err(LimitSpec::Bucket(Algorithm::kTokenBucket, 0, {1, seconds(1)})).find("capacity"),
            std::string::npos);
  EXPECT_NE(err(LimitSpec::Bucket(Algorithm::kTokenBucket, -5, {1, seconds(1)})).find("capacity"),
            std::string::npos);
  EXPECT_NE(err(LimitSpec::Bucket(Algorithm::kTokenBucket, kMaxCapacity + 1, {1, seconds(1)}))
                .find("capacity"),
            std::string::npos);
  EXPECT_NE(err(LimitSpec::Bucket(Algorithm::kTokenBucket, 10, {0, seconds(1)})).find("refill"),
            std::string::npos);
  EXPECT_NE(err(LimitSpec::Bucket(Algorithm::kTokenBucket, 10, {1, Micros(999)})).find("period"),
            std::string::npos);
  EXPECT_NE(
      err(LimitSpec::Bucket(Algorithm::kTokenBucket, 10, {1, hours(24 * 366)})).find("period"),
      std::string::npos);
  EXPECT_NE(err(LimitSpec::Window(Algorithm::kFixedWindow, 0, seconds(1))).find("limit"),
            std::string::npos);
  EXPECT_NE(err(LimitSpec::Window(Algorithm::kSlidingWindowLog, kMaxLogLimit + 1, seconds(1)))
                .find("capped"),
            std::string::npos);
  // 2^40 tokens refilled at 1 per year would take 2^40 years.
  EXPECT_NE(err(LimitSpec::Bucket(Algorithm::kTokenBucket, kMaxCapacity, {1, hours(24 * 365)}))
                .find("100 years"),
            std::string::npos);
  LimitSpec mismatched = LimitSpec::Window(Algorithm::kFixedWindow, 10, seconds(1));
  mismatched.rate.count = 11;
  EXPECT_FALSE(Limit::Create(mismatched).ok());
}

TEST(Limit, RefusesNegativeAndOverflowingParametersWithoutOverflowing) {
  const int64_t kMin = std::numeric_limits<int64_t>::min();
  const int64_t kMax = std::numeric_limits<int64_t>::max();
  struct Case {
    LimitSpec spec;
    const char* field;
  };
  const Case cases[] = {
      {LimitSpec::Bucket(Algorithm::kGcra, kMin, {1, seconds(1)}), "capacity"},
      {LimitSpec::Bucket(Algorithm::kGcra, kMax, {1, seconds(1)}), "capacity"},
      {LimitSpec::Bucket(Algorithm::kGcra, 10, {-1, seconds(1)}), "refill count"},
      {LimitSpec::Bucket(Algorithm::kGcra, 10, {kMax, seconds(1)}), "refill count"},
      {LimitSpec::Bucket(Algorithm::kGcra, 10, {kMaxRateCount + 1, seconds(1)}), "refill count"},
      {LimitSpec::Bucket(Algorithm::kTokenBucket, 10, {1, Micros(-1)}), "refill period"},
      {LimitSpec::Bucket(Algorithm::kTokenBucket, 10, {1, Micros(kMin)}), "refill period"},
      {LimitSpec::Bucket(Algorithm::kTokenBucket, 10, {1, Micros(kMax)}), "refill period"},
      {LimitSpec::Window(Algorithm::kFixedWindow, -1, seconds(1)), "limit"},
      {LimitSpec::Window(Algorithm::kFixedWindow, 10, Micros(0)), "window"},
      {LimitSpec::Window(Algorithm::kSlidingWindowCounter, 10, Micros(1'500)), "whole number"},
      {LimitSpec::Window(Algorithm::kSlidingWindowCounter, kMax, seconds(1)), "limit"},
  };
  for (const Case& c : cases) {
    const Status s = Limit::Create(c.spec).status();
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << c.field;
    EXPECT_NE(s.message().find(c.field), std::string::npos) << s.message();
  }
}

TEST(Limit, AcceptsARefillOfExactlyAHundredYearsAndNotAMicrosecondMore) {
  // 100 per year (365 d) fills 10,000 tokens in exactly 100 years.
  EXPECT_TRUE(
      Limit::Create(LimitSpec::Bucket(Algorithm::kTokenBucket, 10'000, {100, hours(24 * 365)}))
          .ok());
  EXPECT_FALSE(
      Limit::Create(LimitSpec::Bucket(Algorithm::kTokenBucket, 10'001, {100, hours(24 * 365)}))
          .ok());
}

TEST(Algorithm, NamesRoundTrip) {
  for (Algorithm a : kAllAlgorithms) EXPECT_EQ(*ParseAlgorithm(AlgorithmName(a)), a);
  EXPECT_FALSE(ParseAlgorithm("leaky").ok());
}

}  // namespace
}  // namespace caudal
