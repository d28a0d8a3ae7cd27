#include "server/status_page.h"

#include <algorithm>
#include <boost/json.hpp>

#include "common/cat.h"
#include "engine/policy_dimensions.h"
#include "server/http_api.h"
#include "simulate/limit_chart.h"

namespace caudal {
namespace json = boost::json;
namespace {

std::string_view BreakerName(int state) {
  switch (state) {
    case 0:
      return "closed";
    case 1:
      return "open";
    case 2:
      return "half_open";
  }
  return "unknown";
}

json::object PolicyJson(const PolicySet::Policy& p, Metrics& metrics) {
  json::array identity;
  for (const std::string& d : p.spec.identity) identity.push_back(json::string(d));
  json::array limits;
  for (const Limit& l : p.spec.limits) limits.push_back(json::string(l.ToString()));
  const PolicyCounters& c = metrics.ForPolicy(Api::kHttp, p.spec.name);
  const PolicyCounters& rlqs = metrics.ForPolicy(Api::kRlqs, p.spec.name);
  const auto n = [](const std::atomic<uint64_t>& v) { return v.load(std::memory_order_relaxed); };
  // The units admitted in each dimension its limits (and its tiers') count, as the engine
  // counts them (caudal_units_admitted_total).
  json::array units;
  for (std::string_view d : engine_internal::CountedDimensions(p)) {
    units.push_back(
        json::object{{"dimension", d},
                     {"admitted", n(metrics.Series(MetricId::kUnitsAdmitted, {p.spec.name, d}))}});
  }
  return json::object{
      {"name", p.spec.name},
      {"identity", std::move(identity)},
      {"shadow", p.shadow()},
      {"on_failure", FailureModeName(p.on_failure)},
      {"limits", std::move(limits)},
      {"allowed", n(c.allowed)},
      {"denied", n(c.denied)},
      {"shadow_denied", n(c.shadow_denied)},
      {"fail_open", n(c.fail_open)},
      {"fail_closed", n(c.fail_closed)},
      {"local", n(c.local)},
      {"units", std::move(units)},
      {"rlqs", json::object{{"allowed", n(rlqs.allowed)}, {"denied", n(rlqs.denied)}}}};
}

json::array RefusedJson(const Refusals& refusals) {
  json::array checks;
  for (const CheckRefusals& c : refusals.Top(kStatusTopIdentities)) {
    if (checks.size() == kMaxStatusChecks) break;
    json::array top;
    for (const HeavyHitter& h : c.top) {
      top.push_back(json::object{
          {"identity", http_api::ValidUtf8(h.identity)}, {"count", h.count}, {"error", h.error}});
    }
    checks.push_back(json::object{{"api", ApiName(c.api)},
                                  {"check", http_api::ValidUtf8(c.check)},
                                  {"refused", c.total},
                                  {"top", std::move(top)}});
  }
  return checks;
}

// The URL's scheme; "" for anything that has none, so no other part of it can show.
std::string_view Scheme(std::string_view url) {
  const size_t sep = url.find("://");
  return sep == std::string_view::npos ? std::string_view() : url.substr(0, sep);
}

}  // namespace

StatusPage::StatusPage(StatusPageDeps deps, bool enabled)
    : deps_(std::move(deps)), enabled_(enabled) {}

std::string StatusPage::Json() const {
  const std::shared_ptr<const PolicySet> set = deps_.engine.policies();
  const Status ready = deps_.health.Ready();
  json::object store{{"kind", http_api::ValidUtf8(Scheme(deps_.store_url))},
                     {"ready", ready.ok()},
                     {"reason", http_api::ValidUtf8(ready.message())},
                     {"breaker", BreakerName(deps_.metrics.StoreBreaker())}};
  json::array policies;
  if (set != nullptr) {
    store["on_failure"] = FailureModeName(set->options().on_failure);
    store["instances"] = set->options().instances;
    for (const PolicySet::Policy& p : set->policies()) {
      policies.push_back(PolicyJson(p, deps_.metrics));
    }
  }
  json::object out{{"store", std::move(store)}, {"policies", std::move(policies)}};
  out["refused"] = deps_.refusals != nullptr ? RefusedJson(*deps_.refusals) : json::array();
  return json::serialize(out);
}

Result<std::string> StatusPage::Chart(std::string_view policy, size_t index) {
  const std::shared_ptr<const PolicySet> set = deps_.engine.policies();
  const Limit* limit = nullptr;
  if (set != nullptr) {
    for (const PolicySet::Policy& p : set->policies()) {
      if (p.spec.name == policy && index < p.spec.limits.size()) limit = &p.spec.limits[index];
    }
  }
  if (limit == nullptr) {
    return Status::NotFound(
        Cat("policy ", Quoted(policy.substr(0, kMaxNameLength)), " has no limit ", index));
  }
  // Keyed by what is drawn, so a reload that changes the limit draws it again.
  const std::string key = Cat(policy, '\n', limit->ToString());
  std::lock_guard<std::mutex> lock(charts_mu_);
  if (auto it = charts_.find(key); it != charts_.end()) return it->second;
  Result<std::string> svg = simulate::RenderLimitChart(
      *limit, Cat(policy, " limit ", index, " (", AlgorithmName(limit->algorithm()), ')'));
  if (!svg.ok()) return svg;
  if (charts_.size() >= kMaxCachedCharts) charts_.clear();
  charts_.emplace(key, *svg);
  return svg;
}

}  // namespace caudal
