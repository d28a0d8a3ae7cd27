// Engine::ReleaseAsync: gives back the concurrency slots a hold id names (engine/hold.h).
#include <future>
#include <memory>

#include "caudal/engine/engine.h"
#include "common/cat.h"
#include "engine/hold.h"
#include "engine/plan.h"
#include "engine/store_key.h"

namespace caudal {
namespace {

// One release in flight: what its entries point into, kept alive by the store callbacks.
struct ReleaseOp {
  engine_internal::DecodedHold hold;
  std::shared_ptr<const Engine::Snapshot> snap;
  std::vector<ReleaseEntry> entries;
  std::vector<std::string> local_keys;
  std::vector<ReleaseEntry> local_entries;
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

int Released(const ReleaseResponse& r) {
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
    const engine_internal::KeyedLimit held =
        engine_internal::LookUpKey(*op->snap, key, local != nullptr, IsConcurrency);
    if (held.limit == nullptr) continue;
    op->entries.push_back({.key = key, .limit = held.limit, .hold = op->hold.id});
    if (held.local == nullptr) continue;
    op->local_keys.push_back(store_key::Local(*held.local, key));
    op->local_entries.push_back(
        {.key = op->local_keys.back(), .limit = held.local, .hold = op->hold.id});
  }
  if (op->entries.empty()) return op->Finish(ReleaseResult{});
  store_.ReleaseAsync(op->entries, [op, local](Result<ReleaseResponse> shared) {
    if (op->local_entries.empty()) {
      if (!shared.ok()) return op->Finish(shared.status());
      const int n = Released(*shared);
      return op->Finish(ReleaseResult{.released = n > 0, .slots = n});
    }
    // Slots taken while failing over live in the local store: freed there too.
    local->ReleaseAsync(
        op->local_entries, [op, shared = std::move(shared)](Result<ReleaseResponse> mine) {
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
