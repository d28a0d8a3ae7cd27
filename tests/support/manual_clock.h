// ManualClock: a Clock that moves only when a test tells it to. Test code only.
//
// Advance() moves both readings; Set() moves the wall clock alone (to any time, backwards too),
// as an NTP step would, while the monotonic reading stays put. A thread in WaitUntil() stays
// there until it is notified or Advance() takes the monotonic reading to its deadline, however
// long that takes in real time; waits() and AwaitWaits() tell a test that a background thread
// has reached its wait, so that what the test checks next does not race the thread.
//
// Thread-safety: every method may be called from any thread. Advance() must not be called with
// the mutex of a thread waiting in WaitUntil() held (it takes that mutex to wake the thread).
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <vector>

#include "caudal/common/clock.h"

namespace caudal {

class ManualClock final : public Clock {
 public:
  explicit ManualClock(Nanos start = std::chrono::seconds(1'700'000'000)) : now_(start.count()) {}
  Nanos Now() const override { return Nanos(now_.load(std::memory_order_acquire)); }
  Nanos Monotonic() const override { return Nanos(mono_.load(std::memory_order_acquire)); }
  void Set(Nanos t) { now_.store(t.count(), std::memory_order_release); }
  // A negative d moves the wall clock backwards, which callers must tolerate; the monotonic
  // reading only ever moves forwards, waking every wait whose deadline it reaches.
  void Advance(Nanos d) {
    now_.fetch_add(d.count(), std::memory_order_acq_rel);
    if (d.count() <= 0) return;
    mono_.fetch_add(d.count(), std::memory_order_acq_rel);
    WakeDue();
  }

  bool WaitUntil(std::condition_variable& cv, std::unique_lock<std::mutex>& lock, Nanos deadline,
                 const std::function<bool()>& done) const override {
    if (done()) return true;
    if (Monotonic() >= deadline) return false;
    Waiter self{.cv = &cv, .mu = lock.mutex(), .deadline = deadline};
    {
      std::lock_guard guard(mu_);
      waiters_.push_back(&self);
      ++waits_;
    }
    changed_.notify_all();
    // Advance() takes `lock`'s mutex after moving the reading and before notifying, so a wake
    // cannot fall between this check and the wait.
    while (!done() && Monotonic() < deadline) cv.wait(lock);
    // An Advance() may be about to take `lock`'s mutex to wake this thread: let go of it until
    // that Advance() is done with `self`.
    lock.unlock();
    {
      std::unique_lock guard(mu_);
      changed_.wait(guard, [&] { return self.waking == 0; });
      waiters_.erase(std::find(waiters_.begin(), waiters_.end(), &self));
    }
    changed_.notify_all();
    lock.lock();
    return done();
  }

  // Waits that have blocked in WaitUntil() since the clock was made.
  uint64_t waits() const {
    std::lock_guard guard(mu_);
    return waits_;
  }
  // True once waits() >= n, i.e. a thread has reached its n-th wait (and blocks there until the
  // clock reaches its deadline or it is notified); false after `patience` of real time without,
  // so that a missing wait fails the test instead of hanging it.
  bool AwaitWaits(uint64_t n, std::chrono::seconds patience = std::chrono::seconds(10)) const {
    std::unique_lock guard(mu_);
    return changed_.wait_for(guard, patience, [&] { return waits_ >= n; });
  }
  // The deadlines of the waits blocked now, earliest first (monotonic readings).
  std::vector<Nanos> deadlines() const {
    std::lock_guard guard(mu_);
    std::vector<Nanos> out;
    for (const Waiter* w : waiters_) out.push_back(w->deadline);
    std::sort(out.begin(), out.end());
    return out;
  }

 private:
  struct Waiter {
    std::condition_variable* cv;
    std::mutex* mu;
    Nanos deadline;
    int waking = 0;  // Advance() calls about to notify it; guarded by mu_
  };

  void WakeDue() {
    std::vector<Waiter*> due;
    {
      std::lock_guard guard(mu_);
      for (Waiter* w : waiters_) {
        if (w->deadline <= Monotonic()) {
          ++w->waking;
          due.push_back(w);
        }
      }
    }
    for (Waiter* w : due) {
      { std::lock_guard sync(*w->mu); }  // the waiter is either blocked or sees the new reading
      w->cv->notify_all();
    }
    {
      std::lock_guard guard(mu_);
      for (Waiter* w : due) --w->waking;
    }
    changed_.notify_all();
  }

  std::atomic<int64_t> now_;
  std::atomic<int64_t> mono_{0};
  mutable std::mutex mu_;
  mutable std::condition_variable changed_;  // a wait began or ended, or a wake let go of one
  mutable std::vector<Waiter*> waiters_;     // guarded by mu_
  mutable uint64_t waits_ = 0;               // guarded by mu_
};

}  // namespace caudal
