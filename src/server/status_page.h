// StatusPage: what `caudal serve` shows at `/` — its policies and their limits, decision and
// refusal counts (the page turns successive polls into rates), the store's health and failure
// modes, the most refused identities, and the simulator's chart of any limit.
//
//   GET /                    one HTML document, inline CSS and JS under a strict
//                            Content-Security-Policy (hashes, no external anything)
//   GET /v1/status           the JSON the page polls (see Json())
//   GET /v1/status/chart?policy=NAME&limit=I   an SVG (see simulate/limit_chart.h)
//
// Nothing secret is shown: the store by its URL's scheme alone (the URL may hold a password),
// identities as the refusal log shows them (a hash unless logging.identities: value). The JSON is
// bounded (at most kMaxStatusChecks refusal lists of kStatusTopIdentities) and costs one lock per
// policy; charts are cached (kMaxCachedCharts) and drawn one at a time.
//
// Thread-safety: every method may be called from any thread.
#pragma once

#include <atomic>
#include <cstddef>
#include <map>
#include <mutex>
#include <string>
#include <string_view>

#include "caudal/common/status.h"
#include "caudal/engine/engine.h"
#include "decorators/store_health.h"
#include "observe/metrics.h"
#include "observe/refusals.h"

namespace caudal {

inline constexpr size_t kMaxStatusChecks = 20;
inline constexpr size_t kStatusTopIdentities = 5;
inline constexpr size_t kMaxCachedCharts = 64;

struct StatusPageDeps {
  const Engine& engine;
  Metrics& metrics;
  const StoreHealth& health;
  const Refusals* refusals = nullptr;
  // store.url: the page shows its scheme alone ("memory", "redis", ...), since the rest may hold
  // a password.
  std::string store_url;
};

class StatusPage {
 public:
  StatusPage(StatusPageDeps deps, bool enabled);

  // server.status_page; a reload may change it.
  void SetEnabled(bool enabled) { enabled_.store(enabled, std::memory_order_relaxed); }
  bool enabled() const { return enabled_.load(std::memory_order_relaxed); }

  // {"store": {"kind", "ready", "reason", "breaker", "on_failure", "instances"},
  //  "policies": [{"name", "identity", "shadow", "on_failure", "limits": [...],
  //                "allowed", "denied", "shadow_denied", "fail_open", "fail_closed", "local"}],
  //  "refused": [{"check", "refused", "top": [{"identity", "count", "error"}]}]}
  // Counts are totals since start (HTTP decisions); the page computes rates from two polls.
  std::string Json() const;

  // The chart of policy `policy`'s limit `index`: kNotFound for an unknown policy or limit,
  // kInvalidArgument for one too large to simulate here (the message says how to draw it).
  Result<std::string> Chart(std::string_view policy, size_t index);

 private:
  StatusPageDeps deps_;
  std::atomic<bool> enabled_;
  std::mutex charts_mu_;  // held while a chart is drawn: one at a time
  std::map<std::string, std::string, std::less<>> charts_;  // guarded by charts_mu_
};

// The page itself, and the Content-Security-Policy it is served with (its inline script and
// style allowed by their SHA-256, nothing else but same-origin fetches and images).
std::string_view StatusPageHtml();
const std::string& StatusPageCsp();

}  // namespace caudal
