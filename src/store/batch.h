// The stores' internal encoding of a call: every verb of Store (caudal/store/store.h, which
// states their contracts) arrives at a store as one batch of EntryRefs, encoded in one place
// (store.cc). The memory store decides it, the Redis stores' Lua scripts take it as it is
// (redis/lua_protocol.h), and decorators pass it on (caudal::DecideBatchAsync below).
//
// A batch of Decide holds its consumes and holds (kConsume, a hold's with its id), its reserves
// (kReserve), refunds (kRefund) and charges (kCharge), in that order; a batch of GiveBack, Release,
// Settle or Share holds its op only and is always allowed (a Share's response also has `shares`).
// The response (DecideResponse) has one decision per entry, in batch order.
//
// Private to the stores, their decorators and their tests.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include "caudal/store/store.h"

namespace caudal {

enum class EntryOp : uint8_t {
  kConsume,   // ConsumeEntry
  kRefund,    // RefundEntry
  kCharge,    // ChargeEntry
  kGiveBack,  // GiveBackEntry
  kRelease,   // ReleaseEntry
  kReserve,   // ReserveEntry
  kSettle,    // SettleEntry
  kShare,     // ShareEntry
};

struct EntryRef {
  std::string_view key;
  const Limit* limit = nullptr;
  int64_t cost = 1;  // a give-back's units
  EntryOp op = EntryOp::kConsume;
  int64_t lease = 0;                  // kConsume: ConsumeEntry::lease
  const LeaseGrant* grant = nullptr;  // kGiveBack: GiveBackEntry::grant
  const LeaseTerms* terms = nullptr;  // for a lease decorator; null: its default
  bool native_count = false;          // kCharge or kRefund: counted natively
  // A concurrency limit's kConsume with cost > 0 (a HoldEntry), or a kRelease: the hold it takes
  // or frees. A kReserve or a kSettle: the reservation's id.
  const HoldId* hold = nullptr;
  // A kReserve or a kSettle: its terms (required). Any other entry: the key's reservation terms
  // (ConsumeEntry::reservations).
  const ReservationTerms* reservation = nullptr;
  bool forget_reservations = false;   // a kRefund: RefundEntry::forget_reservations
  const ShareEntry* share = nullptr;  // a kShare: its entry (required)
  const ShareOf* share_of = nullptr;  // kConsume: ConsumeEntry::share_of
};

using StoreResponse = DecideResponse;

// The batch entry of `consume`. Inline: the memory store encodes each entry of DecideEach twice
// (to validate them all first, then to decide), on its hot path.
inline EntryRef EncodeConsume(const ConsumeEntry& e) {
  return {.key = e.key,
          .limit = e.limit,
          .cost = e.cost,
          .lease = e.lease,
          .terms = e.lease_terms,
          .reservation = e.reservations,
          .share_of = e.share_of};
}

// A verb's request as a batch: the one place each verb is encoded (store.cc), for the Store's
// verbs and for what decides batches beside a store (store_reference_model.h). The entries point
// into the request and into the EncodedBatch: both must outlive their use.
class EncodedBatch {
 public:
  explicit EncodedBatch(const DecideRequest& request);
  explicit EncodedBatch(std::span<const GiveBackEntry> entries);
  explicit EncodedBatch(std::span<const ReleaseEntry> entries);
  explicit EncodedBatch(std::span<const SettleEntry> entries);
  explicit EncodedBatch(std::span<const ShareEntry> entries);
  EncodedBatch(const EncodedBatch&) = delete;
  EncodedBatch& operator=(const EncodedBatch&) = delete;

  std::span<const EntryRef> entries() const { return {n_ > kInline ? heap_.data() : inline_, n_}; }

 private:
  static constexpr size_t kInline = 4;  // most calls carry a few entries: no allocation
  explicit EncodedBatch(size_t n);
  // Entry i (each is put once, in order): the inline arrays are left unconstructed until then,
  // as this runs on every decision.
  void Put(size_t i, const EntryRef& e) {
    std::construct_at(n_ > kInline ? &heap_[i] : &inline_[i], e);
  }
  const HoldId* PutId(size_t i, HoldId id) {  // a reserve's or a settle's id
    return std::construct_at(n_ > kInline ? &heap_ids_[i] : &inline_ids_[i], id);
  }

  size_t n_;
  union {
    EntryRef inline_[kInline];
  };
  union {
    HoldId inline_ids_[kInline];
  };
  std::vector<EntryRef> heap_;
  std::vector<HoldId> heap_ids_;
};

// Decides `entries` on `store` (a decorator's inner store, a test of the encoding).
void DecideBatchAsync(Store& store, std::span<const EntryRef> entries, DecideCallback done);
Result<DecideResponse> DecideBatch(Store& store, std::span<const EntryRef> entries);

// Checks a batch against every verb's contract (store.h's errors); shared by every store.
Status ValidateEntries(std::span<const EntryRef> entries);

}  // namespace caudal
