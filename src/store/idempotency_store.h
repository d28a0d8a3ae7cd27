// IdempotencyStore: the records behind the `Idempotency-Key` request header
// (draft-ietf-httpapi-idempotency-key-header), kept where the rate-limit state is, so that a
// request retried through any instance sharing a store finds what the first one decided.
//
// A record is one key (the caller's scope of a key: who asked, at which endpoint, with which
// key value; the front end hashes it), the fingerprint of the request that claimed it, and
// either a claim (a request deciding right now) or the result it answered with. Each call is
// atomic for its key:
//   Claim     no record: one is made "in progress" for `ttl`, with the caller's claim id
//             (kClaimed). A record of another fingerprint: kMismatch; one in progress: kInProgress;
//             one done: kDone with its result. Nothing changes but for kClaimed.
//   Complete  a record in progress with that fingerprint and claim id becomes done with `result`
//             for `ttl`; anything else is left alone (false: the claim had ended, or another took
//             the key after it).
//   Release   the same record in progress is removed (a decision that could not be made, so that
//             a retry can make it); anything else is left alone.
// A record lasts its `ttl` at most, measured on the store's own clock (the memory store's Clock,
// Redis's), then is gone as if never made.
//
// Thread-safety: every method may be called from any thread and never blocks; `done` runs exactly
// once, inline or on the store's own thread, and must not block.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "caudal/common/clock.h"
#include "caudal/common/status.h"

namespace caudal {

// A key, a fingerprint and a claim id are 1 to 128 bytes of [0-9A-Za-z_-] (front ends pass hex
// digests); a result at most kMaxIdempotentResultBytes of anything.
inline constexpr size_t kMaxIdempotencyKeyBytes = 128;
inline constexpr size_t kMaxIdempotentResultBytes = 64 * 1024;

enum class ClaimOutcome : uint8_t {
  kClaimed,     // the record is the caller's: decide, then Complete or Release
  kDone,        // decided before: `result` is what was answered
  kInProgress,  // another request with this key is deciding now
  kMismatch,    // the key was used for another request (another fingerprint)
};

struct IdempotencyClaim {
  ClaimOutcome outcome = ClaimOutcome::kClaimed;
  std::string result;  // kDone only
};

class IdempotencyStore {
 public:
  using ClaimCallback = std::function<void(Result<IdempotencyClaim>)>;
  // Complete: true when the record became done; Release: true when it was removed.
  using ChangeCallback = std::function<void(Result<bool>)>;

  virtual ~IdempotencyStore() = default;

  // kInvalidArgument for a key, fingerprint or claim id outside their shape or a ttl below 1 ms;
  // kUnavailable / kDeadlineExceeded when the store cannot answer; kResourceExhausted when a
  // bounded store holds only records in progress.
  virtual void Claim(std::string_view key, std::string_view fingerprint, std::string_view claim,
                     Micros ttl, ClaimCallback done) = 0;
  virtual void Complete(std::string_view key, std::string_view fingerprint, std::string_view claim,
                        std::string_view result, Micros ttl, ChangeCallback done) = 0;
  virtual void Release(std::string_view key, std::string_view fingerprint, std::string_view claim,
                       ChangeCallback done) = 0;
};

// What the memory store holds at most: records, and the bytes they take (RecordBytes).
struct MemoryIdempotencyLimits {
  size_t max_records = 100'000;
  size_t max_bytes = size_t{64} << 20;
};

// A record's share of the memory store's bytes: its key (twice: the table and the order of
// ends), fingerprint, claim id and result, and kIdempotencyRecordOverheadBytes for the tables'
// nodes and allocations around them.
inline constexpr size_t kIdempotencyRecordOverheadBytes = 320;
inline constexpr size_t RecordBytes(size_t key, size_t fingerprint, size_t claim, size_t result) {
  return kIdempotencyRecordOverheadBytes + 2 * key + fingerprint + claim + result;
}

// The memory store's: records in this process, on `clock`'s Now(), within `limits`. A claim past
// either bound, or a result that would take the bytes past theirs, first makes room: ended
// records go first, then the done record that ends soonest is forgotten (a retry of its request
// is then decided again, as after its window), as many as it takes; when only records in
// progress are left, a new claim is refused, and so is a result (kResourceExhausted: the claim
// then ends after its ttl). Calls answer inline.
class MemoryIdempotencyStore final : public IdempotencyStore {
 public:
  MemoryIdempotencyStore(const Clock& clock, MemoryIdempotencyLimits limits);
  ~MemoryIdempotencyStore() override;

  void Claim(std::string_view key, std::string_view fingerprint, std::string_view claim, Micros ttl,
             ClaimCallback done) override;
  void Complete(std::string_view key, std::string_view fingerprint, std::string_view claim,
                std::string_view result, Micros ttl, ChangeCallback done) override;
  void Release(std::string_view key, std::string_view fingerprint, std::string_view claim,
               ChangeCallback done) override;

  // What is held now (ended records included until a call drops them).
  struct Usage {
    size_t records = 0;
    size_t bytes = 0;  // the sum of RecordBytes: never above limits.max_bytes
  };
  Usage usage() const;

 private:
  class Records;
  const std::unique_ptr<Records> records_;
};

std::unique_ptr<IdempotencyStore> MakeMemoryIdempotencyStore(const Clock& clock,
                                                             MemoryIdempotencyLimits limits);

// Checks the arguments every implementation takes (kInvalidArgument naming the one at fault).
Status ValidateIdempotencyCall(std::string_view key, std::string_view fingerprint,
                               std::string_view claim, std::string_view result, Micros ttl);

}  // namespace caudal
