// Metrics: the counters and histograms `caudal serve` exports at /metrics (Prometheus text).
//
// Counters are atomics updated on the request path without locks; per-policy counters are found
// once per PolicySet install (ForPolicy takes a lock) and kept by pointer. The number of distinct
// policy names is bounded by what configs name over the process's life.
//
// Thread-safety: every method may be called from any thread.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>

#include "caudal/clock.h"
#include "caudal/status.h"

namespace caudal {

// A cumulative histogram over fixed bounds (µs), rendered in seconds.
class LatencyHistogram {
 public:
  static constexpr std::array<int64_t, 14> kBoundsUs = {
      50, 100, 250, 500, 1'000, 2'500, 5'000, 10'000, 25'000, 50'000, 100'000, 250'000, 500'000,
      1'000'000};
  void Observe(Micros d);
  void Render(std::string& out, std::string_view name) const;

 private:
  std::array<std::atomic<uint64_t>, kBoundsUs.size() + 1> buckets_{};  // last: +Inf
  std::atomic<uint64_t> count_{0};
  std::atomic<uint64_t> sum_us_{0};
};

struct PolicyCounters {
  std::atomic<uint64_t> allowed{0};
  std::atomic<uint64_t> denied{0};
  std::atomic<uint64_t> shadow_denied{0};  // a shadow policy would have refused
  std::atomic<uint64_t> fail_open{0};      // store failed; failure mode allow
  std::atomic<uint64_t> fail_closed{0};    // store failed; failure mode deny
  std::atomic<uint64_t> local{0};          // store failed; decided by the local fallback
};

class Metrics {
 public:
  // Stable for the life of the Metrics.
  PolicyCounters& ForPolicy(std::string_view policy);

  void ObserveDecision(Micros d) { decision_latency_.Observe(d); }
  void ObserveStore(Micros d) { store_latency_.Observe(d); }
  void CountStoreError(StatusCode code);
  void SetStoreDegraded(bool degraded) { store_degraded_.store(degraded); }
  void CountReload(bool ok) { (ok ? reloads_ok_ : reloads_failed_).fetch_add(1); }
  // HTTP status codes 100..599; others are ignored.
  void CountHttpResponse(int status);

  // Prometheus text exposition format 0.0.4.
  std::string RenderPrometheus() const;

 private:
  mutable std::mutex mu_;
  std::map<std::string, std::unique_ptr<PolicyCounters>, std::less<>> policies_;  // guarded by mu_
  LatencyHistogram decision_latency_;
  LatencyHistogram store_latency_;
  std::array<std::atomic<uint64_t>, 8> store_errors_{};  // by StatusCode
  std::atomic<bool> store_degraded_{false};
  std::atomic<uint64_t> reloads_ok_{0};
  std::atomic<uint64_t> reloads_failed_{0};
  std::array<std::atomic<uint64_t>, 600> http_{};
};

}  // namespace caudal
