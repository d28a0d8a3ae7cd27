// Metrics: the counters and histograms `caudal serve` exports at /metrics (Prometheus text).
//
// Counters are atomics updated on the request path without locks; per-policy counters (a caudal
// policy, or an Envoy rule by its stat key) are found once per config install (ForPolicy takes a
// lock) and kept by pointer, so their number is bounded by what configs name over the process's
// life. Envoy stat keys that carry request values (detailed_metric, value_to_metric,
// share_threshold, limit overrides) are found per request (ForDetailed, lock-free once a key is
// known): at most kMaxDetailedSeries such series exist; later values are counted together under
// the policy label "_overflow", and the lookups that landed there are counted apart.
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
#include <utility>
#include <vector>

#include "caudal/circuit_breaker.h"
#include "caudal/clock.h"
#include "caudal/status.h"

namespace caudal {

// Which front end asked: the `api` label of the decision metrics.
enum class Api : uint8_t { kHttp, kRls, kCli };
inline constexpr size_t kApiCount = 3;
std::string_view ApiName(Api api);

// A cumulative histogram over fixed bounds (µs), rendered in seconds.
class LatencyHistogram {
 public:
  static constexpr std::array<int64_t, 14> kBoundsUs = {50,      100,     250,     500,      1'000,
                                                        2'500,   5'000,   10'000,  25'000,   50'000,
                                                        100'000, 250'000, 500'000, 1'000'000};
  void Observe(Micros d);
  // `labels` ("api=\"http\"", or empty) go on every series.
  void Render(std::string& out, std::string_view name, std::string_view labels) const;

 private:
  std::array<std::atomic<uint64_t>, kBoundsUs.size() + 1> buckets_{};  // last: +Inf
  std::atomic<uint64_t> count_{0};
  std::atomic<uint64_t> sum_us_{0};
};

inline constexpr size_t kMaxDetailedSeries = 1000;

// envoyproxy/ratelimit's statistics of one rule, in hits (hits_addend units), as its
// base_limiter.go counts them; Envoy rules only. See engine/hit_stats.h for which hits go where.
struct HitCounters {
  std::atomic<uint64_t> total_hits{0};
  std::atomic<uint64_t> within_limit{0};
  std::atomic<uint64_t> near_limit{0};
  std::atomic<uint64_t> over_limit{0};
  std::atomic<uint64_t> over_limit_with_local_cache{0};  // refused by the over-limit cache
  std::atomic<uint64_t> shadow_mode{0};                  // over the limit, let through: shadow
};

// Why a TLS handshake on the HTTP listener failed: the `reason` label of
// caudal_tls_handshake_failures_total (a fixed set, so the series are bounded).
enum class TlsFailure : uint8_t {
  kNoClientCertificate,   // client_cert: require, and the client sent none
  kBadClientCertificate,  // the client's certificate did not verify against client_ca_file
  kRefusedByClient,       // the client sent an alert: it does not trust caudal's certificate...
  kProtocol,              // no TLS at all (plaintext), no common version or cipher, ...
  kClosed,                // the client closed or reset the connection mid-handshake
  kTimeout,               // the handshake was not done within header_timeout
};
inline constexpr size_t kTlsFailureCount = 6;
std::string_view TlsFailureName(TlsFailure reason);

struct PolicyCounters {
  std::atomic<uint64_t> allowed{0};
  std::atomic<uint64_t> denied{0};
  std::atomic<uint64_t> shadow_denied{0};  // a shadow policy would have refused
  std::atomic<uint64_t> fail_open{0};      // store failed; failure mode allow
  std::atomic<uint64_t> fail_closed{0};    // store failed; failure mode deny
  std::atomic<uint64_t> local{0};          // store failed; decided by the local fallback
  HitCounters hits;
};

class Metrics {
 public:
  // Stable for the life of the Metrics.
  PolicyCounters& ForPolicy(Api api, std::string_view policy);
  // The same for an Envoy stat key that carries request values, bounded (see above); a name
  // ForPolicy knows gets that policy's counters. No lock and no allocation once `name` is known.
  PolicyCounters& ForDetailed(Api api, std::string_view name);

  void ObserveDecision(Api api, Micros d) {
    decision_latency_[static_cast<size_t>(api)].Observe(d);
  }
  void ObserveStore(Micros d) { store_latency_.Observe(d); }
  void CountStoreError(StatusCode code);
  // The store's circuit breaker: 0 closed, 1 open, 2 half-open (see breaker_store.h).
  void SetStoreBreaker(int state) { store_breaker_.store(state, std::memory_order_relaxed); }
  int StoreBreaker() const { return store_breaker_.load(std::memory_order_relaxed); }
  // A store server's own circuit breaker (Redis Cluster: one per primary), by "host:port": its
  // state and how often it opened. At most kMaxNodeSeries nodes (the cluster store's own bound);
  // RemoveNode ends a node's series when it leaves the topology.
  void SetNodeBreaker(std::string_view node, BreakerState state, uint64_t opens);
  void RemoveNode(std::string_view node);
  static constexpr size_t kMaxNodeSeries = 1024;
  void CountReload(bool ok) { (ok ? reloads_ok_ : reloads_failed_).fetch_add(1); }
  void CountOverLimitCacheHit() { cache_hits_.fetch_add(1, std::memory_order_relaxed); }
  // HTTP status codes 100..599; others are ignored.
  void CountHttpResponse(int status);
  // A failed TLS handshake on the HTTP listener (gRPC's TLS stack reports none to its server).
  void CountTlsHandshakeFailure(TlsFailure reason) {
    tls_failures_[static_cast<size_t>(reason)].fetch_add(1, std::memory_order_relaxed);
  }

  // A ShouldRateLimit call whose message was not a RateLimitRequest (INVALID_ARGUMENT).
  void CountMalformedRlsRequest() { rls_malformed_.fetch_add(1, std::memory_order_relaxed); }

  // Prometheus text exposition format 0.0.4.
  std::string RenderPrometheus() const;

 private:
  using Key = std::pair<Api, std::string>;
  // A name ForDetailed has seen, published in `index_` (open addressing, never removed).
  struct Indexed {
    Api api;
    std::string_view name;  // the key of its entry in policies_
    PolicyCounters* counters;
  };
  static constexpr size_t kIndexSlots = 4096;  // a power of two, > 2 × what is ever indexed
  static constexpr size_t kMaxIndexed = kIndexSlots / 2;

  PolicyCounters& FindLocked(Api api, std::string_view name);
  PolicyCounters* Lookup(Api api, std::string_view name) const;  // lock-free
  void IndexLocked(Api api, std::string_view name, PolicyCounters* counters);

  mutable std::mutex mu_;
  std::map<Key, std::unique_ptr<PolicyCounters>> policies_;  // guarded by mu_
  size_t detailed_series_ = 0;                               // guarded by mu_
  std::vector<std::unique_ptr<Indexed>> indexed_;            // guarded by mu_
  std::array<std::atomic<const Indexed*>, kIndexSlots> index_{};
  // While false, every name in policies_ is in index_.
  std::atomic<bool> index_full_{false};
  // Per Api, set once every detailed series exists: "_overflow"'s counters.
  std::array<std::atomic<PolicyCounters*>, kApiCount> overflow_{};
  std::atomic<uint64_t> detailed_overflow_{0};
  std::array<LatencyHistogram, kApiCount> decision_latency_;
  LatencyHistogram store_latency_;
  std::array<std::atomic<uint64_t>, 8> store_errors_{};  // by StatusCode
  std::atomic<int> store_breaker_{0};
  struct NodeBreakerSeries {
    BreakerState state = BreakerState::kClosed;
    uint64_t opens = 0;
  };
  std::map<std::string, NodeBreakerSeries, std::less<>> nodes_;  // guarded by mu_
  std::atomic<uint64_t> cache_hits_{0};
  std::atomic<uint64_t> reloads_ok_{0};
  std::atomic<uint64_t> reloads_failed_{0};
  std::array<std::atomic<uint64_t>, 600> http_{};
  std::array<std::atomic<uint64_t>, kTlsFailureCount> tls_failures_{};
  std::atomic<uint64_t> rls_malformed_{0};
};

}  // namespace caudal
