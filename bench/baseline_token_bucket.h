// The benchmarks' baseline: the token bucket a first version would write — one
// std::unordered_map<std::string, {double tokens; int64_t last_ns}> under one std::mutex.
// Floating-point refill, no sharding, no bound on the table.
#pragma once

#include <algorithm>
#include <cstdint>
#include <mutex>
#include <string>
#include <unordered_map>

namespace caudal::bench {

class BaselineTokenBucket {
 public:
  BaselineTokenBucket(double capacity, double tokens_per_second)
      : capacity_(capacity), per_ns_(tokens_per_second / 1e9) {}

  bool Allow(const std::string& key, int64_t now_ns) {
    std::lock_guard<std::mutex> lock(mu_);
    auto [it, inserted] = buckets_.try_emplace(key, Bucket{capacity_, now_ns});
    Bucket& b = it->second;
    if (!inserted) {
      b.tokens = std::min(capacity_, b.tokens + static_cast<double>(now_ns - b.last_ns) * per_ns_);
      b.last_ns = std::max(b.last_ns, now_ns);
    }
    if (b.tokens < 1.0) return false;
    b.tokens -= 1.0;
    return true;
  }

  size_t Size() {
    std::lock_guard<std::mutex> lock(mu_);
    return buckets_.size();
  }

 private:
  struct Bucket {
    double tokens;
    int64_t last_ns;
  };
  const double capacity_;
  const double per_ns_;
  std::mutex mu_;
  std::unordered_map<std::string, Bucket> buckets_;  // guarded by mu_
};

}  // namespace caudal::bench
