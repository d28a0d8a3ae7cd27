// Engine::SettleAsync: settles the reservation a reservation id names (engine/hold.h's format:
// its random id and its keys) at the actual cost, in one store request.
#include <algorithm>
#include <future>
#include <memory>

#include "algorithms/algorithm.h"
#include "caudal/engine/engine.h"
#include "common/cat.h"
#include "engine/hold.h"
#include "engine/plan.h"

namespace caudal {
namespace {

// One settle in flight: what its entries point into, kept alive by the store callback.
struct SettleOp {
  engine_internal::DecodedHold reservation;
  std::shared_ptr<const Engine::Snapshot> snap;
  std::vector<SettleEntry> entries;
  std::vector<engine_internal::KeyedLimit> keyed;  // parallel to entries
  Metrics* metrics = nullptr;
  SettleCallback done;

  void Finish(Result<SettleResult> r) {
    if (metrics != nullptr && r.ok()) {
      const std::string_view name = r->outcome == Reservation::kSettled    ? "settled"
                                    : r->outcome == Reservation::kRepeated ? "repeated"
                                    : r->outcome == Reservation::kConflict ? "conflict"
                                                                           : "unknown";
      metrics->Series(MetricId::kReservationSettles, {name})
          .fetch_add(1, std::memory_order_relaxed);
      if (r->outcome == Reservation::kSettled) {
        int64_t overrun = 0;
        for (const SettledLimit& l : r->limits) {  // what was charged: the limit at most
          const Decision& d = l.decision;
          if (d.reservation == Reservation::kSettled) overrun += std::min(d.overrun, d.limit);
        }
        if (overrun > 0)
          metrics->Add(MetricId::kReservationOverrun, static_cast<uint64_t>(overrun));
      }
    }
    SettleCallback d = std::move(done);
    d(std::move(r));
  }
};

// The outcome over every key: a conflict anywhere wins, then a settle, then a repeat.
Reservation Overall(const std::vector<SettledLimit>& limits) {
  bool settled = false, repeated = false;
  for (const SettledLimit& l : limits) {
    if (l.decision.reservation == Reservation::kConflict) return Reservation::kConflict;
    settled |= l.decision.reservation == Reservation::kSettled;
    repeated |= l.decision.reservation == Reservation::kRepeated;
  }
  return settled    ? Reservation::kSettled
         : repeated ? Reservation::kRepeated
                    : Reservation::kUnknown;
}

}  // namespace

void Engine::SettleAsync(std::string_view reservation, int64_t cost, SettleCallback done) {
  if (cost < 0 || cost > kMaxCost) {
    return done(
        Status::InvalidArgument(Cat("cost: expected an integer from 0 to 2^40 (got ", cost, ')'))
            .WithReason(engine_reason::kInvalidCost));
  }
  SettleWith(reservation, cost, std::nullopt, std::move(done));
}

void Engine::SettleAsync(std::string_view reservation, const Costs& costs, SettleCallback done) {
  const std::shared_ptr<const Snapshot> snap = snapshot();
  if (Status s = engine_internal::ValidateCosts(costs, false, *snap->policies); !s.ok()) {
    return done(s);
  }
  SettleWith(reservation, engine_internal::RequestsIn(costs), costs, std::move(done));
}

void Engine::SettleWith(std::string_view reservation, int64_t requests,
                        const std::optional<Costs>& costs, SettleCallback done) {
  auto decoded = engine_internal::DecodeHold(reservation);
  if (!decoded.ok()) {
    return done(Status::InvalidArgument("reservation: not a reservation id")
                    .WithReason(engine_reason::kInvalidReservation));
  }
  auto op = std::make_shared<SettleOp>();
  op->reservation = std::move(*decoded);
  op->snap = snapshot();
  op->metrics = options_.metrics;
  op->done = std::move(done);
  for (const std::string& key : op->reservation.keys) {
    const engine_internal::KeyedLimit keyed =
        engine_internal::LookUpKey(*op->snap, key, /*has_local=*/false, SupportsReserve);
    if (keyed.limit == nullptr) continue;  // its limit changed since: that key's state is gone
    op->keyed.push_back(keyed);
    op->entries.push_back(
        {.key = key,
         .limit = keyed.limit,
         .cost = std::min(engine_internal::LimitCost(*keyed.limit, requests, costs), kMaxCost),
         .id = {.hi = op->reservation.id.hi, .lo = op->reservation.id.lo},
         .terms = keyed.policy->spec.reservations});
  }
  if (op->entries.empty()) return op->Finish(SettleResult{.keepalive = op->snap});
  store_.SettleAsync(op->entries, [op](Result<SettleResponse> r) {
    if (!r.ok()) return op->Finish(r.status());
    SettleResult out{.keepalive = op->snap};
    for (size_t i = 0; i < op->entries.size() && i < r->decisions.size(); ++i) {
      const Decision& d = r->decisions[i];
      if (d.reservation == Reservation::kUnknown) continue;
      out.limits.push_back(
          {.policy = op->keyed[i].policy->spec.name, .limit = op->keyed[i].limit, .decision = d});
    }
    out.outcome = Overall(out.limits);
    op->Finish(std::move(out));
  });
}

Result<SettleResult> Engine::Settle(std::string_view reservation, int64_t cost) {
  std::promise<Result<SettleResult>> promise;
  auto future = promise.get_future();
  SettleAsync(reservation, cost,
              [&promise](Result<SettleResult> r) { promise.set_value(std::move(r)); });
  return future.get();
}

Result<SettleResult> Engine::Settle(std::string_view reservation, const Costs& costs) {
  std::promise<Result<SettleResult>> promise;
  auto future = promise.get_future();
  SettleAsync(reservation, costs,
              [&promise](Result<SettleResult> r) { promise.set_value(std::move(r)); });
  return future.get();
}

}  // namespace caudal
