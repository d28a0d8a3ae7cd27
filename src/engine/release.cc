// Engine::ReleaseAsync: gives back the concurrency slots a hold id names (engine/hold.h).
#include <future>
#include <memory>

#include "caudal/engine/engine.h"
#include "common/cat.h"
#include "engine/hold.h"
#include "engine/plan.h"

namespace caudal {
namespace {

// The concurrency limit in force whose store key `key` is, and its local failure mode's limit
// when a local store decides for it; `limit` null when none is (the policy, its tier or its
// runtime override changed since, or the key is no concurrency limit's).
struct Held {
  const Limit* limit = nullptr;
  const Limit* local = nullptr;
};

// Policy keys read "caudal:<policy>:<index>:<limit>:{<identity>}" (plan.h); the prefix names the
// limit, so a match is the very limit the slot was taken under.
Held LookUpHeld(const Engine::Snapshot& snap, std::string_view key, bool has_local) {
  constexpr std::string_view kHead = "caudal:";
  const size_t open = key.find('{');
  if (!key.starts_with(kHead) || open == std::string_view::npos || key.back() != '}') return {};
  const size_t name_end = key.find(':', kHead.size());
  if (name_end == std::string_view::npos || name_end > open) return {};
  const std::string_view name = key.substr(kHead.size(), name_end - kHead.size());
  const std::string_view prefix = key.substr(0, open);
  const std::string_view identity = key.substr(open + 1, key.size() - open - 2);
  for (const PolicySet::Policy& p : snap.policies->policies()) {
    if (p.spec.name != name) continue;
    const bool local = has_local && p.on_failure == FailureMode::kLocal;
    auto in = [&](const std::vector<Limit>& limits, const std::vector<Limit>& locals,
                  const std::vector<std::string>& prefixes) -> Held {
      for (size_t k = 0; k < prefixes.size() && k < limits.size(); ++k) {
        if (prefixes[k] != prefix || !IsConcurrency(limits[k].algorithm())) continue;
        return {.limit = &limits[k], .local = local && k < locals.size() ? &locals[k] : nullptr};
      }
      return {};
    };
    if (Held h = in(p.spec.limits, p.local_limits, p.key_prefixes); h.limit) return h;
    for (const PolicySet::Policy::Tier& t : p.tiers) {
      if (Held h = in(t.set.limits, t.set.local_limits, t.set.key_prefixes); h.limit) return h;
    }
    const RuntimeOverrides::Entry* runtime =
        snap.runtime == nullptr ? nullptr
                                : snap.runtime->Find(OverrideKind::kPolicy, name, identity);
    if (runtime != nullptr) {
      return in(runtime->set.limits, runtime->set.local_limits, runtime->set.key_prefixes);
    }
  }
  return {};
}

// One release in flight: what its entries point into, kept alive by the store callbacks.
struct ReleaseOp {
  engine_internal::DecodedHold hold;
  std::shared_ptr<const Engine::Snapshot> snap;
  std::vector<EntryRef> entries;
  std::vector<std::string> local_keys;
  std::vector<EntryRef> local_entries;
  Metrics* metrics = nullptr;
  ReleaseCallback done;

  void Finish(Result<ReleaseResult> r) {
    if (metrics != nullptr && r.ok()) {
      metrics->Series(MetricId::kHoldReleases, {r->released ? "released" : "unknown"})
          .fetch_add(1, std::memory_order_relaxed);
    }
    ReleaseCallback d = std::move(done);
    d(std::move(r));
  }
};

int Released(const StoreResponse& r) {
  int n = 0;
  for (const Decision& d : r.decisions) n += d.released;
  return n;
}

}  // namespace

void Engine::ReleaseAsync(std::string_view hold, ReleaseCallback done) {
  auto decoded = engine_internal::DecodeHold(hold);
  if (!decoded.ok()) return done(decoded.status());
  auto op = std::make_shared<ReleaseOp>();
  op->hold = std::move(*decoded);
  op->snap = snapshot();
  op->metrics = options_.metrics;
  op->done = std::move(done);
  Store* local = options_.local_store;
  op->local_keys.reserve(op->hold.keys.size());  // the entries point into it
  for (const std::string& key : op->hold.keys) {
    const Held held = LookUpHeld(*op->snap, key, local != nullptr);
    if (held.limit == nullptr) continue;
    op->entries.push_back({.key = key,
                           .limit = held.limit,
                           .cost = 0,
                           .op = EntryOp::kRelease,
                           .hold = &op->hold.id});
    if (held.local == nullptr) continue;
    op->local_keys.push_back(Cat("local|", held.local->ToString(), '|', key));
    op->local_entries.push_back({.key = op->local_keys.back(),
                                 .limit = held.local,
                                 .cost = 0,
                                 .op = EntryOp::kRelease,
                                 .hold = &op->hold.id});
  }
  if (op->entries.empty()) return op->Finish(ReleaseResult{});
  store_.DecideAsync(op->entries, [op, local](Result<StoreResponse> shared) {
    if (op->local_entries.empty()) {
      if (!shared.ok()) return op->Finish(shared.status());
      const int n = Released(*shared);
      return op->Finish(ReleaseResult{.released = n > 0, .slots = n});
    }
    // Slots taken while failing over live in the local store: freed there too.
    local->DecideAsync(
        op->local_entries, [op, shared = std::move(shared)](Result<StoreResponse> mine) {
          const int n = (shared.ok() ? Released(*shared) : 0) + (mine.ok() ? Released(*mine) : 0);
          if (n == 0 && !shared.ok()) return op->Finish(shared.status());
          op->Finish(ReleaseResult{.released = n > 0, .slots = n});
        });
  });
}

Result<ReleaseResult> Engine::Release(std::string_view hold) {
  std::promise<Result<ReleaseResult>> promise;
  auto future = promise.get_future();
  ReleaseAsync(hold, [&promise](Result<ReleaseResult> r) { promise.set_value(std::move(r)); });
  return future.get();
}

}  // namespace caudal
