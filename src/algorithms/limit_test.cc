#include "caudal/limit.h"

#include <gtest/gtest.h>

namespace caudal {
namespace {

using std::chrono::hours;
using std::chrono::milliseconds;
using std::chrono::minutes;
using std::chrono::seconds;

TEST(Limit, ReducesTheRateToLowestTerms) {
  const Limit l = *Limit::Create(LimitSpec::Bucket(Algorithm::kTokenBucket, 100, {100, minutes(1)}));
  EXPECT_EQ(l.refill_count(), 1);
  EXPECT_EQ(l.refill_period_us(), 600'000);
  EXPECT_EQ(l.ToString(), "token_bucket capacity=100 refill=100/1m");
}

TEST(Limit, AcceptsTheWholeDocumentedRange) {
  EXPECT_TRUE(Limit::Create(LimitSpec::Bucket(Algorithm::kGcra, kMaxCapacity,
                                              {kMaxRateCount, milliseconds(1)})).ok());
  EXPECT_TRUE(Limit::Create(LimitSpec::Bucket(Algorithm::kGcra, kMaxCapacity,
                                              {kMaxRateCount, hours(24 * 365)})).ok());
  EXPECT_TRUE(Limit::Create(LimitSpec::Window(Algorithm::kFixedWindow, kMaxCapacity,
                                              hours(24 * 365))).ok());
  EXPECT_TRUE(Limit::Create(LimitSpec::Window(Algorithm::kSlidingWindowCounter, 1,
                                              milliseconds(1))).ok());
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
  EXPECT_NE(err(LimitSpec::Bucket(Algorithm::kTokenBucket, 10, {1, hours(24 * 366)})).find("period"),
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

TEST(Algorithm, NamesRoundTrip) {
  for (Algorithm a : kAllAlgorithms) EXPECT_EQ(*ParseAlgorithm(AlgorithmName(a)), a);
  EXPECT_FALSE(ParseAlgorithm("leaky").ok());
}

}  // namespace
}  // namespace caudal
