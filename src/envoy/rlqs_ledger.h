// RlqsLedger: what one Envoy may spend on one bucket, against what was paid for it in the store.
//
// An RLQS assignment lets an Envoy admit requests locally with no call per request. caudal pays
// for them in the store with the grants of the bucket's shares (store.h's Share: each renewal
// takes the units its allocation accrued since the last), and lets an assignment run at most one
// credit ahead of those: its rate over the time to live caudal gives (assignment_ttl). The
// service charges that credit in the store before it sends the assignment (Pay()s it), so that
// every unit an Envoy may spend was consumed first (docs/algorithms.md, "RLQS").
//
// Envoy's filter applies a token bucket assignment as a bucket that starts with at most
// max_tokens M and refills tokens_per_fill F every fill_interval I, continuously; it ends at its
// time to live, counted from its receipt, and an assignment with the same strategy extends it
// (its tokens kept, its time to live counted again from the receipt). Envoy reads a time to live
// and a fill interval in whole seconds (less than one second expires the assignment at once, and
// a fill interval under one second is not usable), and tells strategies apart by max_tokens and
// tokens_per_fill, not by the fill interval's seconds: so every time to live and fill interval
// sent here is whole seconds, and a slower strategy that Envoy would take for the active one is
// told apart by its burst. Over an assignment from s to its end E the Envoy admits at most
// M + (F/I)·(E − s). The ledger keeps, per limit of the bucket's policy,
//   paid       the units granted so far (consumed in the store), and
//   committed  the most the Envoy may admit under every assignment sent so far, through their
//              ends (an ended or replaced one counts through the time it ended),
// and sends nothing that would make committed exceed the least paid plus the credit of the
// assignment it sends. An active rate is kept while the allocation is at most a twentieth above
// it, never when below: an Envoy never holds more than its allocation.
//
// Units paid that no assignment spends are lost, never admitted: caudal errs towards admitting
// less.
//
// Thread-safety: none; the owner serialises.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "caudal/common/clock.h"

namespace caudal::envoy {

// A token bucket as Envoy's filter applies it (envoy.type.v3.TokenBucket).
struct RlqsTokenBucket {
  int64_t max_tokens = 1;       // M: 1 .. 2^32 − 1; also what it starts with
  int64_t tokens_per_fill = 1;  // F: 1 .. 2^32 − 1
  Micros fill_interval{1};      // I: > 0
  friend bool operator==(const RlqsTokenBucket&, const RlqsTokenBucket&) = default;
};

// An assignment's strategy.
struct RlqsStrategy {
  enum class Kind : uint8_t { kTokenBucket, kAllowAll, kDenyAll };
  Kind kind = Kind::kDenyAll;
  RlqsTokenBucket bucket{};  // kTokenBucket's
  friend bool operator==(const RlqsStrategy&, const RlqsStrategy&) = default;
};

struct RlqsAssignment {
  RlqsStrategy strategy;
  Micros ttl{0};
  bool extends = false;  // the same strategy as the active one: Envoy extends it
};

// A rate: `count` units every `period` (a share's allocation per its limit's rate period).
struct RlqsRate {
  int64_t count = 0;
  Micros period{1};
};

// The token bucket that admits at most `rate`, with room for a burst of `burst` worth of it (at
// least one token, at most F): I is `rate`'s period rounded up to whole seconds, F the units of
// `rate` in I rounded down (at most 2^32 − 1). None when F would be 0.
std::optional<RlqsTokenBucket> TokenBucketFor(RlqsRate rate, Micros burst);

class RlqsLedger {
 public:
  explicit RlqsLedger(size_t limits) : paid_(limits, 0) {}

  // `units` of limit `k` granted (consumed in the store) at any time.
  void Pay(size_t k, int64_t units) { paid_[k] += units; }

  // The assignment to send at `now` for the bucket: a token bucket at `rate` (the least of its
  // limits' allocations) whose end is as late as what is paid and its credit (its rate over
  // `max_ttl`) cover, at most `max_ttl` from now, in whole seconds. An active token bucket whose
  // rate is at most a twentieth below `rate` is kept (extended), so that a share's small moves
  // do not reset the Envoy's bucket. When that cannot cover one token and one second, or `rate`
  // is none, DENY_ALL for `deny_ttl`.
  RlqsAssignment Assign(Micros now, std::optional<RlqsRate> rate, Micros max_ttl, Micros deny_ttl,
                        Micros burst);
  // A blanket assignment (allow or deny all) for `ttl`, ending the active token bucket now. An
  // ALLOW_ALL is outside what the ledger bounds: it is a failure mode's or a configuration's
  // choice.
  RlqsAssignment Blanket(Micros now, RlqsStrategy::Kind kind, Micros ttl);
  // The active strategy again with a time to live of 0: the Envoy expires it at once (a
  // shutdown). Ends the active token bucket now.
  RlqsAssignment ExpireNow(Micros now);
  // The same strategy again for `ttl` more, whatever is paid: the `local` failure mode's "keep
  // the last assignment" while the store cannot answer. Outside what the ledger bounds, as
  // ALLOW_ALL is; what it commits is counted, so the ledger pays it back before covering more.
  std::optional<RlqsAssignment> KeepActive(Micros now, Micros ttl);

  size_t limits() const { return paid_.size(); }
  int64_t paid(size_t k) const { return paid_[k]; }
  // What the assignments sent may admit in all, through their ends.
  int64_t committed() const;
  const std::optional<RlqsStrategy>& active() const { return active_; }
  Micros end() const { return end_; }

 private:
  int64_t LeastPaid() const;
  // Ends the active assignment at `now` (or at its end, if sooner): what it may admit is fixed.
  void Close(Micros now);

  std::vector<int64_t> paid_;
  int64_t closed_ = 0;  // what ended assignments may have admitted
  std::optional<RlqsStrategy> active_;
  Micros start_{0};
  Micros end_{0};
};

}  // namespace caudal::envoy
