// Metrics: the counters, gauges and histograms `caudal serve` exports at /metrics (Prometheus
// text), each one row of kMetricTable: its name, type, label names and help. The exposition
// writes every family's # HELP, # TYPE and series from its row, in the table's order, and
// docs/operations.md's list is generated from the table (a test fails when they differ).
//
// Adding a metric: its enumerator in MetricId and its row in kMetricTable, then count it where it
// happens. A row without labels is counted with Add or Set; a labelled row with a bounded set of
// values (reasons, results) through Series, found once and kept. Rows whose series come from
// their own structures (the per-policy families, the histograms, the store's breakers, the HTTP
// codes) are rendered by name in metrics.cc.
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
#include <functional>
#include <initializer_list>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "caudal/common/circuit_breaker.h"
#include "caudal/common/clock.h"
#include "caudal/common/status.h"
#include "caudal/observe/log.h"

namespace caudal {

enum class MetricType : uint8_t { kCounter, kGauge, kHistogram };
constexpr std::string_view MetricTypeName(MetricType type) {
  switch (type) {
    case MetricType::kCounter:
      return "counter";
    case MetricType::kGauge:
      return "gauge";
    case MetricType::kHistogram:
      return "histogram";
  }
  return "untyped";
}

// Each metric's handle; one per row of kMetricTable, in the same order.
enum class MetricId : uint8_t {
  kDecisions,
  kShadowDenials,
  kFailureModeDecisions,
  kRuleHits,
  kDetailedMetricOverflow,
  kDecisionDuration,
  kStoreDuration,
  kStoreErrors,
  kStoreDegraded,
  kStoreBreakerState,
  kStoreNodeBreakerState,
  kStoreNodeBreakerOpens,
  kOverLimitCacheHits,
  kConfigReloads,
  kHttpResponses,
  kTlsHandshakeFailures,
  kRlsMalformedRequests,
  kAdminChanges,
  kAdminUnauthenticated,
  kRuntimeOverrides,
  kRuntimeOverridesNotApplied,
  kOverrideSyncFailures,
  kOverrideFeedMessages,
  kOverrideFeedRereads,
  kOverrideFeedReconnects,
  kLeaseGrants,
  kLeaseRenewals,
  kLeaseRequests,
  kLeaseUnitsGivenBack,
  kLeaseUnitsLost,
  kLeaseUnits,
  kLeaseShares,
  kLeaseShareKeys,
  kShareAllotted,
  kShareIdentities,
  kHoldsTaken,
  kHoldReleases,
  kIdempotencyKeys,
  kReservationsOpened,
  kReservationSettles,
  kReservationOverrun,
  kUnitsAdmitted,
  kRlqsStreams,
  kRlqsBuckets,
  kRlqsMessages,
  kRlqsActions,
  kRlqsRefused,
  kRedisCalls,
  kRedisRequests,
  kRedisScriptReloads,
  kRedisModuleCalls,
  kRedisReconnects,
  kRedisTimeouts,
  kRedisSplitRequests,
  kRedisUndos,
  kRedisUndoFailures,
  kRedisMoved,
  kRedisAsked,
  kRedisTryAgain,
  kRedisNotServed,
  kRedisTopologyRefreshes,
  kRedisPrimarySwitches,
  kRedisOom,
  kRedisEvictionRisk,
  kRedisEvictedKeys,
};

inline constexpr size_t kMaxMetricLabels = 3;

// One metric family of /metrics. Its name, label names and meaning are a contract with
// operators' dashboards: keep them; add rows.
struct MetricDef {
  MetricId id;
  std::string_view name;
  MetricType type;
  std::array<std::string_view, kMaxMetricLabels> labels;  // in series order; the rest empty
  std::string_view help;                                  // one line, plain text

  constexpr size_t LabelCount() const {
    size_t n = 0;
    while (n < labels.size() && !labels[n].empty()) ++n;
    return n;
  }
};

// What /metrics holds, in the order it is written.
inline constexpr std::array kMetricTable = {
    MetricDef{MetricId::kDecisions,
              "caudal_decisions_total",
              MetricType::kCounter,
              {"api", "policy", "outcome"},
              "Decisions by policy and outcome, allowed or denied (shadow policies: what they "
              "decided)."},
    MetricDef{MetricId::kShadowDenials,
              "caudal_shadow_denials_total",
              MetricType::kCounter,
              {"api", "policy"},
              "Requests a shadow policy would have refused (they were allowed)."},
    MetricDef{MetricId::kFailureModeDecisions,
              "caudal_failure_mode_decisions_total",
              MetricType::kCounter,
              {"api", "policy", "mode"},
              "Decisions made by a failure mode (allow, deny or local) because the store failed."},
    MetricDef{MetricId::kRuleHits,
              "caudal_rule_hits_total",
              MetricType::kCounter,
              {"api", "policy", "stat"},
              "envoyproxy/ratelimit's statistics per Envoy rule (policy: its stat key), in hits; "
              "stat is total_hits, within_limit, near_limit, over_limit, "
              "over_limit_with_local_cache or shadow_mode. Envoy rules only."},
    MetricDef{MetricId::kDetailedMetricOverflow,
              "caudal_detailed_metric_overflow_total",
              MetricType::kCounter,
              {},
              "Decisions of Envoy rules whose stat key carries request values (detailed_metric, "
              "value_to_metric, share_threshold, overrides) past the series bound, counted under "
              "policy=\"_overflow\"."},
    MetricDef{MetricId::kDecisionDuration,
              "caudal_decision_duration_seconds",
              MetricType::kHistogram,
              {"api"},
              "Time to decide one request, store included, by front end."},
    MetricDef{MetricId::kStoreDuration,
              "caudal_store_duration_seconds",
              MetricType::kHistogram,
              {},
              "Store round-trip time."},
    MetricDef{MetricId::kStoreErrors,
              "caudal_store_errors_total",
              MetricType::kCounter,
              {"code"},
              "Store calls that failed, by code."},
    MetricDef{MetricId::kStoreDegraded,
              "caudal_store_degraded",
              MetricType::kGauge,
              {},
              "1 while the store's circuit breaker (or one server's) is not closed (decisions by "
              "failure mode)."},
    MetricDef{MetricId::kStoreBreakerState,
              "caudal_store_breaker_state",
              MetricType::kGauge,
              {},
              "The store's circuit breaker: 0 closed, 1 open, 2 half-open; with a breaker per "
              "server, 1 while one is open, else 2 while one is half-open."},
    MetricDef{MetricId::kStoreNodeBreakerState,
              "caudal_store_node_breaker_state",
              MetricType::kGauge,
              {"node"},
              "One store server's circuit breaker (Redis Cluster: each primary's, by host:port, "
              "while it is in the topology): 0 closed, 1 open, 2 half-open."},
    MetricDef{MetricId::kStoreNodeBreakerOpens,
              "caudal_store_node_breaker_opens_total",
              MetricType::kCounter,
              {"node"},
              "Times one store server's circuit breaker opened (Redis Cluster: each primary's)."},
    MetricDef{MetricId::kOverLimitCacheHits,
              "caudal_over_limit_cache_hits_total",
              MetricType::kCounter,
              {},
              "Checks refused from the store's earlier refusal, without a store call."},
    MetricDef{MetricId::kConfigReloads,
              "caudal_config_reloads_total",
              MetricType::kCounter,
              {"result"},
              "Config reloads by result, success or failure."},
    MetricDef{MetricId::kHttpResponses,
              "caudal_http_responses_total",
              MetricType::kCounter,
              {"code"},
              "HTTP responses by status code."},
    MetricDef{MetricId::kTlsHandshakeFailures,
              "caudal_tls_handshake_failures_total",
              MetricType::kCounter,
              {"listener", "reason"},
              "TLS handshakes that failed on a listener (http: gRPC's TLS stack reports none), by "
              "reason: no_client_certificate, bad_client_certificate, refused_by_client, protocol, "
              "closed or timeout."},
    MetricDef{MetricId::kRlsMalformedRequests,
              "caudal_rls_malformed_requests_total",
              MetricType::kCounter,
              {},
              "ShouldRateLimit calls whose bytes were not a RateLimitRequest (answered "
              "INVALID_ARGUMENT)."},
    MetricDef{MetricId::kAdminChanges,
              "caudal_admin_changes_total",
              MetricType::kCounter,
              {"op"},
              "Changes made through the admin API on this instance, by op: set_override, "
              "delete_override or reset_state."},
    MetricDef{MetricId::kAdminUnauthenticated,
              "caudal_admin_unauthenticated_total",
              MetricType::kCounter,
              {},
              "Admin API requests refused for missing or wrong admin credentials (401)."},
    MetricDef{MetricId::kRuntimeOverrides,
              "caudal_runtime_overrides",
              MetricType::kGauge,
              {},
              "Runtime overrides this instance applies (unexpired, as last read from the "
              "store)."},
    MetricDef{MetricId::kRuntimeOverridesNotApplied,
              "caudal_runtime_overrides_not_applied",
              MetricType::kGauge,
              {},
              "Runtime overrides held in the store that this instance does not apply, since they "
              "do not fit their policy or Envoy rule as configured here (each logged once)."},
    MetricDef{MetricId::kOverrideSyncFailures,
              "caudal_override_sync_failures_total",
              MetricType::kCounter,
              {},
              "Polls of the store's runtime overrides that failed (the previous ones stay "
              "applied)."},
    MetricDef{MetricId::kOverrideFeedMessages,
              "caudal_override_feed_messages_total",
              MetricType::kCounter,
              {},
              "Announcements of a change of the runtime overrides or a reset (by any instance) "
              "received from the store (Redis Pub/Sub)."},
    MetricDef{MetricId::kOverrideFeedRereads,
              "caudal_override_feed_rereads_total",
              MetricType::kCounter,
              {},
              "Reads of the runtime overrides that announcements prompted (bursts coalesced; "
              "none for this instance's own changes)."},
    MetricDef{MetricId::kOverrideFeedReconnects,
              "caudal_override_feed_reconnects_total",
              MetricType::kCounter,
              {},
              "Times the subscription to the store's announcements was made again after a loss "
              "(meanwhile the once-a-second poll applies changes)."},
    MetricDef{MetricId::kLeaseGrants,
              "caudal_lease_grants_total",
              MetricType::kCounter,
              {},
              "Leases the store granted in the call that decided a request (store.lease)."},
    MetricDef{MetricId::kLeaseRenewals,
              "caudal_lease_renewals_total",
              MetricType::kCounter,
              {},
              "Leases the store granted to a renewal, a call of its own sent before a lease ran "
              "dry."},
    MetricDef{MetricId::kLeaseRequests,
              "caudal_lease_requests_total",
              MetricType::kCounter,
              {"answered_by"},
              "Store requests of keys that may lease, by what answered them: lease (in memory, "
              "from units the store granted) or store."},
    MetricDef{MetricId::kLeaseUnitsGivenBack,
              "caudal_lease_units_given_back_total",
              MetricType::kCounter,
              {},
              "Unspent units of ended leases given back to the store (it keeps those that no "
              "longer count)."},
    MetricDef{MetricId::kLeaseUnitsLost,
              "caudal_lease_units_lost_total",
              MetricType::kCounter,
              {},
              "Unspent units of ended leases whose give-back failed: consumed in the store, never "
              "spent (under-admission, never over)."},
    MetricDef{MetricId::kLeaseUnits,
              "caudal_lease_units",
              MetricType::kGauge,
              {},
              "Units this instance holds in live leases: granted, not yet spent."},
    MetricDef{MetricId::kLeaseShares,
              "caudal_lease_shares_total",
              MetricType::kCounter,
              {},
              "Shares of a hot key's refill the store granted this instance, in renewals taken "
              "about every ttl/2 once the key's demand across instances exceeds its refill."},
    MetricDef{MetricId::kLeaseShareKeys,
              "caudal_lease_share_keys",
              MetricType::kGauge,
              {},
              "Keys this instance now decides from shares of their refill rather than leased "
              "units."},
    MetricDef{MetricId::kShareAllotted,
              "caudal_share_allotted",
              MetricType::kGauge,
              {"policy"},
              "A policy with share: the units per refill period its identities' shares at this "
              "instance add up to, as last allotted (its part of the capacity; no series per "
              "identity)."},
    MetricDef{MetricId::kShareIdentities,
              "caudal_share_identities",
              MetricType::kGauge,
              {"policy"},
              "A policy with share: the identities holding a share at this instance."},
    MetricDef{MetricId::kHoldsTaken,
              "caudal_holds_taken_total",
              MetricType::kCounter,
              {},
              "Requests admitted with concurrency slots, each answered with a hold id (slots "
              "held: these, less releases, less holds expired in the store)."},
    MetricDef{MetricId::kHoldReleases,
              "caudal_hold_releases_total",
              MetricType::kCounter,
              {"result"},
              "Releases of a hold id, by result: released (its slots were live) or unknown "
              "(unknown, freed already, or expired)."},
    MetricDef{MetricId::kIdempotencyKeys,
              "caudal_idempotency_keys_total",
              MetricType::kCounter,
              {"outcome"},
              "Requests with an Idempotency-Key, by outcome: first (decided), replayed (the first "
              "answer again), conflict (409: in progress), mismatch (422: another body), invalid "
              "(400) or unavailable (the record could not be read: decided by the failure modes)."},
    MetricDef{MetricId::kReservationsOpened,
              "caudal_reservations_opened_total",
              MetricType::kCounter,
              {},
              "Reserves admitted, each answered with a reservation id (open: these, less settles "
              "answered settled, less reservations expired in the store)."},
    MetricDef{MetricId::kReservationSettles,
              "caudal_reservation_settles_total",
              MetricType::kCounter,
              {"result"},
              "Settles of a reservation id, by result: settled, repeated (the same cost again), "
              "conflict (another cost than the first) or unknown (unknown or expired)."},
    MetricDef{MetricId::kReservationOverrun,
              "caudal_reservation_overrun_units_total",
              MetricType::kCounter,
              {},
              "Units settles charged above their reservations' estimates, into debt where they "
              "did not fit (each limit of a reservation counted)."},
    MetricDef{MetricId::kUnitsAdmitted,
              "caudal_units_admitted_total",
              MetricType::kCounter,
              {"policy", "dimension"},
              "Units admitted requests took, by policy and by each dimension its limits count "
              "(requests, input_tokens...: the configured ones): a request's cost, or its costs "
              "of the dimension; a reserve counts its estimate, a refund nothing."},
    MetricDef{MetricId::kRlqsStreams,
              "caudal_rlqs_streams",
              MetricType::kGauge,
              {},
              "Envoy's rate limit quota streams open at this instance (StreamRateLimitQuotas)."},
    MetricDef{MetricId::kRlqsBuckets,
              "caudal_rlqs_buckets",
              MetricType::kGauge,
              {},
              "Buckets the open RLQS streams report, each assigned a share of its policy's "
              "limits (or the domain's no_match)."},
    MetricDef{MetricId::kRlqsMessages,
              "caudal_rlqs_messages_total",
              MetricType::kCounter,
              {"direction"},
              "RLQS messages: received (usage reports) and sent (assignments and abandons)."},
    MetricDef{MetricId::kRlqsActions,
              "caudal_rlqs_actions_total",
              MetricType::kCounter,
              {"action"},
              "RLQS bucket actions sent: token_bucket, allow_all and deny_all (new or replacing "
              "assignments), extend (the same strategy, a later end), expire (time to live 0, "
              "at shutdown) and abandon."},
    MetricDef{MetricId::kRlqsRefused,
              "caudal_rlqs_streams_refused_total",
              MetricType::kCounter,
              {"reason"},
              "RLQS streams refused or ended by caudal, by reason: malformed, domain, "
              "too_many_streams, too_many_buckets, unauthenticated, shutdown."},
    MetricDef{MetricId::kRedisCalls,
              "caudal_redis_calls_total",
              MetricType::kCounter,
              {},
              "Script calls sent to Redis (batches of requests), retries included; summed over the "
              "process's Redis stores."},
    MetricDef{MetricId::kRedisRequests,
              "caudal_redis_requests_total",
              MetricType::kCounter,
              {},
              "Store requests Redis decided (a request whose keys span Cluster slots: once per "
              "slot group)."},
    MetricDef{
        MetricId::kRedisScriptReloads,
        "caudal_redis_script_reloads_total",
        MetricType::kCounter,
        {},
        "NOSCRIPT or \"Function not found\" replies answered by loading the script or library "
        "again (a restarted or failed-over Redis)."},
    MetricDef{MetricId::kRedisModuleCalls,
              "caudal_redis_module_calls_total",
              MetricType::kCounter,
              {},
              "Calls sent to the caudal Redis module (CAUDAL.CONSUME) instead of the fast script, "
              "retries included: 0 where no server of the store has loaded this build's module."},
    MetricDef{MetricId::kRedisReconnects,
              "caudal_redis_reconnects_total",
              MetricType::kCounter,
              {},
              "Connections to Redis re-established after a loss."},
    MetricDef{MetricId::kRedisTimeouts,
              "caudal_redis_timeouts_total",
              MetricType::kCounter,
              {},
              "Store requests completed at their deadline (store.timeout) without Redis's answer."},
    MetricDef{MetricId::kRedisSplitRequests,
              "caudal_redis_split_requests_total",
              MetricType::kCounter,
              {},
              "Requests whose keys span Cluster slots, decided as a reserve per slot group, then "
              "committed or undone (Cluster and Sentinel)."},
    MetricDef{MetricId::kRedisUndos,
              "caudal_redis_undos_total",
              MetricType::kCounter,
              {},
              "Undo calls for split requests that were refused or failed."},
    MetricDef{MetricId::kRedisUndoFailures,
              "caudal_redis_undo_failures_total",
              MetricType::kCounter,
              {},
              "Undos that did not reach their node: their units stay consumed (under-admission)."},
    MetricDef{MetricId::kRedisMoved,
              "caudal_redis_moved_total",
              MetricType::kCounter,
              {},
              "MOVED redirects followed (Cluster: a slot moved)."},
    MetricDef{MetricId::kRedisAsked,
              "caudal_redis_asked_total",
              MetricType::kCounter,
              {},
              "ASK redirects followed (Cluster: a slot migrating)."},
    MetricDef{MetricId::kRedisTryAgain,
              "caudal_redis_tryagain_total",
              MetricType::kCounter,
              {},
              "TRYAGAIN answers retried (Cluster: a multi-key request during a slot's migration)."},
    MetricDef{MetricId::kRedisNotServed,
              "caudal_redis_not_served_total",
              MetricType::kCounter,
              {},
              "Requests a Cluster node did not serve in a call spanning slots (the slot map was "
              "behind), sent again with their keys declared."},
    MetricDef{MetricId::kRedisTopologyRefreshes,
              "caudal_redis_topology_refreshes_total",
              MetricType::kCounter,
              {},
              "Cluster slot maps read, or Sentinels asked for the primary."},
    MetricDef{MetricId::kRedisPrimarySwitches,
              "caudal_redis_primary_switches_total",
              MetricType::kCounter,
              {},
              "Sentinel: times the primary changed."},
    MetricDef{MetricId::kRedisOom,
              "caudal_redis_oom_total",
              MetricType::kCounter,
              {},
              "Script calls Redis refused with OOM (used memory over maxmemory, noeviction): "
              "their requests are decided by the failure mode."},
    MetricDef{MetricId::kRedisEvictionRisk,
              "caudal_redis_eviction_risk",
              MetricType::kGauge,
              {},
              "Redis primaries of the store whose maxmemory-policy may evict caudal's keys "
              "(maxmemory set, a policy other than noeviction): an evicted limit starts fresh."},
    MetricDef{MetricId::kRedisEvictedKeys,
              "caudal_redis_evicted_keys_total",
              MetricType::kCounter,
              {},
              "Keys the store's Redis primaries evicted while caudal watched (INFO evicted_keys: "
              "any key, caudal's or not)."},
};
inline constexpr size_t kMetricCount = kMetricTable.size();

constexpr bool InIdOrder(const decltype(kMetricTable)& table) {
  for (size_t i = 0; i < table.size(); ++i) {
    if (static_cast<size_t>(table[i].id) != i) return false;
  }
  return true;
}
static_assert(InIdOrder(kMetricTable), "kMetricTable's rows follow MetricId's order");

constexpr const MetricDef& MetricOf(MetricId id) { return kMetricTable[static_cast<size_t>(id)]; }

// A cumulative histogram over fixed bounds (µs), rendered in seconds.
class LatencyHistogram {
 public:
  static constexpr std::array<int64_t, 14> kBoundsUs = {50,      100,     250,     500,      1'000,
                                                        2'500,   5'000,   10'000,  25'000,   50'000,
                                                        100'000, 250'000, 500'000, 1'000'000};
  struct Counts {
    std::array<uint64_t, kBoundsUs.size() + 1> cumulative{};  // ≤ each bound; last: all (+Inf)
    uint64_t sum_us = 0;
  };

  void Observe(Micros d);
  Counts Read() const;

 private:
  std::array<std::atomic<uint64_t>, kBoundsUs.size() + 1> buckets_{};  // last: +Inf
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

class PrometheusText;  // observe/prometheus_text.h

class Metrics {
 public:
  Metrics();

  // Stable for the life of the Metrics.
  PolicyCounters& ForPolicy(Api api, std::string_view policy);
  // The same for an Envoy stat key that carries request values, bounded (see above); a name
  // ForPolicy knows gets that policy's counters. No lock and no allocation once `name` is known.
  PolicyCounters& ForDetailed(Api api, std::string_view name);

  // A row without labels: a counter counts up, a gauge is set (gauges hold a count or a state,
  // never negative). Lock-free.
  void Add(MetricId id, uint64_t n = 1) { Scalar(id).fetch_add(n, std::memory_order_relaxed); }
  void Set(MetricId id, uint64_t value) { Scalar(id).store(value, std::memory_order_relaxed); }
  uint64_t Value(MetricId id) const {
    return scalars_[static_cast<size_t>(id)].load(std::memory_order_relaxed);
  }
  // One series of a labelled counter or gauge row, by its label values in the row's order (as
  // many as the row has labels). Stable for the life of the Metrics: find it once (this takes a
  // lock) and keep it, then count on it as on any atomic. Values come from a bounded set
  // (reasons, results); past kMaxSeriesPerMetric series of one row, the rest share one series
  // whose every label is "_overflow". A series exists, and is rendered, from its first lookup.
  std::atomic<uint64_t>& Series(MetricId id, std::initializer_list<std::string_view> values);
  static constexpr size_t kMaxSeriesPerMetric = 256;

  void ObserveDecision(Api api, Micros d) {
    decision_latency_[static_cast<size_t>(api)].Observe(d);
  }
  void ObserveStore(Micros d) { store_latency_.Observe(d); }
  void CountStoreError(StatusCode code);
  // The store's circuit breaker: 0 closed, 1 open, 2 half-open (see breaker_store.h).
  void SetStoreBreaker(int state) {
    Set(MetricId::kStoreBreakerState, static_cast<uint64_t>(state));
  }
  int StoreBreaker() const { return static_cast<int>(Value(MetricId::kStoreBreakerState)); }
  // A store server's own circuit breaker (Redis Cluster: one per primary), by "host:port": its
  // state and how often it opened. At most kMaxNodeSeries nodes (the cluster store's own bound);
  // RemoveNode ends a node's series when it leaves the topology.
  void SetNodeBreaker(std::string_view node, BreakerState state, uint64_t opens);
  void RemoveNode(std::string_view node);
  static constexpr size_t kMaxNodeSeries = 1024;
  void CountReload(bool ok) { reloads_[ok ? 0 : 1]->fetch_add(1, std::memory_order_relaxed); }
  void CountOverLimitCacheHit() { Add(MetricId::kOverLimitCacheHits); }
  // HTTP status codes 100..599; others are ignored.
  void CountHttpResponse(int status);
  // A failed TLS handshake on the HTTP listener (gRPC's TLS stack reports none to its server).
  void CountTlsHandshakeFailure(TlsFailure reason) {
    tls_failures_[static_cast<size_t>(reason)]->fetch_add(1, std::memory_order_relaxed);
  }

  // A ShouldRateLimit call whose message was not a RateLimitRequest (INVALID_ARGUMENT).
  void CountMalformedRlsRequest() { Add(MetricId::kRlsMalformedRequests); }

  // Rows without labels whose values a component keeps itself (a Redis store's counters): a
  // collector adds its values, by row, at each rendering, to what Add counted. It runs on the
  // rendering thread under a lock of its own, so it must only read (atomics) and never call
  // into this Metrics. It is called until its Registration is destroyed, which waits for a
  // rendering in progress.
  using CollectedValues = std::array<uint64_t, kMetricCount>;
  using Collector = std::function<void(CollectedValues&)>;
  class Registration {
   public:
    Registration() = default;
    Registration(Registration&& other) noexcept { *this = std::move(other); }
    Registration& operator=(Registration&& other) noexcept;
    ~Registration() { Reset(); }
    void Reset();

   private:
    friend class Metrics;
    Metrics* metrics_ = nullptr;
    uint64_t id_ = 0;
  };
  [[nodiscard]] Registration AddCollector(Collector collect);
  // What Add counted on a row without labels and its collectors keep, together.
  uint64_t Total(MetricId id) const;

  // Prometheus text exposition format 0.0.4, every row of kMetricTable in order.
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
  // One series of a row counted through Series().
  struct LabelledSeries {
    std::vector<std::string> values;
    std::atomic<uint64_t> value{0};
  };
  struct NodeBreakerSeries {
    BreakerState state = BreakerState::kClosed;
    uint64_t opens = 0;
  };
  std::atomic<uint64_t>& Scalar(MetricId id) { return scalars_[static_cast<size_t>(id)]; }
  PolicyCounters& FindLocked(Api api, std::string_view name);
  PolicyCounters* Lookup(Api api, std::string_view name) const;  // lock-free
  void IndexLocked(Api api, std::string_view name, PolicyCounters* counters);
  // The series of one row, written after its # HELP and # TYPE lines.
  void RenderSeries(const MetricDef& def, const CollectedValues& collected,
                    PrometheusText& out) const;
  CollectedValues Collect() const;
  void RenderPolicySeries(const MetricDef& def, PrometheusText& out) const;
  void RenderBreakers(const MetricDef& def, PrometheusText& out) const;

  mutable std::mutex mu_;
  std::map<Key, std::unique_ptr<PolicyCounters>> policies_;  // guarded by mu_
  size_t detailed_series_ = 0;                               // guarded by mu_
  std::vector<std::unique_ptr<Indexed>> indexed_;            // guarded by mu_
  std::array<std::atomic<const Indexed*>, kIndexSlots> index_{};
  // While false, every name in policies_ is in index_.
  std::atomic<bool> index_full_{false};
  // Per Api, set once every detailed series exists: "_overflow"'s counters.
  std::array<std::atomic<PolicyCounters*>, kApiCount> overflow_{};
  // By row: the value of each row without labels (the store breaker's own state, folded with the
  // servers' when written), and the labelled series Series() made, in lookup order.
  std::array<std::atomic<uint64_t>, kMetricCount> scalars_{};
  std::array<std::vector<std::unique_ptr<LabelledSeries>>, kMetricCount> series_;  // mu_
  std::array<LatencyHistogram, kApiCount> decision_latency_;
  LatencyHistogram store_latency_;
  std::array<std::atomic<uint64_t>, 8> store_errors_{};          // by StatusCode
  std::map<std::string, NodeBreakerSeries, std::less<>> nodes_;  // guarded by mu_
  std::array<std::atomic<uint64_t>*, 2> reloads_{};              // success, failure
  std::array<std::atomic<uint64_t>, 600> http_{};
  std::array<std::atomic<uint64_t>*, kTlsFailureCount> tls_failures_{};
  mutable std::atomic<size_t> last_render_bytes_{0};
  mutable std::mutex collectors_mu_;          // held while collectors run
  std::map<uint64_t, Collector> collectors_;  // guarded by collectors_mu_
  uint64_t next_collector_ = 1;               // guarded by collectors_mu_
};

}  // namespace caudal
