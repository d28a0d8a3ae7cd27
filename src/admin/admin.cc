#include "admin/admin.h"

#include <algorithm>

#include "algorithms/algorithm.h"
#include "common/cat.h"
#include "engine/override_fit.h"
#include "engine/plan.h"
#include "engine/store_key.h"
#include "observe/refusals.h"

namespace caudal {

using engine_internal::Check;
using engine_internal::Plan;

namespace {

namespace reason = admin_reason;

// Bad input: a caller's mistake, with the reason that names it.
Status Invalid(std::string_view why, std::string message) {
  return Status::InvalidArgument(std::move(message)).WithReason(why);
}

Status Unavailable(const Status& s) {
  return Status::Unavailable(Cat("the store did not answer: ", s.message()))
      .WithReason(reason::kStoreUnavailable);
}

std::optional<Micros> ExpiresIn(const RuntimeOverride& o, Micros now) {
  if (!o.expires_at) return std::nullopt;
  return std::max(Micros(0), *o.expires_at - now);
}

// A peek at cost 1 that consumes nothing: the store refuses a request whose one entry can never
// fit, and reports every other entry's decision as if it had been asked alone, without
// consuming it (store.h).
const Limit& NeverFits() {
  static const Limit limit =
      *Limit::Create(LimitSpec::Bucket(Algorithm::kTokenBucket, 1, {1, std::chrono::hours(1)}));
  return limit;
}

}  // namespace

struct Admin::Resolved {
  std::shared_ptr<const Engine::Snapshot> snap;
  OverrideKind kind = OverrideKind::kPolicy;
  const PolicySet::Policy* policy = nullptr;   // kPolicy
  const envoy::RateLimitRule* rule = nullptr;  // kEnvoyRule
  std::string domain;                          // kEnvoyRule: the rule's domain
  Descriptors descriptors;  // the parameters: a policy's descriptors, or the rule's entries
  std::string identity_key;
  std::vector<std::pair<std::string, std::string>> params;
};

namespace {

// The one check an admin request is about, with the plan that holds it.
struct Planned {
  Plan plan;
  const Check* check = nullptr;
};

std::vector<envoy::DescriptorEntry> EntriesOf(const Descriptors& d) {
  std::vector<envoy::DescriptorEntry> out;
  for (const Descriptor& e : d) out.push_back({e.name, e.value});
  return out;
}

// An Envoy rule by its stat key, and the domain it is in, or nullptr.
const envoy::RateLimitRule* FindRule(const Engine::Snapshot& snap, std::string_view stat_key,
                                     std::string& domain) {
  for (const auto& [rule, stats] : snap.rule_stats) {
    if (stats.name != stat_key || snap.domains == nullptr) continue;
    for (size_t dot = stat_key.find('.'); dot != std::string_view::npos;
         dot = stat_key.find('.', dot + 1)) {
      if (snap.domains->HasDomain(stat_key.substr(0, dot))) domain = stat_key.substr(0, dot);
    }
    return rule;
  }
  return nullptr;
}

Result<Planned> PlanTarget(const Admin::Resolved& r) {
  Planned out;
  if (r.kind == OverrideKind::kPolicy) {
    auto plan = engine_internal::PlanPolicies(*r.snap, {.descriptors = r.descriptors, .cost = 1});
    if (!plan.ok()) return Invalid(reason::kInvalidParameter, plan.status().message());
    out.plan = std::move(*plan);
    for (const Check& c : out.plan.checks) {
      if (c.result.policy == r.policy) out.check = &c;
    }
  } else {
    DomainRequest request{.domain = r.domain, .descriptors = {}, .hits_addend = 1};
    request.descriptors.push_back(
        {.entries = EntriesOf(r.descriptors), .hits = std::nullopt, .limit = std::nullopt});
    auto plan = engine_internal::PlanDomain(*r.snap, request);
    if (!plan.ok()) return Invalid(reason::kInvalidParameter, plan.status().message());
    out.plan = std::move(*plan);
    if (out.plan.checks.size() == 1) out.check = &out.plan.checks[0];
  }
  if (out.check == nullptr) return Invalid(reason::kInvalidParameter, "the identity is incomplete");
  return out;
}

}  // namespace

Admin::Admin(Engine& engine, OverrideStore& overrides, const Clock& clock, AdminOptions options)
    : engine_(engine), overrides_(overrides), clock_(clock), options_(options) {
  if (options_.metrics != nullptr) {
    for (std::string_view op : {"set_override", "delete_override", "reset_state"}) {
      options_.metrics->Series(MetricId::kAdminChanges, {op});
    }
  }
}

Admin::~Admin() {
  watch_.reset();
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
  watch_ = overrides_.Watch(
      {.announced = [this](std::optional<uint64_t> v) { Announced(v, false); },
       .subscribed =
           [this](bool again) {
             if (feed_down_.exchange(false) && options_.log != nullptr) {
               options_.log->Info("runtime overrides: the store's announcements are heard again");
             }
             if (again) Announced(std::nullopt, true);
           },
       .lost = [this](const Status& why) { FeedLost(why); }});
  thread_ = std::thread([this] { Loop(); });
}

void Admin::Announced(std::optional<uint64_t> version, bool resubscribed) {
  if (options_.metrics != nullptr) {
    options_.metrics->Add(resubscribed ? MetricId::kOverrideFeedReconnects
                                       : MetricId::kOverrideFeedMessages);
  }
  {
    std::lock_guard lock(mu_);
    // Coalesced: the last version announced stands for those before it (Redis keeps their
    // order); a resubscription's read, which knows none, checks the version first.
    reread_version_ = reread_ && !reread_version_ ? std::nullopt : version;
    reread_ = true;
    ++announcements_;
  }
  cv_.notify_all();
}

void Admin::FeedLost(const Status& why) {
  if (!feed_down_.exchange(true) && options_.log != nullptr) {
    options_.log->Warning(Cat("runtime overrides: the store's announcements are not heard (",
                              why.message(),
                              "): other instances' changes apply by the poll meanwhile"));
  }
}

void Admin::Reread(std::optional<uint64_t> version) {
  std::lock_guard lock(sync_mu_);
  if (version && synced_ && *version == version_) return;  // installed already (our own change)
  if (options_.metrics != nullptr) options_.metrics->Add(MetricId::kOverrideFeedRereads);
  // A version other than ours: list at once; none: read the version first.
  if (!SyncLocked(version.has_value()).ok() && options_.metrics != nullptr) {
    options_.metrics->Add(MetricId::kOverrideSyncFailures);
  }
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

// Submitted work first; then an announcement's read (once min_reread has passed since the last
// one); then the poll, when due or when an override ends.
void Admin::Loop() {
  Nanos next_poll = clock_.Monotonic() + options_.poll;
  Nanos next_reread = clock_.Monotonic();
  std::optional<Nanos> expiry_tried;  // an end a read failed at waits for the poll
  for (;;) {
    std::optional<Nanos> expiry;
    {
      std::lock_guard sync(sync_mu_);
      if (next_expiry_ != expiry_tried) expiry = next_expiry_;
    }
    std::unique_lock lock(mu_);
    Nanos wake = expiry ? std::min(next_poll, *expiry) : next_poll;
    if (reread_) wake = std::min(wake, next_reread);
    const uint64_t seen = announcements_;
    clock_.WaitUntil(cv_, lock, wake,
                     [&] { return stop_ || !queue_.empty() || announcements_ != seen; });
    if (stop_) return;
    const Nanos now = clock_.Monotonic();
    if (!queue_.empty()) {
      std::function<void()> work = std::move(queue_.front());
      queue_.pop_front();
      lock.unlock();
      work();
      continue;
    }
    if (reread_ && now >= next_reread) {
      const std::optional<uint64_t> version = std::exchange(reread_version_, std::nullopt);
      reread_ = false;
      lock.unlock();
      Reread(version);
      next_reread = clock_.Monotonic() + options_.min_reread;
      continue;
    }
    const bool ended = expiry && now >= *expiry;
    if (now < next_poll && !ended) continue;
    if (ended) expiry_tried = expiry;
    lock.unlock();
    if (Status s = Sync(); !s.ok() && options_.metrics != nullptr) {
      options_.metrics->Add(MetricId::kOverrideSyncFailures);
    }
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
  // The engine applies those that fit its policies and rules, and counts them.
  engine_.SetRuntimeOverrides(
      RuntimeOverrides::Create(std::move(overrides), engine_.policies()->options().instances));
  if (options_.on_change) options_.on_change();
  version_ = list->version;
  synced_ = true;
  return list;
}

Result<Admin::Resolved> Admin::Resolve(const AdminTarget& target) const {
  Resolved r;
  r.snap = engine_.snapshot();
  for (const PolicySet::Policy& p : r.snap->policies->policies()) {
    if (p.spec.name == target.policy) r.policy = &p;
  }
  if (r.policy == nullptr) return ResolveRule(target, std::move(r));
  const std::vector<std::string>& fields = r.policy->spec.identity;
  for (const auto& [name, value] : target.params) {
    if (std::find(fields.begin(), fields.end(), name) == fields.end()) {
      return Invalid(reason::kUnknownParameter,
                     Cat("parameter ", Quoted(name.substr(0, 100)), ": not a field of policy ",
                         Quoted(target.policy), "'s identity"));
    }
    for (const Descriptor& d : r.descriptors) {
      if (d.name == name) {
        return Invalid(
            reason::kDuplicateParameter,
            Cat("parameter ", Quoted(name), ": given twice (an identity is given once)"));
      }
    }
    if (Status s = engine_internal::ValidateValue(name, value);
        !s.ok() || value.empty() || value.size() > kMaxDescriptorValueLength) {
      return Invalid(reason::kInvalidParameter,
                     s.ok() ? Cat(name, ": expected 1 to ", kMaxDescriptorValueLength, " bytes")
                            : s.message());
    }
    r.descriptors.push_back({name, value});
  }
  for (const std::string& field : fields) {
    const bool given = std::any_of(r.descriptors.begin(), r.descriptors.end(),
                                   [&](const Descriptor& d) { return d.name == field; });
    if (!given) {
      return Invalid(reason::kMissingParameter,
                     Cat("parameter ", Quoted(field), ": missing (policy ", Quoted(target.policy),
                         " is keyed by it)"));
    }
  }
  auto key = engine_internal::EncodeIdentity(*r.policy, r.descriptors);
  if (!key.ok()) return Invalid(reason::kInvalidParameter, key.status().message());
  r.identity_key = std::move(**key);
  r.params = target.params;
  return r;
}

// An Envoy rule named by its stat key: the parameters are a descriptor's entries, in order, and
// must select that rule.
Result<Admin::Resolved> Admin::ResolveRule(const AdminTarget& target, Resolved r) const {
  r.rule = FindRule(*r.snap, target.policy, r.domain);
  if (r.rule == nullptr || r.domain.empty()) {
    return Status::NotFound(Cat("policy ", Quoted(target.policy.substr(0, 200)),
                                ": no such policy, nor an Envoy rule's stat key"))
        .WithReason(reason::kUnknownPolicy);
  }
  r.kind = OverrideKind::kEnvoyRule;
  if (target.params.empty()) {
    return Invalid(reason::kMissingParameter,
                   Cat("Envoy rule ", Quoted(target.policy),
                       ": expected its descriptor's entries as parameters, in order"));
  }
  for (const auto& [name, value] : target.params) {
    if (Status s = engine_internal::ValidateValue(name, value); !s.ok()) {
      return Invalid(reason::kInvalidParameter, s.message());
    }
    r.descriptors.push_back({name, value});
  }
  const std::vector<envoy::DescriptorEntry> entries = EntriesOf(r.descriptors);
  if (r.snap->domains->Match(r.domain, entries) != r.rule) {
    return Invalid(reason::kUnknownParameter,
                   Cat("the parameters select another rule of domain ", Quoted(r.domain), " than ",
                       Quoted(target.policy), ", or none"));
  }
  r.identity_key = engine_internal::EncodeEntries(entries);
  r.params = target.params;
  return r;
}

Result<std::pair<OverrideView, bool>> Admin::SetOverride(const AdminTarget& target,
                                                         std::vector<Limit> limits,
                                                         std::optional<Micros> expires_in,
                                                         std::string_view who,
                                                         std::optional<int64_t> weight) {
  auto r = Resolve(target);
  if (!r.ok()) return r.status();
  RuntimeOverride o{.kind = r->kind,
                    .policy = target.policy,
                    .identity = r->params,
                    .identity_key = r->identity_key,
                    .limits = std::move(limits),
                    .weight = weight,
                    .expires_at = {},
                    .set_by = std::string(who)};
  // The check every install makes again (a poll, a reload): what is refused here would not apply.
  if (auto problem = engine_internal::OverrideFit(*r->snap).Check(o)) {
    return Invalid(problem->field.starts_with("limits") ? reason::kInvalidLimits
                   : problem->field == "weight"         ? reason::kInvalidWeight
                                                        : reason::kInvalidParameter,
                   Cat(problem->field, ": ", problem->message));
  }
  const std::string id = OverrideId(o);
  std::lock_guard lock(sync_mu_);
  auto put = overrides_.Put(id, EncodeOverride(o), expires_in, options_.max_overrides);
  if (!put.ok()) {
    if (put.status().code() == StatusCode::kResourceExhausted) {
      return Status::ResourceExhausted(
                 Cat(options_.max_overrides,
                     " runtime overrides are held across all policies: delete some first"))
          .WithReason(reason::kTooManyOverrides);
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
  if (o.weight) limits_text += Cat(limits_text.empty() ? "" : "; ", "weight ", *o.weight);
  Changed(
      "set_override",
      Cat("admin: ", *put ? "set" : "replaced", " the runtime override of policy ",
          Quoted(o.policy), " identity ", Shown(o.identity), ": ", limits_text,
          expires_in ? Cat(", for ", expires_in->count() / 1000, " ms") : "", " (by ", who, ')'));
  return std::pair(std::move(view), *put);
}

OverrideKind Admin::KindOf(std::string_view policy) const {
  const auto snap = engine_.snapshot();
  for (const PolicySet::Policy& p : snap->policies->policies()) {
    if (p.spec.name == policy) return OverrideKind::kPolicy;
  }
  std::string domain;
  return FindRule(*snap, policy, domain) != nullptr ? OverrideKind::kEnvoyRule
                                                    : OverrideKind::kPolicy;
}

Result<std::vector<OverrideView>> Admin::ListOverrides(std::string_view policy) {
  const auto snap = engine_.snapshot();
  const auto policies = snap->policies->policies();
  OverrideKind kind = OverrideKind::kPolicy;
  std::string domain;
  if (std::none_of(policies.begin(), policies.end(),
                   [&](const PolicySet::Policy& p) { return p.spec.name == policy; })) {
    if (FindRule(*snap, policy, domain) == nullptr) {
      return Status::NotFound(Cat("policy ", Quoted(policy.substr(0, 200)),
                                  ": no such policy, nor an Envoy rule's stat key"))
          .WithReason(reason::kUnknownPolicy);
    }
    kind = OverrideKind::kEnvoyRule;
  }
  auto list = overrides_.List();
  if (!list.ok()) return Unavailable(list.status());
  std::vector<OverrideView> out;
  for (const OverrideRecord& r : list->records) {
    auto o = DecodeOverride(r.body, r.expires_at);
    if (!o.ok() || o->kind != kind || o->policy != policy) continue;
    OverrideView view{.spec = std::move(*o), .expires_in = {}};
    view.expires_in = ExpiresIn(view.spec, list->now);
    out.push_back(std::move(view));
  }
  std::sort(out.begin(), out.end(), [](const OverrideView& a, const OverrideView& b) {
    return a.spec.identity < b.spec.identity;
  });
  return out;
}

Result<OverrideView> Admin::DeleteOverride(const AdminTarget& target, std::string_view who) {
  auto r = Resolve(target);
  if (!r.ok()) return r.status();
  RuntimeOverride key{.kind = r->kind,
                      .policy = target.policy,
                      .identity = {},
                      .identity_key = r->identity_key,
                      .limits = {},
                      .weight = {},
                      .expires_at = {},
                      .set_by = {}};
  std::lock_guard lock(sync_mu_);
  auto removed = overrides_.Delete(OverrideId(key));
  if (!removed.ok()) return Unavailable(removed.status());
  if (!removed->has_value()) {
    return Status::NotFound(Cat("policy ", Quoted(target.policy), " has no runtime override for ",
                                Shown(r->params)))
        .WithReason(reason::kNoOverride);
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

Result<StateView> Admin::ReadState(const Resolved& r) {
  auto planned = PlanTarget(r);
  if (!planned.ok()) return planned.status();
  const Check* check = planned->check;
  StateView view{.policy = std::string(check->result.name),
                 .kind = r.kind,
                 .identity = r.params,
                 .limits_from = engine_internal::LimitsFromName(*check),
                 .limits = {}};
  if (r.kind == OverrideKind::kEnvoyRule) view.policy = check->stat_name;
  if (check->keys.empty()) return view;  // unlimited: nothing is counted
  // The guard takes the first key's hash tag: one Redis Cluster slot for the whole request.
  const std::string_view tag = store_key::HashTag(check->keys[0]);
  const std::string guard =
      Cat("caudal:admin-peek:", tag.empty() ? Cat('{', r.identity_key, '}') : std::string(tag));
  std::vector<ConsumeEntry> entries;
  for (size_t k = 0; k < check->keys.size(); ++k) {
    // A concurrency slot is taken under a hold id only: a peek of it costs nothing.
    entries.push_back(
        {.key = check->keys[k], .limit = check->result.limits[k], .cost = check->slots[k] ? 0 : 1});
  }
  entries.push_back({.key = guard, .limit = &NeverFits(), .cost = 2});
  auto decided = engine_.store().Decide({.consumes = entries});
  if (!decided.ok()) return Unavailable(decided.status());
  for (size_t k = 0; k < check->keys.size(); ++k) {
    const Decision& d = decided->decisions[k];
    LimitState state{.limit = *check->result.limits[k],
                     .remaining = d.remaining,
                     .reset_after = d.reset_after,
                     .retry_after = d.allowed() ? Micros(0) : d.retry_after};
    state.shared = check->shared != nullptr;
    if (check->shared != nullptr && options_.held_share != nullptr) {
      if (auto held = options_.held_share(check->keys[k], check->shared->identity)) {
        state.share = held->allocation;
        state.share_held = held->held;
      }
    }
    view.limits.push_back(state);
  }
  if (r.kind == OverrideKind::kPolicy && options_.held_rlqs != nullptr) {
    view.rlqs = options_.held_rlqs(view.policy, r.params);
  }
  return view;
}

Result<StateView> Admin::GetState(const AdminTarget& target) {
  auto r = Resolve(target);
  if (!r.ok()) return r.status();
  return ReadState(*r);
}

Result<StateView> Admin::ResetState(const AdminTarget& target, std::string_view who) {
  auto r = Resolve(target);
  if (!r.ok()) return r.status();
  auto planned = PlanTarget(*r);
  if (!planned.ok()) return planned.status();
  const Check& c = *planned->check;
  std::vector<RefundEntry> entries;
  // A refund gives back what was consumed, never past a fresh state: the largest is a reset. The
  // key's reservations go with it, in the same step: none gives back, is settled or holds a slot
  // after it.
  for (size_t k = 0; k < c.keys.size(); ++k) {
    // Held slots are not state: they come back by their release or at their hold's end, so a
    // reset never lets more requests run at once than the limit.
    if (c.slots[k]) continue;
    entries.push_back({.key = c.keys[k],
                       .limit = c.result.limits[k],
                       .cost = kMaxCost,
                       .forget_reservations = true});
  }
  if (entries.empty()) return ReadState(*r);  // unlimited: nothing to reset
  if (auto done = engine_.store().Decide({.refunds = entries}); !done.ok()) {
    return Unavailable(done.status());
  }
  engine_.ForgetRefusals();
  if (options_.on_change) options_.on_change();
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
  return engine_internal::ShownIdentity(identity, options_.refusals);
}

}  // namespace caudal
