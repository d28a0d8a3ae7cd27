#include "caudal/breaker_store.h"

#include "common/cat.h"

namespace caudal {
namespace {

// A failure answered faster than this is the store saying it is down, not a timeout.
constexpr Nanos kAtOnce = std::chrono::milliseconds(1);

bool IsStoreFailure(const Status& s) {
  switch (s.code()) {
    case StatusCode::kUnavailable:
    case StatusCode::kDeadlineExceeded:
    case StatusCode::kInternal:
      return true;
    default:
      return false;
  }
}

}  // namespace

std::string_view BreakerStateName(BreakerState s) {
  switch (s) {
    case BreakerState::kClosed:
      return "closed";
    case BreakerState::kOpen:
      return "open";
    case BreakerState::kHalfOpen:
      return "half_open";
  }
  return "unknown";
}

BreakerStore::BreakerStore(Store& inner, const Clock& clock, BreakerOptions options)
    : inner_(inner), clock_(clock), options_(options) {
  if (options_.metrics != nullptr) options_.metrics->SetStoreBreaker(0);
}

BreakerStore::Admission BreakerStore::Admit(Status* why) {
  if (state_.load(std::memory_order_acquire) == BreakerState::kClosed) return Admission::kPass;
  std::lock_guard lock(mu_);
  const BreakerState s = state_.load(std::memory_order_relaxed);
  if (s == BreakerState::kClosed) return Admission::kPass;
  if (s == BreakerState::kOpen && clock_.Monotonic() >= open_until_) {
    SetState(BreakerState::kHalfOpen);
  }
  if (state_.load(std::memory_order_relaxed) == BreakerState::kHalfOpen && !probing_) {
    probing_ = true;
    return Admission::kProbe;
  }
  *why = Status::Unavailable(Cat("store ", Quoted(inner_.Name()), " circuit open after ",
                                 options_.failures_to_open,
                                 " consecutive failures; last: ", last_error_.ToString()));
  return Admission::kRefuse;
}

void BreakerStore::DecideAsync(std::span<const EntryRef> entries, DecideCallback done) {
  Status why;
  const Admission admission = Admit(&why);
  if (admission == Admission::kRefuse) return done(std::move(why));
  const bool probe = admission == Admission::kProbe;
  const Nanos start = clock_.Monotonic();
  inner_.DecideAsync(entries,
                     [this, probe, start, done = std::move(done)](Result<StoreResponse> r) {
                       Observe(r.status(), probe, clock_.Monotonic() - start);
                       done(std::move(r));
                     });
}

void BreakerStore::Observe(const Status& s, bool probe, Nanos took) {
  const bool failed = IsStoreFailure(s);
  if (!probe && state_.load(std::memory_order_acquire) == BreakerState::kClosed) {
    if (!failed) {
      if (consecutive_failures_.load(std::memory_order_relaxed) != 0) {
        consecutive_failures_.store(0, std::memory_order_relaxed);
      }
      return;
    }
    const Nanos now = clock_.Monotonic();
    const int run = consecutive_failures_.fetch_add(1, std::memory_order_acq_rel) + 1;
    if (run == 1) first_failure_.store(now.count(), std::memory_order_relaxed);
    // A store that fails at once (no connection) knows it is down; only a run of slow
    // failures (timeouts) must also last failing_for.
    const bool at_once = took < kAtOnce;
    if (run < options_.failures_to_open ||
        (!at_once &&
         now - Nanos(first_failure_.load(std::memory_order_relaxed)) < options_.failing_for)) {
      return;
    }
  } else if (!probe) {
    return;  // a call admitted while closed, answered after the breaker moved on
  }
  std::lock_guard lock(mu_);
  if (probe) probing_ = false;
  if (failed) last_error_ = s;
  const BreakerState now = state_.load(std::memory_order_relaxed);
  if (!failed) {
    if (probe && now == BreakerState::kHalfOpen) {
      consecutive_failures_.store(0, std::memory_order_relaxed);
      SetState(BreakerState::kClosed);
    }
    return;
  }
  if (now == BreakerState::kOpen) return;
  open_until_ = clock_.Monotonic() + options_.open_for;
  SetState(BreakerState::kOpen);
}

void BreakerStore::SetState(BreakerState next) {
  const BreakerState prev = state_.exchange(next, std::memory_order_acq_rel);
  if (prev == next) return;
  if (options_.metrics != nullptr) options_.metrics->SetStoreBreaker(static_cast<int>(next));
  if (options_.log == nullptr) return;
  if (prev == BreakerState::kClosed && next == BreakerState::kOpen) {
    options_.log->Warning(Cat(
        "store ", Quoted(inner_.Name()), " failed ", options_.failures_to_open, " times in a row (",
        last_error_.ToString(), "): circuit open, deciding by failure mode; probing every ",
        std::chrono::duration_cast<std::chrono::milliseconds>(options_.open_for).count(), " ms"));
  } else if (next == BreakerState::kClosed) {
    options_.log->Info(Cat("store ", Quoted(inner_.Name()), " answers again: circuit closed"));
  }
}

}  // namespace caudal
