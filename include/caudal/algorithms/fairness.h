// Fairness: how a shared capacity is divided among the consumers that want it (a policy's
// `share`; the allocation is algorithms/share.h's), and the weights a consumer may carry.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "caudal/common/status.h"

namespace caudal {

enum class Fairness : uint8_t {
  kMaxMin,        // max-min fair: no one gets more than it wants, the rest alike (by weight)
  kProportional,  // in proportion to weight times demand
};

inline constexpr int64_t kMaxShareWeight = 4096;  // weights are 1..kMaxShareWeight
// Consumers one shared capacity divides among at most (a store's key, a policy's identities).
inline constexpr size_t kMaxShareConsumers = 1024;

std::string_view FairnessName(Fairness f);  // "max_min", "proportional"
// kInvalidArgument naming both when `text` is neither.
Result<Fairness> ParseFairness(std::string_view text);

}  // namespace caudal
