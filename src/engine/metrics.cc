#include "caudal/metrics.h"

#include <cstdio>
#include <functional>
#include <vector>

#include "common/cat.h"

namespace caudal {
namespace {

void AppendSeconds(std::string& out, uint64_t us) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%llu.%06llu", static_cast<unsigned long long>(us / 1'000'000),
                static_cast<unsigned long long>(us % 1'000'000));
  out += buf;
}

void AppendHeader(std::string& out, std::string_view name, std::string_view type,
                  std::string_view help) {
  out.append("# HELP ").append(name).append(" ").append(help).append("\n");
  out.append("# TYPE ").append(name).append(" ").append(type).append("\n");
}

// A label value as the text format wants it: backslash, quote and newline escaped. (Policy names
// are [A-Za-z0-9_.-]; Envoy stat keys carry the config's values, which may hold anything.)
void AppendLabelValue(std::string& out, std::string_view v) {
  for (char c : v) {
    if (c == '\\' || c == '"') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
}

void AppendPolicyCounter(std::string& out, std::string_view name, Api api, std::string_view policy,
                         std::string_view extra, uint64_t v) {
  out.append(name).append("{api=\"").append(ApiName(api)).append("\",policy=\"");
  AppendLabelValue(out, policy);
  out.append("\"");
  if (!extra.empty()) out.append(",").append(extra);
  out.append("} ").append(std::to_string(v)).append("\n");
}

// The per-server breaker series, and the worst of their states folded into `breaker`.
template <typename Nodes>
std::string RenderNodeBreakers(const Nodes& nodes, int& breaker) {
  std::string out;
  AppendHeader(out, "caudal_store_node_breaker_state", "gauge",
               "One store server's circuit breaker (Redis Cluster: each primary's): 0 closed, 1 "
               "open, 2 half-open.");
  for (const auto& [node, s] : nodes) {
    out.append("caudal_store_node_breaker_state{node=\"");
    AppendLabelValue(out, node);
    out.append("\"} ").append(std::to_string(static_cast<int>(s.state))).append("\n");
    if (s.state == BreakerState::kOpen) breaker = static_cast<int>(BreakerState::kOpen);
    if (s.state == BreakerState::kHalfOpen && breaker == 0) breaker = static_cast<int>(s.state);
  }
  AppendHeader(out, "caudal_store_node_breaker_opens_total", "counter",
               "Times one store server's circuit breaker opened.");
  for (const auto& [node, s] : nodes) {
    out.append("caudal_store_node_breaker_opens_total{node=\"");
    AppendLabelValue(out, node);
    out.append("\"} ").append(std::to_string(s.opens)).append("\n");
  }
  return out;
}

}  // namespace

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
  count_.fetch_add(1, std::memory_order_relaxed);
  sum_us_.fetch_add(static_cast<uint64_t>(us), std::memory_order_relaxed);
}

void LatencyHistogram::Render(std::string& out, std::string_view name,
                              std::string_view labels) const {
  uint64_t cumulative = 0;
  const std::string prefix = labels.empty() ? "" : Cat(labels, ',');
  const std::string braced = labels.empty() ? "" : Cat('{', labels, '}');
  for (size_t i = 0; i <= kBoundsUs.size(); ++i) {
    cumulative += buckets_[i].load(std::memory_order_relaxed);
    out.append(name).append("_bucket{").append(prefix).append("le=\"");
    if (i < kBoundsUs.size()) {
      AppendSeconds(out, static_cast<uint64_t>(kBoundsUs[i]));
    } else {
      out.append("+Inf");
    }
    out.append("\"} ").append(std::to_string(cumulative)).append("\n");
  }
  out.append(name).append("_sum").append(braced).append(" ");
  AppendSeconds(out, sum_us_.load(std::memory_order_relaxed));
  out.append("\n").append(name).append("_count").append(braced).append(" ");
  out.append(std::to_string(cumulative)).append("\n");
}

std::string_view ApiName(Api api) {
  switch (api) {
    case Api::kHttp:
      return "http";
    case Api::kRls:
      return "rls";
    case Api::kCli:
      return "cli";
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
      detailed_overflow_.fetch_add(1, std::memory_order_relaxed);
      return *o;
    }
  }
  std::lock_guard<std::mutex> lock(mu_);
  if (auto it = policies_.find(Key(api, std::string(name))); it != policies_.end()) {
    return *it->second;
  }
  if (detailed_series_ >= kMaxDetailedSeries) {
    detailed_overflow_.fetch_add(1, std::memory_order_relaxed);
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
  std::string out;
  out.reserve(4096);
  struct Row {
    Api api;
    std::string name;
    const PolicyCounters* c;
  };
  std::vector<Row> rows;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [key, c] : policies_) rows.push_back({key.first, key.second, c.get()});
  }
  AppendHeader(out, "caudal_decisions_total", "counter",
               "Decisions by policy and outcome (shadow policies: what they decided).");
  for (const Row& r : rows) {
    AppendPolicyCounter(out, "caudal_decisions_total", r.api, r.name, "outcome=\"allowed\"",
                        r.c->allowed.load());
    AppendPolicyCounter(out, "caudal_decisions_total", r.api, r.name, "outcome=\"denied\"",
                        r.c->denied.load());
  }
  AppendHeader(out, "caudal_shadow_denials_total", "counter",
               "Requests a shadow policy would have refused (they were allowed).");
  for (const Row& r : rows) {
    AppendPolicyCounter(out, "caudal_shadow_denials_total", r.api, r.name, "",
                        r.c->shadow_denied.load());
  }
  AppendHeader(out, "caudal_failure_mode_decisions_total", "counter",
               "Decisions made by a failure mode because the store failed.");
  for (const Row& r : rows) {
    AppendPolicyCounter(out, "caudal_failure_mode_decisions_total", r.api, r.name, "mode=\"allow\"",
                        r.c->fail_open.load());
    AppendPolicyCounter(out, "caudal_failure_mode_decisions_total", r.api, r.name, "mode=\"deny\"",
                        r.c->fail_closed.load());
    AppendPolicyCounter(out, "caudal_failure_mode_decisions_total", r.api, r.name, "mode=\"local\"",
                        r.c->local.load());
  }
  AppendHeader(out, "caudal_rule_hits_total", "counter",
               "envoyproxy/ratelimit's statistics per Envoy rule (policy: its stat key), in hits.");
  for (const Row& r : rows) {
    if (r.api != Api::kRls) continue;
    const HitCounters& h = r.c->hits;
    const std::pair<std::string_view, const std::atomic<uint64_t>*> stats[] = {
        {"total_hits", &h.total_hits},
        {"within_limit", &h.within_limit},
        {"near_limit", &h.near_limit},
        {"over_limit", &h.over_limit},
        {"over_limit_with_local_cache", &h.over_limit_with_local_cache},
        {"shadow_mode", &h.shadow_mode}};
    for (const auto& [stat, v] : stats) {
      AppendPolicyCounter(out, "caudal_rule_hits_total", r.api, r.name, Cat("stat=\"", stat, '"'),
                          v->load(std::memory_order_relaxed));
    }
  }
  AppendHeader(out, "caudal_detailed_metric_overflow_total", "counter",
               "Decisions of Envoy rules whose stat key carries request values (detailed_metric, "
               "value_to_metric, share_threshold, overrides) past the series bound, counted under "
               "policy=\"_overflow\".");
  out.append("caudal_detailed_metric_overflow_total ")
      .append(std::to_string(detailed_overflow_.load()))
      .append("\n");
  AppendHeader(out, "caudal_decision_duration_seconds", "histogram",
               "Time to decide one request, store included, by front end.");
  for (size_t a = 0; a < kApiCount; ++a) {
    decision_latency_[a].Render(out, "caudal_decision_duration_seconds",
                                Cat("api=\"", ApiName(static_cast<Api>(a)), '"'));
  }
  AppendHeader(out, "caudal_store_duration_seconds", "histogram", "Store round-trip time.");
  store_latency_.Render(out, "caudal_store_duration_seconds", "");
  AppendHeader(out, "caudal_store_errors_total", "counter", "Store calls that failed, by code.");
  for (size_t i = 1; i < store_errors_.size(); ++i) {
    const uint64_t v = store_errors_[i].load();
    if (v == 0) continue;
    out.append("caudal_store_errors_total{code=\"")
        .append(StatusCodeName(static_cast<StatusCode>(i)))
        .append("\"} ")
        .append(std::to_string(v))
        .append("\n");
  }
  int breaker = store_breaker_.load(std::memory_order_relaxed);
  std::string node_series;
  {
    std::lock_guard lock(mu_);
    if (!nodes_.empty()) node_series = RenderNodeBreakers(nodes_, breaker);
  }
  AppendHeader(out, "caudal_store_degraded", "gauge",
               "1 while the store's circuit breaker (or one server's) is not closed (decisions by "
               "failure mode).");
  out.append("caudal_store_degraded ").append(breaker != 0 ? "1" : "0").append("\n");
  AppendHeader(out, "caudal_store_breaker_state", "gauge",
               "The store's circuit breaker: 0 closed, 1 open, 2 half-open; with a breaker per "
               "server, 1 while one is open, else 2 while one is half-open.");
  out.append("caudal_store_breaker_state ").append(std::to_string(breaker)).append("\n");
  out += node_series;
  AppendHeader(out, "caudal_over_limit_cache_hits_total", "counter",
               "Checks refused from the store's earlier refusal, without a store call.");
  out.append("caudal_over_limit_cache_hits_total ")
      .append(std::to_string(cache_hits_.load(std::memory_order_relaxed)))
      .append("\n");
  AppendHeader(out, "caudal_config_reloads_total", "counter", "Config reloads by result.");
  out.append("caudal_config_reloads_total{result=\"success\"} ")
      .append(std::to_string(reloads_ok_.load()))
      .append("\ncaudal_config_reloads_total{result=\"failure\"} ")
      .append(std::to_string(reloads_failed_.load()))
      .append("\n");
  AppendHeader(out, "caudal_http_responses_total", "counter", "HTTP responses by status code.");
  for (size_t i = 100; i < http_.size(); ++i) {
    const uint64_t v = http_[i].load(std::memory_order_relaxed);
    if (v != 0) {
      out.append("caudal_http_responses_total{code=\"")
          .append(std::to_string(i))
          .append("\"} ")
          .append(std::to_string(v))
          .append("\n");
    }
  }
  AppendHeader(out, "caudal_tls_handshake_failures_total", "counter",
               "TLS handshakes that failed on a listener, by reason.");
  for (size_t i = 0; i < kTlsFailureCount; ++i) {
    out.append("caudal_tls_handshake_failures_total{listener=\"http\",reason=\"")
        .append(TlsFailureName(static_cast<TlsFailure>(i)))
        .append("\"} ")
        .append(std::to_string(tls_failures_[i].load(std::memory_order_relaxed)))
        .append("\n");
  }
  AppendHeader(
      out, "caudal_rls_malformed_requests_total", "counter",
      "ShouldRateLimit calls whose message was not a RateLimitRequest (INVALID_ARGUMENT).");
  out.append("caudal_rls_malformed_requests_total ")
      .append(std::to_string(rls_malformed_.load(std::memory_order_relaxed)))
      .append("\n");
  return out;
}

}  // namespace caudal
