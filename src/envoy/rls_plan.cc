#include "rls_plan.h"

#include <string>
#include <unordered_set>

namespace caudal::envoy::internal {
namespace {

constexpr size_t kMaxEntriesPerDescriptor = 32;

// Length-prefixed, so no choice of keys and values can make two descriptors share a key.
void AppendField(std::string& out, std::string_view s) {
  out += std::to_string(s.size());
  out += ':';
  out += s;
}

Status Bad(size_t i, std::string_view message) {
  return Status::InvalidArgument("descriptor " + std::to_string(i) + ": " + std::string(message));
}

Status ValidateShape(const RateLimitRequest& request, const RlsOptions& options) {
  const size_t bytes = request.ByteSizeLong();
  if (bytes > options.max_request_bytes) {
    return Status::InvalidArgument("request of " + std::to_string(bytes) + " bytes exceeds " +
                                   std::to_string(options.max_request_bytes));
  }
  if (request.domain().empty()) return Status::InvalidArgument("domain must not be empty");
  if (request.descriptors().empty()) {
    return Status::InvalidArgument("a request needs at least one descriptor");
  }
  if (static_cast<size_t>(request.descriptors_size()) > kMaxEntriesPerRequest) {
    return Status::InvalidArgument("a request carries at most " +
                                   std::to_string(kMaxEntriesPerRequest) + " descriptors");
  }
  for (int i = 0; i < request.descriptors_size(); ++i) {
    const auto& d = request.descriptors(i);
    if (d.entries().empty()) return Bad(i, "has no entries");
    if (static_cast<size_t>(d.entries_size()) > kMaxEntriesPerDescriptor) {
      return Bad(i, "has more than " + std::to_string(kMaxEntriesPerDescriptor) + " entries");
    }
    for (int j = 0; j < d.entries_size(); ++j) {
      if (d.entries(j).key().empty()) {
        return Bad(i, "entry " + std::to_string(j) + " has an empty key");
      }
      if (d.entries(j).value().empty()) {
        return Bad(i, "entry " + std::to_string(j) + " (" + d.entries(j).key() +
                          ") has an empty value");
      }
    }
  }
  return Status::Ok();
}

Result<int64_t> Hits(const RateLimitRequest& request, size_t i) {
  const auto& d = request.descriptors(static_cast<int>(i));
  const uint64_t hits = d.has_hits_addend() ? d.hits_addend().value()
                        : request.hits_addend() == 0 ? 1
                                                     : request.hits_addend();
  if (hits > static_cast<uint64_t>(kMaxCost)) {
    return Bad(i, "hits_addend " + std::to_string(hits) + " exceeds 2^40");
  }
  return static_cast<int64_t>(hits);
}

// Fills `slot` from the request's override or the config's rule.
Status Resolve(const RateLimitRequest& request, size_t i, const RateLimitConfig& config,
               const RateLimitRule** rule_out, Slot& slot) {
  const auto& d = request.descriptors(static_cast<int>(i));
  *rule_out = nullptr;
  if (d.has_limit()) {
    // An override replaces the configured limit with a plain fixed window, as in the reference.
    const int unit = d.limit().unit();
    if (unit < static_cast<int>(Unit::kSecond) || unit > static_cast<int>(Unit::kYear)) {
      return Bad(i, "limit override has no valid unit");
    }
    slot.unit = static_cast<Unit>(unit);
    slot.requests_per_unit = d.limit().requests_per_unit();
    if (slot.requests_per_unit == 0) {
      slot.kind = SlotKind::kBlocked;
      return Status::Ok();
    }
    auto limit = MakeLimit(Algorithm::kFixedWindow, slot.requests_per_unit, slot.unit);
    if (!limit.ok()) return Bad(i, "limit override: " + limit.status().message());
    slot.kind = SlotKind::kLimited;
    slot.limit = *limit;
    return Status::Ok();
  }
  std::vector<DescriptorEntry> entries;
  entries.reserve(static_cast<size_t>(d.entries_size()));
  for (const auto& e : d.entries()) entries.push_back({e.key(), e.value()});
  const RateLimitRule* rule = config.Match(request.domain(), entries);
  *rule_out = rule;
  if (rule == nullptr) return Status::Ok();
  slot.name = rule->name;
  slot.shadow = rule->shadow_mode;
  slot.unit = rule->unit;
  slot.requests_per_unit = rule->requests_per_unit;
  if (rule->unlimited) {
    slot.kind = SlotKind::kUnlimited;
  } else if (rule->blocks_all()) {
    slot.kind = SlotKind::kBlocked;
  } else {
    slot.kind = SlotKind::kLimited;
    slot.limit = *rule->limit;
  }
  return Status::Ok();
}

}  // namespace

Result<Plan> BuildPlan(const RateLimitRequest& request, const RateLimitConfig& config,
                       const RlsOptions& options) {
  if (Status s = ValidateShape(request, options); !s.ok()) return s;
  if (!config.HasDomain(request.domain())) {
    return Status::InvalidArgument("unknown domain '" + request.domain() + "'");
  }
  Plan plan;
  plan.slots.resize(static_cast<size_t>(request.descriptors_size()));
  std::vector<const RateLimitRule*> rules(plan.slots.size());
  std::unordered_set<std::string> replaced;
  for (size_t i = 0; i < plan.slots.size(); ++i) {
    Slot& slot = plan.slots[i];
    auto hits = Hits(request, i);
    if (!hits.ok()) return hits.status();
    slot.cost = *hits;
    slot.refund = request.descriptors(static_cast<int>(i)).is_negative_hits() && slot.cost > 0;
    if (Status s = Resolve(request, i, config, &rules[i], slot); !s.ok()) return s;
    if (rules[i] != nullptr) replaced.insert(rules[i]->replaces.begin(), rules[i]->replaces.end());
    if (slot.kind != SlotKind::kLimited) continue;
    slot.key = "rls|" + slot.limit->ToString() + "|";
    AppendField(slot.key, request.domain());
    for (const auto& e : request.descriptors(static_cast<int>(i)).entries()) {
      AppendField(slot.key, e.key());
      AppendField(slot.key, e.value());
    }
    if (slot.key.size() > kMaxKeyLength) {
      return Bad(i, "domain, keys and values together exceed " + std::to_string(kMaxKeyLength) +
                        " bytes");
    }
  }
  // `replaces`: a matched rule named by another matched rule no longer applies.
  for (size_t i = 0; i < plan.slots.size(); ++i) {
    if (rules[i] != nullptr && !rules[i]->name.empty() && replaced.contains(rules[i]->name)) {
      plan.slots[i] = Slot{};
    }
  }
  return plan;
}

}  // namespace caudal::envoy::internal
