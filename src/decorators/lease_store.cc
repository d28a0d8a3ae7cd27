#include "decorators/lease_store.h"

#include <algorithm>
#include <cstdio>
#include <random>
#include <utility>
#include <vector>

#include "algorithms/algorithm.h"
#include "common/cat.h"
#include "decorators/lease_table.h"

namespace caudal {

using engine_internal::EndedLot;
using engine_internal::LeaseAsk;

struct LeaseStore::Core {
  Core(const LeaseStoreOptions& o, const Clock& c)
      : clock(c),
        table({.defaults = {.enabled = o.lease_by_default,
                            .ttl = o.ttl,
                            .max_share_ppm = o.max_share_ppm},
               .instances = o.instances,
               .max_keys = o.max_keys,
               .shares = o.shares}),
        consumer(o.consumer.empty() ? RandomName() : o.consumer),
        own(o.metrics == nullptr ? std::make_unique<Metrics>() : nullptr),
        metrics(o.metrics != nullptr ? *o.metrics : *own),
        local(metrics.Series(MetricId::kLeaseRequests, {"lease"})),
        forwarded(metrics.Series(MetricId::kLeaseRequests, {"store"})) {}

  // One give-back call answered (ReturnAll waits for them).
  void Answered(int64_t units, bool ok) {
    metrics.Add(ok ? MetricId::kLeaseUnitsGivenBack : MetricId::kLeaseUnitsLost,
                static_cast<uint64_t>(units));
    std::lock_guard lock(mu);
    --returning;
    returning_units -= units;
    if (returning == 0) idle.notify_all();
  }

  // A store call sent at `sent` was answered now: its round trip sizes the leases (failed calls
  // are not measured: a deadline is no round trip).
  void RoundTrip(Nanos sent, bool ok) {
    if (ok) table.ObserveRoundTrip(clock.Monotonic() - sent);
  }

  // A random name: 16 hex digits (64 bits), distinct among instances in all likelihood.
  static std::string RandomName() {
    std::random_device rd;
    const uint64_t n = (uint64_t{rd()} << 32) ^ rd();
    char buf[17];
    std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(n));
    return buf;
  }

  // A request that waited for its identity's share runs again on the renewal's answer, on the
  // store's thread: through `inner` while the LeaseStore lives (Enter/Leave bracket each such use,
  // and its destructor waits for them).
  bool Enter() {
    std::lock_guard lock(mu);
    if (closed) return false;
    ++entered;
    return true;
  }
  void Leave() {
    std::lock_guard lock(mu);
    if (--entered == 0) idle.notify_all();
  }

  const Clock& clock;
  Store* inner = nullptr;
  engine_internal::LeaseTable table;
  const std::string consumer;          // in shares
  const std::unique_ptr<Metrics> own;  // when none was given
  Metrics& metrics;
  std::atomic<uint64_t>& local;
  std::atomic<uint64_t>& forwarded;
  std::mutex mu;
  std::condition_variable idle;
  int64_t returning = 0;        // guarded by mu: give-back calls in flight
  int64_t returning_units = 0;  // guarded by mu: the units they carry
  bool closed = false;          // guarded by mu: the LeaseStore is gone (or going)
  // Guarded by mu: the policies whose share gauges the last UnitsHeld() set.
  std::vector<std::string> share_policies;
  int64_t entered = 0;  // guarded by mu: requests running again through `inner`
};

namespace {

using CorePtr = std::shared_ptr<LeaseStore::Core>;

// Each ask as a request of its own (a renewal: a peek that takes a lease), answered into the
// table.
void Renew(Store& inner, const CorePtr& core, std::vector<LeaseAsk> renewals, Nanos sent) {
  for (LeaseAsk& r : renewals) {
    auto ask = std::make_shared<LeaseAsk>(std::move(r));
    if (ask->share) {
      // An identity's share is taken by "<identity>@<instance>" in the identity's group.
      const std::string consumer =
          ask->group.empty() ? core->consumer : Cat(ask->group, '@', core->consumer);
      const ShareEntry e{.key = ask->StoreKey(),
                         .limit = &ask->limit,
                         .consumer = consumer,
                         .group = ask->group,
                         .demand = ask->demand,
                         .weight = ask->weight,
                         .ttl = std::clamp(std::chrono::duration_cast<Micros>(ask->ttl),
                                           kMinShareTtl, kMaxShareTtl),
                         .fairness = ask->fairness};
      inner.ShareAsync({&e, 1}, [core, ask, sent](Result<ShareResponse> got) {
        core->RoundTrip(sent, got.ok());
        const bool one = got.ok() && !got->decisions.empty() && !got->shares.empty();
        std::vector<std::function<void()>> woken;
        const int64_t added =
            core->table.GrantedShare(ask->key, ask->limit, sent, one ? &got->decisions[0] : nullptr,
                                     one ? &got->shares[0] : nullptr, &woken);
        if (added > 0) core->metrics.Add(MetricId::kLeaseShares);
        for (const auto& wake : woken) wake();
      });
      continue;
    }
    const ConsumeEntry e{.key = ask->key, .limit = &ask->limit, .cost = 0, .lease = ask->units};
    inner.DecideAsync({.consumes = {&e, 1}}, [core, ask, sent](Result<DecideResponse> got) {
      core->RoundTrip(sent, got.ok());
      const Decision* d = got.ok() && !got->decisions.empty() ? &got->decisions[0] : nullptr;
      const int64_t added =
          core->table.Granted(ask->key, ask->limit, sent, got.ok() && got->allowed, d);
      if (added > 0) {
        core->metrics.Add(MetricId::kLeaseRenewals);
      }
    });
  }
}

// Checks a request with consumes of shared capacities as a store would (ValidateEntries, such a
// consume as a plain one), and what only a shared capacity asks of its consume.
Status ValidateShared(std::span<const EntryRef> entries) {
  std::vector<EntryRef> plain(entries.begin(), entries.end());
  for (EntryRef& e : plain) e.share_of = nullptr;
  if (Status s = ValidateEntries(plain); !s.ok()) return s;
  for (size_t i = 0; i < entries.size(); ++i) {
    const EntryRef& e = entries[i];
    const ShareOf* of = e.share_of;
    if (of == nullptr) continue;
    if (e.op != EntryOp::kConsume || e.lease != 0 || e.hold != nullptr ||
        !SupportsLease(e.limit->algorithm()) || e.limit->calendar()) {
      return Status::InvalidArgument(
          Cat("entry ", i,
              ": a capacity shared among identities is consumed alone (no lease, hold or reserve) "
              "and is a token_bucket, gcra or fixed_window of a steady rate"));
    }
    if (of->window < kMinShareTtl || of->window > kMaxShareTtl || of->weight < 1 ||
        of->weight > kMaxShareWeight) {
      return Status::InvalidArgument(Cat(
          "entry ", i, ": a share's window is 1ms to 1h and its weight 1 to ", kMaxShareWeight));
    }
  }
  return Status::Ok();
}

// Decides a request with consumes of shared capacities (EntryRef::share_of): those from the
// identities' shares here (LeaseTable::BeginShared), the rest in the store, all-or-nothing: the
// store's call is made only once the shares covered theirs, and a refusal there puts them back.
// `waited`: the request runs again after waiting for a renewal.
void DecideShared(Store& inner, const CorePtr& core, std::span<const EntryRef> entries,
                  DecideCallback done, bool waited) {
  if (Status s = ValidateShared(entries); !s.ok()) return done(s);
  std::vector<EntryRef> shared, rest;
  std::vector<size_t> shared_at, rest_at;
  for (size_t i = 0; i < entries.size(); ++i) {
    (entries[i].share_of != nullptr ? shared : rest).push_back(entries[i]);
    (entries[i].share_of != nullptr ? shared_at : rest_at).push_back(i);
  }
  const Nanos now = core->clock.Monotonic();
  engine_internal::SharePlan plan = core->table.BeginShared(shared, now, waited);
  using Kind = engine_internal::SharePlan::Kind;
  if (plan.kind == Kind::kWait) {
    // The entries live until `done` is called: the request runs again from a copy of their refs.
    auto again = std::make_shared<std::vector<EntryRef>>(entries.begin(), entries.end());
    core->table.Await(shared, plan.waits, [core, again, done = std::move(done)]() mutable {
      if (!core->Enter()) return done(Status::Unavailable("the lease decorator is closing"));
      DecideShared(*core->inner, core, *again, std::move(done), /*waited=*/true);
      core->Leave();
    });
    return Renew(inner, core, std::move(plan.renewals), now);
  }
  core->local.fetch_add(1, std::memory_order_relaxed);
  std::vector<Decision> decisions(entries.size());
  for (size_t j = 0; j < shared_at.size() && j < plan.decisions.size(); ++j) {
    decisions[shared_at[j]] = plan.decisions[j];
  }
  // The other entries of a request refused here were not decided: reported as full.
  for (const size_t i : rest_at)
    decisions[i].limit = decisions[i].remaining = entries[i].limit->capacity();
  if (plan.kind == Kind::kUnavailable) {
    done(Status::Unavailable(
        "the store has not answered for this identity's share of a shared capacity"));
  } else if (plan.kind == Kind::kDenied || rest.empty()) {
    done(DecideResponse{.allowed = plan.kind == Kind::kAllowed, .decisions = std::move(decisions)});
  } else {
    auto held = std::make_shared<std::vector<EntryRef>>(std::move(shared));
    caudal::DecideBatchAsync(
        inner, rest,
        [core, held, decisions = std::move(decisions), rest_at = std::move(rest_at), shared_at, now,
         done = std::move(done)](Result<DecideResponse> r) mutable {
          core->RoundTrip(now, r.ok());
          if (!r.ok() || !r->allowed) core->table.Unspend(*held);
          if (!r.ok()) return done(r.status());
          for (size_t j = 0; j < rest_at.size() && j < r->decisions.size(); ++j) {
            decisions[rest_at[j]] = r->decisions[j];
          }
          if (!r->allowed) {  // reported without their consumption, as a store would
            for (size_t j = 0; j < shared_at.size(); ++j) {
              Decision& d = decisions[shared_at[j]];
              d.remaining = std::min(d.limit, d.remaining + (*held)[j].cost);
            }
          }
          r->decisions = std::move(decisions);
          done(std::move(r));
        });
  }
  Renew(inner, core, std::move(plan.renewals), now);
}

// Takes from the table what `take` ends and counts it as being given back, in one step under the
// core's lock: Owed() sees each unit in exactly one place.
template <typename Take>
std::vector<EndedLot> TakeToGiveBack(const CorePtr& core, Take take) {
  std::lock_guard lock(core->mu);
  std::vector<EndedLot> ended = take(core->table);
  for (const EndedLot& lot : ended) core->returning_units += lot.units;
  return ended;
}

// Gives `ended` (taken by TakeToGiveBack) back, at most kMaxEntriesPerRequest entries per call and
// each key once per call (a key's several lots go in separate calls).
void GiveBackEnded(Store& inner, const CorePtr& core, std::vector<EndedLot> ended) {
  if (ended.empty()) return;
  std::vector<std::vector<size_t>> calls;
  for (size_t i = 0; i < ended.size(); ++i) {
    auto fits = [&](const std::vector<size_t>& call) {
      if (call.size() >= kMaxEntriesPerRequest) return false;
      return std::none_of(call.begin(), call.end(),
                          [&](size_t j) { return ended[j].key == ended[i].key; });
    };
    auto it = std::find_if(calls.begin(), calls.end(), fits);
    if (it == calls.end()) it = calls.insert(calls.end(), std::vector<size_t>{});
    it->push_back(i);
  }
  auto lots = std::make_shared<std::vector<EndedLot>>(std::move(ended));
  {
    std::lock_guard lock(core->mu);
    core->returning += static_cast<int64_t>(calls.size());
  }
  for (const std::vector<size_t>& call : calls) {
    std::vector<GiveBackEntry> entries;
    int64_t units = 0;
    for (size_t i : call) {
      const EndedLot& lot = (*lots)[i];
      entries.push_back(
          {.key = lot.key, .limit = &lot.limit, .units = lot.units, .grant = lot.grant});
      units += lot.units;
    }
    inner.GiveBackAsync(entries, [core, lots, units](Result<GiveBackResponse> r) {
      core->Answered(units, r.ok());
    });
  }
}

}  // namespace

LeaseStore::LeaseStore(Store& inner, const Clock& clock, LeaseStoreOptions options)
    : inner_(inner),
      clock_(clock),
      options_(options),
      core_(std::make_shared<Core>(options, clock)) {
  core_->inner = &inner_;
  if (options_.return_interval <= Nanos(0)) return;
  thread_ = std::thread([this] {
    std::unique_lock lock(mu_);
    while (!stopping_) {
      clock_.WaitUntil(wake_, lock, clock_.Monotonic() + options_.return_interval,
                       [this] { return stopping_; });
      if (stopping_) break;
      lock.unlock();
      ReturnEnded();
      lock.lock();
    }
  });
}

LeaseStore::~LeaseStore() {
  {
    std::unique_lock lock(core_->mu);
    core_->closed = true;
    core_->idle.wait(lock, [this] { return core_->entered == 0; });
  }
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void LeaseStore::DecideBatchAsync(std::span<const EntryRef> entries, DecideCallback done) {
  if (std::any_of(entries.begin(), entries.end(),
                  [](const EntryRef& e) { return e.share_of != nullptr; })) {
    return DecideShared(inner_, core_, entries, std::move(done), /*waited=*/false);
  }
  if (!options_.leases) return caudal::DecideBatchAsync(inner_, entries, std::move(done));
  // Native counts never lease (their state is the store's counter, store.h); entries whose terms
  // do not lease go straight on too: their requests cost one scan here.
  if (!entries.empty() && entries[0].native_count)
    return caudal::DecideBatchAsync(inner_, entries, std::move(done));
  // Reservations and shares live in the store: a reserve, a settle or a share is the store's to
  // decide (the units this instance holds leased were consumed there already).
  if (std::any_of(entries.begin(), entries.end(), [](const EntryRef& e) {
        return e.op == EntryOp::kReserve || e.op == EntryOp::kSettle || e.op == EntryOp::kShare;
      })) {
    return caudal::DecideBatchAsync(inner_, entries, std::move(done));
  }
  const bool leasing = std::any_of(entries.begin(), entries.end(), [this](const EntryRef& e) {
    return e.terms == nullptr ? options_.lease_by_default : e.terms->enabled;
  });
  if (!leasing) return caudal::DecideBatchAsync(inner_, entries, std::move(done));
  // Validated first: a request answered here must be one the store would take, and the table
  // relies on distinct keys.
  if (Status s = ValidateEntries(entries); !s.ok()) return done(s);
  const Nanos now = clock_.Monotonic();
  engine_internal::LeasePlan plan = core_->table.Begin(entries, now);
  if (plan.local) {
    core_->local.fetch_add(1, std::memory_order_relaxed);
    done(DecideResponse{.allowed = plan.allowed, .decisions = std::move(plan.decisions)});
    return Renew(inner_, core_, std::move(plan.renewals), now);
  }
  core_->forwarded.fetch_add(1, std::memory_order_relaxed);
  if (plan.asks.empty()) {
    caudal::DecideBatchAsync(
        inner_, entries,
        [core = core_, now, done = std::move(done)](Result<DecideResponse> r) mutable {
          core->RoundTrip(now, r.ok());
          done(std::move(r));
        });
    return Renew(inner_, core_, std::move(plan.renewals), now);
  }
  std::vector<EntryRef> asking(entries.begin(), entries.end());
  for (const LeaseAsk& a : plan.asks) asking[a.entry].lease = a.units;
  auto asks = std::make_shared<std::vector<LeaseAsk>>(std::move(plan.asks));
  caudal::DecideBatchAsync(
      inner_, asking,
      [core = core_, asks, now, done = std::move(done)](Result<DecideResponse> r) mutable {
        core->RoundTrip(now, r.ok());
        for (const LeaseAsk& a : *asks) {
          Decision* d = r.ok() && a.entry < r->decisions.size() ? &r->decisions[a.entry] : nullptr;
          const bool allowed = r.ok() && r->allowed;
          const int64_t added = core->table.Granted(a.key, a.limit, now, allowed, d);
          if (added > 0) {
            core->metrics.Add(MetricId::kLeaseGrants);
          }
          // What this instance now holds for the key is there for its requests: counted as
          // remaining, as without the lease.
          if (d != nullptr && allowed) d->remaining = std::min(d->limit, d->remaining + d->leased);
        }
        done(std::move(r));
      });
  Renew(inner_, core_, std::move(plan.renewals), now);
}

void LeaseStore::ReturnEnded() {
  const Nanos now = clock_.Monotonic();
  GiveBackEnded(inner_, core_,
                TakeToGiveBack(core_, [now](auto& table) { return table.TakeEnded(now); }));
  UnitsHeld();  // the gauge
}

void LeaseStore::ReturnAll(Nanos wait) {
  GiveBackEnded(inner_, core_, TakeToGiveBack(core_, [](auto& table) { return table.TakeAll(); }));
  std::unique_lock lock(core_->mu);
  clock_.WaitUntil(core_->idle, lock, clock_.Monotonic() + wait,
                   [this] { return core_->returning == 0; });
}

LeaseCounts LeaseStore::counters() const {
  const Metrics& m = core_->metrics;
  return {.grants = m.Value(MetricId::kLeaseGrants),
          .renewals = m.Value(MetricId::kLeaseRenewals),
          .local = core_->local.load(std::memory_order_relaxed),
          .forwarded = core_->forwarded.load(std::memory_order_relaxed),
          .units_given_back = m.Value(MetricId::kLeaseUnitsGivenBack),
          .units_lost = m.Value(MetricId::kLeaseUnitsLost),
          .shares = m.Value(MetricId::kLeaseShares)};
}

int64_t LeaseStore::UnitsHeld() const {
  const engine_internal::LeaseTableCounts c = core_->table.Counts();
  core_->metrics.Set(MetricId::kLeaseUnits, static_cast<uint64_t>(c.held));
  core_->metrics.Set(MetricId::kLeaseShareKeys, c.sharing);
  // Per policy with share; a policy no longer holding any drops to 0.
  const auto by_policy = core_->table.SharesByPolicy();
  std::lock_guard lock(core_->mu);
  for (const std::string& policy : core_->share_policies) {
    if (by_policy.count(policy) != 0) continue;
    core_->metrics.Series(MetricId::kShareAllotted, {policy}).store(0, std::memory_order_relaxed);
    core_->metrics.Series(MetricId::kShareIdentities, {policy}).store(0, std::memory_order_relaxed);
  }
  core_->share_policies.clear();
  for (const auto& [policy, p] : by_policy) {
    core_->share_policies.push_back(policy);
    core_->metrics.Series(MetricId::kShareAllotted, {policy})
        .store(static_cast<uint64_t>(p.allotted), std::memory_order_relaxed);
    core_->metrics.Series(MetricId::kShareIdentities, {policy})
        .store(static_cast<uint64_t>(p.identities), std::memory_order_relaxed);
  }
  return c.held;
}

std::optional<LeaseStore::IdentityShare> LeaseStore::HeldShare(std::string_view key,
                                                               std::string_view identity) const {
  const ShareOf of{.policy = {}, .identity = identity};
  const EntryRef e{.key = key, .share_of = &of};
  const auto held = core_->table.HeldShare(engine_internal::LeaseTable::SharedKey(e));
  if (!held) return std::nullopt;
  return IdentityShare{.allocation = held->allocation, .held = held->units};
}

LeaseOwed LeaseStore::Owed() const {
  // Under the core's lock, as lots are taken to be given back; a unit otherwise moves only within
  // its key's shard, read under that shard's lock: each unit is counted exactly once.
  std::lock_guard lock(core_->mu);
  const engine_internal::LeaseTableCounts c = core_->table.Counts();
  return {.held = c.held, .asked = c.asked, .ending = c.ending + core_->returning_units};
}

}  // namespace caudal
