#include "caudal/store/idempotency_store.h"

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

class MemoryIdempotencyStore final : public IdempotencyStore {
 public:
  MemoryIdempotencyStore(const Clock& clock, size_t max_records)
      : clock_(clock), max_records_(max_records) {}

  void Claim(std::string_view key, std::string_view fingerprint, std::string_view claim, Micros ttl,
             ClaimCallback done) override {
    if (Status s = ValidateIdempotencyCall(key, fingerprint, claim, {}, ttl); !s.ok()) {
      return done(std::move(s));
    }
    done(TryClaim(key, fingerprint, claim, ttl));
  }

  void Complete(std::string_view key, std::string_view fingerprint, std::string_view claim,
                std::string_view result, Micros ttl, ChangeCallback done) override {
    if (Status s = ValidateIdempotencyCall(key, fingerprint, claim, result, ttl); !s.ok()) {
      return done(std::move(s));
    }
    bool changed = false;
    {
      std::lock_guard lock(mu_);
      if (Record* r = Ours(key, fingerprint, claim); r != nullptr) {
        r->done = true;
        r->result = std::string(result);
        Expire(std::string(key), *r, Now() + ttl);
        changed = true;
      }
    }
    done(changed);  // outside the lock: `done` may call the store again
  }

  void Release(std::string_view key, std::string_view fingerprint, std::string_view claim,
               ChangeCallback done) override {
    if (Status s = ValidateIdempotencyCall(key, fingerprint, claim, {}, Micros(1000)); !s.ok()) {
      return done(std::move(s));
    }
    bool changed = false;
    {
      std::lock_guard lock(mu_);
      if (Ours(key, fingerprint, claim) != nullptr) {
        Erase(records_.find(std::string(key)));
        changed = true;
      }
    }
    done(changed);
  }

 private:
  struct Record {
    std::string fingerprint;
    std::string claim;
    bool done = false;
    std::string result;
    Micros expires_at{0};
  };
  using Records = std::unordered_map<std::string, Record>;

  Micros Now() const { return std::chrono::duration_cast<Micros>(clock_.Now()); }

  Result<IdempotencyClaim> TryClaim(std::string_view key, std::string_view fingerprint,
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
    if (records_.size() >= max_records_ && !ForgetOneDone()) {
      return Status::ResourceExhausted(
          "the idempotency records are full of requests in progress; retry shortly");
    }
    auto [at, fresh] =
        records_.emplace(std::string(key), Record{.fingerprint = std::string(fingerprint),
                                                  .claim = std::string(claim),
                                                  .done = false,
                                                  .result = {},
                                                  .expires_at = Micros(0)});
    Expire(at->first, at->second, now + ttl);
    return IdempotencyClaim{.outcome = ClaimOutcome::kClaimed, .result = {}};
  }

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

  void Erase(Records::iterator it) {
    ends_.erase({it->second.expires_at, it->first});
    records_.erase(it);
  }

  void DropEnded(Micros now) {
    while (!ends_.empty() && ends_.begin()->first <= now) {
      Erase(records_.find(ends_.begin()->second));
    }
  }

  // Forgets the done record that ends soonest; false when every record is in progress.
  bool ForgetOneDone() {
    for (const auto& [end, key] : ends_) {
      auto it = records_.find(key);
      if (it->second.done) {
        Erase(it);
        return true;
      }
    }
    return false;
  }

  const Clock& clock_;
  const size_t max_records_;
  std::mutex mu_;
  Records records_;                                // guarded by mu_
  std::set<std::pair<Micros, std::string>> ends_;  // guarded by mu_: every record, by its end
};

}  // namespace

std::unique_ptr<IdempotencyStore> MakeMemoryIdempotencyStore(const Clock& clock,
                                                             size_t max_records) {
  return std::make_unique<MemoryIdempotencyStore>(clock, max_records);
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
