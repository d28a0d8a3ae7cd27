#include "engine/override_fit.h"

#include <unordered_set>

#include "caudal/observe/log.h"
#include "common/cat.h"
#include "observe/metrics.h"
#include "observe/refusals.h"

namespace caudal::engine_internal {
namespace {

OverrideProblem Problem(std::string field, std::string message) {
  return {std::move(field), std::move(message)};
}

// The domain a rule's stat key starts with: its longest prefix, up to a dot, that is a domain.
std::string_view DomainOf(const envoy::RateLimitConfig& domains, std::string_view stat_key) {
  std::string_view domain;
  for (size_t dot = stat_key.find('.'); dot != std::string_view::npos;
       dot = stat_key.find('.', dot + 1)) {
    if (domains.HasDomain(stat_key.substr(0, dot))) domain = stat_key.substr(0, dot);
  }
  return domain;
}

}  // namespace

OverrideFit::OverrideFit(const Engine::Snapshot& snap) : snap_(snap) {
  for (const auto& [rule, stats] : snap.rule_stats) rules_.emplace(stats.name, rule);
}

std::optional<OverrideProblem> OverrideFit::Check(const RuntimeOverride& o) const {
  return o.kind == OverrideKind::kPolicy ? CheckPolicy(o) : CheckRule(o);
}

std::optional<OverrideProblem> OverrideFit::CheckPolicy(const RuntimeOverride& o) const {
  const PolicySet::Policy* policy = nullptr;
  for (const PolicySet::Policy& p : snap_.policies->policies()) {
    if (p.spec.name == o.policy) policy = &p;
  }
  if (policy == nullptr) return Problem("policy", "the config has no such policy");
  Descriptors descriptors;
  for (const auto& [name, value] : o.identity) descriptors.push_back({name, value});
  auto key = EncodeIdentity(*policy, descriptors);
  if (!key.ok() || !key->has_value() || **key != o.identity_key) {
    return Problem("identity",
                   "not an identity of the policy (its identity fields or ip_prefix changed)");
  }
  if (auto e = ValidateOverrideTerms(policy->spec, snap_.policies->options(), o.limits, o.weight)) {
    return Problem(e->field, e->status.message());
  }
  return std::nullopt;
}

std::optional<OverrideProblem> OverrideFit::CheckRule(const RuntimeOverride& o) const {
  const auto found = rules_.find(o.policy);
  const std::string_view domain =
      snap_.domains == nullptr ? std::string_view() : DomainOf(*snap_.domains, o.policy);
  if (found == rules_.end() || domain.empty()) {
    return Problem("policy", "the Envoy config has no rule of this stat key");
  }
  std::vector<envoy::DescriptorEntry> entries;
  for (const auto& [key, value] : o.identity) entries.push_back({key, value});
  if (snap_.domains->Match(domain, entries) != found->second ||
      EncodeEntries(entries) != o.identity_key) {
    return Problem("identity", "its entries no longer select the rule");
  }
  if (o.weight) return Problem("weight", "an Envoy rule has no share: it takes no weight");
  if (o.limits.size() != 1) return Problem("limits", "an Envoy rule takes exactly one limit");
  if (auto problem = envoy::CheckRuleLimit(*found->second, o.limits[0].algorithm())) {
    return Problem("limits[0]", std::move(problem->message));
  }
  return std::nullopt;
}

void RefitOverrides(Engine::Snapshot& snap, const RuntimeOverrides* before,
                    const OverrideReport& report) {
  if (snap.runtime == nullptr) return;
  const OverrideFit fit(snap);
  snap.runtime = snap.runtime->Refit(
      [&](const RuntimeOverride& o) -> std::optional<std::string> {
        auto problem = fit.Check(o);
        if (!problem) return std::nullopt;
        return Cat(problem->field, ": ", problem->message);
      },
      snap.policies->options().instances);
  const RuntimeOverrides& after = *snap.runtime;
  if (report.metrics != nullptr) {
    report.metrics->Set(MetricId::kRuntimeOverrides, after.size());
    report.metrics->Set(MetricId::kRuntimeOverridesNotApplied, after.not_applied().size());
  }
  if (report.log == nullptr || after.not_applied().empty()) return;
  std::unordered_set<std::string> told;
  if (before != nullptr) {
    for (const auto& n : before->not_applied())
      told.insert(Cat(OverrideId(n.spec), '\n', n.reason));
  }
  for (const auto& n : after.not_applied()) {
    if (told.contains(Cat(OverrideId(n.spec), '\n', n.reason))) continue;
    report.log->Warning(Cat("runtime overrides: not applying the override of ",
                            n.spec.kind == OverrideKind::kPolicy ? "policy " : "Envoy rule ",
                            Quoted(n.spec.policy), " identity ",
                            ShownIdentity(n.spec.identity, report.refusals), ": ", n.reason,
                            " (it applies again once it fits; or delete it)"));
  }
}

std::string ShownIdentity(const std::vector<std::pair<std::string, std::string>>& identity,
                          const Refusals* refusals) {
  if (refusals == nullptr) return Cat("(", identity.size(), " values, not shown)");
  std::string joined;
  for (const auto& [name, value] : identity) {
    joined += Cat(joined.empty() ? "" : ",", name, '=', value);
  }
  return refusals->Display(joined);
}

}  // namespace caudal::engine_internal
