#include "caudal/store/store.h"

#include <array>
#include <future>
#include <string>
#include <vector>

#include "algorithms/algorithm.h"
#include "algorithms/exact_math.h"
#include "store/batch.h"

namespace caudal {

EncodedBatch::EncodedBatch(size_t n) : n_(n) {
  if (n > kInline) {
    heap_.resize(n);
    heap_ids_.resize(n);
  }
}

EncodedBatch::EncodedBatch(const DecideRequest& r) : EncodedBatch(r.size()) {
  size_t i = 0;
  for (const ConsumeEntry& e : r.consumes) Put(i++, EncodeConsume(e));
  for (const HoldEntry& e : r.holds) {
    Put(i++, {.key = e.key, .limit = e.limit, .cost = 1, .hold = &e.hold});
  }
  for (const ReserveEntry& e : r.reserves) {
    const HoldId* id = PutId(i, {.hi = e.id.hi, .lo = e.id.lo});
    Put(i, {.key = e.key,
            .limit = e.limit,
            .cost = e.cost,
            .op = EntryOp::kReserve,
            .hold = id,
            .reservation = &e.terms});
    ++i;
  }
  for (const RefundEntry& e : r.refunds) {
    Put(i++, {.key = e.key,
              .limit = e.limit,
              .cost = e.cost,
              .op = EntryOp::kRefund,
              .terms = e.lease_terms,
              .native_count = e.native,
              .reservation = e.reservations,
              .forget_reservations = e.forget_reservations});
  }
  for (const ChargeEntry& e : r.charges) {
    Put(i++, {.key = e.key,
              .limit = e.limit,
              .cost = e.cost,
              .op = EntryOp::kCharge,
              .terms = e.lease_terms,
              .native_count = e.native,
              .reservation = e.reservations});
  }
}

EncodedBatch::EncodedBatch(std::span<const GiveBackEntry> entries) : EncodedBatch(entries.size()) {
  for (size_t i = 0; i < entries.size(); ++i) {
    const GiveBackEntry& e = entries[i];
    Put(i, {.key = e.key,
            .limit = e.limit,
            .cost = e.units,
            .op = EntryOp::kGiveBack,
            .grant = &e.grant});
  }
}

EncodedBatch::EncodedBatch(std::span<const ReleaseEntry> entries) : EncodedBatch(entries.size()) {
  for (size_t i = 0; i < entries.size(); ++i) {
    const ReleaseEntry& e = entries[i];
    Put(i, {.key = e.key, .limit = e.limit, .cost = 0, .op = EntryOp::kRelease, .hold = &e.hold});
  }
}

EncodedBatch::EncodedBatch(std::span<const SettleEntry> entries) : EncodedBatch(entries.size()) {
  for (size_t i = 0; i < entries.size(); ++i) {
    const SettleEntry& e = entries[i];
    const HoldId* id = PutId(i, {.hi = e.id.hi, .lo = e.id.lo});
    Put(i, {.key = e.key,
            .limit = e.limit,
            .cost = e.cost,
            .op = EntryOp::kSettle,
            .hold = id,
            .reservation = &e.terms});
  }
}

EncodedBatch::EncodedBatch(std::span<const ShareEntry> entries) : EncodedBatch(entries.size()) {
  for (size_t i = 0; i < entries.size(); ++i) {
    const ShareEntry& e = entries[i];
    Put(i, {.key = e.key, .limit = e.limit, .cost = 0, .op = EntryOp::kShare, .share = &e});
  }
}

namespace {

// A verb of one op: its entries encoded, its response the batch's decisions.
template <typename Response, typename Entry>
void Call(Store& store, std::span<const Entry> entries, StoreCallback<Response> done) {
  const EncodedBatch batch(entries);
  DecideBatchAsync(store, batch.entries(), [done = std::move(done)](Result<DecideResponse> r) {
    if (!r.ok()) return done(r.status());
    done(Response{.decisions = std::move(r->decisions)});
  });
}

template <typename Response, typename Entry>
Result<Response> CallBlocking(Store& store, std::span<const Entry> entries) {
  const EncodedBatch batch(entries);
  Result<DecideResponse> r = DecideBatch(store, batch.entries());
  if (!r.ok()) return r.status();
  return Response{.decisions = std::move(r->decisions)};
}

}  // namespace

void DecideBatchAsync(Store& store, std::span<const EntryRef> entries, DecideCallback done) {
  store.DecideBatchAsync(entries, std::move(done));
}

Result<DecideResponse> DecideBatch(Store& store, std::span<const EntryRef> entries) {
  return store.DecideBatch(entries);
}

Result<DecideResponse> Store::DecideBatch(std::span<const EntryRef> entries) {
  std::promise<Result<DecideResponse>> promise;
  auto future = promise.get_future();
  DecideBatchAsync(entries,
                   [&promise](Result<DecideResponse> r) { promise.set_value(std::move(r)); });
  return future.get();
}

void Store::DecideAsync(const DecideRequest& request, DecideCallback done) {
  const EncodedBatch batch(request);
  DecideBatchAsync(batch.entries(), std::move(done));
}

Result<DecideResponse> Store::Decide(const DecideRequest& request) {
  const EncodedBatch batch(request);
  return DecideBatch(batch.entries());
}

void Store::GiveBackAsync(std::span<const GiveBackEntry> entries,
                          StoreCallback<GiveBackResponse> done) {
  Call<GiveBackResponse>(*this, entries, std::move(done));
}

Result<GiveBackResponse> Store::GiveBack(std::span<const GiveBackEntry> entries) {
  return CallBlocking<GiveBackResponse>(*this, entries);
}

void Store::ReleaseAsync(std::span<const ReleaseEntry> entries,
                         StoreCallback<ReleaseResponse> done) {
  Call<ReleaseResponse>(*this, entries, std::move(done));
}

Result<ReleaseResponse> Store::Release(std::span<const ReleaseEntry> entries) {
  return CallBlocking<ReleaseResponse>(*this, entries);
}

void Store::SettleAsync(std::span<const SettleEntry> entries, StoreCallback<SettleResponse> done) {
  Call<SettleResponse>(*this, entries, std::move(done));
}

Result<SettleResponse> Store::Settle(std::span<const SettleEntry> entries) {
  return CallBlocking<SettleResponse>(*this, entries);
}

void Store::ShareAsync(std::span<const ShareEntry> entries, StoreCallback<ShareResponse> done) {
  const EncodedBatch batch(entries);
  DecideBatchAsync(batch.entries(), [done = std::move(done)](Result<DecideResponse> r) {
    if (!r.ok()) return done(r.status());
    done(ShareResponse{.decisions = std::move(r->decisions), .shares = std::move(r->shares)});
  });
}

Result<ShareResponse> Store::Share(std::span<const ShareEntry> entries) {
  const EncodedBatch batch(entries);
  Result<DecideResponse> r = DecideBatch(batch.entries());
  if (!r.ok()) return r.status();
  return ShareResponse{.decisions = std::move(r->decisions), .shares = std::move(r->shares)};
}

namespace {

// The lease fields of one entry; `give_backs`: the request gives back (its first entry does).
Status ValidateLease(const EntryRef& e, bool give_backs) {
  const bool leasing = SupportsLease(e.limit->algorithm());
  if (e.lease != 0) {
    if (e.lease < 0 || e.lease > kMaxCost) {
      return Status::InvalidArgument("a lease must be between 0 and 2^40 (got " +
                                     std::to_string(e.lease) + ")");
    }
    if (e.op != EntryOp::kConsume) return Status::InvalidArgument("only a consume takes a lease");
  }
  if ((e.op == EntryOp::kGiveBack) != give_backs) {
    return Status::InvalidArgument("a request that gives leases back holds nothing else");
  }
  if (e.op == EntryOp::kGiveBack && e.grant == nullptr) {
    return Status::InvalidArgument("a give-back names its lease's grant");
  }
  if ((e.lease != 0 || e.op == EntryOp::kGiveBack) && !leasing) {
    return Status::InvalidArgument(
        "leases are taken for token_bucket, gcra and fixed_window (not " +
        std::string(AlgorithmName(e.limit->algorithm())) + ")");
  }
  return Status::Ok();
}

// The concurrency fields of one entry; `releases`: the request releases (its first entry does).
Status ValidateHold(const EntryRef& e, bool releases) {
  const bool concurrency = IsConcurrency(e.limit->algorithm());
  if ((e.op == EntryOp::kRelease) != releases) {
    return Status::InvalidArgument("a request that releases holds holds nothing else");
  }
  if (concurrency && e.op != EntryOp::kConsume && e.op != EntryOp::kRelease) {
    return Status::InvalidArgument(
        "a concurrency limit is taken or released, never refunded, "
        "charged or given back");
  }
  if (!concurrency && e.op == EntryOp::kConsume && e.hold != nullptr) {
    return Status::InvalidArgument("only a concurrency limit's slot is held (not " +
                                   std::string(AlgorithmName(e.limit->algorithm())) + ")");
  }
  if (!concurrency && e.op == EntryOp::kRelease) {
    return Status::InvalidArgument("only a concurrency limit is released (not " +
                                   std::string(AlgorithmName(e.limit->algorithm())) + ")");
  }
  if (concurrency && (e.op == EntryOp::kRelease || e.cost > 0)) {
    if (e.hold == nullptr) return Status::InvalidArgument("a concurrency slot names its hold");
    const auto word = [](int64_t w) { return w >= 0 && w < kHoldIdWordLimit; };
    if (!word(e.hold->hi) || !word(e.hold->lo)) {
      return Status::InvalidArgument("a hold id's words are below 2^52");
    }
  }
  return Status::Ok();
}

// The reservation fields of one entry; `settles`: the request settles (its first entry does).
Status ValidateReservation(const EntryRef& e, bool settles) {
  if (e.forget_reservations && (e.op != EntryOp::kRefund || e.native_count)) {
    return Status::InvalidArgument("only a refund forgets a key's reservations, never natively");
  }
  const bool reserving = e.op == EntryOp::kReserve || e.op == EntryOp::kSettle;
  if ((e.op == EntryOp::kSettle) != settles) {
    return Status::InvalidArgument("a request that settles reservations holds nothing else");
  }
  if (!reserving) return Status::Ok();
  if (!SupportsReserve(e.limit->algorithm())) {
    return Status::InvalidArgument(
        "reservations are taken for token_bucket, gcra and fixed_window (not " +
        std::string(AlgorithmName(e.limit->algorithm())) + ")");
  }
  if (e.hold == nullptr || e.reservation == nullptr) {
    return Status::InvalidArgument("a reserve or a settle names its reservation and its terms");
  }
  const auto word = [](int64_t w) { return w >= 0 && w < kHoldIdWordLimit; };
  if (!word(e.hold->hi) || !word(e.hold->lo)) {
    return Status::InvalidArgument("a reservation id's words are below 2^52");
  }
  const ReservationTerms& t = *e.reservation;
  if (t.ttl < kMinReservationTtl || t.ttl > kMaxReservationTtl) {
    return Status::InvalidArgument("a reservation's ttl is between 1ms and 24h");
  }
  if (t.max_open < 1 || t.max_open > kMaxOpenReservations) {
    return Status::InvalidArgument("a key's open reservations are between 1 and 10000");
  }
  if (e.lease != 0) return Status::InvalidArgument("a reserve takes no lease");
  return Status::Ok();
}

// The share fields of one entry; `shares`: the request takes shares (its first entry does).
Status ValidateShare(const EntryRef& e, bool shares) {
  if ((e.op == EntryOp::kShare) != shares) {
    return Status::InvalidArgument("a request that takes shares holds nothing else");
  }
  if (!shares) return Status::Ok();
  if (e.share == nullptr) return Status::InvalidArgument("a share names its entry");
  const ShareEntry& s = *e.share;
  if (!SupportsLease(e.limit->algorithm())) {
    return Status::InvalidArgument(
        "shares are taken for token_bucket, gcra and fixed_window (not " +
        std::string(AlgorithmName(e.limit->algorithm())) + ")");
  }
  if (s.consumer.empty() || s.consumer.size() > kMaxShareNameLength) {
    return Status::InvalidArgument("a share's consumer is 1 to 128 bytes (got " +
                                   std::to_string(s.consumer.size()) + ")");
  }
  if (s.group.size() > kMaxShareNameLength) {
    return Status::InvalidArgument("a share's group is at most 128 bytes (got " +
                                   std::to_string(s.group.size()) + ")");
  }
  if (s.demand < 0 || s.demand > kMaxCost) {
    return Status::InvalidArgument("a share's demand must be between 0 and 2^40 (got " +
                                   std::to_string(s.demand) + ")");
  }
  if (s.weight < 1 || s.weight > kMaxShareWeight) {
    return Status::InvalidArgument("a share's weight must be between 1 and 4096 (got " +
                                   std::to_string(s.weight) + ")");
  }
  if (s.ttl < kMinShareTtl || s.ttl > kMaxShareTtl) {
    return Status::InvalidArgument("a share's ttl is between 1ms and 1h");
  }
  if (s.fairness != Fairness::kMaxMin && s.fairness != Fairness::kProportional) {
    return Status::InvalidArgument("a share's fairness is max-min or proportional");
  }
  // The accrual's quotient stays below 2^52 (AccrueShare, and the script's doubles).
  const Rate rate = e.limit->rate();
  if (static_cast<exact::Int128>(rate.count) * s.ttl.count() >=
      (static_cast<exact::Int128>(1) << 52) * rate.period.count()) {
    return Status::InvalidArgument("a share's limit must refill fewer than 2^52 units in its ttl");
  }
  return Status::Ok();
}

// Every check of entry `i` but its key's and its limit's presence (ValidateEntries), with no
// "entry i: " prefix.
Status ValidateSpecial(std::span<const EntryRef> entries, size_t i) {
  const EntryRef& e = entries[i];
  if (e.op == EntryOp::kCharge && !SupportsCharge(e.limit->algorithm())) {
    return Status::InvalidArgument(
        "a charge counts refused hits, which only token_bucket, gcra and fixed_window can (not " +
        std::string(AlgorithmName(e.limit->algorithm())) + ")");
  }
  if (e.native_count != entries[0].native_count) {
    return Status::InvalidArgument("a native count goes with native counts only");
  }
  if (e.native_count && ((e.op != EntryOp::kCharge && e.op != EntryOp::kRefund) || e.lease != 0 ||
                         e.limit->algorithm() != Algorithm::kFixedWindow)) {
    return Status::InvalidArgument(
        "a native count is a fixed_window charge or refund without a lease");
  }
  if (e.limit->calendar() && (e.native_count || e.op == EntryOp::kShare)) {
    return Status::InvalidArgument(
        "a calendar window is counted by the store's scripts alone: neither natively nor in "
        "shares");
  }
  if (e.share_of != nullptr) {
    return Status::InvalidArgument(
        "a consume of a capacity shared among identities is decided from its identity's share, "
        "by the lease decorator: no store takes it");
  }
  if (e.cost < 0 || e.cost > kMaxCost) {
    return Status::InvalidArgument("cost must be between 0 and 2^40 (got " +
                                   std::to_string(e.cost) + ")");
  }
  if (Status s = ValidateLease(e, entries[0].op == EntryOp::kGiveBack); !s.ok()) return s;
  if (Status s = ValidateHold(e, entries[0].op == EntryOp::kRelease); !s.ok()) return s;
  if (Status s = ValidateShare(e, entries[0].op == EntryOp::kShare); !s.ok()) return s;
  return ValidateReservation(e, entries[0].op == EntryOp::kSettle);
}

}  // namespace

bool HasHashTag(std::string_view key) {
  const size_t open = key.find('{');
  if (open == std::string_view::npos) return false;
  const size_t close = key.find('}', open + 1);
  return close != std::string_view::npos && close > open + 1;
}

std::optional<GroupedKey> ReadGroupedKey(std::string_view key) {
  if (key.size() < 3 || key[0] != '#') return std::nullopt;
  const size_t end = key.find('#', 1);
  if (end == std::string_view::npos || end == 1) return std::nullopt;
  const std::string_view group = key.substr(end + 1);
  if (!HasHashTag(group)) return std::nullopt;
  return GroupedKey{.member = key.substr(1, end - 1), .group = group};
}

Status ValidateEntries(std::span<const EntryRef> entries) {
  if (entries.empty()) return Status::InvalidArgument("a request needs at least one entry");
  if (entries.size() > kMaxEntriesPerRequest) {
    return Status::InvalidArgument("a request carries at most " +
                                   std::to_string(kMaxEntriesPerRequest) + " entries (got " +
                                   std::to_string(entries.size()) + ")");
  }
  // The messages are built only on failure: this runs on every decision.
  auto where = [](size_t i) { return "entry " + std::to_string(i) + ": "; };
  // Whether the request's first entry lets a plain consume pass every check below the key's,
  // the limit's and the cost's: a request of plain consumes, the usual one, skips them.
  const EntryOp first = entries[0].op;
  const bool consumes = first != EntryOp::kGiveBack && first != EntryOp::kRelease &&
                        first != EntryOp::kSettle && first != EntryOp::kShare &&
                        !entries[0].native_count;
  for (size_t i = 0; i < entries.size(); ++i) {
    const EntryRef& e = entries[i];
    if (e.key.empty()) return Status::InvalidArgument(where(i) + "empty key");
    if (e.key.size() > kMaxKeyLength) {
      return Status::InvalidArgument(where(i) + "key longer than " + std::to_string(kMaxKeyLength) +
                                     " bytes");
    }
    if (e.limit == nullptr) return Status::InvalidArgument(where(i) + "no limit");
    if (e.key[0] == '#' && (!ReadGroupedKey(e.key) ||
                            AlgorithmInfoOf(e.limit->algorithm()).state != StateShape::kCompact ||
                            e.native_count || e.op == EntryOp::kShare)) {
      return Status::InvalidArgument(
          where(i) +
          "a key starting with '#' is a grouped key, \"#<member>#<group>\" with a hash "
          "tag in the group, of a compact algorithm's state, neither native nor shared");
    }
    const bool plain = consumes && e.op == EntryOp::kConsume && e.lease == 0 && e.hold == nullptr &&
                       e.share_of == nullptr && !e.native_count && !e.forget_reservations &&
                       e.cost >= 0 && e.cost <= kMaxCost && !IsConcurrency(e.limit->algorithm());
    if (!plain) {
      if (Status s = ValidateSpecial(entries, i); !s.ok())
        return Status::InvalidArgument(where(i) + s.message());
    }
    for (size_t j = 0; j < i; ++j) {
      if (entries[j].key == e.key) {
        return Status::InvalidArgument(where(i) + "duplicate key \"" + std::string(e.key) + "\"");
      }
    }
  }
  return Status::Ok();
}

}  // namespace caudal
