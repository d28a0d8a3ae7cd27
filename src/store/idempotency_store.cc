#include "store/idempotency_store.h"

#include <algorithm>
#include <mutex>
#include <set>
#include <unordered_map>
#include <utility>

namespace caudal {
namespace {

bool Shaped(std::string_view s) {
  if (s.empty() || s.size() > kMaxIdempotencyKeyBytes) return false;
  for (const char c : s) {
    const bool ok = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                    c == '_' || c == '-';
    if (!ok) return false;
  }
  return true;
}

}  // namespace

// The records and their accounting, under one mutex.
class MemoryIdempotencyStore::Records {
 public:
  Records(const Clock& clock, MemoryIdempotencyLimits limits) : clock_(clock), limits_(limits) {}

  Result<IdempotencyClaim> Claim(std::string_view key, std::string_view fingerprint,
                                 std::string_view claim, Micros ttl) {
    std::lock_guard lock(mu_);
    const Micros now = Now();
    DropEnded(now);
    auto it = records_.find(std::string(key));
    if (it != records_.end()) {
      const Record& r = it->second;
      if (r.fingerprint != fingerprint)
        return IdempotencyClaim{.outcome = ClaimOutcome::kMismatch, .result = {}};
      if (!r.done) return IdempotencyClaim{.outcome = ClaimOutcome::kInProgress, .result = {}};
      return IdempotencyClaim{.outcome = ClaimOutcome::kDone, .result = r.result};
    }
    if (!MakeRoom(RecordBytes(key.size(), fingerprint.size(), claim.size(), 0), 1)) {
      return Status::ResourceExhausted(
          "the idempotency records are full of requests in progress; retry shortly");
    }
    auto [at, fresh] =
        records_.emplace(std::string(key), Record{.fingerprint = std::string(fingerprint),
                                                  .claim = std::string(claim),
                                                  .done = false,
                                                  .result = {},
                                                  .expires_at = Micros(0)});
    bytes_ += BytesOf(at->first, at->second);
    Expire(at->first, at->second, now + ttl);
    return IdempotencyClaim{.outcome = ClaimOutcome::kClaimed, .result = {}};
  }

  Result<bool> Complete(std::string_view key, std::string_view fingerprint, std::string_view claim,
                        std::string_view result, Micros ttl) {
    std::lock_guard lock(mu_);
    if (Ours(key, fingerprint, claim) == nullptr) return false;
    // Forgetting done records never forgets this one, in progress.
    if (!MakeRoom(result.size(), 0)) {
      return Status::ResourceExhausted(
          "the idempotency records are full of requests in progress: the answer is not kept");
    }
    Record& r = records_.find(std::string(key))->second;
    r.done = true;
    r.result = std::string(result);
    bytes_ += r.result.size();
    Expire(std::string(key), r, Now() + ttl);
    return true;
  }

  bool Release(std::string_view key, std::string_view fingerprint, std::string_view claim) {
    std::lock_guard lock(mu_);
    if (Ours(key, fingerprint, claim) == nullptr) return false;
    Erase(records_.find(std::string(key)));
    return true;
  }

  Usage usage() const {
    std::lock_guard lock(mu_);
    return {.records = records_.size(), .bytes = bytes_};
  }

 private:
  struct Record {
    std::string fingerprint;
    std::string claim;
    bool done = false;
    std::string result;
    Micros expires_at{0};
  };
  using Table = std::unordered_map<std::string, Record>;

  static size_t BytesOf(const std::string& key, const Record& r) {
    return RecordBytes(key.size(), r.fingerprint.size(), r.claim.size(), r.result.size());
  }

  Micros Now() const { return std::chrono::duration_cast<Micros>(clock_.Now()); }

  // The record in progress under `key` with this fingerprint and claim id, unended; else null.
  Record* Ours(std::string_view key, std::string_view fingerprint, std::string_view claim) {
    DropEnded(Now());
    auto it = records_.find(std::string(key));
    if (it == records_.end()) return nullptr;
    Record& r = it->second;
    if (r.done || r.fingerprint != fingerprint || r.claim != claim) return nullptr;
    return &r;
  }

  void Expire(const std::string& key, Record& r, Micros at) {
    ends_.erase({r.expires_at, key});
    r.expires_at = at;
    ends_.insert({at, key});
  }

  void Erase(Table::iterator it) {
    bytes_ -= BytesOf(it->first, it->second);
    ends_.erase({it->second.expires_at, it->first});
    records_.erase(it);
  }

  void DropEnded(Micros now) {
    while (!ends_.empty() && ends_.begin()->first <= now) {
      Erase(records_.find(ends_.begin()->second));
    }
  }

  // Room for `records` more records and `bytes` more bytes, forgetting done records, the one that
  // ends soonest first (ended ones went already); false when only records in progress are left.
  bool MakeRoom(size_t bytes, size_t records) {
    while (records_.size() + records > limits_.max_records || bytes_ + bytes > limits_.max_bytes) {
      auto done = std::find_if(ends_.begin(), ends_.end(),
                               [this](const auto& end) { return records_.at(end.second).done; });
      if (done == ends_.end()) return false;
      Erase(records_.find(done->second));
    }
    return true;
  }

  const Clock& clock_;
  const MemoryIdempotencyLimits limits_;
  mutable std::mutex mu_;
  Table records_;                                  // guarded by mu_
  std::set<std::pair<Micros, std::string>> ends_;  // guarded by mu_: every record, by its end
  size_t bytes_ = 0;                               // guarded by mu_: BytesOf every record
};

MemoryIdempotencyStore::MemoryIdempotencyStore(const Clock& clock, MemoryIdempotencyLimits limits)
    : records_(std::make_unique<Records>(clock, limits)) {}

MemoryIdempotencyStore::~MemoryIdempotencyStore() = default;

// Each answer outside the lock: `done` may call the store again.
void MemoryIdempotencyStore::Claim(std::string_view key, std::string_view fingerprint,
                                   std::string_view claim, Micros ttl, ClaimCallback done) {
  if (Status s = ValidateIdempotencyCall(key, fingerprint, claim, {}, ttl); !s.ok()) {
    return done(std::move(s));
  }
  done(records_->Claim(key, fingerprint, claim, ttl));
}

void MemoryIdempotencyStore::Complete(std::string_view key, std::string_view fingerprint,
                                      std::string_view claim, std::string_view result, Micros ttl,
                                      ChangeCallback done) {
  if (Status s = ValidateIdempotencyCall(key, fingerprint, claim, result, ttl); !s.ok()) {
    return done(std::move(s));
  }
  done(records_->Complete(key, fingerprint, claim, result, ttl));
}

void MemoryIdempotencyStore::Release(std::string_view key, std::string_view fingerprint,
                                     std::string_view claim, ChangeCallback done) {
  if (Status s = ValidateIdempotencyCall(key, fingerprint, claim, {}, Micros(1000)); !s.ok()) {
    return done(std::move(s));
  }
  done(records_->Release(key, fingerprint, claim));
}

MemoryIdempotencyStore::Usage MemoryIdempotencyStore::usage() const { return records_->usage(); }

std::unique_ptr<IdempotencyStore> MakeMemoryIdempotencyStore(const Clock& clock,
                                                             MemoryIdempotencyLimits limits) {
  return std::make_unique<MemoryIdempotencyStore>(clock, limits);
}

Status ValidateIdempotencyCall(std::string_view key, std::string_view fingerprint,
                               std::string_view claim, std::string_view result, Micros ttl) {
  if (!Shaped(key)) {
    return Status::InvalidArgument("an idempotency record's key must be 1 to 128 of [0-9A-Za-z_-]");
  }
  if (!Shaped(fingerprint)) {
    return Status::InvalidArgument(
        "an idempotency record's fingerprint must be 1 to 128 of [0-9A-Za-z_-]");
  }
  if (!Shaped(claim)) {
    return Status::InvalidArgument("an idempotency claim id must be 1 to 128 of [0-9A-Za-z_-]");
  }
  if (result.size() > kMaxIdempotentResultBytes) {
    return Status::InvalidArgument("an idempotent result must be at most 64 KiB");
  }
  if (ttl < std::chrono::milliseconds(1)) {
    return Status::InvalidArgument("an idempotency record must last at least 1 ms");
  }
  return Status::Ok();
}

}  // namespace caudal
