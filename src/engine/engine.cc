#include "caudal/engine/engine.h"

#include <algorithm>
#include <future>
#include <mutex>
#include <utility>

// GCC 12 misreads small_vector's inline buffer as the only storage at -O3 (a false
// -Wstringop-overread on its copies).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wstringop-overread"
#endif
#include <boost/container/small_vector.hpp>
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

#include "common/cat.h"
#include "engine/hit_stats.h"
#include "engine/hold.h"
#include "engine/over_limit_cache.h"
#include "engine/override_fit.h"
#include "engine/plan.h"
#include "engine/policy_dimensions.h"
#include "engine/store_key.h"
#include "observe/log_throttle.h"
#include "observe/refusals.h"

namespace caudal {

using PlanCheck = engine_internal::Check;
using engine_internal::Plan;

__extension__ typedef __int128 Wide;

std::string_view DecidedByName(DecidedBy d) {
  switch (d) {
    case DecidedBy::kStore:
      return "store";
    case DecidedBy::kLocal:
      return "local";
    case DecidedBy::kFailOpen:
      return "fail_open";
    case DecidedBy::kFailClosed:
      return "fail_closed";
    case DecidedBy::kOverLimitCache:
      return "over_limit_cache";
    case DecidedBy::kSkipped:
      return "skipped";
  }
  return "unknown";
}

bool IsFailover(DecidedBy d) {
  return d == DecidedBy::kLocal || d == DecidedBy::kFailOpen || d == DecidedBy::kFailClosed;
}

std::string_view OutcomeName(Outcome o) {
  switch (o) {
    case Outcome::kAllowed:
      return "allowed";
    case Outcome::kDenied:
      return "denied";
    case Outcome::kUnavailable:
      return "unavailable";
  }
  return "unknown";
}

namespace {

void Count(PolicyCounters& c, const PolicyResult& r) {
  if (r.kind == CheckKind::kNoLimit) return;
  switch (r.decided_by) {
    case DecidedBy::kSkipped:
      return;
    case DecidedBy::kOverLimitCache:
      break;
    case DecidedBy::kFailOpen:
      if (!r.shadow) c.fail_open.fetch_add(1, std::memory_order_relaxed);
      return;
    case DecidedBy::kFailClosed:
      c.fail_closed.fetch_add(1, std::memory_order_relaxed);
      return;
    case DecidedBy::kLocal:
      c.local.fetch_add(1, std::memory_order_relaxed);
      break;
    case DecidedBy::kStore:
      break;
  }
  (r.allowed ? c.allowed : c.denied).fetch_add(1, std::memory_order_relaxed);
  if (r.shadow && !r.allowed) c.shadow_denied.fetch_add(1, std::memory_order_relaxed);
}

// envoyproxy/ratelimit's statistics of an Envoy check (engine/hit_stats.h): every hit of a rule
// that applies is in total_hits; how the others split needs the count before the hits, which a
// check the store did not decide (its failure mode, or skipped) does not have.
void CountHits(HitCounters& h, const engine_internal::Check& c) {
  const PolicyResult& r = c.result;
  if (r.refund || (r.kind != CheckKind::kLimited && r.kind != CheckKind::kBlocked)) return;
  const auto hits = static_cast<uint64_t>(r.cost);
  if (hits != 0) h.total_hits.fetch_add(hits, std::memory_order_relaxed);
  engine_internal::HitSplit split;
  if (r.kind == CheckKind::kBlocked || r.decided_by == DecidedBy::kOverLimitCache) {
    split = {.over_limit = hits, .shadow_mode = r.shadow ? hits : 0};
    if (r.kind == CheckKind::kLimited) {
      h.over_limit_with_local_cache.fetch_add(hits, std::memory_order_relaxed);
    }
  } else if (c.used_before >= 0 && !r.decisions.empty()) {
    split = engine_internal::SplitHits(r.decisions[0].limit, c.used_before, r.cost, r.shadow);
  }
  // Only what changes is written: these counters are shared by every thread deciding the rule.
  const std::pair<std::atomic<uint64_t>*, uint64_t> adds[] = {{&h.within_limit, split.within_limit},
                                                              {&h.near_limit, split.near_limit},
                                                              {&h.over_limit, split.over_limit},
                                                              {&h.shadow_mode, split.shadow_mode}};
  for (auto [counter, v] : adds) {
    if (v != 0) counter->fetch_add(v, std::memory_order_relaxed);
  }
}

// The identity a check's first key was built from, as "name=value,...": a policy's identity
// fields, or an Envoy descriptor's entries.
std::string IdentityOf(const engine_internal::Check& c) {
  if (c.keys.empty()) return "";
  const std::vector<std::string_view> fields = store_key::ReadFields(c.keys[0]);
  std::string out;
  if (c.result.policy != nullptr) {
    const std::vector<std::string>& names = c.result.policy->spec.identity;
    for (size_t i = 0; i < names.size() && i < fields.size(); ++i) {
      out += Cat(out.empty() ? "" : ",", names[i], '=', fields[i]);
    }
    return out;
  }
  for (size_t i = 1; i + 1 < fields.size(); i += 2) {  // after the domain
    out += Cat(out.empty() ? "" : ",", fields[i], '=', fields[i + 1]);
  }
  return out;
}

}  // namespace

// Compared as fractions without division (a/b < c/d  <=>  a·d < c·b; all ≤ 2^40).
bool CloserToLimit(const Decision& x, const Decision& y) {
  if (x.allowed() != y.allowed()) return !x.allowed();
  return static_cast<Wide>(x.remaining) * y.limit < static_cast<Wide>(y.remaining) * x.limit;
}

int PolicyResult::Tightest() const {
  int best = -1;
  for (size_t i = 0; i < decisions.size(); ++i) {
    if (best < 0 || CloserToLimit(decisions[i], decisions[static_cast<size_t>(best)])) {
      best = static_cast<int>(i);
    }
  }
  return best;
}

std::vector<const PolicyResult*> CheckResult::Refused() const {
  std::vector<const PolicyResult*> out;
  for (const PolicyResult& r : results) {
    if (!r.allowed && !r.shadow) out.push_back(&r);
  }
  return out;
}

const PolicyResult* CheckResult::ClosestToLimit(int* decision_index) const {
  const PolicyResult* best = nullptr;
  int best_index = -1;
  for (const PolicyResult& r : results) {
    if (r.shadow) continue;
    const int t = r.Tightest();
    if (t < 0) continue;
    if (best != nullptr && !CloserToLimit(r.decisions[static_cast<size_t>(t)],
                                          best->decisions[static_cast<size_t>(best_index)])) {
      continue;
    }
    best = &r;
    best_index = t;
  }
  if (decision_index != nullptr) *decision_index = best_index;
  return best;
}

// A request's checks, entries and per-entry numbers are few (one policy, one limit, most of the
// time): inline room for them spares the allocations of a vector each on every decision.
template <typename T>
using Small = boost::container::small_vector<T, 4>;
using Indices = Small<size_t>;

// One decision in flight: owns its plan; kept alive by the store callbacks.
class Engine::Operation : public std::enable_shared_from_this<Operation> {
 public:
  Operation(Engine& engine, std::shared_ptr<const Snapshot> snap, Api api, CheckCallback done,
            Status store_failed = Status::Ok())
      : engine_(engine),
        snap_(std::move(snap)),
        api_(api),
        done_(std::move(done)),
        start_(engine.clock_.Monotonic()),
        store_failed_(std::move(store_failed)) {}

  void Abort(Status s) { Complete(std::move(s)); }

  void Start(Plan plan) {
    plan_ = std::move(plan);
    if (plan_.mode == DescriptorMode::kConsumeEach) return DecideEach();
    Indices enforced;
    for (size_t i = 0; i < plan_.checks.size(); ++i) {
      if (Limited(i) && !plan_.checks[i].result.shadow) enforced.push_back(i);
    }
    if (enforced.empty()) return RunSecondary(/*admitted=*/!plan_.blocked);
    if (!plan_.blocked && RefusedFromCache(enforced)) return RunSecondary(/*admitted=*/false);
    // A blocked check refuses the request anyway: look, do not consume (refunds still apply).
    const bool consume = !plan_.blocked;
    Send(engine_.store_, std::move(enforced), consume, /*local=*/false,
         [](Operation& op, Result<DecideResponse> r, const Batch& batch) {
           op.OnEnforced(std::move(r), batch);
         });
  }

 private:
  // One key of a store request: its checks' hits and refunds netted out into one consume, hold,
  // reserve, refund or charge (a store request holds each key once), the order of a response's
  // decisions (store.h).
  enum class As : uint8_t { kConsume, kHold, kReserve, kRefund, kCharge };
  static constexpr size_t kAs = 5;
  struct KeyEntry {
    std::string_view key;
    const Limit* limit = nullptr;
    int64_t cost = 0;  // as sent
    As as = As::kConsume;
    size_t decision = 0;  // its decision's index in the store's response
    bool shared = false;  // a shared capacity's (Check::shared): refused for one identity only
  };
  // A store request built from some checks.
  struct Batch {
    Indices checks;
    Small<KeyEntry> entries;
    std::vector<std::string> local_keys;  // the keys, when sent to the local fallback
    Indices entry_of;                     // per (check, limit) in order: its entry
    Small<int64_t> units_of;              // per (check, limit): what it adds to its entry's net
    Nanos sent{0};                        // monotonic
  };
  using Then = void (*)(Operation&, Result<DecideResponse>, const Batch&);

  bool Limited(size_t i) const { return plan_.checks[i].result.kind == CheckKind::kLimited; }

  // Over-limit cache: refuses `checks` (all-or-nothing) when one of them was refused by the store
  // for this cost or less and it still would be; the others are then skipped. Refunds among
  // them forget their keys first. False when the store must decide.
  bool RefusedFromCache(const Indices& checks) {
    engine_internal::OverLimitCache* cache = engine_.cache_.get();
    if (cache == nullptr) return false;
    const Nanos now = engine_.clock_.Monotonic();
    bool refunds = false;
    for (size_t i : checks) {
      const PlanCheck& c = plan_.checks[i];
      if (!c.result.refund) continue;
      for (const std::string& key : c.keys) cache->Forget(key);
      refunds = true;
    }
    if (refunds) return false;  // a refund applies whatever else is refused: the store must see it
    for (size_t i : checks) {   // and so does an always_charge rule's charge
      if (plan_.checks[i].always_charge) return false;
    }
    for (size_t i : checks) {
      PlanCheck& c = plan_.checks[i];
      if (c.result.refund || c.shared != nullptr) continue;
      for (size_t k = 0; k < c.keys.size(); ++k) {
        if (c.result.CostOf(k) == 0) continue;
        const std::optional<Decision> d = cache->Lookup(c.keys[k], c.result.CostOf(k), now);
        if (!d) continue;
        for (size_t j : checks) plan_.checks[j].result.decided_by = DecidedBy::kSkipped;
        PolicyResult& r = c.result;
        r.limits = {r.limits[k]};
        if (k < r.costs.size()) r.costs = {r.costs[k]};
        r.decisions = {*d};
        r.allowed = false;
        r.decided_by = DecidedBy::kOverLimitCache;
        if (engine_.options_.metrics != nullptr) engine_.options_.metrics->CountOverLimitCacheHit();
        return true;
      }
    }
    return false;
  }

  // Remembers the refusals of a store response, for the over-limit cache.
  void RememberRefusals(const DecideResponse& resp, const Batch& batch) {
    engine_internal::OverLimitCache* cache = engine_.cache_.get();
    if (cache == nullptr) return;
    for (const KeyEntry& entry : batch.entries) {
      // A slot may come back at any moment (a release): a refusal says nothing of the next one.
      if ((entry.as != As::kConsume && entry.as != As::kReserve) || entry.cost == 0 ||
          entry.shared || entry.decision >= resp.decisions.size()) {
        continue;
      }
      const Decision& d = resp.decisions[entry.decision];
      if (d.verdict == Verdict::kDenied) cache->Remember(entry.key, entry.cost, batch.sent, d);
    }
  }

  void Send(Store& store, Indices checks, bool consume, bool local, Then then) {
    auto batch = std::make_shared<Batch>();
    batch->checks = std::move(checks);
    // CheckRequest::store_failed: answered its error, as the store would have, asking nothing.
    if (!local && !store_failed_.ok()) return then(*this, store_failed_, *batch);
    if (local) {
      for (size_t i : batch->checks) {
        const PlanCheck& c = plan_.checks[i];
        for (size_t k = 0; k < c.keys.size(); ++k) {
          batch->local_keys.push_back(store_key::Local(*c.local_limits[k], c.keys[k]));
        }
      }
    }
    struct Pending {                               // per entry, while netting
      int64_t net = 0;                             // its checks' units
      bool charged = false;                        // a check counting whatever the verdict
      bool slot = false;                           // a concurrency limit's (Check::slots)
      const ReservationTerms* reserved = nullptr;  // a reserve's terms
      const LeaseTerms* lease = nullptr;           // how it leases
      const ReservationTerms* expiry = nullptr;    // its reservations' terms
      const ShareOf* share_of = nullptr;           // a shared capacity's: the identity's share
    };
    Small<Pending> pending;
    size_t n = 0;
    for (size_t i : batch->checks) {
      const PlanCheck& c = plan_.checks[i];
      // An always_charge rule's hits count even when the request is refused or blocked.
      const bool counts = consume || c.always_charge;
      for (size_t k = 0; k < c.keys.size(); ++k, ++n) {
        const int64_t cost = c.result.CostOf(k);
        const int64_t units = c.result.refund ? -cost : counts ? cost : 0;
        const std::string_view key = local ? std::string_view(batch->local_keys[n]) : c.keys[k];
        const Limit* limit = local ? c.local_limits[k] : c.result.limits[k];
        // A concurrency limit takes one slot per admitted request, whatever its cost, and is
        // never refunded: its slots come back by release.
        const int64_t u = c.slots[k] ? (units > 0 ? 1 : 0) : units;
        size_t e = 0;
        while (e < batch->entries.size() && batch->entries[e].key != key) ++e;
        if (e == batch->entries.size()) {
          batch->entries.push_back({.key = key, .limit = limit, .shared = c.shared != nullptr});
          pending.push_back({.slot = c.slots[k],
                             .lease = local ? nullptr : c.lease,
                             .expiry = local ? nullptr : c.expiry,
                             .share_of = local || c.shared == nullptr ? nullptr : &c.shared->of});
        }
        Pending& p = pending[e];
        p.net += u;
        if (c.charge && counts) p.charged = true;
        // Only the shared store keeps reservations: failing over, a reserve is a plain consume.
        if (c.reserves && consume && !local) p.reserved = &c.reservation;
        batch->entry_of.push_back(e);
        batch->units_of.push_back(u);
      }
    }
    // consume_each's charges of fixed windows that do not lease are the reference's own
    // counting: the store may make them with its native commands (store.h, native counts). A
    // calendar window is not: only the scripts place it.
    bool native = plan_.mode == DescriptorMode::kConsumeEach && !local;
    for (size_t e = 0; e < batch->entries.size() && native; ++e) {
      const Pending& p = pending[e];
      const Limit& limit = *batch->entries[e].limit;
      native = (p.net < 0 || p.charged) && limit.algorithm() == Algorithm::kFixedWindow &&
               !limit.calendar() && (p.lease == nullptr || !p.lease->enabled);
    }
    // The request's entries need live only until DecideAsync returns (store.h).
    Small<ConsumeEntry> consumes;
    std::vector<HoldEntry> holds;
    std::vector<ReserveEntry> reserves;
    std::vector<RefundEntry> refunds;
    std::vector<ChargeEntry> charges;
    for (size_t e = 0; e < batch->entries.size(); ++e) {
      KeyEntry& entry = batch->entries[e];
      const Pending& p = pending[e];
      entry.cost = std::min(p.net < 0 ? -p.net : p.net, kMaxCost);
      if (p.net < 0) {
        entry.as = As::kRefund;
        refunds.push_back({.key = entry.key,
                           .limit = entry.limit,
                           .cost = entry.cost,
                           .native = native,
                           .reservations = p.expiry,
                           .lease_terms = p.lease});
      } else if (p.charged) {
        entry.as = As::kCharge;
        charges.push_back({.key = entry.key,
                           .limit = entry.limit,
                           .cost = entry.cost,
                           .native = native,
                           .reservations = p.reserved != nullptr ? p.reserved : p.expiry,
                           .lease_terms = p.lease});
      } else if (p.slot && entry.cost > 0) {
        entry.as = As::kHold;
        holds.push_back({.key = entry.key, .limit = entry.limit, .hold = plan_.hold});
      } else if (p.reserved != nullptr) {
        entry.as = As::kReserve;
        reserves.push_back({.key = entry.key,
                            .limit = entry.limit,
                            .cost = entry.cost,
                            .id = {.hi = plan_.reservation.hi, .lo = plan_.reservation.lo},
                            .terms = *p.reserved});
      } else {
        consumes.push_back({.key = entry.key,
                            .limit = entry.limit,
                            .cost = entry.cost,
                            .reservations = p.expiry,
                            .lease_terms = p.lease,
                            .share_of = p.share_of});
      }
    }
    // The response's decisions come in the order of As.
    const size_t sizes[kAs] = {consumes.size(), holds.size(), reserves.size(), refunds.size(),
                               charges.size()};
    size_t at[kAs] = {};
    for (size_t a = 1; a < kAs; ++a) at[a] = at[a - 1] + sizes[a - 1];
    for (KeyEntry& entry : batch->entries) entry.decision = at[static_cast<size_t>(entry.as)]++;
    batch->sent = engine_.clock_.Monotonic();
    store.DecideAsync({.consumes = consumes,
                       .holds = holds,
                       .reserves = reserves,
                       .refunds = refunds,
                       .charges = charges},
                      [self = shared_from_this(), batch = std::move(batch), then,
                       local](Result<DecideResponse> r) {
                        if (!local) {
                          self->ObserveStore(batch->sent, r.status());
                          if (r.ok()) self->RememberRefusals(*r, *batch);
                        }
                        then(*self, std::move(r), *batch);
                      });
  }

  // Copies a store response into the checks of `batch`. Checks sharing a key that consumed
  // each report the remaining after their own hits, in request order (as the reference's
  // counter reads after each INCRBY), not after everyone's.
  void Distribute(const DecideResponse& resp, const Batch& batch, DecidedBy by) {
    Small<int64_t> later(batch.entries.size(), 0);  // units added after (check, limit) n
    Small<int64_t> added_later(batch.entry_of.size(), 0);
    for (size_t n = batch.entry_of.size(); n-- > 0;) {
      added_later[n] = later[batch.entry_of[n]];
      later[batch.entry_of[n]] += batch.units_of[n];
    }
    size_t n = 0;
    for (size_t i : batch.checks) {
      PolicyResult& r = plan_.checks[i].result;
      r.decisions.clear();
      r.decided_by = by;
      for (size_t k = 0; k < r.limits.size(); ++k, ++n) {
        const size_t e = batch.entry_of[n];
        const KeyEntry& entry = batch.entries[e];
        Decision d = resp.decisions.at(entry.decision);
        const int64_t used = d.limit - d.remaining + d.overdrawn;  // as reported
        // A charge, or a consume the request admitted, reports the count after the request.
        const bool applied = entry.as == As::kCharge || (entry.as != As::kRefund && resp.allowed);
        const int64_t earlier = later[e] - added_later[n] - batch.units_of[n];
        if (k == 0) {
          plan_.checks[i].used_before =
              std::max<int64_t>(0, (applied ? used - entry.cost : used) + earlier);
        }
        if (resp.allowed && entry.as != As::kRefund && added_later[n] > 0) {
          const int64_t own = used - added_later[n];  // counted after this check's own hits
          d.remaining = std::clamp<int64_t>(d.limit - own, 0, d.limit);
          d.overdrawn = std::max<int64_t>(0, own - d.limit);
        }
        r.decisions.push_back(d);
      }
      r.allowed = r.refund || std::all_of(r.decisions.begin(), r.decisions.end(),
                                          [](const Decision& d) { return d.allowed(); });
    }
    if (by == DecidedBy::kLocal) {
      for (size_t i : batch.checks) {
        PolicyResult& r = plan_.checks[i].result;
        r.limits = plan_.checks[i].local_limits;
      }
    }
  }

  void ObserveStore(Nanos sent, const Status& s) {
    Metrics* m = engine_.options_.metrics;
    if (m == nullptr) return;
    m->ObserveStore(std::chrono::duration_cast<Micros>(engine_.clock_.Monotonic() - sent));
    if (!s.ok()) m->CountStoreError(s.code());
  }

  void OnEnforced(Result<DecideResponse> r, const Batch& batch) {
    if (r.ok()) {
      Distribute(*r, batch, DecidedBy::kStore);
      return RunSecondary(r->allowed && !plan_.blocked);
    }
    if (r.status().code() == StatusCode::kInvalidArgument) return Complete(r.status());
    store_error_ = r.status();
    FailOver(batch.checks);
  }

  // kConsumeEach: every limited check in a store request of its own.
  void DecideEach() {
    Indices todo;
    for (size_t i = 0; i < plan_.checks.size(); ++i) {
      if (Limited(i) && !RefusedFromCache({i})) todo.push_back(i);
    }
    if (todo.empty()) return Finish();
    pending_.store(todo.size(), std::memory_order_release);
    for (size_t i : todo) {
      Send(engine_.store_, {i}, /*consume=*/true, /*local=*/false,
           [](Operation& op, Result<DecideResponse> r, const Batch& batch) {
             PlanCheck& c = op.plan_.checks[batch.checks[0]];
             if (r.ok()) {
               op.Distribute(*r, batch, DecidedBy::kStore);
             } else {
               c.error = r.status();
             }
             if (op.pending_.fetch_sub(1, std::memory_order_acq_rel) == 1) op.AfterEach();
           });
    }
  }

  void AfterEach() {
    Indices failed;
    for (size_t i = 0; i < plan_.checks.size(); ++i) {
      const Status& e = plan_.checks[i].error;
      if (e.code() == StatusCode::kInvalidArgument) return Complete(e);
      if (e.ok()) continue;
      if (store_error_.ok()) store_error_ = e;
      failed.push_back(i);
    }
    if (failed.empty()) return Finish();
    FailOver(std::move(failed));
  }

  // The store failed for `failed`: each follows its failure mode. A shadow check under `local`
  // is decided locally too (after the enforced ones, as with the store); otherwise it is not
  // decided. A refund never refuses.
  void FailOver(Indices failed) {
    if (plan_.mode == DescriptorMode::kAllOrNothing) {  // the shadow checks were never sent
      for (size_t i = 0; i < plan_.checks.size(); ++i) {
        if (Limited(i) && plan_.checks[i].result.shadow) failed.push_back(i);
      }
    }
    Indices local;
    for (size_t i : failed) {
      PlanCheck& c = plan_.checks[i];
      PolicyResult& r = c.result;
      r.decisions.clear();
      r.decided_by = DecidedBy::kFailOpen;
      r.allowed = true;
      if (c.on_failure == FailureMode::kLocal && engine_.options_.local_store != nullptr &&
          engine_internal::PrepareLocal(c, plan_.instances)) {
        (r.shadow ? local_shadow_ : local).push_back(i);
        continue;
      }
      if (r.shadow || r.refund || c.on_failure == FailureMode::kAllow) continue;
      r.decided_by = DecidedBy::kFailClosed;  // deny, or a local fallback that cannot decide
      r.allowed = false;
    }
    if (plan_.mode == DescriptorMode::kConsumeEach) {
      local.insert(local.end(), local_shadow_.begin(), local_shadow_.end());
      local_shadow_.clear();
      if (local.empty()) return Finish();
      pending_.store(local.size(), std::memory_order_release);
      for (size_t i : local) {
        Send(*engine_.options_.local_store, {i}, /*consume=*/true, /*local=*/true,
             [](Operation& op, Result<DecideResponse> r, const Batch& batch) {
               op.OnLocal(std::move(r), batch);
               if (op.pending_.fetch_sub(1, std::memory_order_acq_rel) == 1) op.Finish();
             });
      }
      return;
    }
    if (local.empty()) return LocalShadows();
    Send(*engine_.options_.local_store, std::move(local), /*consume=*/!plan_.blocked,
         /*local=*/true, [](Operation& op, Result<DecideResponse> r, const Batch& batch) {
           op.OnLocal(std::move(r), batch);
           op.LocalShadows();
         });
  }

  void OnLocal(Result<DecideResponse> r, const Batch& batch) {
    if (r.ok()) return Distribute(*r, batch, DecidedBy::kLocal);
    // The local table is full or the request is malformed for it: fail closed (a shadow check
    // or a refund: not decided).
    for (size_t i : batch.checks) {
      PolicyResult& p = plan_.checks[i].result;
      p.decided_by = DecidedBy::kFailOpen;
      if (p.refund || p.shadow) continue;
      p.allowed = false;
      p.decided_by = DecidedBy::kFailClosed;
    }
  }

  // All-or-nothing, failing over: the shadow checks decided locally, each alone, charged only
  // if the request passed.
  void LocalShadows() {
    if (local_shadow_.empty()) return Finish();
    bool admitted = !plan_.blocked;
    for (const PlanCheck& c : plan_.checks) {
      if (!c.result.shadow && !c.result.refund && !c.result.allowed) admitted = false;
    }
    const Indices todo = std::move(local_shadow_);
    pending_.store(todo.size(), std::memory_order_release);
    for (size_t i : todo) {
      Send(*engine_.options_.local_store, {i}, admitted, /*local=*/true,
           [](Operation& op, Result<DecideResponse> r, const Batch& batch) {
             op.OnLocal(std::move(r), batch);
             if (op.pending_.fetch_sub(1, std::memory_order_acq_rel) == 1) op.Finish();
           });
    }
  }

  // After the enforced decision (all-or-nothing): charge shadow checks (admitted) or look at
  // them (refused), and charge count_rejected ones (refused).
  void RunSecondary(bool admitted) {
    Indices todo;
    for (size_t i = 0; i < plan_.checks.size(); ++i) {
      const PlanCheck& c = plan_.checks[i];
      if (!Limited(i)) continue;
      if (c.result.shadow || (!admitted && c.count_rejected && !c.result.refund)) todo.push_back(i);
    }
    if (todo.empty()) return Finish();
    pending_.store(todo.size(), std::memory_order_release);
    for (size_t i : todo) {
      const bool shadow = plan_.checks[i].result.shadow;
      Send(engine_.store_, {i}, /*consume=*/admitted || !shadow, /*local=*/false,
           [](Operation& op, Result<DecideResponse> r, const Batch& batch) {
             PolicyResult& p = op.plan_.checks[batch.checks[0]].result;
             // A count_rejected charge changes no verdict; a shadow decision is reported as made.
             if (p.shadow) {
               if (r.ok()) {
                 op.Distribute(*r, batch, DecidedBy::kStore);
               } else {
                 p.decided_by = DecidedBy::kFailOpen;
               }
             }
             if (op.pending_.fetch_sub(1, std::memory_order_acq_rel) == 1) op.Finish();
           });
    }
  }

  void Finish() {
    CheckResult out;
    out.keepalive = snap_;
    out.store_error = store_error_;
    Micros retry{0};
    bool closed = false;
    bool denied = false;
    // Envoy's quota_mode: refused quota checks refuse the request only if no quota check passed.
    bool quota_passed = false;
    for (PlanCheck& c : plan_.checks) {
      if (c.result.kind == CheckKind::kBlocked) c.result.allowed = false;
      quota_passed |= c.quota && !c.result.shadow && c.result.allowed;
    }
    for (PlanCheck& c : plan_.checks) {
      PolicyResult& r = c.result;
      if (r.kind == CheckKind::kLimited && IsFailover(r.decided_by)) out.degraded = true;
      if (r.shadow || r.allowed || (c.quota && quota_passed)) continue;
      if (r.decided_by == DecidedBy::kFailClosed) closed = true;
      denied = true;
      for (const Decision& d : r.decisions) {
        if (d.verdict == Verdict::kDenied) retry = std::max(retry, d.retry_after);
        if (d.verdict == Verdict::kNeverFits) retry = std::max(retry, d.reset_after);
      }
    }
    out.outcome = closed ? Outcome::kUnavailable : denied ? Outcome::kDenied : Outcome::kAllowed;
    if (out.outcome == Outcome::kDenied) out.retry_after = retry;
    if (out.outcome == Outcome::kAllowed && plan_.takes_slots) out.hold = HoldOf();
    if (out.outcome == Outcome::kAllowed && plan_.reserves) {
      out.reservation = ReservationOf();
      out.reservation_ttl = plan_.reservation_ttl;
    }
    CountMetrics();
    RecordRefusals();
    out.results.reserve(plan_.checks.size());
    for (PlanCheck& c : plan_.checks) out.results.push_back(std::move(c.result));
    Complete(std::move(out));
  }

  // The hold id of the slots the admitted request took (its checks decided by a store, the
  // shared one or the local one), or "" when it took none.
  std::string HoldOf() const {
    std::vector<std::string_view> keys;
    for (const PlanCheck& c : plan_.checks) {
      const PolicyResult& r = c.result;
      const bool decided = r.decided_by == DecidedBy::kStore || r.decided_by == DecidedBy::kLocal;
      if (r.kind != CheckKind::kLimited || r.refund || !r.allowed || !decided) continue;
      for (size_t k = 0; k < r.limits.size() && k < r.decisions.size(); ++k) {
        if (c.slots[k] && r.decisions[k].allowed()) {
          keys.push_back(c.keys[k]);
        }
      }
    }
    if (keys.empty()) return "";
    if (engine_.options_.metrics != nullptr) engine_.options_.metrics->Add(MetricId::kHoldsTaken);
    return engine_internal::EncodeHold(plan_.hold, keys);
  }

  // The id that settles the admitted reserve: every enforced check's keys (those a failure mode
  // decided hold none, and their settle finds none).
  std::string ReservationOf() const {
    std::vector<std::string_view> keys;
    for (const PlanCheck& c : plan_.checks) {
      if (!c.reserves || c.result.kind != CheckKind::kLimited) continue;
      for (const std::string& k : c.keys) keys.push_back(k);
    }
    if (engine_.options_.metrics != nullptr) {
      engine_.options_.metrics->Add(MetricId::kReservationsOpened);
    }
    return engine_internal::EncodeHold(plan_.reservation, keys);
  }

  void CountMetrics() {
    Metrics* m = engine_.options_.metrics;
    if (m == nullptr) return;
    for (const PlanCheck& c : plan_.checks) {
      PolicyCounters* counters = c.counters;
      if (!c.detailed_name.empty()) counters = &m->ForDetailed(api_, c.detailed_name);
      if (counters == nullptr) continue;
      Count(*counters, c.result);
      if (api_ == Api::kRls) CountHits(counters->hits, c);
    }
    CountUnits();
  }

  // The units each admitted enforced policy took, per dimension it counts: `requests` its cost,
  // another dimension the request's costs of it (a reserve its estimate; a refund takes none).
  void CountUnits() {
    for (const PlanCheck& c : plan_.checks) {
      const PolicyResult& r = c.result;
      if (c.units == nullptr || !r.allowed || r.shadow || r.refund) continue;
      if (r.decided_by == DecidedBy::kSkipped || r.decided_by == DecidedBy::kFailClosed) continue;
      for (const Snapshot::DimensionSeries& d : *c.units) {
        int64_t units = 0;
        if (d.dimension == kRequestsDimension) {
          units = r.cost;
        } else if (plan_.costs) {
          for (const DimensionCost& given : *plan_.costs) {
            if (given.dimension == d.dimension) units = given.units;
          }
        }
        if (units > 0) d.units->fetch_add(static_cast<uint64_t>(units), std::memory_order_relaxed);
      }
    }
  }

  // Every enforced check a store (shared, local or its cache) refused, to the heavy hitters and
  // the throttled log.
  void RecordRefusals() {
    Refusals* refusals = engine_.options_.refusals;
    if (refusals == nullptr) return;
    for (const PlanCheck& c : plan_.checks) {
      const PolicyResult& r = c.result;
      const bool by_store = r.decided_by == DecidedBy::kStore ||
                            r.decided_by == DecidedBy::kLocal ||
                            r.decided_by == DecidedBy::kOverLimitCache;
      if (r.allowed || r.shadow || r.kind != CheckKind::kLimited || !by_store) continue;
      const int t = r.Tightest();
      if (t < 0) continue;
      const Decision& d = r.decisions[static_cast<size_t>(t)];
      refusals->Record(api_, c.stat_name, IdentityOf(c),
                       r.limits[static_cast<size_t>(t)]->ToString(),
                       d.verdict == Verdict::kNeverFits ? d.reset_after : d.retry_after);
    }
  }

  void Complete(Result<CheckResult> r) {
    if (engine_.options_.metrics != nullptr && r.ok()) {
      engine_.options_.metrics->ObserveDecision(
          api_, std::chrono::duration_cast<Micros>(engine_.clock_.Monotonic() - start_));
    }
    if (engine_.options_.log != nullptr && r.ok()) LogShadowDenials(*r);
    CheckCallback done = std::move(done_);
    done(std::move(r));
  }

  void LogShadowDenials(const CheckResult& r) {
    for (const PolicyResult& p : r.results) {
      if (!p.shadow || p.allowed || p.decided_by != DecidedBy::kStore) continue;
      const std::optional<uint64_t> held_back = engine_.shadow_log_->Admit(p.name);
      if (!held_back) continue;
      std::string line = Cat("shadow ", p.policy != nullptr ? "policy " : "rule ", Quoted(p.name),
                             " would have refused a request (allowed: shadow)");
      if (*held_back > 0) line += Cat("; ", *held_back, " such lines held back since the last one");
      engine_.options_.log->Info(line);
    }
  }

  Engine& engine_;
  std::shared_ptr<const Snapshot> snap_;
  const Api api_;
  CheckCallback done_;
  Nanos start_;
  Plan plan_;
  std::atomic<size_t> pending_{0};
  const Status store_failed_;  // CheckRequest::store_failed
  Status store_error_;         // written before the failover, read after it (one thread at a time)
  Indices local_shadow_;       // all-or-nothing: shadow checks to decide locally
};

Engine::Engine(Store& store, const Clock& clock, EngineOptions options)
    : store_(store),
      clock_(clock),
      options_(options),
      shadow_log_(std::make_unique<LogThrottle>(clock, LogThrottleOptions{})),
      cache_(options.over_limit_cache_keys == 0 ? nullptr
                                                : std::make_unique<engine_internal::OverLimitCache>(
                                                      options.over_limit_cache_keys)) {
  auto snap = std::make_shared<Snapshot>();
  snap->policies = *PolicySet::Create({}, {});
  snapshot_.store(std::move(snap));
}

Engine::~Engine() = default;

Status Engine::SetPolicies(std::shared_ptr<const PolicySet> set) {
  if (set == nullptr) return Status::InvalidArgument("no policy set");
  for (const PolicySet::Policy& p : set->policies()) {
    if (p.on_failure == FailureMode::kLocal && options_.local_store == nullptr) {
      return Status::InvalidArgument(Cat("policy ", Quoted(p.spec.name),
                                         " fails over to local, but no local store is configured"));
    }
  }
  std::lock_guard lock(install_mu_);
  auto snap = std::make_shared<Snapshot>(*snapshot_.load(std::memory_order_acquire));
  snap->policies = std::move(set);
  snap->policy_counters.clear();
  snap->policy_units.clear();
  for (const PolicySet::Policy& p : snap->policies->policies()) {
    snap->policy_counters.push_back(
        options_.metrics ? &options_.metrics->ForPolicy(Api::kHttp, p.spec.name) : nullptr);
    if (options_.metrics == nullptr) continue;
    auto& series = snap->policy_units.emplace_back();
    for (std::string_view n : engine_internal::CountedDimensions(p)) {
      series.push_back(
          {.dimension = n,
           .units = &options_.metrics->Series(MetricId::kUnitsAdmitted, {p.spec.name, n})});
    }
  }
  const auto before = snap->runtime;  // checked again against the new policies
  engine_internal::RefitOverrides(*snap, before.get(),
                                  {options_.log, options_.metrics, options_.refusals});
  snapshot_.store(std::move(snap), std::memory_order_release);
  return Status::Ok();
}

std::shared_ptr<const PolicySet> Engine::policies() const {
  return snapshot_.load(std::memory_order_acquire)->policies;
}

Status Engine::SetDomains(std::shared_ptr<const envoy::RateLimitConfig> domains,
                          DomainOptions options) {
  if (options.on_failure == FailureMode::kLocal && options_.local_store == nullptr) {
    return Status::InvalidArgument(
        "Envoy domains fail over to local, but no local store is configured");
  }
  std::lock_guard lock(install_mu_);
  auto snap = std::make_shared<Snapshot>(*snapshot_.load(std::memory_order_acquire));
  snap->domains = std::move(domains);
  snap->domain_options = options;
  snap->rule_stats.clear();
  if (snap->domains != nullptr) {
    snap->domains->ForEachRule([&](const envoy::RateLimitRule& rule, std::string_view stat_key) {
      std::string metric(stat_key);  // named as the reference names its stats
      engine_internal::SanitizeStatName(metric);
      snap->rule_stats[&rule] = {
          .name = std::string(stat_key),
          .counters = options_.metrics ? &options_.metrics->ForPolicy(Api::kRls, metric) : nullptr};
    });
  }
  const auto before = snap->runtime;  // checked again against the new rules
  engine_internal::RefitOverrides(*snap, before.get(),
                                  {options_.log, options_.metrics, options_.refusals});
  snapshot_.store(std::move(snap), std::memory_order_release);
  return Status::Ok();
}

std::shared_ptr<const envoy::RateLimitConfig> Engine::domains() const {
  return snapshot_.load(std::memory_order_acquire)->domains;
}

void Engine::SetRuntimeOverrides(std::shared_ptr<const RuntimeOverrides> overrides) {
  {
    std::lock_guard lock(install_mu_);
    auto snap = std::make_shared<Snapshot>(*snapshot_.load(std::memory_order_acquire));
    const auto before = std::move(snap->runtime);
    snap->runtime = std::move(overrides);
    engine_internal::RefitOverrides(*snap, before.get(),
                                    {options_.log, options_.metrics, options_.refusals});
    snapshot_.store(std::move(snap), std::memory_order_release);
  }
  ForgetRefusals();
}

std::shared_ptr<const RuntimeOverrides> Engine::runtime_overrides() const {
  return snapshot_.load(std::memory_order_acquire)->runtime;
}

void Engine::ForgetRefusals() {
  if (cache_ != nullptr) cache_->Clear();
}

Result<Engine::PolicyQuota> Engine::QuotaOf(std::string_view policy,
                                            const Descriptors& descriptors) const {
  const std::shared_ptr<const Snapshot> snap = snapshot();
  CheckRequest request{.descriptors = descriptors, .cost = std::nullopt};
  auto plan = engine_internal::PlanPolicies(*snap, request);
  if (!plan.ok()) return plan.status();
  for (engine_internal::Check& c : plan->checks) {
    if (c.result.name != policy) continue;
    PolicyQuota q;
    q.keys = std::move(c.keys);
    q.on_failure = c.on_failure;
    for (const Limit* l : c.result.limits) q.limits.push_back(*l);
    if (c.shared != nullptr) {
      q.identity = c.shared->identity;
      q.shared = true;
      q.weight = c.shared->of.weight;
      q.fairness = c.shared->of.fairness;
    } else if (!q.keys.empty()) {
      if (auto parts = store_key::ReadPolicy(q.keys[0])) q.identity = std::string(parts->identity);
    }
    return q;
  }
  return Status::NotFound(Cat("policy ", Quoted(policy), " does not apply to the descriptors"));
}

std::shared_ptr<const Engine::Snapshot> Engine::snapshot() const {
  return snapshot_.load(std::memory_order_acquire);
}

void Engine::CheckAsync(CheckRequest request, CheckCallback done) {
  auto snap = snapshot_.load(std::memory_order_acquire);
  auto op = std::make_shared<Operation>(*this, snap, request.api, std::move(done),
                                        std::move(request.store_failed));
  auto plan = engine_internal::PlanPolicies(*snap, request);
  if (!plan.ok()) return op->Abort(plan.status());  // nothing was sent to the store
  if (plan->takes_slots) plan->hold = engine_internal::NewHoldId();
  if (plan->reserves) plan->reservation = engine_internal::NewHoldId();
  op->Start(std::move(*plan));
}

void Engine::CheckAsync(const DomainRequest& request, CheckCallback done) {
  auto snap = snapshot_.load(std::memory_order_acquire);
  auto op = std::make_shared<Operation>(*this, snap, Api::kRls, std::move(done));
  auto plan = engine_internal::PlanDomain(*snap, request);
  if (!plan.ok()) return op->Abort(plan.status());
  op->Start(std::move(*plan));
}

namespace {

template <typename Request>
Result<CheckResult> Wait(Engine& engine, Request&& request) {
  std::promise<Result<CheckResult>> promise;
  auto future = promise.get_future();
  engine.CheckAsync(std::forward<Request>(request),
                    [&promise](Result<CheckResult> r) { promise.set_value(std::move(r)); });
  return future.get();
}

}  // namespace

Result<CheckResult> Engine::Check(CheckRequest request) { return Wait(*this, std::move(request)); }
Result<CheckResult> Engine::Check(const DomainRequest& request) { return Wait(*this, request); }

}  // namespace caudal
