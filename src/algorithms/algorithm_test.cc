#include "algorithms/algorithm.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <set>
#include <string>

namespace caudal {
namespace {

using std::chrono::seconds;

bool IsSnakeCase(std::string_view s) {
  if (s.empty() || !std::islower(static_cast<unsigned char>(s[0]))) return false;
  for (const char c : s) {
    if (!std::islower(static_cast<unsigned char>(c)) &&
        !std::isdigit(static_cast<unsigned char>(c)) && c != '_') {
      return false;
    }
  }
  return true;
}

bool IsHexColour(std::string_view s) {
  if (s.size() != 7 || s[0] != '#') return false;
  for (const char c : s.substr(1)) {
    if (!std::isxdigit(static_cast<unsigned char>(c))) return false;
  }
  return true;
}

// kAllAlgorithms is every rate algorithm: each entry but those that keep holds, in table order.
TEST(AlgorithmTable, ListsEveryRateAlgorithmOnceInEnumOrder) {
  size_t next = 0;
  for (size_t i = 0; i < kAlgorithmCount; ++i) {
    if (kAlgorithmTable[i].state == StateShape::kHolds) continue;
    ASSERT_LT(next, kAllAlgorithms.size());
    EXPECT_EQ(static_cast<size_t>(kAllAlgorithms[next]), i);
    EXPECT_EQ(&AlgorithmInfoOf(kAllAlgorithms[next]), &kAlgorithmTable[i]);
    ++next;
  }
  EXPECT_EQ(next, kAllAlgorithms.size());
  EXPECT_EQ(std::count(kAllAlgorithms.begin(), kAllAlgorithms.end(), Algorithm::kConcurrency), 0);
}

TEST(AlgorithmTable, EachEntryHasExactlyItsStateShapesFunctions) {
  for (const AlgorithmInfo& e : kAlgorithmTable) {
    SCOPED_TRACE(e.name);
    const bool compact = e.state == StateShape::kCompact;
    const bool log = e.state == StateShape::kLog;
    EXPECT_EQ(e.compact.decide != nullptr, compact);
    EXPECT_EQ(e.compact.refund != nullptr, compact);
    EXPECT_EQ(e.log.evaluate != nullptr, log);
    EXPECT_EQ(e.log.commit != nullptr, log);
    EXPECT_EQ(e.log.refund != nullptr, log);
    EXPECT_EQ(e.state == StateShape::kHolds, e.family == AlgorithmFamily::kConcurrency);
  }
}

// The name is a config value, a file name (src/redis/lua/<name>.lua) and, upper-cased, a Lua
// identifier: snake_case keeps it valid as all three.
TEST(AlgorithmTable, NamesAreDistinctSnakeCase) {
  std::set<std::string_view> names;
  for (const AlgorithmInfo& e : kAlgorithmTable) {
    EXPECT_TRUE(IsSnakeCase(e.name)) << e.name;
    EXPECT_TRUE(names.insert(e.name).second) << "duplicate " << e.name;
    EXPECT_EQ(AlgorithmName(e.algorithm), e.name);
    EXPECT_EQ(*ParseAlgorithm(e.name), e.algorithm);
  }
}

TEST(AlgorithmTable, UnknownNamesListEveryKnownOne) {
  const Result<Algorithm> r = ParseAlgorithm("no_such_algorithm");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  for (const AlgorithmInfo& e : kAlgorithmTable) {
    EXPECT_NE(r.status().message().find(e.name), std::string::npos) << r.status().message();
  }
  EXPECT_NE(r.status().message().find("no_such_algorithm"), std::string::npos);
}

TEST(AlgorithmTable, ChartStylesAreValidAndDistinct) {
  std::set<std::string_view> colours;
  for (const AlgorithmInfo& e : kAlgorithmTable) {
    EXPECT_TRUE(IsHexColour(e.chart.colour)) << e.name << ": " << e.chart.colour;
    EXPECT_TRUE(colours.insert(e.chart.colour).second) << e.name << " repeats a colour";
  }
}

// The family decides how a LimitSpec reads: a window spec must be accepted by window algorithms,
// whose rate count equals the limit, and a bucket spec with another rate by bucket algorithms.
TEST(AlgorithmTable, FamilyMatchesTheSpecTheLimitAccepts) {
  for (const AlgorithmInfo& e : kAlgorithmTable) {
    SCOPED_TRACE(e.name);
    const bool window = e.family == AlgorithmFamily::kWindow;
    EXPECT_EQ(IsWindowAlgorithm(e.algorithm), window);
    EXPECT_EQ(IsConcurrency(e.algorithm), e.family == AlgorithmFamily::kConcurrency);
    const Result<Limit> fast_refill =
        Limit::Create(LimitSpec::Bucket(e.algorithm, 10, {20, seconds(1)}));
    EXPECT_EQ(fast_refill.ok(), e.family == AlgorithmFamily::kBucket)
        << fast_refill.status().ToString();
    EXPECT_TRUE(Limit::Create(LimitSpec::Window(e.algorithm, 10, seconds(1))).ok());
  }
}

// Through the table, every algorithm decides a fresh key: the first unit passes, and the state
// (or log) records it.
TEST(AlgorithmTable, DispatchReachesEachAlgorithm) {
  for (const AlgorithmInfo& e : kAlgorithmTable) {
    SCOPED_TRACE(e.name);
    const Limit limit = *Limit::Create(LimitSpec::Window(e.algorithm, 1, seconds(1)));
    const Micros now = seconds(1'000'000);
    EXPECT_EQ(HasLogState(e.algorithm), e.state == StateShape::kLog);
    EXPECT_EQ(HasHolds(e.algorithm), e.state == StateShape::kHolds);
    if (e.state == StateShape::kHolds) {
      concurrency::Holds holds;
      ASSERT_TRUE(concurrency::Evaluate(limit, holds, now, 1).allowed());
      concurrency::Take(limit, holds, now, 7);
      EXPECT_FALSE(concurrency::Evaluate(limit, holds, now, 1).allowed());
      bool released = false;
      EXPECT_EQ(concurrency::Release(limit, holds, now, 7, &released).remaining, 1);
      EXPECT_TRUE(released);
    } else if (e.state == StateShape::kLog) {
      sliding_window_log::LogState log;
      const Decision d = LogFunctionsOf(limit).evaluate(limit, log, now, 1);
      ASSERT_TRUE(d.allowed());
      LogFunctionsOf(limit).commit(limit, log, now, 1);
      EXPECT_FALSE(LogFunctionsOf(limit).evaluate(limit, log, now, 1).allowed());
      EXPECT_EQ(LogFunctionsOf(limit).refund(limit, log, now, 1).remaining, 1);
    } else {
      const Step first = DecideCompact(limit, nullptr, now, 1);
      ASSERT_TRUE(first.decision.allowed());
      ASSERT_TRUE(first.changed);
      EXPECT_FALSE(DecideCompact(limit, &first.next, now, 1).decision.allowed());
      EXPECT_EQ(RefundCompact(limit, &first.next, now, 1).decision.remaining, 1);
    }
  }
}

TEST(AlgorithmTable, LimitRefusesAnAlgorithmOutsideTheTable) {
  const auto beyond = static_cast<Algorithm>(kAlgorithmCount);
  const Result<Limit> r = Limit::Create(LimitSpec::Window(beyond, 10, seconds(1)));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(AlgorithmName(beyond), "unknown");
  EXPECT_FALSE(IsWindowAlgorithm(beyond));
}

}  // namespace
}  // namespace caudal
