#include "observe/metrics.h"

#include <algorithm>
#include <cassert>
#include <functional>
#include <utility>
#include <vector>

#include "observe/prometheus_text.h"

namespace caudal {
namespace {

// The per-policy rows (labels api, policy, and perhaps one more), written once per policy: which
// of a policy's counters each series reads, by the value of the row's third label (empty when
// the row has two), in the order they are written.
struct PolicySeries {
  MetricId id;
  std::string_view value;
  std::atomic<uint64_t> PolicyCounters::*counter = nullptr;  // this counter, or
  std::atomic<uint64_t> HitCounters::*hit = nullptr;         // this one of its hits

  const std::atomic<uint64_t>& Of(const PolicyCounters& c) const {
    return counter != nullptr ? c.*counter : c.hits.*hit;
  }
};
constexpr PolicySeries kPolicySeries[] = {
    {MetricId::kDecisions, "allowed", &PolicyCounters::allowed},
    {MetricId::kDecisions, "denied", &PolicyCounters::denied},
    {MetricId::kShadowDenials, "", &PolicyCounters::shadow_denied},
    {MetricId::kFailureModeDecisions, "allow", &PolicyCounters::fail_open},
    {MetricId::kFailureModeDecisions, "deny", &PolicyCounters::fail_closed},
    {MetricId::kFailureModeDecisions, "local", &PolicyCounters::local},
    {MetricId::kRuleHits, "total_hits", nullptr, &HitCounters::total_hits},
    {MetricId::kRuleHits, "within_limit", nullptr, &HitCounters::within_limit},
    {MetricId::kRuleHits, "near_limit", nullptr, &HitCounters::near_limit},
    {MetricId::kRuleHits, "over_limit", nullptr, &HitCounters::over_limit},
    {MetricId::kRuleHits, "over_limit_with_local_cache", nullptr,
     &HitCounters::over_limit_with_local_cache},
    {MetricId::kRuleHits, "shadow_mode", nullptr, &HitCounters::shadow_mode},
};

constexpr bool IsPolicyRow(MetricId id) {
  for (const PolicySeries& s : kPolicySeries) {
    if (s.id == id) return true;
  }
  return false;
}

constexpr std::string_view kReloadResults[] = {"success", "failure"};

}  // namespace

Metrics::Metrics() {
  // Rendered from zero: every result and every reason.
  for (size_t i = 0; i < reloads_.size(); ++i) {
    reloads_[i] = &Series(MetricId::kConfigReloads, {kReloadResults[i]});
  }
  for (size_t i = 0; i < kTlsFailureCount; ++i) {
    tls_failures_[i] = &Series(MetricId::kTlsHandshakeFailures,
                               {"http", TlsFailureName(static_cast<TlsFailure>(i))});
  }
}

std::atomic<uint64_t>& Metrics::Series(MetricId id,
                                       std::initializer_list<std::string_view> values) {
  assert(values.size() == MetricOf(id).LabelCount() && values.size() > 0);
  std::lock_guard lock(mu_);
  std::vector<std::unique_ptr<LabelledSeries>>& series = series_[static_cast<size_t>(id)];
  auto find = [&series](const auto& wanted) -> LabelledSeries* {
    for (const auto& s : series) {
      if (std::equal(wanted.begin(), wanted.end(), s->values.begin(), s->values.end())) {
        return s.get();
      }
    }
    return nullptr;
  };
  if (LabelledSeries* s = find(values)) return s->value;
  // The last series a row may have is the overflow's, found as any other by its values.
  const bool full = series.size() + 1 >= kMaxSeriesPerMetric;
  std::vector<std::string> key = full ? std::vector<std::string>(values.size(), "_overflow")
                                      : std::vector<std::string>(values.begin(), values.end());
  if (full) {
    if (LabelledSeries* s = find(key)) return s->value;
  }
  // Braces, not make_unique: clang 14 (the fuzz build) has no parenthesized aggregate init.
  series.push_back(std::unique_ptr<LabelledSeries>(new LabelledSeries{std::move(key)}));
  return series.back()->value;
}

void Metrics::SetNodeBreaker(std::string_view node, BreakerState state, uint64_t opens) {
  std::lock_guard lock(mu_);
  auto it = nodes_.find(node);
  if (it == nodes_.end()) {
    if (nodes_.size() >= kMaxNodeSeries) return;
    it = nodes_.emplace(std::string(node), NodeBreakerSeries{}).first;
  }
  it->second = {.state = state, .opens = opens};
}

void Metrics::RemoveNode(std::string_view node) {
  std::lock_guard lock(mu_);
  if (auto it = nodes_.find(node); it != nodes_.end()) nodes_.erase(it);
}

void LatencyHistogram::Observe(Micros d) {
  const int64_t us = d.count() < 0 ? 0 : d.count();
  size_t i = 0;
  while (i < kBoundsUs.size() && us > kBoundsUs[i]) ++i;
  buckets_[i].fetch_add(1, std::memory_order_relaxed);
  sum_us_.fetch_add(static_cast<uint64_t>(us), std::memory_order_relaxed);
}

LatencyHistogram::Counts LatencyHistogram::Read() const {
  Counts c;
  uint64_t cumulative = 0;
  for (size_t i = 0; i < buckets_.size(); ++i) {
    cumulative += buckets_[i].load(std::memory_order_relaxed);
    c.cumulative[i] = cumulative;
  }
  c.sum_us = sum_us_.load(std::memory_order_relaxed);
  return c;
}

std::string_view ApiName(Api api) {
  switch (api) {
    case Api::kHttp:
      return "http";
    case Api::kRls:
      return "rls";
    case Api::kCli:
      return "cli";
    case Api::kRlqs:
      return "rlqs";
  }
  return "unknown";
}

std::string_view TlsFailureName(TlsFailure reason) {
  switch (reason) {
    case TlsFailure::kNoClientCertificate:
      return "no_client_certificate";
    case TlsFailure::kBadClientCertificate:
      return "bad_client_certificate";
    case TlsFailure::kRefusedByClient:
      return "refused_by_client";
    case TlsFailure::kProtocol:
      return "protocol";
    case TlsFailure::kClosed:
      return "closed";
    case TlsFailure::kTimeout:
      return "timeout";
  }
  return "unknown";
}

PolicyCounters& Metrics::FindLocked(Api api, std::string_view name) {
  Key key(api, std::string(name));
  auto it = policies_.find(key);
  if (it == policies_.end()) {
    it = policies_.emplace(std::move(key), std::make_unique<PolicyCounters>()).first;
    IndexLocked(api, it->first.second, it->second.get());
  }
  return *it->second;
}

namespace {

size_t HashOf(Api api, std::string_view name) {
  return std::hash<std::string_view>{}(name) ^ (static_cast<size_t>(api) * 0x9e3779b97f4a7c15u);
}

}  // namespace

PolicyCounters* Metrics::Lookup(Api api, std::string_view name) const {
  // At most kMaxIndexed of kIndexSlots slots are ever used, so a probe meets an empty one.
  for (size_t i = HashOf(api, name);; ++i) {
    const Indexed* e = index_[i & (kIndexSlots - 1)].load(std::memory_order_acquire);
    if (e == nullptr) return nullptr;
    if (e->api == api && e->name == name) return e->counters;
  }
}

void Metrics::IndexLocked(Api api, std::string_view name, PolicyCounters* counters) {
  if (indexed_.size() >= kMaxIndexed) {
    index_full_.store(true, std::memory_order_release);
    return;
  }
  indexed_.push_back(std::make_unique<Indexed>(Indexed{api, name, counters}));
  for (size_t i = HashOf(api, name);; ++i) {
    std::atomic<const Indexed*>& slot = index_[i & (kIndexSlots - 1)];
    if (slot.load(std::memory_order_relaxed) == nullptr) {
      slot.store(indexed_.back().get(), std::memory_order_release);
      return;
    }
  }
}

PolicyCounters& Metrics::ForPolicy(Api api, std::string_view policy) {
  std::lock_guard<std::mutex> lock(mu_);
  return FindLocked(api, policy);
}

PolicyCounters& Metrics::ForDetailed(Api api, std::string_view name) {
  if (PolicyCounters* c = Lookup(api, name)) return *c;
  std::atomic<PolicyCounters*>& overflow = overflow_[static_cast<size_t>(api)];
  // Every known name is indexed while the index has room: this one is new, and past the bound.
  if (!index_full_.load(std::memory_order_acquire)) {
    if (PolicyCounters* o = overflow.load(std::memory_order_acquire)) {
      Add(MetricId::kDetailedMetricOverflow);
      return *o;
    }
  }
  std::lock_guard<std::mutex> lock(mu_);
  if (auto it = policies_.find(Key(api, std::string(name))); it != policies_.end()) {
    return *it->second;
  }
  if (detailed_series_ >= kMaxDetailedSeries) {
    Add(MetricId::kDetailedMetricOverflow);
    PolicyCounters& o = FindLocked(api, "_overflow");
    overflow.store(&o, std::memory_order_release);
    return o;
  }
  ++detailed_series_;
  return FindLocked(api, name);
}

void Metrics::CountStoreError(StatusCode code) {
  const auto i = static_cast<size_t>(code);
  if (i < store_errors_.size()) store_errors_[i].fetch_add(1, std::memory_order_relaxed);
}

void Metrics::CountHttpResponse(int status) {
  if (status >= 100 && status < 600) {
    http_[static_cast<size_t>(status)].fetch_add(1, std::memory_order_relaxed);
  }
}

std::string Metrics::RenderPrometheus() const {
  // Sized once from the last rendering: growing a megabyte by doubling copies it and faults its
  // pages in several times over.
  const size_t last = last_render_bytes_.load(std::memory_order_relaxed);
  PrometheusText out(last + last / 8 + 4096);
  const CollectedValues collected = Collect();
  for (const MetricDef& def : kMetricTable) {
    out.Family(def);
    RenderSeries(def, collected, out);
  }
  std::string text = std::move(out).Take();
  last_render_bytes_.store(text.size(), std::memory_order_relaxed);
  return text;
}

Metrics::Registration Metrics::AddCollector(Collector collect) {
  std::lock_guard lock(collectors_mu_);
  Registration r;
  r.metrics_ = this;
  r.id_ = next_collector_++;
  collectors_.emplace(r.id_, std::move(collect));
  return r;
}

Metrics::Registration& Metrics::Registration::operator=(Registration&& other) noexcept {
  if (this != &other) {
    Reset();
    metrics_ = std::exchange(other.metrics_, nullptr);
    id_ = std::exchange(other.id_, 0);
  }
  return *this;
}

void Metrics::Registration::Reset() {
  if (metrics_ == nullptr) return;
  std::lock_guard lock(metrics_->collectors_mu_);
  metrics_->collectors_.erase(id_);
  metrics_ = nullptr;
}

Metrics::CollectedValues Metrics::Collect() const {
  CollectedValues values{};
  std::lock_guard lock(collectors_mu_);
  for (const auto& [id, collect] : collectors_) collect(values);
  return values;
}

uint64_t Metrics::Total(MetricId id) const {
  return Value(id) + Collect()[static_cast<size_t>(id)];
}

void Metrics::RenderSeries(const MetricDef& def, const CollectedValues& collected,
                           PrometheusText& out) const {
  if (IsPolicyRow(def.id)) return RenderPolicySeries(def, out);
  switch (def.id) {
    case MetricId::kDecisionDuration:
      for (size_t a = 0; a < kApiCount; ++a) {
        out.Histogram({ApiName(static_cast<Api>(a))}, decision_latency_[a].Read());
      }
      return;
    case MetricId::kStoreDuration:
      return out.Histogram({}, store_latency_.Read());
    case MetricId::kStoreErrors:
      for (size_t i = 1; i < store_errors_.size(); ++i) {
        const uint64_t v = store_errors_[i].load(std::memory_order_relaxed);
        if (v != 0) out.Sample({StatusCodeName(static_cast<StatusCode>(i))}, v);
      }
      return;
    case MetricId::kStoreDegraded:
    case MetricId::kStoreBreakerState:
    case MetricId::kStoreNodeBreakerState:
    case MetricId::kStoreNodeBreakerOpens:
      return RenderBreakers(def, out);
    case MetricId::kHttpResponses:
      for (size_t i = 100; i < http_.size(); ++i) {
        const uint64_t v = http_[i].load(std::memory_order_relaxed);
        if (v != 0) out.Sample({std::to_string(i)}, v);
      }
      return;
    default:
      break;
  }
  // Rows counted through Add, Set or Series.
  if (def.LabelCount() == 0) {
    return out.Sample({}, Value(def.id) + collected[static_cast<size_t>(def.id)]);
  }
  std::lock_guard lock(mu_);
  for (const auto& s : series_[static_cast<size_t>(def.id)]) {
    out.Sample(s->values, s->value.load(std::memory_order_relaxed));
  }
}

void Metrics::RenderPolicySeries(const MetricDef& def, PrometheusText& out) const {
  std::lock_guard lock(mu_);
  for (const auto& [key, counters] : policies_) {
    const auto& [api, name] = key;
    // envoyproxy/ratelimit's statistics belong to Envoy rules alone.
    if (def.id == MetricId::kRuleHits && api != Api::kRls) continue;
    for (const PolicySeries& s : kPolicySeries) {
      if (s.id != def.id) continue;
      const uint64_t v = s.Of(*counters).load(std::memory_order_relaxed);
      if (s.value.empty()) {
        out.Sample({ApiName(api), name}, v);
      } else {
        out.Sample({ApiName(api), name, s.value}, v);
      }
    }
  }
}

// The store's breaker, folded with every server's: 1 while one is open, else 2 while one is
// half-open.
void Metrics::RenderBreakers(const MetricDef& def, PrometheusText& out) const {
  std::lock_guard lock(mu_);
  int breaker = StoreBreaker();
  for (const auto& [node, s] : nodes_) {
    if (s.state == BreakerState::kOpen) breaker = static_cast<int>(BreakerState::kOpen);
    if (s.state == BreakerState::kHalfOpen && breaker == 0) breaker = static_cast<int>(s.state);
  }
  switch (def.id) {
    case MetricId::kStoreDegraded:
      return out.Sample({}, breaker != 0 ? 1 : 0);
    case MetricId::kStoreBreakerState:
      return out.Sample({}, static_cast<uint64_t>(breaker));
    case MetricId::kStoreNodeBreakerState:
      for (const auto& [node, s] : nodes_) out.Sample({node}, static_cast<uint64_t>(s.state));
      return;
    case MetricId::kStoreNodeBreakerOpens:
      for (const auto& [node, s] : nodes_) out.Sample({node}, s.opens);
      return;
    default:
      return;
  }
}

}  // namespace caudal
