// CompactState and Step: the shape shared by the algorithms whose state is a few integers
// (fixed_window, sliding_window_counter, token_bucket, gcra).
//
// Every algorithm is a pure function (state, limit, now, cost) -> Step: no clock, no I/O, no
// locks. A missing state (nullptr) means "fresh": never seen, or idle long enough that dropping
// it changes no decision. Each algorithm documents what its three words mean.
//
// Shared by all five algorithms (sliding_window_log included):
// - cost 0 is a peek: always kAllowed, consumes nothing, reports remaining and reset_after.
// - cost > capacity is kNeverFits with retry_after 0, and consumes nothing.
// - a kDenied request retried exactly retry_after later passes (if nothing else was consumed in
//   between), and 1 µs earlier it does not.
// - reset_after later the state decides exactly as a fresh one (nullptr) does.
// - timestamps are µs since the epoch in [0, 2^52), so every value stays below 2^53.
// - Refund(units) gives back up to `units` units already admitted, never past a fresh state:
//   always kAllowed with retry_after 0, and it reports the state after the refund. A fresh state
//   has nothing to give back and needs no write. Refunding what a request of cost c consumed,
//   right after it, leaves the state deciding exactly as before the request.
// - GiveBack(units, at, reset), where an algorithm takes leases (token_bucket, gcra,
//   fixed_window): gives back up to `units` that a decision at `at` (the store's time) consumed
//   and reported `reset` (its reset_after) for, but only those that still count: a unit counted
//   in a window that has passed, or absorbed by a bucket that has refilled since, stays. So the
//   state never ends fuller than if those units had not been consumed, whatever came between.
//   At `at` itself it is a refund of `units`. Like Refund, it reports the state after it.
// - Overdraw(units), where an algorithm settles reservations (token_bucket, gcra, fixed_window):
//   counts `units` whatever is left, into debt past empty: a bucket's tokens go below 0 (a GCRA
//   arrival time past now + τ), a fixed window's count above its limit. Debt is held up to
//   MaxDebt units, and what is past that is forgiven. A bucket in debt refuses every request
//   until it has refilled past the debt, so a later request waits until the long-run rate is
//   met; a window's excess lasts until the window ends. Always kAllowed; it reports the state
//   after it (remaining 0 while in debt).
// - Charge(cost), where an algorithm can overdraw (token_bucket, gcra, fixed_window): counts
//   `cost` as Overdraw does, whatever the verdict; the verdict says whether it fitted the state
//   before (Decide's, kNeverFits above the capacity included), except that a peek (cost 0) on a
//   state in debt or overdrawn is kDenied. A kDenied charge's retry_after is until a hit of its
//   cost fits the state it left (a window: its end). It reports the state after it.
#pragma once

#include <array>
#include <cstdint>

#include "caudal/algorithms/limit.h"

namespace caudal {

struct CompactState {
  std::array<int64_t, 3> w{};
  friend bool operator==(const CompactState&, const CompactState&) = default;
};

struct Step {
  Decision decision;
  // The state to persist. Equal to the input (or fresh) when nothing was consumed: a denied
  // request or a peek (cost 0) needs no write.
  CompactState next;
  // The state changed (something was consumed, or refunded): `next` must be written back.
  bool changed = false;
};

}  // namespace caudal
