#include "algorithms/algorithm.h"

#include <algorithm>
#include <array>
#include <string>

#include "algorithms/exact_math.h"

namespace caudal {
namespace {

constexpr size_t kRateAlgorithmCount = [] {
  size_t n = 0;
  for (const AlgorithmInfo& e : kAlgorithmTable) n += e.state != StateShape::kHolds;
  return n;
}();

constexpr auto kAllAlgorithmsArray = [] {
  std::array<Algorithm, kRateAlgorithmCount> all{};
  size_t n = 0;
  for (const AlgorithmInfo& e : kAlgorithmTable) {
    if (e.state != StateShape::kHolds) all[n++] = e.algorithm;
  }
  return all;
}();

bool Known(Algorithm a) { return static_cast<size_t>(a) < kAlgorithmCount; }

}  // namespace

// Constant-initialized, so it is ready before any dynamic initialization (a test suite
// instantiated over it) reads it.
constinit const std::span<const Algorithm> kAllAlgorithms = kAllAlgorithmsArray;

std::string_view AlgorithmName(Algorithm a) {
  return Known(a) ? AlgorithmInfoOf(a).name : "unknown";
}

Result<Algorithm> ParseAlgorithm(std::string_view name) {
  std::string known;
  for (size_t i = 0; i < kAlgorithmCount; ++i) {
    const AlgorithmInfo& e = kAlgorithmTable[i];
    if (e.name == name) return e.algorithm;
    known += i == 0 ? "" : i + 1 == kAlgorithmCount ? " or " : ", ";
    known += e.name;
  }
  return Status::InvalidArgument("unknown algorithm \"" + std::string(name) + "\" (expected " +
                                 known + ")");
}

bool IsWindowAlgorithm(Algorithm a) {
  return Known(a) && AlgorithmInfoOf(a).family == AlgorithmFamily::kWindow;
}

int64_t MaxDebt(const Limit& limit) {
  if (limit.algorithm() == Algorithm::kFixedWindow) return kMaxCapacity;
  // floor(kMaxDebtTime · n / p), or 2^40 when that is more.
  const exact::Int128 units = static_cast<exact::Int128>(kMaxDebtTime.count()) *
                              limit.refill_count() / limit.refill_period_us();
  return units >= kMaxCapacity ? kMaxCapacity : static_cast<int64_t>(units);
}

bool IsConcurrency(Algorithm a) {
  return Known(a) && AlgorithmInfoOf(a).family == AlgorithmFamily::kConcurrency;
}

LimitFields FieldsOf(Algorithm a) {
  switch (Known(a) ? AlgorithmInfoOf(a).family : AlgorithmFamily::kBucket) {
    case AlgorithmFamily::kWindow:
      return {.count = "limit", .period = "window"};
    case AlgorithmFamily::kConcurrency:
      return {.count = "limit", .period = "hold"};
    case AlgorithmFamily::kBucket:
      break;
  }
  return {.count = "capacity", .period = "refill", .period_is_rate = true};
}

}  // namespace caudal
