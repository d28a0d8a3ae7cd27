#include "store/store_reference_model.h"

#include "algorithms/algorithm.h"

namespace caudal {
namespace {

// Applied whatever the request's other entries decide.
bool Refunds(const EntryRef& e) {
  return e.op == EntryOp::kRefund || e.op == EntryOp::kGiveBack || e.op == EntryOp::kRelease ||
         e.op == EntryOp::kSettle;
}

}  // namespace

int64_t ReferenceModel::ModelId(const HoldId& id) {
  const auto [it, inserted] =
      hold_ids_.try_emplace({id.hi, id.lo}, static_cast<int64_t>(hold_ids_.size()) + 1);
  return it->second;
}

Decision ReferenceModel::Evaluate(const EntryRef& e, Micros now, int64_t cost, int64_t lease,
                                  Step* step) {
  if (HasHolds(e.limit->algorithm())) {
    return concurrency::Evaluate(*e.limit, holds_[std::string(e.key)], now, cost);
  }
  if (HasLogState(e.limit->algorithm())) {
    return LogFunctionsOf(*e.limit).evaluate(*e.limit, logs_[std::string(e.key)], now, cost);
  }
  const auto it = compact_.find(e.key);
  const CompactState* state = it == compact_.end() ? nullptr : &it->second;
  if (e.op == EntryOp::kReserve) {
    *step = DecideReserve(*e.limit, books_[std::string(e.key)], state, now, cost, *e.reservation);
    return step->decision;
  }
  *step = e.op == EntryOp::kCharge ? ChargeCompact(*e.limit, state, now, cost)
                                   : DecideCompactWithLease(*e.limit, state, now, cost, lease);
  return step->decision;
}

Decision ReferenceModel::Refund(const EntryRef& e, Micros now) {
  if (e.op == EntryOp::kRelease) {
    bool released = false;
    Decision d = concurrency::Release(*e.limit, holds_[std::string(e.key)], now, ModelId(*e.hold),
                                      &released);
    d.released = released;
    return d;
  }
  if (HasLogState(e.limit->algorithm())) {
    return LogFunctionsOf(*e.limit).refund(*e.limit, logs_[std::string(e.key)], now, e.cost);
  }
  const auto it = compact_.find(e.key);
  const CompactState* state = it == compact_.end() ? nullptr : &it->second;
  if (e.op == EntryOp::kSettle) {
    const Step step = Settle(*e.limit, books_[std::string(e.key)], state, now, ModelId(*e.hold),
                             e.cost, *e.reservation);
    if (step.changed) compact_[std::string(e.key)] = step.next;
    return step.decision;
  }
  const Step step = e.op == EntryOp::kGiveBack ? GiveBackCompact(*e.limit, state, now, e.cost,
                                                                 e.grant->at, e.grant->reset_after)
                                               : RefundCompact(*e.limit, state, now, e.cost);
  if (step.changed) compact_[std::string(e.key)] = step.next;
  return step.decision;
}

StoreResponse ReferenceModel::Decide(std::span<const EntryRef> entries, Micros now) {
  StoreResponse response;
  response.allowed = true;
  response.decisions.resize(entries.size());
  std::vector<Step> steps(entries.size());
  for (const EntryRef& e : entries) {  // expired reservations first, whatever comes next
    if (e.forget_reservations) books_.erase(std::string(e.key));  // a reset: none gives back
    if (e.reservation == nullptr || !SupportsReserve(e.limit->algorithm())) continue;
    const auto book = books_.find(e.key);
    if (book == books_.end()) continue;
    const auto it = compact_.find(e.key);
    std::optional<CompactState> state;
    if (it != compact_.end()) state = it->second;
    if (ExpireReservations(*e.limit, book->second, state, now))
      compact_[std::string(e.key)] = *state;
  }
  for (size_t i = 0; i < entries.size(); ++i) {
    if (Refunds(entries[i])) continue;
    response.decisions[i] = Evaluate(entries[i], now, entries[i].cost, entries[i].lease, &steps[i]);
    response.allowed = response.allowed && response.decisions[i].allowed();
  }
  for (size_t i = 0; i < entries.size(); ++i) {
    const EntryRef& e = entries[i];
    if (Refunds(e)) {
      response.decisions[i] = Refund(e, now);  // whatever the other entries decided
    } else if (e.op == EntryOp::kCharge) {
      if (steps[i].changed) compact_[std::string(e.key)] = steps[i].next;  // whatever they decided
    } else if (!response.allowed) {
      // Would-have-passed entries report their unchanged state; refusals keep their verdict.
      if (response.decisions[i].allowed())
        response.decisions[i] = Evaluate(e, now, 0, 0, &steps[i]);
    } else if (HasHolds(e.limit->algorithm())) {
      if (e.cost > 0)
        concurrency::Take(*e.limit, holds_[std::string(e.key)], now, ModelId(*e.hold));
    } else if (HasLogState(e.limit->algorithm())) {
      LogFunctionsOf(*e.limit).commit(*e.limit, logs_[std::string(e.key)], now, e.cost);
    } else {
      if (steps[i].changed) compact_[std::string(e.key)] = steps[i].next;
      if (e.op == EntryOp::kReserve) {
        OpenReservation(books_[std::string(e.key)], ModelId(*e.hold), now, e.cost, *e.reservation,
                        response.decisions[i]);
      }
    }
  }
  return response;
}

}  // namespace caudal
