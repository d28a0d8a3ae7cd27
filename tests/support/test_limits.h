// Limits for tests, made in one call from specs the test knows are valid. Test code only.
#pragma once

#include <cstdint>

#include "caudal/algorithms/limit.h"

namespace caudal::testing {

// A token bucket of `capacity` refilled at `refill`.
inline Limit Bucket(int64_t capacity, Rate refill) {
  return *Limit::Create(LimitSpec::Bucket(Algorithm::kTokenBucket, capacity, refill));
}

}  // namespace caudal::testing
