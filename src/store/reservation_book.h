// ReservationBook: the reservations of one key (store.h, EntryOp::kReserve and kSettle) and the
// pure steps that decide them, shared by the memory store and the reference model; the Redis
// script is their twin (src/redis/lua/reservation.lua). No clock, no locks.
//
// A record is open from its reserve until it is settled or expires; a settled one stays, with
// its cost and decision, until its expiry, to answer a repeated settle. At most `max_open` open
// records of an estimate above 0, `max_open` of estimate 0 and `max_open` settled ones: a reserve
// past the first is refused, and one past the second, or a settle past the third, forgets the
// record of its kind that expires first (a reserve of 0 consumes nothing, so it takes no slot
// that could lock the key's reserves out).
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "algorithms/compact_state.h"
#include "caudal/algorithms/limit.h"
#include "caudal/store/store.h"

namespace caudal {

struct ReservationRecord {
  int64_t id = 0;  // what the store keeps of the reservation's HoldId
  int64_t expiry_us = 0;
  int64_t estimate = 0;
  LeaseGrant grant;        // the reserve's decision: what a give-back of the estimate needs
  bool give_back = false;  // ExpiryOutcome::kGiveBack
  bool settled = false;
  int64_t actual = 0;  // settled: the cost it was settled with
  Decision result;     // settled: the settle's decision
};

struct ReservationBook {
  std::vector<ReservationRecord> records;
};

// Drops the records expired at `now`, applying each unsettled kGiveBack one's give-back to
// `state` (nullopt: fresh). Returns whether `state` changed.
bool ExpireReservations(const Limit& limit, ReservationBook& book,
                        std::optional<CompactState>& state, Micros now);

// A reserve of `cost` on `state` at `now`: the decision of a consume, refused (kDenied, kFull)
// when cost > 0 and the book holds terms.max_open open records of an estimate above 0; one of 0
// is refused (kDenied) on a state in debt or overdrawn, as a charge's peek.
// Precondition: ExpireReservations ran at `now`.
Step DecideReserve(const Limit& limit, const ReservationBook& book, const CompactState* state,
                   Micros now, int64_t cost, const ReservationTerms& terms);
// Records an admitted reserve (`decision` is DecideReserve's).
void OpenReservation(ReservationBook& book, int64_t id, Micros now, int64_t cost,
                     const ReservationTerms& terms, Decision& decision);

// A settle of reservation `id` at `cost`: the step to write (changed) and the decision, whose
// `reservation` says what happened and `overrun` the cost above the estimate, of which at most
// the limit's capacity is charged; a settled record is updated in `book`. Precondition:
// ExpireReservations ran at `now`.
Step Settle(const Limit& limit, ReservationBook& book, const CompactState* state, Micros now,
            int64_t id, int64_t cost, const ReservationTerms& terms);

}  // namespace caudal
