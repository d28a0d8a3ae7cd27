#include "caudal/engine/admin.h"

#include <algorithm>

#include "caudal/engine/refusals.h"
#include "common/cat.h"
#include "engine/plan.h"

namespace caudal {

using engine_internal::Check;
using engine_internal::Plan;

std::string_view AdminErrorCode(AdminError e) {
  switch (e) {
    case AdminError::kUnknownPolicy:
      return "unknown_policy";
    case AdminError::kMissingParameter:
      return "missing_parameter";
    case AdminError::kUnknownParameter:
      return "unknown_parameter";
    case AdminError::kDuplicateParameter:
      return "duplicate_parameter";
    case AdminError::kInvalidParameter:
      return "invalid_parameter";
    case AdminError::kInvalidLimits:
      return "invalid_limits";
    case AdminError::kNoOverride:
      return "no_override";
    case AdminError::kTooManyOverrides:
      return "too_many_overrides";
    case AdminError::kUnavailable:
      return "store_unavailable";
  }
  return "invalid_request";
}

int AdminErrorStatus(AdminError e) {
  switch (e) {
    case AdminError::kUnknownPolicy:
    case AdminError::kNoOverride:
      return 404;
    case AdminError::kTooManyOverrides:
      return 409;
    case AdminError::kUnavailable:
      return 503;
    default:
      return 400;
  }
}

namespace {

AdminFailure Fail(AdminError e, std::string message) { return {e, std::move(message)}; }

AdminFailure Unavailable(const Status& s) {
  return Fail(AdminError::kUnavailable, Cat("the store did not answer: ", s.message()));
}

std::optional<Micros> ExpiresIn(const RuntimeOverride& o, Micros now) {
  if (!o.expires_at) return std::nullopt;
  return std::max(Micros(0), *o.expires_at - now);
}

// A peek at cost 1 that consumes nothing: the store refuses a request whose one entry can never
// fit, and reports every other entry's decision as if it had been asked alone, without
// consuming it (store.h). Its key shares the identity's hash tag, so one Cluster slot serves all.
const Limit& NeverFits() {
  static const Limit limit =
      *Limit::Create(LimitSpec::Bucket(Algorithm::kTokenBucket, 1, {1, std::chrono::hours(1)}));
  return limit;
}

}  // namespace

struct Admin::Resolved {
  std::shared_ptr<const Engine::Snapshot> snap;
  const PolicySet::Policy* policy = nullptr;
  Descriptors descriptors;
  std::string identity_key;
  std::vector<std::pair<std::string, std::string>> params;
};

Admin::Admin(Engine& engine, OverrideStore& overrides, const Clock& clock, AdminOptions options)
    : engine_(engine), overrides_(overrides), clock_(clock), options_(options) {
  if (options_.metrics != nullptr) {
    for (std::string_view op : {"set_override", "delete_override", "reset_state"}) {
      options_.metrics->Series(MetricId::kAdminChanges, {op});
    }
  }
}

Admin::~Admin() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void Admin::Start() {
  if (Status s = Sync(); !s.ok() && options_.log != nullptr) {
    options_.log->Warning(Cat("runtime overrides: cannot read them yet: ", s.message()));
  }
  thread_ = std::thread([this] { Loop(); });
}

bool Admin::Submit(std::function<void()> work) {
  {
    std::lock_guard lock(mu_);
    if (stop_ || queue_.size() >= options_.max_queued) return false;
    queue_.push_back(std::move(work));
  }
  cv_.notify_all();
  return true;
}

void Admin::Loop() {
  std::unique_lock lock(mu_);
  Nanos next_poll = clock_.Monotonic() + options_.poll;
  while (!stop_) {
    clock_.WaitUntil(cv_, lock, next_poll, [this] { return stop_ || !queue_.empty(); });
    if (stop_) return;
    if (!queue_.empty()) {
      std::function<void()> work = std::move(queue_.front());
      queue_.pop_front();
      lock.unlock();
      work();
      lock.lock();
      continue;
    }
    lock.unlock();
    if (Status s = Sync(); !s.ok() && options_.metrics != nullptr) {
      options_.metrics->Add(MetricId::kOverrideSyncFailures);
    }
    lock.lock();
    next_poll = clock_.Monotonic() + options_.poll;
  }
}

Status Admin::Sync() {
  std::lock_guard lock(sync_mu_);
  return SyncLocked(false).status();
}

Result<OverrideList> Admin::SyncLocked(bool force) {
  if (!force && synced_) {
    auto version = overrides_.Version();
    if (!version.ok()) return version.status();
    const bool expired = next_expiry_ && clock_.Monotonic() >= *next_expiry_;
    if (*version == version_ && !expired)
      return OverrideList{.version = version_, .now = {}, .records = {}};
  }
  auto list = overrides_.List();
  if (!list.ok()) return list.status();
  std::vector<RuntimeOverride> overrides;
  std::optional<Micros> first_end;
  for (const OverrideRecord& r : list->records) {
    auto o = DecodeOverride(r.body, r.expires_at);
    if (!o.ok()) {
      if (options_.log != nullptr) {
        options_.log->Warning(Cat("runtime overrides: skipping a record: ", o.status().message()));
      }
      continue;
    }
    if (r.expires_at) first_end = std::min(first_end.value_or(*r.expires_at), *r.expires_at);
    overrides.push_back(std::move(*o));
  }
  next_expiry_.reset();
  if (first_end) next_expiry_ = clock_.Monotonic() + (*first_end - list->now);
  const size_t count = overrides.size();
  engine_.SetRuntimeOverrides(
      RuntimeOverrides::Create(std::move(overrides), engine_.policies()->options().instances));
  if (options_.metrics != nullptr) options_.metrics->Set(MetricId::kRuntimeOverrides, count);
  version_ = list->version;
  synced_ = true;
  return list;
}

AdminResult<Admin::Resolved> Admin::Resolve(const AdminTarget& target) const {
  Resolved r;
  r.snap = engine_.snapshot();
  for (const PolicySet::Policy& p : r.snap->policies->policies()) {
    if (p.spec.name == target.policy) r.policy = &p;
  }
  if (r.policy == nullptr) {
    return Fail(AdminError::kUnknownPolicy,
                Cat("policy ", Quoted(target.policy.substr(0, 200)), ": no such policy"));
  }
  const std::vector<std::string>& fields = r.policy->spec.identity;
  for (const auto& [name, value] : target.params) {
    if (std::find(fields.begin(), fields.end(), name) == fields.end()) {
      return Fail(AdminError::kUnknownParameter,
                  Cat("parameter ", Quoted(name.substr(0, 100)), ": not a field of policy ",
                      Quoted(target.policy), "'s identity"));
    }
    for (const Descriptor& d : r.descriptors) {
      if (d.name == name) {
        return Fail(AdminError::kDuplicateParameter,
                    Cat("parameter ", Quoted(name), ": given twice (an identity is given once)"));
      }
    }
    if (Status s = engine_internal::ValidateValue(name, value);
        !s.ok() || value.empty() || value.size() > kMaxDescriptorValueLength) {
      return Fail(AdminError::kInvalidParameter,
                  s.ok() ? Cat(name, ": expected 1 to ", kMaxDescriptorValueLength, " bytes")
                         : s.message());
    }
    r.descriptors.push_back({name, value});
  }
  for (const std::string& field : fields) {
    const bool given = std::any_of(r.descriptors.begin(), r.descriptors.end(),
                                   [&](const Descriptor& d) { return d.name == field; });
    if (!given) {
      return Fail(AdminError::kMissingParameter,
                  Cat("parameter ", Quoted(field), ": missing (policy ", Quoted(target.policy),
                      " is keyed by it)"));
    }
  }
  auto key = engine_internal::EncodeIdentity(*r.policy, r.descriptors);
  if (!key.ok()) return Fail(AdminError::kInvalidParameter, key.status().message());
  r.identity_key = std::move(**key);
  r.params = target.params;
  return r;
}

AdminResult<std::pair<OverrideView, bool>> Admin::SetOverride(const AdminTarget& target,
                                                              std::vector<Limit> limits,
                                                              std::optional<Micros> expires_in,
                                                              std::string_view who) {
  auto r = Resolve(target);
  if (!r.ok()) return r.failure();
  if (auto e = ValidateOverrideLimits(r->policy->spec, r->snap->policies->options(), limits)) {
    return Fail(AdminError::kInvalidLimits, Cat("limits", e->field, ": ", e->status.message()));
  }
  RuntimeOverride o{.kind = OverrideKind::kPolicy,
                    .policy = target.policy,
                    .identity = r->params,
                    .identity_key = r->identity_key,
                    .limits = std::move(limits),
                    .expires_at = {},
                    .set_by = std::string(who)};
  const std::string id = OverrideId(o);
  std::lock_guard lock(sync_mu_);
  auto put = overrides_.Put(id, EncodeOverride(o), expires_in, options_.max_overrides);
  if (!put.ok()) {
    if (put.status().code() == StatusCode::kResourceExhausted) {
      return Fail(AdminError::kTooManyOverrides,
                  Cat(options_.max_overrides,
                      " runtime overrides are held across all policies: delete some first"));
    }
    return Unavailable(put.status());
  }
  OverrideView view{.spec = o, .expires_in = expires_in};
  auto list = SyncLocked(true);
  if (list.ok()) {
    for (const OverrideRecord& rec : list->records) {
      if (rec.id != id) continue;
      view.spec.expires_at = rec.expires_at;
      view.expires_in = ExpiresIn(view.spec, list->now);
    }
  }
  std::string limits_text;
  for (const Limit& l : o.limits) limits_text += Cat(limits_text.empty() ? "" : "; ", l.ToString());
  Changed(
      "set_override",
      Cat("admin: ", *put ? "set" : "replaced", " the runtime override of policy ",
          Quoted(o.policy), " identity ", Shown(o.identity), ": ", limits_text,
          expires_in ? Cat(", for ", expires_in->count() / 1000, " ms") : "", " (by ", who, ')'));
  return std::pair(std::move(view), *put);
}

AdminResult<std::vector<OverrideView>> Admin::ListOverrides(std::string_view policy) {
  const auto snap = engine_.snapshot();
  const auto policies = snap->policies->policies();
  if (std::none_of(policies.begin(), policies.end(),
                   [&](const PolicySet::Policy& p) { return p.spec.name == policy; })) {
    return Fail(AdminError::kUnknownPolicy,
                Cat("policy ", Quoted(policy.substr(0, 200)), ": no such policy"));
  }
  auto list = overrides_.List();
  if (!list.ok()) return Unavailable(list.status());
  std::vector<OverrideView> out;
  for (const OverrideRecord& r : list->records) {
    auto o = DecodeOverride(r.body, r.expires_at);
    if (!o.ok() || o->kind != OverrideKind::kPolicy || o->policy != policy) continue;
    OverrideView view{.spec = std::move(*o), .expires_in = {}};
    view.expires_in = ExpiresIn(view.spec, list->now);
    out.push_back(std::move(view));
  }
  std::sort(out.begin(), out.end(), [](const OverrideView& a, const OverrideView& b) {
    return a.spec.identity < b.spec.identity;
  });
  return out;
}

AdminResult<OverrideView> Admin::DeleteOverride(const AdminTarget& target, std::string_view who) {
  auto r = Resolve(target);
  if (!r.ok()) return r.failure();
  RuntimeOverride key{.kind = OverrideKind::kPolicy,
                      .policy = target.policy,
                      .identity = {},
                      .identity_key = r->identity_key,
                      .limits = {},
                      .expires_at = {},
                      .set_by = {}};
  std::lock_guard lock(sync_mu_);
  auto removed = overrides_.Delete(OverrideId(key));
  if (!removed.ok()) return Unavailable(removed.status());
  if (!removed->has_value()) {
    return Fail(AdminError::kNoOverride, Cat("policy ", Quoted(target.policy),
                                             " has no runtime override for ", Shown(r->params)));
  }
  auto o = DecodeOverride((*removed)->body, (*removed)->expires_at);
  (void)SyncLocked(true);
  OverrideView view{.spec = o.ok() ? std::move(*o) : key, .expires_in = {}};
  view.expires_in = ExpiresIn(view.spec, std::chrono::duration_cast<Micros>(clock_.Now()));
  Changed("delete_override",
          Cat("admin: deleted the runtime override of policy ", Quoted(target.policy), " identity ",
              Shown(r->params), " (by ", who, ')'));
  return view;
}

AdminResult<StateView> Admin::ReadState(const Resolved& r) {
  auto plan = engine_internal::PlanPolicies(*r.snap, {.descriptors = r.descriptors, .cost = 1});
  if (!plan.ok()) return Fail(AdminError::kInvalidParameter, plan.status().message());
  const Check* check = nullptr;
  for (const Check& c : plan->checks) {
    if (c.result.policy == r.policy) check = &c;
  }
  if (check == nullptr) return Fail(AdminError::kInvalidParameter, "the identity is incomplete");
  const std::string guard = Cat("caudal:admin-peek:{", r.identity_key, '}');
  std::vector<EntryRef> entries;
  for (size_t k = 0; k < check->keys.size(); ++k) {
    entries.push_back({.key = check->keys[k], .limit = check->result.limits[k], .cost = 1});
  }
  entries.push_back({.key = guard, .limit = &NeverFits(), .cost = 2});
  auto decided = engine_.store().Decide(entries);
  if (!decided.ok()) return Unavailable(decided.status());
  StateView view{.policy = r.policy->spec.name,
                 .identity = r.params,
                 .limits_from = engine_internal::LimitsFromName(*check),
                 .limits = {}};
  for (size_t k = 0; k < check->keys.size(); ++k) {
    const Decision& d = decided->decisions[k];
    view.limits.push_back({.limit = *check->result.limits[k],
                           .remaining = d.remaining,
                           .reset_after = d.reset_after,
                           .retry_after = d.allowed() ? Micros(0) : d.retry_after});
  }
  return view;
}

AdminResult<StateView> Admin::GetState(const AdminTarget& target) {
  auto r = Resolve(target);
  if (!r.ok()) return r.failure();
  return ReadState(*r);
}

AdminResult<StateView> Admin::ResetState(const AdminTarget& target, std::string_view who) {
  auto r = Resolve(target);
  if (!r.ok()) return r.failure();
  auto plan = engine_internal::PlanPolicies(*r->snap, {.descriptors = r->descriptors, .cost = 1});
  if (!plan.ok()) return Fail(AdminError::kInvalidParameter, plan.status().message());
  std::vector<EntryRef> entries;
  for (const Check& c : plan->checks) {
    if (c.result.policy != r->policy) continue;
    // A refund gives back what was consumed, never past a fresh state: the largest is a reset.
    for (size_t k = 0; k < c.keys.size(); ++k) {
      entries.push_back({.key = c.keys[k],
                         .limit = c.result.limits[k],
                         .cost = kMaxCost,
                         .op = EntryOp::kRefund});
    }
  }
  if (entries.empty()) return Fail(AdminError::kInvalidParameter, "the identity is incomplete");
  if (auto done = engine_.store().Decide(entries); !done.ok()) return Unavailable(done.status());
  engine_.ForgetRefusals();
  if (Status s = overrides_.Touch(); !s.ok() && options_.log != nullptr) {
    options_.log->Warning(
        Cat("admin: the other instances may remember refusals of the reset "
            "identity until they expire: ",
            s.message()));
  }
  Changed("reset_state", Cat("admin: reset the state of policy ", Quoted(target.policy),
                             " identity ", Shown(r->params), " (by ", who, ')'));
  return ReadState(*r);
}

void Admin::Changed(std::string_view op, std::string message) const {
  if (options_.metrics != nullptr) {
    options_.metrics->Series(MetricId::kAdminChanges, {op}).fetch_add(1, std::memory_order_relaxed);
  }
  if (options_.log != nullptr) options_.log->Info(message);
}

std::string Admin::Shown(const std::vector<std::pair<std::string, std::string>>& identity) const {
  std::string joined;
  for (const auto& [name, value] : identity) {
    joined += Cat(joined.empty() ? "" : ",", name, '=', value);
  }
  if (options_.refusals != nullptr) return options_.refusals->Display(joined);
  return Cat("(", identity.size(), " values, not shown)");
}

}  // namespace caudal
