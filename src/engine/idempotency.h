// Idempotency: a keyed decision decided once, by any instance sharing the records
// (store/idempotency_store.h), whatever the front end asks it.
//
// The first request with a key claims its record, decides, and keeps its answer for `window`
// when the decision charged; a retry is answered the kept answer; the same key with another
// request (another fingerprint) and a duplicate while the first is deciding decide nothing. A
// record that cannot be read (the store failed or passed its deadline, its calls are at their
// bound, or what it holds is no answer) leaves the request to the engine's failure modes: it is
// decided as a request is when the store fails, asking the store nothing, and kept nowhere. The
// record calls are bounded by the store's own deadline (store.timeout).
//
// Answers are the front end's, opaque here: HTTP keeps a reply's status, type and body
// (server/idempotency.h), and says which text is one.
//
// Thread-safety: Run and CountInvalid may be called from any thread.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "caudal/common/clock.h"
#include "caudal/common/status.h"
namespace caudal {

class IdempotencyStore;  // store/idempotency_store.h
class Metrics;           // observe/metrics.h
struct IdempotencyClaim;

// server.idempotency.
struct IdempotencyOptions {
  Micros window = std::chrono::hours(1);          // a key's first answer is replayed this long
  Micros in_progress = std::chrono::seconds(10);  // a request deciding holds its key this long
};

enum class KeyedOutcome : uint8_t {
  kDecided,     // decided now: the first with its key, or its record unreadable
  kReplayed,    // decided before: the answer is the kept one
  kInProgress,  // another request with the key is being decided: nothing decided (a 409)
  kMismatch,    // the key was used for another request: nothing decided (a 422)
};

class Idempotency {
 public:
  // Whether a kept answer is one the front end can replay.
  using Readable = bool (*)(std::string_view kept);
  // `store` and `metrics` must outlive this object.
  Idempotency(IdempotencyStore& store, Metrics& metrics, Readable readable);

  // The request's decision. `records` is ok when its record was claimed; otherwise why the
  // record could not be read, and the decision is the one for a store failing with that error
  // (CheckRequest::store_failed; a settle's 503). Calls `then` exactly once with the answer as
  // kept and whether to keep it (a decision that charged: 200 or 429).
  using Then = std::function<void(std::string kept, bool keep)>;
  using Decide = std::function<void(const Status& records, Then then)>;
  // The outcome, exactly once, possibly on the store's thread: with the kept answer when
  // kReplayed (Readable), with what `then` was given when kDecided, empty otherwise.
  using Done = std::function<void(KeyedOutcome outcome, std::string answer)>;

  // Decides the request whose record is `record` (a hash of the endpoint, the caller, the
  // identity and the key) and whose request is `fingerprint`, once.
  void Run(const IdempotencyOptions& options, std::string record, std::string fingerprint,
           Decide decide, Done done) const;
  // A request refused for its key (malformed), counted.
  void CountInvalid() const;

 private:
  // Metrics' series, which outlive the front ends (and so any store answer on its way).
  struct Counters {
    std::atomic<uint64_t>* first;
    std::atomic<uint64_t>* replayed;
    std::atomic<uint64_t>* conflict;
    std::atomic<uint64_t>* mismatch;
    std::atomic<uint64_t>* unavailable;
    std::atomic<uint64_t>* invalid;
  };
  struct Call;
  static void Claimed(const std::shared_ptr<Call>& call, Result<IdempotencyClaim> claimed);
  static void Unreadable(const std::shared_ptr<Call>& call, const Status& why);
  static void Decided(const std::shared_ptr<Call>& call, std::string kept, bool keep);

  IdempotencyStore& store_;
  const Counters counters_;
  const Readable readable_;
};

}  // namespace caudal
