// Decision: what one limit says about one request. Over-limit is a result, not an error.
#pragma once

#include <cstdint>
#include <string_view>

#include "caudal/common/clock.h"

namespace caudal {

enum class Verdict : uint8_t {
  kAllowed,
  kDenied,     // over the limit now; retry_after says when a request of this cost could pass
  kNeverFits,  // cost exceeds the limit's capacity: no wait will ever admit it
};

std::string_view VerdictName(Verdict v);

// What a reserve or a settle did with its reservation (EntryOp::kReserve, kSettle: store.h).
enum class Reservation : uint8_t {
  kNone,      // neither a reserve nor a settle, or a reserve its request refused elsewhere
  kOpened,    // a reserve admitted and recorded it
  kFull,      // a reserve refused: the key already holds its most open reservations
  kSettled,   // a settle applied its cost
  kRepeated,  // a settle of the cost it was already settled with: the first settle's decision
  kConflict,  // a settle of another cost than the first one's: nothing changed
  kUnknown,   // a settle of no live reservation (never made, or expired): nothing changed
};

struct Decision {
  Verdict verdict = Verdict::kAllowed;
  int64_t limit = 0;      // the capacity (burst) or the per-window limit
  int64_t remaining = 0;  // whole units left after this decision
  // Units counted beyond `limit` (remaining is 0 then): only a fixed window that charges
  // overdrew (EntryOp::kCharge) has any. So limit - remaining + overdrawn is what the limit
  // counts as used, exactly, which envoyproxy/ratelimit's hit statistics need.
  int64_t overdrawn = 0;
  Micros reset_after{0};  // until the state is fresh again (full bucket, empty window)
  Micros retry_after{0};  // 0 unless kDenied: until a request of this cost could pass
  // Units taken beyond the cost as a lease (EntryRef::lease); `remaining` and `reset_after` are
  // after them. 0 unless the entry asked for a lease and the request was allowed.
  int64_t leased = 0;
  // leased > 0: the store's time of the grant (µs since the epoch, on the store's clock), which
  // giving the units back names (LeaseGrant).
  Micros leased_at{0};
  // A release (EntryOp::kRelease): the hold was live and is now freed.
  bool released = false;
  // A reserve or a settle: what it did with its reservation.
  Reservation reservation = Reservation::kNone;
  // A settle that settled (or repeats one): its cost above the estimate, of which it charged at
  // most `limit` (store.h).
  int64_t overrun = 0;

  bool allowed() const { return verdict == Verdict::kAllowed; }
  friend bool operator==(const Decision&, const Decision&) = default;
};

}  // namespace caudal
