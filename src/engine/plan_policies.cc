// PlanPolicies: which of caudal's policies apply to a request, and the store keys of their limits.
#include <algorithm>

#include "algorithms/algorithm.h"
#include "caudal/engine/ip.h"
#include "common/cat.h"
#include "engine/hold.h"
#include "engine/plan.h"
#include "engine/store_key.h"

namespace caudal::engine_internal {
namespace {

// Decodes one UTF-8 sequence at s[i]; its length, or 0 when ill-formed (overlong forms,
// surrogates and code points past U+10FFFF included).
size_t Utf8Length(std::string_view s, size_t i) {
  const auto b = [&](size_t k) { return static_cast<unsigned char>(s[i + k]); };
  const auto cont = [&](size_t k) { return i + k < s.size() && (b(k) & 0xC0) == 0x80; };
  const unsigned char c = b(0);
  if (c < 0x80) return 1;
  if (c >= 0xC2 && c <= 0xDF) return cont(1) ? 2 : 0;
  if (c >= 0xE0 && c <= 0xEF) {
    if (!cont(1) || !cont(2)) return 0;
    if (c == 0xE0 && b(1) < 0xA0) return 0;  // overlong
    if (c == 0xED && b(1) > 0x9F) return 0;  // surrogate
    return 3;
  }
  if (c >= 0xF0 && c <= 0xF4) {
    if (!cont(1) || !cont(2) || !cont(3)) return 0;
    if (c == 0xF0 && b(1) < 0x90) return 0;  // overlong
    if (c == 0xF4 && b(1) > 0x8F) return 0;  // past U+10FFFF
    return 4;
  }
  return 0;
}

Status ValidateDescriptors(const Descriptors& descriptors) {
  if (descriptors.empty()) {
    return Status::InvalidArgument("descriptors: at least one descriptor is required");
  }
  if (descriptors.size() > kMaxDescriptors) {
    return Status::InvalidArgument(Cat("descriptors: at most ", kMaxDescriptors,
                                       " descriptors (got ", descriptors.size(), ')'));
  }
  for (size_t i = 0; i < descriptors.size(); ++i) {
    const Descriptor& d = descriptors[i];
    if (!IsValidName(d.name)) {
      return Status::InvalidArgument(Cat("descriptors: ", Quoted(d.name.substr(0, kMaxNameLength)),
                                         " is not a descriptor name (expected 1 to 64 characters "
                                         "of [A-Za-z0-9_.-])"));
    }
    const std::string field = "descriptors." + d.name;
    if (d.value.empty() || d.value.size() > kMaxDescriptorValueLength) {
      return Status::InvalidArgument(
          Cat(field, ": expected a string of 1 to ", kMaxDescriptorValueLength, " bytes"));
    }
    if (Status s = ValidateValue(field, d.value); !s.ok()) return s;
    for (size_t j = 0; j < i; ++j) {
      if (descriptors[j].name == d.name) return Status::InvalidArgument(field + ": given twice");
    }
    if (d.name == "ip") {  // well-known: an address whether or not a policy keys by it
      if (auto ip = IpAddress::Parse(d.value); !ip.ok()) {
        return Status::InvalidArgument(Cat(field, ": ", ip.status().message()));
      }
    }
  }
  return Status::Ok();
}

}  // namespace

Result<std::optional<std::string>> EncodeIdentity(const PolicySet::Policy& policy,
                                                  const Descriptors& descriptors) {
  std::string out;
  for (const std::string& field : policy.spec.identity) {
    const auto found = std::find_if(descriptors.begin(), descriptors.end(),
                                    [&](const Descriptor& d) { return d.name == field; });
    if (found == descriptors.end()) return std::optional<std::string>();
    std::string masked;  // only for ip
    std::string_view value = found->value;
    if (field == "ip") {
      auto ip = IpAddress::Parse(found->value);
      if (!ip.ok()) return Status::InvalidArgument("descriptors.ip: " + ip.status().message());
      const int prefix =
          ip->family == IpFamily::kV4 ? policy.spec.ip_prefix.v4 : policy.spec.ip_prefix.v6;
      masked = Cat(ip->Masked(prefix).ToString(), '/', prefix);
      value = masked;
    }
    store_key::AppendField(out, value);
  }
  return std::optional<std::string>(std::move(out));
}

namespace {

const std::string* ValueOf(const Descriptors& descriptors, std::string_view name) {
  for (const Descriptor& d : descriptors) {
    if (d.name == name) return &d.value;
  }
  return nullptr;
}

// The first of `p`'s static overrides whose every value `descriptors` hold, or -1.
int MatchTier(const PolicySet::Policy& p, const Descriptors& descriptors) {
  for (size_t t = 0; t < p.spec.overrides.size(); ++t) {
    bool all = true;
    for (const MatchValue& m : p.spec.overrides[t].match) {
      const std::string* v = ValueOf(descriptors, m.descriptor);
      if (v == nullptr) {
        all = false;
      } else if (m.descriptor == "ip") {  // validated: an address; the tier's, a block
        auto ip = IpAddress::Parse(*v);
        all = ip.ok() && p.tiers[t].ip->Contains(*ip);
      } else {
        all = *v == m.value;
      }
      if (!all) break;
    }
    if (all) return static_cast<int>(t);
  }
  return -1;
}

}  // namespace

std::string LimitsFromName(const Check& c) {
  switch (c.limits_from) {
    case LimitsFrom::kPolicy:
      return "limits";
    case LimitsFrom::kTier:
      return Cat("overrides[", c.tier, ']');
    case LimitsFrom::kRuntime:
      return "runtime_override";
  }
  return "limits";
}

Status ValidateValue(std::string_view field, std::string_view value, bool allow_controls) {
  for (size_t i = 0; i < value.size();) {
    const unsigned char c = static_cast<unsigned char>(value[i]);
    if (c == 0 || (!allow_controls && (c < 0x20 || c == 0x7F))) {
      return Status::InvalidArgument(
          Cat(field, ": control characters (such as NUL) are not allowed in a value"));
    }
    const size_t n = Utf8Length(value, i);
    if (n == 0) return Status::InvalidArgument(Cat(field, ": not valid UTF-8"));
    i += n;
  }
  return Status::Ok();
}

Result<Plan> PlanPolicies(const Engine::Snapshot& snap, const CheckRequest& request) {
  if (Status s = ValidateDescriptors(request.descriptors); !s.ok()) return s;
  // A reserve may estimate 0: its settle then charges the whole actual cost.
  const int64_t least = request.reserve.has_value() ? 0 : 1;
  if (request.cost.has_value() && (*request.cost < least || *request.cost > kMaxCost)) {
    return Status::InvalidArgument(Cat("cost: expected ", least == 0 ? "an" : "a positive",
                                       " integer up to 2^40 (got ", *request.cost, ')'))
        .WithReason(engine_reason::kInvalidCost);
  }
  if (request.reserve.has_value()) {
    if (request.refund) return Status::InvalidArgument("refund: a reserve takes, never refunds");
    if (*request.reserve < kMinReservationTtl || *request.reserve > kMaxReservationTtl) {
      return Status::InvalidArgument(
          Cat("ttl: expected between 1ms and 24h (got ", request.reserve->count(), "us)"));
    }
  }
  const PolicySet& set = *snap.policies;
  if (Status s = ValidateCosts(request.costs, request.cost.has_value(), set); !s.ok()) return s;
  // `costs` names the requests dimension's units, or leaves them 0.
  const std::optional<int64_t> requests =
      request.costs ? std::optional<int64_t>(RequestsIn(*request.costs)) : request.cost;
  Plan plan;
  plan.mode = set.options().mode;
  if (request.reserve.has_value()) {
    plan.mode = DescriptorMode::kAllOrNothing;  // a reserve is all-or-nothing, like a check
    plan.reserves = true;
    plan.reservation_ttl = *request.reserve;
  }
  size_t reserved = 0;  // keys the reservation id names
  plan.instances = set.options().instances;
  const auto policies = set.policies();
  size_t slots = 0;  // concurrency limits that take a slot
  for (size_t i = 0; i < policies.size(); ++i) {
    const PolicySet::Policy& p = policies[i];
    auto identity = EncodeIdentity(p, request.descriptors);
    if (!identity.ok()) return identity.status();
    if (!identity->has_value()) continue;
    Check c;
    c.result.name = p.spec.name;
    c.stat_name = p.spec.name;
    c.result.policy = &p;
    c.result.shadow = p.shadow();
    c.result.cost = requests.value_or(p.spec.cost);
    c.result.refund = request.refund;
    c.on_failure = p.on_failure;
    c.lease = &p.lease;
    c.count_rejected = p.spec.count_rejected == RejectedCounting::kCounted;
    c.reserves = plan.reserves && !c.result.shadow;
    c.reservation = p.spec.reservations;
    c.reservation.ttl = plan.reserves ? plan.reservation_ttl : kDefaultReservationTtl;
    if (p.spec.reservations.on_expiry == ExpiryOutcome::kGiveBack) {
      c.expiry = &p.spec.reservations;
    }
    c.counters = snap.policy_counters.empty() ? nullptr : snap.policy_counters[i];
    c.units = snap.policy_units.empty() ? nullptr : &snap.policy_units[i];
    const std::vector<Limit>* limits = &p.spec.limits;
    const std::vector<Limit>* local = &p.local_limits;
    const std::vector<std::string>* prefixes = &p.key_prefixes;
    const RuntimeOverrides::Entry* runtime =
        snap.runtime == nullptr
            ? nullptr
            : snap.runtime->Find(OverrideKind::kPolicy, p.spec.name, **identity);
    // A policy with share: one capacity for all its identities, under its own limits; a runtime
    // override or a tier gives the identity its weight in it.
    if (p.spec.share) {
      int64_t weight = 1;
      // (limits_from stays the policy's: the limits are its own whatever gives the weight.)
      if (runtime != nullptr && runtime->spec.weight) {
        weight = *runtime->spec.weight;
      } else if (const int t = MatchTier(p, request.descriptors); t >= 0) {
        weight = p.tiers[static_cast<size_t>(t)].weight;
      }
      if (c.reserves) {
        return Status::InvalidArgument(Cat("descriptors: policy ", Quoted(p.spec.name),
                                           " shares its capacity among its identities, which "
                                           "takes no reservations"));
      }
      auto shared = std::make_shared<Check::Shared>();
      shared->identity = **identity;
      shared->of = {.policy = p.spec.name,
                    .identity = shared->identity,
                    .weight = weight,
                    .fairness = p.spec.share->fairness,
                    .window = p.spec.share->window};
      c.shared = std::move(shared);
      c.lease = nullptr;
    } else if (runtime != nullptr && !runtime->spec.limits.empty()) {
      // A runtime override of a policy with share gives a weight only: the limits stay its own.
      limits = &runtime->set.limits;
      local = &runtime->set.local_limits;
      prefixes = &runtime->set.key_prefixes;
      c.limits_from = LimitsFrom::kRuntime;
    } else if (const int t = MatchTier(p, request.descriptors); t >= 0) {
      const LimitSet& tier = p.tiers[static_cast<size_t>(t)].set;
      limits = &tier.limits;
      local = &tier.local_limits;
      prefixes = &tier.key_prefixes;
      c.limits_from = LimitsFrom::kTier;
      c.tier = t;
    }
    for (size_t k = 0; k < limits->size(); ++k) {
      const Limit& l = (*limits)[k];
      const bool slot = IsConcurrency(l.algorithm());
      if (slot && !request.refund && ++slots > kMaxHeldSlots) {
        return Status::InvalidArgument(
            Cat("descriptors: the request would take slots of more "
                "than ",
                kMaxHeldSlots, " concurrency limits"));
      }
      const int64_t cost = LimitCost(l, c.result.cost, request.costs);
      if (!request.refund && !slot && cost > l.capacity()) {
        return Status::InvalidArgument(
                   Cat(l.counts_requests() ? "cost: " : Cat("costs (", l.DimensionText(), "): "),
                       cost > kMaxCost ? std::string("above 2^40") : std::to_string(cost),
                       " exceeds the capacity ", l.capacity(), " of policy ", Quoted(p.spec.name),
                       " (", LimitsFromName(c),
                       c.limits_from == LimitsFrom::kPolicy ? "" : ".limits", '[', k,
                       "]), so it could never pass"))
            .WithReason(engine_reason::kInvalidCost);
      }
      if (request.refund && cost > kMaxCost) {
        return Status::InvalidArgument(Cat("costs (", l.DimensionText(), "): above 2^40"))
            .WithReason(engine_reason::kInvalidCost);
      }
      if (c.reserves && !SupportsReserve(l.algorithm())) {
        return Status::InvalidArgument(
            Cat("descriptors: policy ", Quoted(p.spec.name), " (", LimitsFromName(c),
                c.limits_from == LimitsFrom::kPolicy ? "" : ".limits", '[', k, "]) is a ",
                AlgorithmName(l.algorithm()),
                " limit, which takes no reservations (token_bucket, gcra and fixed_window do)"));
      }
      if (c.reserves && ++reserved > kMaxHeldSlots) {
        return Status::InvalidArgument(
            Cat("descriptors: a reservation holds at most ", kMaxHeldSlots, " limits"));
      }
      // The identity is the key's hash tag: one identity's limits share a Redis Cluster slot. A
      // shared capacity's key is the policy's: "*<policy>" is no encoded identity, and puts the
      // policy's limits in one slot.
      std::string key = c.shared != nullptr
                            ? store_key::Policy((*prefixes)[k], Cat('*', p.spec.name))
                            : store_key::Policy((*prefixes)[k], **identity);
      if (key.size() > kMaxKeyLength) {
        return Status::InvalidArgument(Cat("descriptors: the identity of policy ",
                                           Quoted(p.spec.name), " is too long for a key (",
                                           key.size(), " bytes, at most ", kMaxKeyLength, ")"));
      }
      c.keys.push_back(std::move(key));
      c.slots.set(k, slot);
      c.result.limits.push_back(&l);
      // Per limit only where one differs from the requests dimension's: no allocation on the
      // usual decision.
      if (!c.result.costs.empty() || cost != c.result.cost) {
        c.result.costs.resize(k, c.result.cost);
        c.result.costs.push_back(cost);
      }
      c.local_limits.push_back(&(*local)[k]);
    }
    plan.checks.push_back(std::move(c));
  }
  plan.takes_slots = slots > 0;
  plan.costs = request.costs;
  if (plan.reserves && reserved == 0) {
    return Status::InvalidArgument("descriptors: no enforced policy applies: nothing to reserve");
  }
  return plan;
}

Status ValidateCosts(const std::optional<Costs>& given, bool request_cost, const PolicySet& set) {
  if (!given) return Status::Ok();
  const Costs& costs = *given;
  auto bad = [](std::string message) {
    return Status::InvalidArgument(std::move(message)).WithReason(engine_reason::kInvalidCost);
  };
  if (request_cost) {
    return bad("cost and costs: give one of them (cost is the requests dimension of costs)");
  }
  if (costs.empty() || costs.size() > kMaxCostDimensions) {
    return bad(
        Cat("costs: expected 1 to ", kMaxCostDimensions, " dimensions (got ", costs.size(), ')'));
  }
  const std::span<const std::string> known = set.dimensions();
  for (size_t i = 0; i < costs.size(); ++i) {
    const DimensionCost& c = costs[i];
    const std::string field = Cat("costs.", c.dimension.substr(0, kMaxDimensionNameLength + 8));
    if (!std::binary_search(known.begin(), known.end(), c.dimension)) {
      std::string names;
      for (const std::string& k : known) names += Cat(names.empty() ? "" : ", ", k);
      return bad(Cat(field, ": no limit counts this dimension (the configured ones: ", names, ')'));
    }
    for (size_t j = 0; j < i; ++j) {
      if (costs[j].dimension == c.dimension) return bad(Cat(field, ": given twice"));
    }
    if (c.units < 0 || c.units > kMaxCost) {
      return bad(Cat(field, ": expected an integer from 0 to 2^40 (got ", c.units, ')'));
    }
  }
  return Status::Ok();
}

int64_t LimitCost(const Limit& limit, int64_t requests, const std::optional<Costs>& costs) {
  if (limit.counts_requests()) return requests;
  int64_t sum = 0;
  for (const std::string& d : limit.dimension()) {
    if (d == kRequestsDimension) {
      sum += requests;
    } else if (costs) {
      for (const DimensionCost& c : *costs) {
        if (c.dimension == d) sum += c.units;
      }
    }
  }
  return std::min(sum, kMaxCost + 1);  // at most kMaxDimensionsPerLimit terms of 2^40
}

int64_t RequestsIn(const Costs& costs) {
  for (const DimensionCost& c : costs) {
    if (c.dimension == kRequestsDimension) return c.units;
  }
  return 0;
}

KeyedLimit LookUpKey(const Engine::Snapshot& snap, std::string_view key, bool has_local,
                     bool (*want)(Algorithm)) {
  // The prefix names the limit, so a match is the very limit the key was made under.
  const std::optional<store_key::PolicyParts> parts = store_key::ReadPolicy(key);
  if (!parts) return {};
  const std::string_view name = parts->policy, prefix = parts->prefix, identity = parts->identity;
  for (const PolicySet::Policy& p : snap.policies->policies()) {
    if (p.spec.name != name) continue;
    const bool local = has_local && p.on_failure == FailureMode::kLocal;
    auto in = [&](const LimitSet& set) -> KeyedLimit {
      for (size_t k = 0; k < set.key_prefixes.size() && k < set.limits.size(); ++k) {
        if (set.key_prefixes[k] != prefix || !want(set.limits[k].algorithm())) continue;
        return {.limit = &set.limits[k],
                .local = local && k < set.local_limits.size() ? &set.local_limits[k] : nullptr,
                .policy = &p};
      }
      return {};
    };
    for (size_t k = 0; k < p.key_prefixes.size() && k < p.spec.limits.size(); ++k) {
      if (p.key_prefixes[k] != prefix || !want(p.spec.limits[k].algorithm())) continue;
      return {.limit = &p.spec.limits[k],
              .local = local && k < p.local_limits.size() ? &p.local_limits[k] : nullptr,
              .policy = &p};
    }
    for (const PolicySet::Policy::Tier& t : p.tiers) {
      if (KeyedLimit h = in(t.set); h.limit) return h;
    }
    const RuntimeOverrides::Entry* runtime =
        snap.runtime == nullptr ? nullptr
                                : snap.runtime->Find(OverrideKind::kPolicy, name, identity);
    if (runtime != nullptr) return in(runtime->set);
  }
  return {};
}

bool PrepareLocal(Check& check, int64_t instances) {
  if (check.local_limits.size() == check.result.limits.size()) return true;  // precomputed
  check.local_limits.clear();
  check.local_owned.clear();
  check.local_owned.reserve(check.result.limits.size());  // no reallocation below
  for (const Limit* l : check.result.limits) {
    auto local = LocalLimit(*l, instances);
    if (!local.ok()) return false;
    check.local_owned.push_back(*local);
    check.local_limits.push_back(&check.local_owned.back());
  }
  return true;
}

}  // namespace caudal::engine_internal
