// The key indices a load generator asks about: in turn over [0, n), or drawn from Zipf(s) over
// [0, n) (a few keys carry most requests, as a real API's tenants do). redis_load and
// reference_load draw the same stream from the same seed, so their runs compare key for key.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <random>
#include <vector>

namespace caudal::bench {

class KeyStream {
 public:
  // `zipf_s` 0: the keys in turn, starting at `first`.
  KeyStream(int n, double zipf_s, uint64_t seed, uint64_t first)
      : n_(static_cast<size_t>(n)), next_(first), rng_(seed) {
    if (zipf_s <= 0) return;
    cdf_.resize(n_);
    double sum = 0;
    for (size_t k = 0; k < n_; ++k) sum += 1.0 / std::pow(static_cast<double>(k + 1), zipf_s);
    double acc = 0;
    for (size_t k = 0; k < n_; ++k)
      cdf_[k] = (acc += 1.0 / std::pow(static_cast<double>(k + 1), zipf_s) / sum);
  }

  size_t Next() {
    if (cdf_.empty()) return next_++ % n_;
    const double u = std::uniform_real_distribution<double>(0, 1)(rng_);
    const auto it = std::lower_bound(cdf_.begin(), cdf_.end(), u);
    return std::min(static_cast<size_t>(it - cdf_.begin()), n_ - 1);
  }

 private:
  size_t n_;
  uint64_t next_;
  std::mt19937_64 rng_;
  std::vector<double> cdf_;  // the inverse of Zipf's cumulative distribution; empty: in turn
};

}  // namespace caudal::bench
