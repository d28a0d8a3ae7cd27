#include "engine/idempotency.h"

#include <random>
#include <utility>

#include "observe/metrics.h"
#include "store/idempotency_store.h"

namespace caudal {
namespace {

void Bump(std::atomic<uint64_t>* n) { n->fetch_add(1, std::memory_order_relaxed); }

// A claim's id: 128 random bits from the operating system's generator, so that a late request
// never completes a later one's claim.
std::string ClaimId() {
  static constexpr char kHex[] = "0123456789abcdef";
  std::random_device rd;
  std::string out;
  out.reserve(32);
  for (int i = 0; i < 4; ++i) {
    const uint32_t word = rd();
    for (int shift = 28; shift >= 0; shift -= 4) out.push_back(kHex[(word >> shift) & 0xF]);
  }
  return out;
}

}  // namespace

struct Idempotency::Call {
  // The store and the counters, not the Idempotency: the front end may be gone when the store
  // answers (both outlive it).
  IdempotencyStore* store;
  Counters counters;
  Readable readable;
  IdempotencyOptions options;
  std::string record;
  std::string fingerprint;
  std::string claim;
  Decide decide;
  Done done;
};

Idempotency::Idempotency(IdempotencyStore& store, Metrics& metrics, Readable readable)
    : store_(store),
      counters_{.first = &metrics.Series(MetricId::kIdempotencyKeys, {"first"}),
                .replayed = &metrics.Series(MetricId::kIdempotencyKeys, {"replayed"}),
                .conflict = &metrics.Series(MetricId::kIdempotencyKeys, {"conflict"}),
                .mismatch = &metrics.Series(MetricId::kIdempotencyKeys, {"mismatch"}),
                .unavailable = &metrics.Series(MetricId::kIdempotencyKeys, {"unavailable"}),
                .invalid = &metrics.Series(MetricId::kIdempotencyKeys, {"invalid"})},
      readable_(readable) {}

void Idempotency::CountInvalid() const { Bump(counters_.invalid); }

void Idempotency::Run(const IdempotencyOptions& options, std::string record,
                      std::string fingerprint, Decide decide, Done done) const {
  auto call = std::make_shared<Call>(Call{.store = &store_,
                                          .counters = counters_,
                                          .readable = readable_,
                                          .options = options,
                                          .record = std::move(record),
                                          .fingerprint = std::move(fingerprint),
                                          .claim = ClaimId(),
                                          .decide = std::move(decide),
                                          .done = std::move(done)});
  const Call& c = *call;
  store_.Claim(c.record, c.fingerprint, c.claim, c.options.in_progress,
               [call](Result<IdempotencyClaim> claimed) { Claimed(call, std::move(claimed)); });
}

void Idempotency::Claimed(const std::shared_ptr<Call>& call, Result<IdempotencyClaim> claimed) {
  const Counters& n = call->counters;
  if (!claimed.ok()) return Unreadable(call, claimed.status());
  switch (claimed->outcome) {
    case ClaimOutcome::kClaimed:
      Bump(n.first);
      return call->decide(Status::Ok(), [call](std::string kept, bool keep) {
        Decided(call, std::move(kept), keep);
      });
    case ClaimOutcome::kDone:
      if (!call->readable(claimed->result)) {
        return Unreadable(call, Status::Internal("an Idempotency-Key record holds no answer"));
      }
      Bump(n.replayed);
      return call->done(KeyedOutcome::kReplayed, std::move(claimed->result));
    case ClaimOutcome::kInProgress:
      Bump(n.conflict);
      return call->done(KeyedOutcome::kInProgress, {});
    case ClaimOutcome::kMismatch:
      Bump(n.mismatch);
      return call->done(KeyedOutcome::kMismatch, {});
  }
}

// The record cannot be read: decided as a request is when the store fails, by the failure modes,
// asking the store nothing, so that nothing is charged there that no record says was charged;
// no claim was made, so nothing is kept. (A kInvalidArgument would be the call's own fault, not
// the client's: it must not become a 400.)
void Idempotency::Unreadable(const std::shared_ptr<Call>& call, const Status& why) {
  Bump(call->counters.unavailable);
  call->decide(
      why.code() == StatusCode::kInvalidArgument ? Status::Internal(why.message()) : why,
      [call](std::string kept, bool) { call->done(KeyedOutcome::kDecided, std::move(kept)); });
}

// A decision that charged is kept before it is answered, so that a retry arriving as soon as the
// answer does finds it; if keeping it fails the answer still goes (it was charged), and the
// claim ends by itself after in_progress. Anything else charged nothing: the claim is released.
void Idempotency::Decided(const std::shared_ptr<Call>& call, std::string kept, bool keep) {
  const Call& c = *call;
  auto text = std::make_shared<std::string>(std::move(kept));
  // A copy: the store may still read `*text` when it calls back.
  auto answer = [call, text](Result<bool>) { call->done(KeyedOutcome::kDecided, *text); };
  if (keep) {
    return c.store->Complete(c.record, c.fingerprint, c.claim, *text, c.options.window,
                             std::move(answer));
  }
  c.store->Release(c.record, c.fingerprint, c.claim, std::move(answer));
}

}  // namespace caudal
