#include "store/reservation_book.h"

#include <algorithm>

#include "algorithms/algorithm.h"

namespace caudal {
namespace {

// Forgets the record that expires first among those `which` picks, when they are `most` or more.
template <typename Which>
void ForgetEarliestPast(ReservationBook& book, int64_t most, Which which) {
  if (std::count_if(book.records.begin(), book.records.end(), which) < most) return;
  auto first = book.records.end();
  for (auto x = book.records.begin(); x != book.records.end(); ++x) {
    if (which(*x) && (first == book.records.end() || x->expiry_us < first->expiry_us)) first = x;
  }
  book.records.erase(first);
}

// An open record that holds a slot: one of estimate 0 takes none.
bool HoldsASlot(const ReservationRecord& r) { return !r.settled && r.estimate > 0; }
bool OpenAtZero(const ReservationRecord& r) { return !r.settled && r.estimate == 0; }

}  // namespace

bool ExpireReservations(const Limit& limit, ReservationBook& book,
                        std::optional<CompactState>& state, Micros now) {
  bool changed = false;
  for (const ReservationRecord& r : book.records) {
    if (r.expiry_us > now.count() || r.settled || !r.give_back) continue;
    const Step s = GiveBackCompact(limit, state ? &*state : nullptr, now, r.estimate, r.grant.at,
                                   r.grant.reset_after);
    if (!s.changed) continue;
    state = s.next;
    changed = true;
  }
  std::erase_if(book.records,
                [&](const ReservationRecord& r) { return r.expiry_us <= now.count(); });
  return changed;
}

Step DecideReserve(const Limit& limit, const ReservationBook& book, const CompactState* state,
                   Micros now, int64_t cost, const ReservationTerms& terms) {
  Step step = DecideCompact(limit, state, now, cost);
  if (cost == 0) {
    // It takes no slot, but a settle may charge it: refused in debt (or on an overdrawn window),
    // as a charge's peek is, so that settles cannot pile debt up through reserves of 0.
    const Step peek = ChargeCompact(limit, state, now, 0);
    if (!peek.decision.allowed()) step.decision = peek.decision;
    return step;
  }
  int64_t open = 0;
  int64_t earliest = 0;
  for (const ReservationRecord& r : book.records) {
    if (!HoldsASlot(r)) continue;
    earliest = open == 0 ? r.expiry_us : std::min(earliest, r.expiry_us);
    ++open;
  }
  if (open < terms.max_open) return step;
  // Full: nothing is consumed; the request could pass once the earliest open one expires.
  const Micros until(earliest - now.count());
  Step peek = DecideCompact(limit, state, now, 0);
  peek.decision.verdict = Verdict::kDenied;
  peek.decision.retry_after = std::max(until, step.decision.retry_after);
  peek.decision.reservation = Reservation::kFull;
  return peek;
}

void OpenReservation(ReservationBook& book, int64_t id, Micros now, int64_t cost,
                     const ReservationTerms& terms, Decision& decision) {
  // At most max_open of estimate 0 besides the open ones: the one that expires first goes.
  if (cost == 0) ForgetEarliestPast(book, terms.max_open, OpenAtZero);
  book.records.push_back({.id = id,
                          .expiry_us = now.count() + terms.ttl.count(),
                          .estimate = cost,
                          .grant = {.at = now, .reset_after = decision.reset_after},
                          .give_back = terms.on_expiry == ExpiryOutcome::kGiveBack,
                          .settled = false,
                          .actual = 0,
                          .result = {}});
  decision.reservation = Reservation::kOpened;
}

Step Settle(const Limit& limit, ReservationBook& book, const CompactState* state, Micros now,
            int64_t id, int64_t cost, const ReservationTerms& terms) {
  const auto it = std::find_if(book.records.begin(), book.records.end(),
                               [&](const ReservationRecord& r) { return r.id == id; });
  Step step;
  if (it == book.records.end() || it->settled) {
    step = DecideCompact(limit, state, now, 0);
    if (it != book.records.end() && it->actual == cost) {
      step.decision = it->result;
      step.decision.reservation = Reservation::kRepeated;
    } else {
      step.decision.reservation =
          it == book.records.end() ? Reservation::kUnknown : Reservation::kConflict;
    }
    return step;
  }
  ReservationRecord& r = *it;
  if (cost < r.estimate) {
    step = GiveBackCompact(limit, state, now, r.estimate - cost, r.grant.at, r.grant.reset_after);
  } else if (cost > r.estimate) {  // at most the capacity above the estimate is charged
    step = OverdrawCompact(limit, state, now, std::min(cost - r.estimate, limit.capacity()));
  } else {
    step = DecideCompact(limit, state, now, 0);
  }
  step.decision.reservation = Reservation::kSettled;
  step.decision.overrun = cost > r.estimate ? cost - r.estimate : 0;
  r.settled = true;
  r.actual = cost;
  r.result = step.decision;
  // At most max_open settled records: the one that expires first goes.
  ForgetEarliestPast(book, terms.max_open + 1,
                     [](const ReservationRecord& x) { return x.settled; });
  return step;
}

}  // namespace caudal
