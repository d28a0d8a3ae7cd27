// ReferenceModel: the simplest possible single-threaded store, built straight from the pure
// algorithms, that the conformance suite compares real stores against decision for decision.
//
// It keeps every key forever in a std::map and decides a request exactly as the Store contract
// says: evaluate every consuming entry at `now`; if all are allowed, commit all; otherwise commit
// nothing and report the entries that would have passed as a peek (cost 0). Refunds, charges and
// give-backs are applied in either case; a lease is taken only when the request is allowed.
// Concurrency holds are taken (admitted) and released as the Store contract says; reservations
// are opened, settled and expired as it says too (store/reservation_book.h).
//
// Thread-safety: none (test helper). Preconditions: the request is valid (ValidateEntries).
#pragma once

#include <map>
#include <span>
#include <string>
#include <utility>

#include "algorithms/compact_state.h"
#include "algorithms/concurrency.h"
#include "algorithms/sliding_window_log.h"
#include "caudal/store/store.h"
#include "store/batch.h"
#include "store/reservation_book.h"

namespace caudal {

class ReferenceModel {
 public:
  StoreResponse Decide(std::span<const EntryRef> entries, Micros now);
  // A typed request, as a store encodes it (store/batch.h).
  StoreResponse Decide(const DecideRequest& request, Micros now) {
    const EncodedBatch batch(request);
    return Decide(batch.entries(), now);
  }

 private:
  Decision Evaluate(const EntryRef& e, Micros now, int64_t cost, int64_t lease, Step* step);
  Decision Refund(const EntryRef& e, Micros now);
  // A hold's id as the model keeps it: each distinct id its own number, in order of first use
  // (exact for any ids, unlike a hash).
  int64_t ModelId(const HoldId& id);

  std::map<std::string, CompactState, std::less<>> compact_;
  std::map<std::string, sliding_window_log::LogState, std::less<>> logs_;
  std::map<std::string, concurrency::Holds, std::less<>> holds_;
  std::map<std::pair<int64_t, int64_t>, int64_t> hold_ids_;
  std::map<std::string, ReservationBook, std::less<>> books_;
};

}  // namespace caudal
