// Value-parameterised suites over the algorithm table (algorithms/algorithm.h): a suite's
// TEST_Ps take an Algorithm and are instantiated over the rows a property holds for, chosen by
// the table's capability flags (SupportsCharge, SupportsLease, SupportsReserve) or family, never
// by a hand list, so that a new row runs every suite it qualifies for. Each instance is named by
// its row's name:
//
//   INSTANTIATE_TEST_SUITE_P(SupportsLease, GiveBack,
//                            ::testing::ValuesIn(AlgorithmsWhere(SupportsLease)),
//                            AlgorithmParamName);
//
// Test code only.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <vector>

#include "algorithms/algorithm.h"

namespace caudal::testing {

// The instant the suites start at: a whole minute (and second, millisecond) since the epoch, so a
// boundary of any whole-minute window.
inline constexpr Micros kT0 = std::chrono::minutes(28'333'334);

// The algorithms of the table's rows for which `holds(algorithm)` is true, in table order.
template <typename Predicate>
std::vector<Algorithm> AlgorithmsWhere(Predicate holds) {
  std::vector<Algorithm> out;
  for (const AlgorithmInfo& row : kAlgorithmTable) {
    if (holds(row.algorithm)) out.push_back(row.algorithm);
  }
  return out;
}

// Whether the row is a bucket (LimitSpec::Bucket): token_bucket, gcra.
inline bool IsBucket(Algorithm a) { return AlgorithmInfoOf(a).family == AlgorithmFamily::kBucket; }

// The instance's name: its row's name ("token_bucket").
inline std::string AlgorithmParamName(const ::testing::TestParamInfo<Algorithm>& info) {
  return std::string(AlgorithmName(info.param));
}

}  // namespace caudal::testing
