// FakeStore: the one scriptable Store for tests. Test code only.
//
// It answers from a source: the conformance suite's ReferenceModel (store_reference_model.h),
// deciding at the clock's wall time after ValidateEntries as every store does, or a Store it
// wraps (a MemoryStore, or the store a process opened). On top of its source a test scripts,
// from any thread and at any time, any mix of:
//
//   fail   FailWith(s): every call, and Ping(), answers `s` until Recover(). FailWith(s, kWrites):
//          only calls that would change state (an entry with a cost), as Redis at maxmemory
//          refuses a script that writes. FailNext({s1, s2}): the next calls answer s1, then s2,
//          before anything else.
//   hold   Hold(): from then on answers are parked until ReleaseHeld() delivers them as decided,
//          or ReleaseHeld(s) answers every parked call with `s` (calls in flight together, a
//          stall). A held call is decided when it arrives, as by a remote store whose answer is
//          on its way; WaitForHeld(n) returns once n answers are parked.
//   count  calls(): store calls so far, failed and held ones included.
//
//   FakeStore store(clock);
//   store.FailWith(Status::Unavailable("connection refused"));
//   store.Recover();
//   store.Hold();  ... store.WaitForHeld(2); store.ReleaseHeld();
//
// Thread-safety: every method may be called from any thread. Answers are delivered with no lock
// held, so a callback may call the store again. Answers still parked when the store is destroyed
// are dropped, never delivered (what their callbacks touch may be gone).
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "caudal/common/clock.h"
#include "caudal/store/store.h"
#include "store/batch.h"

namespace caudal {

class ReferenceModel;

namespace testing {

// Which calls FailWith() fails.
enum class Failing : uint8_t {
  kEveryCall,  // every call, and Ping()
  kWrites,     // calls with an entry whose cost is above 0; Ping() answers as the source does
};

class FakeStore final : public Store {
 public:
  // Answers from a ReferenceModel at `clock`'s wall time; `clock` must outlive the store.
  explicit FakeStore(const Clock& clock, std::string name = "fake");
  // Answers from `inner`, and is named as it is.
  explicit FakeStore(std::unique_ptr<Store> inner);
  ~FakeStore() override;
  FakeStore(const FakeStore&) = delete;
  FakeStore& operator=(const FakeStore&) = delete;

  Status Ping() override;
  std::string_view Name() const override;

  // `status` must be an error.
  void FailWith(Status status, Failing which = Failing::kEveryCall);
  void Recover();
  // Each of `statuses`, in turn, answers one call; an Ok one lets its call through.
  void FailNext(std::vector<Status> statuses);

  void Hold();
  void ReleaseHeld();
  void ReleaseHeld(const Status& status);  // an error
  size_t held() const;
  // True once `n` answers are parked; false after `patience` of real time without.
  bool WaitForHeld(size_t n, std::chrono::seconds patience = std::chrono::seconds(10)) const;

  uint64_t calls() const;

  // A store that over-admits, for checking the checkers: from now on, one refused answer in
  // `one_in` (the one_in-th, the 2·one_in-th, …) of a request whose entries are all plain
  // consumes is delivered as admitted, though the store consumed nothing. 0 stops it.
  void OverAdmitOneIn(uint64_t one_in);
  uint64_t over_admitted() const;

 protected:
  void DecideBatchAsync(std::span<const EntryRef> entries, DecideCallback done) override;

 private:
  struct Parked {
    Result<StoreResponse> answer;
    DecideCallback done;
  };

  std::optional<Status> TakeFailure(std::span<const EntryRef> entries);
  void MaybeOverAdmit(StoreResponse& r);
  Result<StoreResponse> DecideOnModel(std::span<const EntryRef> entries);
  void Deliver(Result<StoreResponse> answer, DecideCallback done);
  std::vector<Parked> TakeHeld();

  const Clock* const clock_;  // null with an inner store
  const std::string name_;
  mutable std::mutex mu_;
  mutable std::condition_variable parked_;  // an answer was parked
  std::unique_ptr<ReferenceModel> model_;   // guarded by mu_; null with an inner store
  std::optional<Status> failure_;           // guarded by mu_
  Failing failing_ = Failing::kEveryCall;   // guarded by mu_
  std::deque<Status> fail_next_;            // guarded by mu_
  bool holding_ = false;                    // guarded by mu_
  std::vector<Parked> held_;                // guarded by mu_
  uint64_t calls_ = 0;                      // guarded by mu_
  uint64_t over_admit_one_in_ = 0;          // guarded by mu_
  uint64_t refusals_seen_ = 0;              // guarded by mu_; since OverAdmitOneIn
  uint64_t over_admitted_ = 0;              // guarded by mu_
  // Last: destroyed first, while what its late callbacks touch is still there.
  const std::unique_ptr<Store> inner_;
};

}  // namespace testing
}  // namespace caudal
