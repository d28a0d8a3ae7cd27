// OverrideFit: whether a runtime override fits the policies and Envoy rules of an engine's
// snapshot (caudal/engine/runtime_overrides.h says what fitting means), and the refit of the held
// overrides the Engine runs at every install of overrides, policies or domains.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "engine/plan.h"

namespace caudal {

class Logger;
class Metrics;
class Refusals;

namespace engine_internal {

struct OverrideProblem {
  std::string field;  // "policy", "identity", "limits", "limits[i]" or "weight"
  std::string message;
};

class OverrideFit {
 public:
  // `snap` must outlive this; the rules are indexed by stat key once, here.
  explicit OverrideFit(const Engine::Snapshot& snap);
  // Why `o` cannot apply under the snapshot, or nullopt: its policy or rule is not there, its
  // identity is none of it (identity fields, ip_prefix or descriptors changed), or its limits
  // and weight are not ones the config could give it (ValidateOverrideTerms,
  // envoy::CheckRuleLimit).
  std::optional<OverrideProblem> Check(const RuntimeOverride& o) const;

 private:
  std::optional<OverrideProblem> CheckPolicy(const RuntimeOverride& o) const;
  std::optional<OverrideProblem> CheckRule(const RuntimeOverride& o) const;

  const Engine::Snapshot& snap_;
  std::unordered_map<std::string_view, const envoy::RateLimitRule*> rules_;  // by stat key
};

// What a refit reports to: each optional.
struct OverrideReport {
  const Logger* log = nullptr;
  Metrics* metrics = nullptr;
  const Refusals* refusals = nullptr;  // shows identities (a hash unless configured)
};

// Refits `snap.runtime` (when set) to `snap`'s policies and domains. Logs at warning each
// override it does not apply that `before` did not already leave unapplied for the same reason
// (so once), and sets the overrides' gauges.
void RefitOverrides(Engine::Snapshot& snap, const RuntimeOverrides* before,
                    const OverrideReport& report);

// An identity as logs show identities: Refusals::Display when given, else only how many values.
std::string ShownIdentity(const std::vector<std::pair<std::string, std::string>>& identity,
                          const Refusals* refusals);

}  // namespace engine_internal
}  // namespace caudal
