// PlanDomain: an Envoy request's descriptors matched against envoyproxy/ratelimit's rules, one
// check per descriptor, keyed by the limit, the domain and the descriptor's entries.
#include <algorithm>
#include <string>
#include <unordered_set>

#include "algorithms/algorithm.h"
#include "common/cat.h"
#include "engine/hit_stats.h"
#include "engine/plan.h"
#include "engine/store_key.h"

namespace caudal::engine_internal {
namespace {

constexpr size_t kMaxEntriesPerDescriptor = 32;

// An always_charge rule's keys: every hit is counted in the store, none from a lease.
constexpr LeaseTerms kNoLease{};

// Length-prefixed, so no choice of keys and values can make two descriptors share a key.
Status BadDescriptor(size_t i, std::string_view message) {
  return Status::InvalidArgument(Cat("descriptor ", i, ": ", message));
}

Status ValidateShape(const DomainRequest& request, const DomainOptions& options) {
  if (request.wire_bytes > options.max_request_bytes) {
    return Status::InvalidArgument(
        Cat("request of ", request.wire_bytes, " bytes exceeds ", options.max_request_bytes));
  }
  if (request.domain.empty()) return Status::InvalidArgument("domain must not be empty");
  if (Status s = ValidateValue("domain", request.domain, /*allow_controls=*/true); !s.ok()) {
    return s;
  }
  if (request.descriptors.empty()) {
    return Status::InvalidArgument("a request needs at least one descriptor");
  }
  if (request.descriptors.size() > kMaxEntriesPerRequest) {
    return Status::InvalidArgument(
        Cat("a request carries at most ", kMaxEntriesPerRequest, " descriptors"));
  }
  for (size_t i = 0; i < request.descriptors.size(); ++i) {
    const auto& entries = request.descriptors[i].entries;
    if (entries.size() > kMaxEntriesPerDescriptor) {
      return BadDescriptor(i, Cat("has more than ", kMaxEntriesPerDescriptor, " entries"));
    }
    for (size_t j = 0; j < entries.size(); ++j) {
      const std::string field = Cat("descriptor ", i, " entry ", j);
      if (Status s = ValidateValue(field + " key", entries[j].key, true); !s.ok()) return s;
      if (Status s = ValidateValue(field + " value", entries[j].value, true); !s.ok()) return s;
    }
  }
  return Status::Ok();
}

Result<int64_t> Hits(const DomainRequest& request, size_t i) {
  const DomainDescriptor& d = request.descriptors[i];
  const uint64_t hits = d.hits.has_value()         ? *d.hits
                        : request.hits_addend == 0 ? 1
                                                   : request.hits_addend;
  if (hits > static_cast<uint64_t>(kMaxCost)) {
    return BadDescriptor(i, Cat("hits_addend ", hits, " exceeds 2^40"));
  }
  return static_cast<int64_t>(hits);
}

// The limit of a descriptor that carries its own: a plain fixed window, as in the reference.
Status ResolveOverride(const DomainDescriptor& d, size_t i, Check& c) {
  const int unit = d.limit->unit;
  if (unit < static_cast<int>(envoy::Unit::kSecond) ||
      unit > static_cast<int>(envoy::Unit::kYear)) {
    return BadDescriptor(i, "limit override has no valid unit");
  }
  if (d.limit->requests_per_unit == 0) {
    c.result.kind = CheckKind::kBlocked;
    return Status::Ok();
  }
  auto limit = envoy::MakeLimit(Algorithm::kFixedWindow, d.limit->requests_per_unit,
                                static_cast<envoy::Unit>(unit));
  if (!limit.ok()) return BadDescriptor(i, "limit override: " + limit.status().message());
  c.override_limit = std::make_shared<const Limit>(*limit);
  c.result.limits.push_back(c.override_limit.get());
  return Status::Ok();
}

void ResolveRule(const Engine::Snapshot& snap, const envoy::RateLimitRule& rule, Check& c) {
  c.result.rule = &rule;
  if (rule.lease) c.lease = &*rule.lease;
  c.always_charge = rule.always_charge;
  if (rule.always_charge) c.lease = &kNoLease;
  c.result.name = rule.name;
  c.result.shadow = rule.shadow_mode;
  if (auto it = snap.rule_stats.find(&rule); it != snap.rule_stats.end()) {
    c.counters = it->second.counters;
    c.stat_name = it->second.name;
  }
  if (rule.unlimited) {
    c.result.kind = CheckKind::kUnlimited;
  } else if (rule.blocks_all()) {
    c.result.kind = CheckKind::kBlocked;
  } else {
    c.result.limits.push_back(&*rule.limit);
  }
}

// The store key: the limit, then the domain and the first entry as the hash tag (so that one
// client's descriptors tend to share a Redis Cluster slot), then the other entries. `values`
// are what each entry counts by: its value, or a share_threshold wildcard's pattern.
std::string KeyOf(const Limit& limit, std::string_view domain,
                  const std::vector<envoy::DescriptorEntry>& entries,
                  const std::vector<std::string_view>& values) {
  std::vector<std::string_view> fields;
  fields.reserve(2 * entries.size());
  for (size_t j = 0; j < entries.size(); ++j) {
    fields.push_back(entries[j].key);
    fields.push_back(values[j]);
  }
  return store_key::Domain(limit, domain, fields);
}

// A runtime override of the matched rule for these entries (by the rule's stat key) replaces
// its limit, whatever the rule says (unlimited, or blocking, too).
void ApplyRuntime(const Engine::Snapshot& snap, const std::vector<envoy::DescriptorEntry>& entries,
                  Check& c) {
  if (snap.runtime == nullptr || snap.runtime->size() == 0 || c.stat_name.empty()) return;
  const RuntimeOverrides::Entry* o =
      snap.runtime->Find(OverrideKind::kEnvoyRule, c.stat_name, EncodeEntries(entries));
  if (o == nullptr) return;
  c.override_limit = std::make_shared<const Limit>(o->set.limits[0]);
  c.result.limits = {c.override_limit.get()};
  c.result.kind = CheckKind::kLimited;
  c.limits_from = LimitsFrom::kRuntime;  // it fits the rule: the engine applies no other
}

// consume_each counts a refused hit as the reference does where the reference's own counter
// is: a fixed window (a bucket consumes, unless its rule is always_charge).
bool ChargedAsTheReference(const Check& c) {
  return std::all_of(c.result.limits.begin(), c.result.limits.end(),
                     [](const Limit* l) { return l->algorithm() == Algorithm::kFixedWindow; });
}

}  // namespace

std::string EncodeEntries(std::span<const envoy::DescriptorEntry> entries) {
  std::string out;
  for (const envoy::DescriptorEntry& e : entries) {
    store_key::AppendField(out, e.key);
    store_key::AppendField(out, e.value);
  }
  return out;
}

Result<Plan> PlanDomain(const Engine::Snapshot& snap, const DomainRequest& request) {
  if (Status s = ValidateShape(request, snap.domain_options); !s.ok()) return s;
  Plan plan;
  plan.mode = snap.domain_options.mode;
  plan.instances = snap.domain_options.instances;
  plan.checks.resize(request.descriptors.size());
  std::unordered_set<std::string_view> replaced;
  const envoy::RateLimitConfig* domains = snap.domains.get();
  for (size_t i = 0; i < request.descriptors.size(); ++i) {
    const DomainDescriptor& d = request.descriptors[i];
    Check& c = plan.checks[i];
    c.on_failure = snap.domain_options.on_failure;
    c.lease = &snap.domain_options.lease;  // a rule with its own replaces it (ResolveRule)
    c.result.kind = CheckKind::kLimited;
    auto hits = Hits(request, i);
    if (!hits.ok()) return hits.status();
    c.result.cost = *hits;
    c.result.refund = d.refund && c.result.cost > 0;
    if (d.entries.empty()) {  // nothing to key or match by: no limit, as in the reference
      c.result.kind = CheckKind::kNoLimit;
      continue;
    }
    // An unknown domain has no limit, even for a descriptor carrying its own, as in the reference.
    if (domains == nullptr || !domains->HasDomain(request.domain)) {
      c.result.kind = CheckKind::kNoLimit;
      continue;
    }
    std::vector<std::string_view> values;
    if (d.limit.has_value()) {
      if (Status s = ResolveOverride(d, i, c); !s.ok()) return s;
      for (const envoy::DescriptorEntry& e : d.entries) values.push_back(e.value);
      c.detailed_name = envoy::RateLimitConfig::OverrideStatsKey(request.domain, d.entries);
    } else {
      // No matching rule: no limit, as in the reference.
      envoy::RuleMatch m = domains->MatchDetailed(request.domain, d.entries);
      if (m.rule == nullptr) {
        c.result.kind = CheckKind::kNoLimit;
        continue;
      }
      ResolveRule(snap, *m.rule, c);
      ApplyRuntime(snap, d.entries, c);
      c.quota = m.rule->quota_mode;
      replaced.insert(m.rule->replaces.begin(), m.rule->replaces.end());
      // detailed_metric, value_to_metric and share_threshold name the stats by the values.
      if (m.stats_key != c.stat_name) c.detailed_name = std::move(m.stats_key);
      values = std::move(m.counter_values);
    }
    SanitizeStatName(c.detailed_name);  // named as the reference names its stats
    if (c.result.kind != CheckKind::kLimited) continue;
    c.keys.push_back(KeyOf(*c.result.limits[0], request.domain, d.entries, values));
    if (c.keys[0].size() > kMaxKeyLength) {
      return BadDescriptor(
          i, Cat("domain, keys and values together exceed ", kMaxKeyLength, " bytes"));
    }
  }
  // `replaces`: a matched rule named by another matched rule no longer applies.
  for (Check& c : plan.checks) {
    if (c.result.rule != nullptr && !c.result.rule->name.empty() &&
        replaced.contains(c.result.rule->name)) {
      c = Check{};
      c.result.kind = CheckKind::kNoLimit;
    }
  }
  for (const Check& c : plan.checks) {
    plan.blocked |= c.result.kind == CheckKind::kBlocked && !c.result.shadow;
    if (c.quota && !c.result.shadow) plan.mode = DescriptorMode::kConsumeEach;
  }
  for (Check& c : plan.checks) {
    c.always_charge = c.always_charge && c.result.kind == CheckKind::kLimited && !c.result.refund;
    c.charge = c.always_charge ||
               (plan.mode == DescriptorMode::kConsumeEach && c.result.kind == CheckKind::kLimited &&
                !c.result.refund && ChargedAsTheReference(c));
  }
  return plan;
}

}  // namespace caudal::engine_internal
