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

TEST(Limit, CountsADimensionOrASumOfThemInCanonicalOrder) {
  LimitSpec spec = LimitSpec::Bucket(Algorithm::kTokenBucket, 1000, {1000, minutes(1)});
  EXPECT_TRUE(Limit::Create(spec)->counts_requests());
  spec.dimension = {"requests"};  // the default, spelled out: the same limit
  EXPECT_EQ(*Limit::Create(spec),
            *Limit::Create(LimitSpec::Bucket(Algorithm::kTokenBucket, 1000, {1000, minutes(1)})));
  spec.dimension = {"output_tokens", "input_tokens"};
  const Limit sum = *Limit::Create(spec);
  EXPECT_FALSE(sum.counts_requests());
  EXPECT_EQ(sum.dimension(), (std::vector<std::string>{"input_tokens", "output_tokens"}));
  EXPECT_EQ(sum.DimensionText(), "input_tokens+output_tokens");
  EXPECT_EQ(sum.ToString(),
            "token_bucket capacity=1000 refill=1000/1m dimension=input_tokens+output_tokens");
  spec.dimension = {"input_tokens"};
  EXPECT_NE(*Limit::Create(spec), sum);
  const std::pair<std::vector<std::string>, std::string_view> bad[] = {
      {{"Input"}, "not a dimension name"},
      {{"1st"}, "not a dimension name"},
      {{""}, "not a dimension name"},
      {{std::string(33, 'a')}, "not a dimension name"},
      {{"a-b"}, "not a dimension name"},
      {{"a", "b", "a"}, "named twice"},
      {{"a", "b", "c", "d", "e", "f", "g", "h", "i"}, "at most 8"},
  };
  for (const auto& [names, message] : bad) {
    spec.dimension = names;
    auto l = Limit::Create(spec);
    ASSERT_FALSE(l.ok()) << message;
    EXPECT_NE(l.status().message().find(message), std::string::npos) << l.status().message();
  }
  LimitSpec slots = LimitSpec::Concurrency(5, seconds(30));
  slots.dimension = {"input_tokens"};
  EXPECT_FALSE(Limit::Create(slots).ok());
}

TEST(Algorithm, NamesRoundTrip) {
  for (Algorithm a : kAllAlgorithms) EXPECT_EQ(*ParseAlgorithm(AlgorithmName(a)), a);
  EXPECT_FALSE(ParseAlgorithm("leaky").ok());
}

}  // namespace
}  // namespace caudal
