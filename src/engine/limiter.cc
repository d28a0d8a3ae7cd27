#include "caudal/limiter.h"

#include <algorithm>
#include <future>
#include <utility>

#include "caudal/ip.h"
#include "engine/log_throttle.h"
#include "engine/request_keys.h"

namespace caudal {

__extension__ typedef __int128 Wide;

struct Limiter::Snapshot {
  std::shared_ptr<const PolicySet> set;
  std::vector<PolicyCounters*> counters;  // parallel to set->policies(); null without metrics
};

std::string_view DecidedByName(DecidedBy d) {
  switch (d) {
    case DecidedBy::kStore: return "store";
    case DecidedBy::kLocal: return "local";
    case DecidedBy::kFailOpen: return "fail_open";
    case DecidedBy::kFailClosed: return "fail_closed";
  }
  return "unknown";
}

std::string_view OutcomeName(Outcome o) {
  switch (o) {
    case Outcome::kAllowed: return "allowed";
    case Outcome::kDenied: return "denied";
    case Outcome::kUnavailable: return "unavailable";
  }
  return "unknown";
}

int PolicyResult::Tightest() const {
  int best = -1;
  // Compare remaining/limit as fractions without division: a/b < c/d  <=>  a·d < c·b (all ≤ 2^40).
  auto tighter = [](const Decision& x, const Decision& y) {
    if (x.allowed() != y.allowed()) return !x.allowed();
    const Wide lhs = static_cast<Wide>(x.remaining) * y.limit;
    const Wide rhs = static_cast<Wide>(y.remaining) * x.limit;
    return lhs < rhs;
  };
  for (size_t i = 0; i < limits.size(); ++i) {
    if (best < 0 || tighter(limits[i], limits[static_cast<size_t>(best)])) {
      best = static_cast<int>(i);
    }
  }
  return best;
}

std::vector<const PolicyResult*> CheckResult::Refused() const {
  std::vector<const PolicyResult*> out;
  for (const PolicyResult& r : results) {
    if (!r.allowed && !r.policy->shadow()) out.push_back(&r);
  }
  return out;
}

const PolicyResult* CheckResult::ClosestToLimit(int* limit_index) const {
  const PolicyResult* best = nullptr;
  int best_limit = -1;
  for (const PolicyResult& r : results) {
    if (r.policy->shadow()) continue;
    const int t = r.Tightest();
    if (t < 0) continue;
    const Decision& d = r.limits[static_cast<size_t>(t)];
    if (best != nullptr) {
      const Decision& b = best->limits[static_cast<size_t>(best_limit)];
      const bool tighter =
          d.allowed() != b.allowed()
              ? !d.allowed()
              : static_cast<Wide>(d.remaining) * b.limit <
                    static_cast<Wide>(b.remaining) * d.limit;
      if (!tighter) continue;
    }
    best = &r;
    best_limit = t;
  }
  if (limit_index != nullptr) *limit_index = best_limit;
  return best;
}

// One decision in flight: owns its keys and results; kept alive by the store callbacks.
class Limiter::Operation : public std::enable_shared_from_this<Operation> {
 public:
  Operation(Limiter& limiter, std::shared_ptr<const Snapshot> snap, CheckCallback done)
      : limiter_(limiter), snap_(std::move(snap)), done_(std::move(done)),
        start_(limiter.clock_.Now()) {}

  Status Prepare(const CheckRequest& request) {
    auto applicable = ResolveApplicable(*snap_->set, request);
    if (!applicable.ok()) return applicable.status();
    items_ = std::move(applicable).value();
    return Status::Ok();
  }

  void Abort(Status s) { Complete(std::move(s)); }

  void Run() {
    if (std::none_of(items_.begin(), items_.end(), [](const ApplicableItem& it) {
          return !it.policy->shadow();
        })) {
      RunSecondary(/*admitted=*/true);
      return;
    }
    std::vector<EntryRef> entries;
    entries.reserve(items_.size() * 2);
    enforced_owners_.reserve(items_.size() * 2);
    for (size_t i = 0; i < items_.size(); ++i) {
      if (items_[i].policy->shadow()) continue;
      AppendEntries(i, /*local=*/false, items_[i].cost, entries, enforced_owners_);
    }
    sent_ = limiter_.clock_.Now();
    // The callback captures `this` alone, which std::function stores inline (a shared_ptr would
    // cost an allocation); the operation keeps itself alive until the store answers.
    self_ = shared_from_this();
    limiter_.store_.DecideAsync(entries, [this](Result<StoreResponse> r) {
      const std::shared_ptr<Operation> self = std::move(self_);
      ObserveStore(sent_, r.status());
      OnEnforced(std::move(r), enforced_owners_);
    });
  }

 private:
  void AppendEntries(size_t item, bool local, int64_t cost, std::vector<EntryRef>& entries,
                     std::vector<size_t>& owners) {
    const ApplicableItem& it = items_[item];
    const auto& keys = local ? it.local_keys : it.keys;
    const auto& limits = local ? it.policy->local_limits : it.policy->spec.limits;
    for (size_t k = 0; k < keys.size(); ++k) {
      entries.push_back({.key = keys[k], .limit = &limits[k], .cost = cost});
      owners.push_back(item);
    }
  }

  // Copies the store's decisions into the items they belong to, in entry order.
  void Distribute(const StoreResponse& resp, const std::vector<size_t>& owners, DecidedBy by) {
    // An item's entries are contiguous: the first one resets what an earlier step reported.
    for (size_t e = 0; e < owners.size() && e < resp.decisions.size(); ++e) {
      PolicyResult& r = items_[owners[e]].result;
      if (e == 0 || owners[e] != owners[e - 1]) {
        r.limits.clear();
        r.decided_by = by;
      }
      r.limits.push_back(resp.decisions[e]);
      r.allowed = std::all_of(r.limits.begin(), r.limits.end(),
                              [](const Decision& d) { return d.allowed(); });
    }
  }

  void ObserveStore(Nanos sent, const Status& s) {
    if (limiter_.options_.metrics == nullptr) return;
    limiter_.options_.metrics->ObserveStore(
        std::chrono::duration_cast<Micros>(limiter_.clock_.Now() - sent));
    if (!s.ok()) limiter_.options_.metrics->CountStoreError(s.code());
  }

  void OnEnforced(Result<StoreResponse> r, const std::vector<size_t>& owners) {
    if (r.ok()) {
      limiter_.NoteStoreHealth(Status::Ok(), *snap_->set);
      Distribute(*r, owners, DecidedBy::kStore);
      RunSecondary(r->allowed);
      return;
    }
    if (r.status().code() == StatusCode::kInvalidArgument) {
      Complete(r.status());
      return;
    }
    limiter_.NoteStoreHealth(r.status(), *snap_->set);
    FailOver();
  }

  // The store failed: each enforced policy follows its failure mode.
  void FailOver() {
    std::vector<EntryRef> entries;
    std::vector<size_t> owners;
    for (size_t i = 0; i < items_.size(); ++i) {
      ApplicableItem& it = items_[i];
      it.result.limits.clear();
      if (it.policy->shadow()) {
        it.result.decided_by = DecidedBy::kFailOpen;
        continue;
      }
      switch (it.policy->on_failure) {
        case FailureMode::kAllow:
          it.result.decided_by = DecidedBy::kFailOpen;
          break;
        case FailureMode::kDeny:
          it.result.decided_by = DecidedBy::kFailClosed;
          it.result.allowed = false;
          break;
        case FailureMode::kLocal:
          it.result.decided_by = DecidedBy::kLocal;
          BuildLocalKeys(it);
          AppendEntries(i, /*local=*/true, it.cost, entries, owners);
          break;
      }
    }
    Store* local = limiter_.options_.local_store;
    if (entries.empty() || local == nullptr) {
      Finish();
      return;
    }
    local->DecideAsync(entries, [self = shared_from_this(),
                                 owners = std::move(owners)](Result<StoreResponse> r) {
      if (r.ok()) {
        self->Distribute(*r, owners, DecidedBy::kLocal);
      } else {
        // The local table is full or the request is malformed for it: fail closed.
        for (size_t o : owners) {
          self->items_[o].result.allowed = false;
          self->items_[o].result.decided_by = DecidedBy::kFailClosed;
        }
      }
      self->Finish();
    });
  }

  // After the enforced decision: charge shadow policies (admitted) or count_rejected ones.
  void RunSecondary(bool admitted) {
    std::vector<size_t> todo;
    for (size_t i = 0; i < items_.size(); ++i) {
      const ApplicableItem& it = items_[i];
      if (it.policy->shadow() ||
          (!admitted && it.policy->spec.count_rejected == RejectedCounting::kCounted)) {
        todo.push_back(i);
      }
    }
    if (todo.empty()) {
      Finish();
      return;
    }
    pending_.store(todo.size(), std::memory_order_release);
    for (size_t i : todo) {
      const bool shadow = items_[i].policy->shadow();
      const int64_t cost = shadow && !admitted ? 0 : items_[i].cost;
      std::vector<EntryRef> entries;
      std::vector<size_t> owners;
      AppendEntries(i, /*local=*/false, cost, entries, owners);
      const Nanos sent = limiter_.clock_.Now();
      limiter_.store_.DecideAsync(entries, [self = shared_from_this(), i, shadow, sent,
                                            owners = std::move(owners)](Result<StoreResponse> r) {
        self->ObserveStore(sent, r.status());
        // A count_rejected charge changes no verdict; a shadow decision is reported as made.
        if (r.ok() && shadow) self->Distribute(*r, owners, DecidedBy::kStore);
        if (!r.ok() && shadow) self->items_[i].result.decided_by = DecidedBy::kFailOpen;
        if (self->pending_.fetch_sub(1, std::memory_order_acq_rel) == 1) self->Finish();
      });
    }
  }

  void BuildLocalKeys(ApplicableItem& it) {
    it.local_keys.clear();
    for (const std::string& prefix : it.policy->local_key_prefixes) {
      it.local_keys.push_back(prefix + it.identity);
    }
  }

  void Finish() {
    CheckResult out;
    out.policies = snap_->set;
    Micros retry{0};
    bool closed = false;
    bool denied = false;
    for (ApplicableItem& it : items_) {
      PolicyResult& r = it.result;
      if (r.decided_by != DecidedBy::kStore) out.degraded = true;
      if (!r.policy->shadow() && !r.allowed) {
        if (r.decided_by == DecidedBy::kFailClosed) closed = true;
        denied = true;
        for (const Decision& d : r.limits) {
          if (d.verdict == Verdict::kDenied) retry = std::max(retry, d.retry_after);
          if (d.verdict == Verdict::kNeverFits) retry = std::max(retry, d.reset_after);
        }
      }
    }
    out.outcome = closed ? Outcome::kUnavailable : denied ? Outcome::kDenied : Outcome::kAllowed;
    if (out.outcome == Outcome::kDenied) out.retry_after = retry;
    CountMetrics();
    out.results.reserve(items_.size());
    for (ApplicableItem& it : items_) out.results.push_back(std::move(it.result));
    Complete(std::move(out));
  }

  void CountMetrics() {
    for (const ApplicableItem& it : items_) {
      PolicyCounters* c = snap_->counters[it.index];
      if (c == nullptr) continue;
      const PolicyResult& r = it.result;
      switch (r.decided_by) {
        case DecidedBy::kFailOpen:
          if (!r.policy->shadow()) c->fail_open.fetch_add(1, std::memory_order_relaxed);
          continue;
        case DecidedBy::kFailClosed: c->fail_closed.fetch_add(1, std::memory_order_relaxed); continue;
        case DecidedBy::kLocal: c->local.fetch_add(1, std::memory_order_relaxed); break;
        case DecidedBy::kStore: break;
      }
      (r.allowed ? c->allowed : c->denied).fetch_add(1, std::memory_order_relaxed);
      if (r.policy->shadow() && !r.allowed) {
        c->shadow_denied.fetch_add(1, std::memory_order_relaxed);
      }
    }
  }

  void Complete(Result<CheckResult> r) {
    if (limiter_.options_.metrics != nullptr && r.ok()) {
      limiter_.options_.metrics->ObserveDecision(
          std::chrono::duration_cast<Micros>(limiter_.clock_.Now() - start_));
    }
    if (limiter_.options_.log != nullptr && r.ok()) LogShadowDenials(*r);
    CheckCallback done = std::move(done_);
    done(std::move(r));
  }

  void LogShadowDenials(const CheckResult& r) {
    for (const PolicyResult& p : r.results) {
      if (p.policy->shadow() && !p.allowed && p.decided_by == DecidedBy::kStore) {
        const std::string& name = p.policy->spec.name;
        const std::optional<uint64_t> held_back = limiter_.shadow_log_->Admit(name);
        if (!held_back) continue;
        std::string line = "shadow policy \"" + name +
                           "\" would have refused a request (allowed: shadow)";
        if (*held_back > 0) {
          line += "; " + std::to_string(*held_back) + " such lines held back since the last one";
        }
        limiter_.options_.log->Info(line);
      }
    }
  }

  Limiter& limiter_;
  std::shared_ptr<const Snapshot> snap_;
  CheckCallback done_;
  Nanos start_;
  std::vector<ApplicableItem> items_;
  std::vector<size_t> enforced_owners_;  // store entry → item, for the enforced request
  Nanos sent_{0};
  std::atomic<size_t> pending_{0};
  std::shared_ptr<Operation> self_;  // while the enforced request is at the store
};

Limiter::Limiter(Store& store, const Clock& clock, LimiterOptions options)
    : store_(store), clock_(clock), options_(options),
      shadow_log_(std::make_unique<LogThrottle>(clock, LogThrottleOptions{})) {
  auto empty = PolicySet::Create({}, {});
  snapshot_.store(std::make_shared<const Snapshot>(Snapshot{.set = *empty, .counters = {}}));
}

Limiter::~Limiter() = default;

Status Limiter::SetPolicies(std::shared_ptr<const PolicySet> set) {
  if (set == nullptr) return Status::InvalidArgument("no policy set");
  Snapshot snap{.set = set, .counters = {}};
  for (const PolicySet::Policy& p : set->policies()) {
    if (p.on_failure == FailureMode::kLocal && options_.local_store == nullptr) {
      return Status::InvalidArgument("policy \"" + p.spec.name +
                                     "\" fails over to local, but no local store is configured");
    }
    snap.counters.push_back(options_.metrics ? &options_.metrics->ForPolicy(p.spec.name)
                                             : nullptr);
  }
  snapshot_.store(std::make_shared<const Snapshot>(std::move(snap)), std::memory_order_release);
  return Status::Ok();
}

std::shared_ptr<const PolicySet> Limiter::policies() const {
  return snapshot_.load(std::memory_order_acquire)->set;
}

void Limiter::CheckAsync(CheckRequest request, CheckCallback done) {
  auto op = std::make_shared<Operation>(*this, snapshot_.load(std::memory_order_acquire),
                                        std::move(done));
  if (Status s = op->Prepare(request); !s.ok()) {
    op->Abort(std::move(s));  // nothing was sent to the store
    return;
  }
  op->Run();
}

Result<CheckResult> Limiter::Check(CheckRequest request) {
  std::promise<Result<CheckResult>> promise;
  auto future = promise.get_future();
  CheckAsync(std::move(request),
             [&promise](Result<CheckResult> r) { promise.set_value(std::move(r)); });
  return future.get();
}

void Limiter::NoteStoreHealth(const Status& s, const PolicySet& set) {
  const bool failing = !s.ok();
  if (degraded_.exchange(failing, std::memory_order_acq_rel) == failing) return;
  if (options_.metrics != nullptr) options_.metrics->SetStoreDegraded(failing);
  if (options_.log == nullptr) return;
  if (!failing) {
    options_.log->Info("store \"" + std::string(store_.Name()) +
                       "\" answers again; policies decided by the store");
    return;
  }
  std::string modes;
  for (const PolicySet::Policy& p : set.policies()) {
    if (p.shadow()) continue;
    if (!modes.empty()) modes += ", ";
    modes += p.spec.name + "=" + std::string(FailureModeName(p.on_failure));
  }
  options_.log->Warning("store \"" + std::string(store_.Name()) + "\" failed (" + s.ToString() +
                        "); deciding by failure mode: " + modes);
}

}  // namespace caudal
