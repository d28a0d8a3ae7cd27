#include "caudal/engine/policy.h"

#include <algorithm>

#include "algorithms/algorithm.h"
#include "common/cat.h"
#include "common/utf8.h"
#include "engine/policy_dimensions.h"
#include "engine/store_key.h"

namespace caudal {
namespace {

PolicyError Err(std::string field, std::string message) {
  return {std::move(field), Status::InvalidArgument(std::move(message))};
}

// Why `l`, a limit of `policy`, cannot be decided as the policy says, or nullopt. A concurrency
// limit takes a slot only with the whole request admitted, so nothing may take one for a
// refused request: neither count_rejected nor consume_each.
std::optional<std::string> ConcurrencyProblem(const PolicySpec& policy,
                                              const PolicySetOptions& options, const Limit& l) {
  if (!IsConcurrency(l.algorithm())) return std::nullopt;
  if (policy.count_rejected == RejectedCounting::kCounted) {
    return "a concurrency limit takes no slot for a refused request: count_rejected cannot "
           "count one";
  }
  if (options.mode == DescriptorMode::kConsumeEach) {
    return "a concurrency limit needs policies decided all_or_nothing: consume_each would hold "
           "slots for a refused request";
  }
  return std::nullopt;
}

// Why `l` cannot be one of `policy`'s limits when its capacity is shared among its identities,
// or nullopt: a share divides a rate (n units per period), which a sliding window (a count over
// a window that moves with each request) and concurrency (slots, not a rate) are not.
std::optional<std::string> ShareProblem(const PolicySpec& policy, const Limit& l) {
  if (!policy.share) return std::nullopt;
  const Algorithm a = l.algorithm();
  if (IsConcurrency(a) || a == Algorithm::kSlidingWindowLog ||
      a == Algorithm::kSlidingWindowCounter) {
    return Cat("share divides a rate among identities and cannot divide a ", AlgorithmName(a),
               " limit (token_bucket, gcra or fixed_window can be shared)");
  }
  if (l.calendar()) {
    return Cat(
        "share divides a steady rate among identities and cannot divide a calendar window "
        "(1 ",
        CalendarUnitName(l.calendar()->unit()), ")");
  }
  return std::nullopt;
}

// A request's cost must fit a rate limit; a concurrency limit takes one slot whatever it is.
// `l` counts requests, alone or in a sum: the policy's default cost binds it.
bool CountsRequests(const Limit& l) {
  const auto& d = l.dimension();
  return d.empty() || std::find(d.begin(), d.end(), kRequestsDimension) != d.end();
}

bool CostFits(int64_t cost, const Limit& l) {
  return IsConcurrency(l.algorithm()) || cost <= l.capacity();
}

// Why `value` cannot be matched as a descriptor's value, or nullopt: a descriptor value is 1 to
// 256 bytes of UTF-8 without control characters, and an `ip` an address or a CIDR block.
std::optional<std::string> MatchValueProblem(const MatchValue& m) {
  if (m.value.empty() || m.value.size() > kMaxMatchValueLength) {
    return Cat("expected a value of 1 to ", kMaxMatchValueLength, " bytes");
  }
  for (std::string_view rest = m.value; !rest.empty();) {
    if (ControlCharacterLength(rest) > 0) return "control characters are not allowed in a value";
    const size_t n = Utf8SequenceLength(rest);
    if (n == 0) return "not valid UTF-8";
    rest.remove_prefix(n);
  }
  if (m.descriptor == "ip" && !CidrBlock::Parse(m.value).ok()) {
    return Cat("expected an IP address or a CIDR block such as 10.0.0.0/8 (got ", Quoted(m.value),
               ')');
  }
  return std::nullopt;
}

std::optional<PolicyError> ValidateOverride(const PolicySpec& spec, const PolicySetOptions& options,
                                            const OverrideSpec& o, const std::string& where) {
  if (o.match.empty() || o.match.size() > kMaxMatchValues) {
    return Err(where + ".match", Cat("expected 1 to ", kMaxMatchValues, " descriptor values"));
  }
  for (size_t i = 0; i < o.match.size(); ++i) {
    const MatchValue& m = o.match[i];
    const std::string field = Cat(where, ".match.", m.descriptor);
    if (!IsValidName(m.descriptor)) {
      return Err(where + ".match", Cat("expected descriptor names of [A-Za-z0-9_.-] (got ",
                                       Quoted(m.descriptor), ')'));
    }
    for (size_t j = 0; j < i; ++j) {
      if (o.match[j].descriptor == m.descriptor) return Err(field, "given twice");
    }
    if (auto problem = MatchValueProblem(m)) return Err(field, *problem);
  }
  if (auto e = ValidateOverrideTerms(spec, options, o.limits, o.weight)) {
    return Err(Cat(where, '.', e->field), e->status.message());
  }
  return std::nullopt;
}

}  // namespace

std::string_view FailureModeName(FailureMode m) {
  switch (m) {
    case FailureMode::kAllow:
      return "allow";
    case FailureMode::kDeny:
      return "deny";
    case FailureMode::kLocal:
      return "local";
  }
  return "unknown";
}

Result<FailureMode> ParseFailureMode(std::string_view text) {
  for (FailureMode m : {FailureMode::kAllow, FailureMode::kDeny, FailureMode::kLocal}) {
    if (FailureModeName(m) == text) return m;
  }
  return Status::InvalidArgument("expected allow, deny or local (got \"" + std::string(text) +
                                 "\")");
}

std::string_view DescriptorModeName(DescriptorMode m) {
  switch (m) {
    case DescriptorMode::kAllOrNothing:
      return "all_or_nothing";
    case DescriptorMode::kConsumeEach:
      return "consume_each";
  }
  return "unknown";
}

Result<DescriptorMode> ParseDescriptorMode(std::string_view text) {
  for (DescriptorMode m : {DescriptorMode::kAllOrNothing, DescriptorMode::kConsumeEach}) {
    if (DescriptorModeName(m) == text) return m;
  }
  return Status::InvalidArgument("expected all_or_nothing or consume_each (got \"" +
                                 std::string(text) + "\")");
}

bool IsValidName(std::string_view name) {
  if (name.empty() || name.size() > kMaxNameLength) return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
           c == '-' || c == '.';
  });
}

Result<Limit> LocalLimit(const Limit& global, int64_t instances) {
  if (instances == 1) return global;
  const int64_t capacity = std::max<int64_t>(1, global.capacity() / instances);
  if (!FieldsOf(global.algorithm()).period_is_rate) {  // a window's limit or a hold's slots
    LimitSpec spec = LimitSpec::Window(global.algorithm(), capacity, global.window());
    spec.calendar = global.calendar();  // the same calendar windows
    spec.dimension = global.dimension();
    return Limit::Create(spec);
  }
  Rate r = global.rate();
  if (r.count % instances == 0) {
    r.count /= instances;
  } else {
    r.period *= instances;
  }
  LimitSpec spec = LimitSpec::Bucket(global.algorithm(), capacity, r);
  spec.dimension = global.dimension();
  auto local = Limit::Create(spec);
  if (!local.ok()) {
    return Status::InvalidArgument(
        "divided among " + std::to_string(instances) +
        " instances for the local failure mode: " + local.status().message());
  }
  return local;
}

std::optional<std::string> PolicyLimitProblem(const PolicySpec& policy,
                                              const PolicySetOptions& options, const Limit& l) {
  if (auto problem = ShareProblem(policy, l)) return problem;
  if (auto problem = ConcurrencyProblem(policy, options, l)) return problem;
  if (CountsRequests(l) && !CostFits(policy.cost, l)) {
    return Cat("a capacity of ", l.capacity(), " is below the policy's cost (", policy.cost,
               "): a request of that cost could never pass");
  }
  if (policy.on_failure.value_or(options.on_failure) == FailureMode::kLocal) {
    auto local = LocalLimit(l, options.instances);
    if (!local.ok()) return local.status().message();
  }
  return std::nullopt;
}

std::optional<PolicyError> ValidateOverrideLimits(const PolicySpec& policy,
                                                  const PolicySetOptions& options,
                                                  const std::vector<Limit>& limits) {
  if (limits.empty() || limits.size() > kMaxLimitsPerPolicy) {
    return Err("", Cat("expected 1 to ", kMaxLimitsPerPolicy, " limits"));
  }
  for (size_t i = 0; i < limits.size(); ++i) {
    if (auto problem = PolicyLimitProblem(policy, options, limits[i])) {
      return Err(Cat('[', i, ']'), *problem);
    }
  }
  return std::nullopt;
}

std::optional<PolicyError> ValidateOverrideTerms(const PolicySpec& policy,
                                                 const PolicySetOptions& options,
                                                 const std::vector<Limit>& limits,
                                                 std::optional<int64_t> weight) {
  if (!policy.share) {
    if (weight) return Err("weight", "only a policy with share takes a weight");
    if (auto e = ValidateOverrideLimits(policy, options, limits)) {
      return Err(Cat("limits", e->field), e->status.message());
    }
    return std::nullopt;
  }
  if (!limits.empty()) {
    return Err("limits",
               "a policy with share divides its own limits among its identities: an override "
               "gives a weight, not limits");
  }
  if (!weight) {
    return Err("weight", Cat("missing: an override of a policy with share gives a weight (1 to ",
                             kMaxShareWeight, ")"));
  }
  if (*weight < 1 || *weight > kMaxShareWeight) {
    return Err("weight", Cat("expected 1 to ", kMaxShareWeight, " (got ", *weight, ')'));
  }
  return std::nullopt;
}

LimitSet MakeLimitSet(std::string_view policy, std::vector<Limit> limits, int64_t instances,
                      bool may_group) {
  LimitSet set;
  // Counting more than one dimension, its compact limits' states are one group per identity.
  bool grouped = false;
  const Limit* counted = nullptr;  // the first limit of units
  for (const Limit& l : limits) {
    if (IsConcurrency(l.algorithm())) continue;
    if (counted == nullptr) {
      counted = &l;
    } else if (l.DimensionText() != counted->DimensionText()) {
      grouped = may_group;
    }
  }
  for (size_t k = 0; k < limits.size(); ++k) {
    const Limit& l = limits[k];
    auto local = LocalLimit(l, instances);
    set.local_limits.push_back(local.ok() ? *local : l);
    set.key_prefixes.push_back(store_key::PolicyPrefix(
        policy, k, l, grouped && AlgorithmInfoOf(l.algorithm()).state == StateShape::kCompact));
  }
  set.limits = std::move(limits);
  return set;
}

Status ValidateLeaseTerms(const LeaseTerms& terms) {
  if (!terms.enabled) return Status::Ok();
  if (terms.ttl < kMinLeaseTtl || terms.ttl > kMaxLeaseTtl) {
    return Status::InvalidArgument("a lease's ttl must be between 1ms and 10s");
  }
  if (terms.max_share_ppm <= 0 || terms.max_share_ppm > 1'000'000) {
    return Status::InvalidArgument("a lease's max_share must be above 0 and at most 1");
  }
  return Status::Ok();
}

std::optional<PolicyError> ValidatePolicy(const PolicySpec& spec, const PolicySetOptions& options) {
  if (!IsValidName(spec.name)) {
    return Err("name", "expected 1 to 64 characters of [A-Za-z0-9_.-] (got \"" + spec.name + "\")");
  }
  if (spec.identity.empty() || spec.identity.size() > kMaxIdentityFields) {
    return Err("identity",
               "expected 1 to " + std::to_string(kMaxIdentityFields) + " descriptor names");
  }
  for (size_t i = 0; i < spec.identity.size(); ++i) {
    const std::string field = "identity[" + std::to_string(i) + "]";
    if (!IsValidName(spec.identity[i])) {
      return Err(field,
                 "expected a descriptor name of [A-Za-z0-9_.-] (got \"" + spec.identity[i] + "\")");
    }
    for (size_t j = 0; j < i; ++j) {
      if (spec.identity[j] == spec.identity[i]) {
        return Err(field, Cat(Quoted(spec.identity[i]), " is listed twice"));
      }
    }
  }
  if (spec.ip_prefix.v4 < 0 || spec.ip_prefix.v4 > 32) {
    return Err("ip_prefix.v4", "expected 0..32");
  }
  if (spec.ip_prefix.v6 < 0 || spec.ip_prefix.v6 > 128) {
    return Err("ip_prefix.v6", "expected 0..128");
  }
  if (spec.limits.empty() || spec.limits.size() > kMaxLimitsPerPolicy) {
    return Err("limits", "expected 1 to " + std::to_string(kMaxLimitsPerPolicy) + " limits");
  }
  if (options.instances < 1 || options.instances > kMaxInstances) {
    return Err("instances", "expected 1.." + std::to_string(kMaxInstances));
  }
  if (spec.lease) {
    if (Status s = ValidateLeaseTerms(*spec.lease); !s.ok()) return Err("lease", s.message());
  }
  if (spec.share &&
      (spec.share->window < kMinShareWindow || spec.share->window > kMaxShareWindow)) {
    return Err("share.window", Cat("expected between ", FormatDuration(kMinShareWindow), " and ",
                                   FormatDuration(kMaxShareWindow)));
  }
  // The default cost is its own field: it must fit the policy's own limits that count requests
  // (it is the requests dimension's). Every other check of a limit is the one its tiers and
  // runtime overrides get.
  if (spec.cost < 1) return Err("cost", "the default cost must be at least 1");
  for (const Limit& l : spec.limits) {
    if (CountsRequests(l) && !CostFits(spec.cost, l)) {
      return Err("cost", "the default cost must be between 1 and the smallest capacity (" +
                             std::to_string(l.capacity()) + "), got " + std::to_string(spec.cost));
    }
  }
  if (auto e = ValidateOverrideLimits(spec, options, spec.limits)) {
    return Err("limits" + e->field, e->status.message());
  }
  if (spec.overrides.size() > kMaxOverridesPerPolicy) {
    return Err("overrides", Cat("expected at most ", kMaxOverridesPerPolicy, " overrides"));
  }
  for (size_t t = 0; t < spec.overrides.size(); ++t) {
    if (auto e = ValidateOverride(spec, options, spec.overrides[t], Cat("overrides[", t, ']'))) {
      return e;
    }
  }
  return std::nullopt;
}

Result<std::shared_ptr<const PolicySet>> PolicySet::Create(std::vector<PolicySpec> specs,
                                                           PolicySetOptions options) {
  if (specs.size() > kMaxPolicies) {
    return Status::InvalidArgument("at most " + std::to_string(kMaxPolicies) + " policies");
  }
  std::shared_ptr<PolicySet> set(new PolicySet());
  set->options_ = options;
  for (size_t i = 0; i < specs.size(); ++i) {
    PolicySpec& spec = specs[i];
    const std::string where = "policies[" + std::to_string(i) + "]";
    if (auto e = ValidatePolicy(spec, options)) {
      return Status::InvalidArgument(where + "." + e->field + ": " + e->status.message());
    }
    for (size_t j = 0; j < i; ++j) {
      if (set->policies_[j].spec.name == spec.name) {
        return Status::InvalidArgument(where + ".name: \"" + spec.name + "\" is already used by " +
                                       "policies[" + std::to_string(j) + "]");
      }
    }
    Policy p;
    p.on_failure = spec.on_failure.value_or(options.on_failure);
    p.lease = spec.lease.value_or(options.lease);
    // Local limits are validated above whenever the local fallback can be used.
    // A shared capacity's keys are its policy's, one for all identities: never grouped.
    const bool may_group = !spec.share;
    LimitSet own = MakeLimitSet(spec.name, spec.limits, options.instances, may_group);
    p.local_limits = std::move(own.local_limits);
    p.key_prefixes = std::move(own.key_prefixes);
    for (const OverrideSpec& o : spec.overrides) {
      // With share a tier gives a weight, and its requests the policy's own limits and keys.
      Policy::Tier tier{.set = MakeLimitSet(spec.name, spec.share ? spec.limits : o.limits,
                                            options.instances, may_group),
                        .ip = {},
                        .weight = o.weight.value_or(1)};
      for (const MatchValue& m : o.match) {
        if (m.descriptor == "ip") tier.ip = *CidrBlock::Parse(m.value);
      }
      p.tiers.push_back(std::move(tier));
    }
    p.spec = std::move(spec);
    set->policies_.push_back(std::move(p));
  }
  std::vector<std::string>& dims = set->dimensions_;
  dims.emplace_back(kRequestsDimension);
  for (const Policy& p : set->policies_) {
    for (const Limit& l : p.spec.limits)
      dims.insert(dims.end(), l.dimension().begin(), l.dimension().end());
    for (const OverrideSpec& o : p.spec.overrides) {
      for (const Limit& l : o.limits)
        dims.insert(dims.end(), l.dimension().begin(), l.dimension().end());
    }
  }
  std::sort(dims.begin(), dims.end());
  dims.erase(std::unique(dims.begin(), dims.end()), dims.end());
  return std::shared_ptr<const PolicySet>(std::move(set));
}

}  // namespace caudal

namespace caudal::engine_internal {

std::vector<std::string_view> CountedDimensions(const PolicySet::Policy& p) {
  std::vector<std::string_view> names;
  auto add = [&](const std::vector<Limit>& limits) {
    for (const Limit& l : limits) {
      if (IsConcurrency(l.algorithm())) continue;
      if (l.counts_requests()) names.push_back(kRequestsDimension);
      for (const std::string& n : l.dimension()) names.push_back(n);
    }
  };
  add(p.spec.limits);
  for (const OverrideSpec& o : p.spec.overrides) add(o.limits);
  std::sort(names.begin(), names.end());
  names.erase(std::unique(names.begin(), names.end()), names.end());
  return names;
}

}  // namespace caudal::engine_internal
