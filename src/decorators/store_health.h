// StoreHealth: whether the store can decide right now, kept up to date in the background so that
// a readiness probe (/readyz, gRPC health) reads it and never waits on the store.
//
// A probe is a real decision that writes: one unit taken from a health key with a huge limit
// ("caudal:health:{probe}", fresh again within a millisecond). So a store that answers PING but
// refuses writes (Redis at maxmemory with noeviction, a read-only replica) is not ready. The
// store's own deadline bounds a probe; a probe still unanswered when the next is due is not
// doubled. Ready means: the last probe succeeded, within `stale_after`, and `also` agrees.
//
//   StoreHealth health(store, clock, {});
//   health.Start();             // a thread probing every `interval` of `clock`'s monotonic time
//   health.Ready();             // Ok, or why not; never blocks
//
// Thread-safety: every method may be called from any thread.
#pragma once

#include <atomic>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>

#include "caudal/algorithms/limit.h"
#include "caudal/common/clock.h"
#include "caudal/store/store.h"

namespace caudal {

struct StoreHealthOptions {
  Nanos interval = std::chrono::seconds(1);
  Nanos stale_after = std::chrono::seconds(3);
  // Also required for ready, once the probes succeed (a Redis server that may evict caudal's
  // keys, under store.on_eviction_risk: refuse); unset: nothing more. Must not block.
  std::function<Status()> also{};
};

class StoreHealth {
 public:
  // `store` and `clock` (its monotonic time) must outlive this.
  StoreHealth(Store& store, const Clock& clock, StoreHealthOptions options);
  ~StoreHealth();  // Stop(), then waits for a probe in flight
  StoreHealth(const StoreHealth&) = delete;
  StoreHealth& operator=(const StoreHealth&) = delete;

  void Start();
  // No probe from now on (the probing thread ends); one in flight still records its answer. A
  // stopping service calls it first: its readiness is off, and a probe sent while it drains
  // would keep it waiting for the store at its very end.
  void Stop();
  // Sends one probe now unless one is in flight or Stop() was called; its answer is recorded
  // when it arrives.
  void ProbeOnce();
  // Ok when ready; otherwise kUnavailable saying why (the last error, or no recent answer).
  Status Ready() const;

 private:
  void Record(const Status& s);

  Store& store_;
  const Clock& clock_;
  const StoreHealthOptions options_;
  const Limit probe_limit_;
  std::atomic<bool> in_flight_{false};
  mutable std::mutex mu_;
  Status last_{Status::Unavailable("not probed yet")};  // guarded by mu_
  Nanos last_ok_{-1};                                   // guarded by mu_; monotonic
  bool stopping_ = false;                               // guarded by mu_
  std::condition_variable wake_;
  std::condition_variable idle_;  // a probe in flight has answered
  std::thread thread_;
};

}  // namespace caudal
