#include "caudal/algorithms/algorithm.h"

#include <cassert>

#include "caudal/algorithms/fixed_window.h"
#include "caudal/algorithms/gcra.h"
#include "caudal/algorithms/sliding_window_counter.h"
#include "caudal/algorithms/token_bucket.h"

namespace caudal {

Step DecideCompact(const Limit& limit, const CompactState* state, Micros now, int64_t cost) {
  switch (limit.algorithm()) {
    case Algorithm::kFixedWindow:
      return fixed_window::Decide(limit, state, now, cost);
    case Algorithm::kSlidingWindowCounter:
      return sliding_window_counter::Decide(limit, state, now, cost);
    case Algorithm::kTokenBucket:
      return token_bucket::Decide(limit, state, now, cost);
    case Algorithm::kGcra:
      return gcra::Decide(limit, state, now, cost);
    case Algorithm::kSlidingWindowLog:
      break;
  }
  assert(false && "DecideCompact called for an algorithm without compact state");
  return {};
}

Step RefundCompact(const Limit& limit, const CompactState* state, Micros now, int64_t units) {
  switch (limit.algorithm()) {
    case Algorithm::kFixedWindow:
      return fixed_window::Refund(limit, state, now, units);
    case Algorithm::kSlidingWindowCounter:
      return sliding_window_counter::Refund(limit, state, now, units);
    case Algorithm::kTokenBucket:
      return token_bucket::Refund(limit, state, now, units);
    case Algorithm::kGcra:
      return gcra::Refund(limit, state, now, units);
    case Algorithm::kSlidingWindowLog:
      break;
  }
  assert(false && "RefundCompact called for an algorithm without compact state");
  return {};
}

}  // namespace caudal
