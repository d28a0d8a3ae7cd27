#include "decorators/breaker_store.h"

#include "common/cat.h"
#include "observe/log_throttle.h"
#include "store/batch.h"

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

BreakerReporter::BreakerReporter(const Clock& clock, const Logger* log, Metrics* metrics,
                                 Nanos interval)
    : log_(log),
      metrics_(metrics),
      throttle_(std::make_unique<LogThrottle>(clock, LogThrottleOptions{.interval = interval})) {}

BreakerReporter::~BreakerReporter() = default;

void BreakerReporter::StoreMoved(std::string_view store, BreakerState from, BreakerState to,
                                 std::string_view why, const BreakerRules& rules) {
  if (metrics_ != nullptr) metrics_->SetStoreBreaker(static_cast<int>(to));
  Log(Cat("store ", Quoted(store)), from, to, why, rules);
}

void BreakerReporter::NodeMoved(std::string_view store, std::string_view node, BreakerState from,
                                BreakerState to, uint64_t opens, std::string_view why,
                                const BreakerRules& rules) {
  if (metrics_ != nullptr) metrics_->SetNodeBreaker(node, to, opens);
  if (from != to) Log(Cat("store ", Quoted(store), " node ", node), from, to, why, rules);
}

void BreakerReporter::NodeRemoved(std::string_view node) {
  if (metrics_ != nullptr) metrics_->RemoveNode(node);
}

void BreakerReporter::Log(const std::string& subject, BreakerState from, BreakerState to,
                          std::string_view why, const BreakerRules& rules) {
  if (log_ == nullptr) return;
  if (from == BreakerState::kClosed && to == BreakerState::kOpen) {
    const std::optional<uint64_t> held = throttle_->Admit(subject);
    {
      std::lock_guard lock(mu_);
      // Bounded by the throttle's keys: a subject it no longer tracks logs untracked.
      if (held && logged_open_.size() < 4096) {
        logged_open_.insert(subject);
      } else if (!held) {
        logged_open_.erase(subject);
      }
    }
    if (!held) return;
    log_->Warning(Cat(subject, " failed ", rules.failures_to_open, " times in a row (", why,
                      "): circuit open, deciding by failure mode; probing every ",
                      std::chrono::duration_cast<std::chrono::milliseconds>(rules.open_for).count(),
                      " ms",
                      *held == 0 ? std::string() : Cat("; ", *held, " more openings not logged")));
  } else if (to == BreakerState::kClosed) {
    {
      std::lock_guard lock(mu_);
      const auto it = logged_open_.find(subject);
      if (it == logged_open_.end()) return;  // its opening was held back
      logged_open_.erase(it);
    }
    log_->Info(Cat(subject, " answers again: circuit closed"));
  }
}

BreakerStore::BreakerStore(Store& inner, const Clock& clock, BreakerOptions options)
    : inner_(inner),
      clock_(clock),
      reporter_(clock, options.log, options.metrics),
      breaker_({.failures_to_open = options.failures_to_open,
                .failing_for = options.failing_for,
                .open_for = options.open_for}) {
  if (options.metrics != nullptr) options.metrics->SetStoreBreaker(0);
}

BreakerStore::~BreakerStore() = default;

CircuitBreaker::Verdict BreakerStore::Admit(Status* why) {
  if (state_.load(std::memory_order_acquire) == BreakerState::kClosed) {
    return CircuitBreaker::Verdict::kPass;
  }
  std::lock_guard lock(mu_);
  const BreakerState before = breaker_.state();
  const CircuitBreaker::Verdict verdict = breaker_.Admit(clock_.Monotonic());
  Publish(before);
  if (verdict == CircuitBreaker::Verdict::kRefuse) {
    *why = Status::Unavailable(Cat("store ", Quoted(inner_.Name()), " circuit open after ",
                                   breaker_.rules().failures_to_open,
                                   " consecutive failures; last: ", breaker_.last_error()));
  }
  return verdict;
}

void BreakerStore::DecideBatchAsync(std::span<const EntryRef> entries, DecideCallback done) {
  Status why;
  const CircuitBreaker::Verdict verdict = Admit(&why);
  if (verdict == CircuitBreaker::Verdict::kRefuse) return done(std::move(why));
  const auto call = verdict == CircuitBreaker::Verdict::kProbe ? CircuitBreaker::Call::kProbe
                                                               : CircuitBreaker::Call::kOrdinary;
  const Nanos start = clock_.Monotonic();
  caudal::DecideBatchAsync(inner_, entries,
                           [this, call, start, done = std::move(done)](Result<DecideResponse> r) {
                             Observe(r.status(), call, clock_.Monotonic() - start);
                             done(std::move(r));
                           });
}

void BreakerStore::Observe(const Status& s, CircuitBreaker::Call call, Nanos took) {
  const bool failed = IsStoreFailure(s);
  if (!failed && s.code() != StatusCode::kOk && call == CircuitBreaker::Call::kOrdinary) return;
  if (!failed && call == CircuitBreaker::Call::kOrdinary &&
      clean_.load(std::memory_order_acquire)) {
    return;  // the healthy path: nothing to change
  }
  std::lock_guard lock(mu_);
  const BreakerState before = breaker_.state();
  if (failed) {
    breaker_.Failed(
        clock_.Monotonic(), call,
        took < kAtOnce ? CircuitBreaker::Failure::kAtOnce : CircuitBreaker::Failure::kSlow,
        s.ToString());
  } else {
    breaker_.Succeeded(call);  // an answer, even a refusal of a bad request: the store is up
  }
  Publish(before);
}

void BreakerStore::Publish(BreakerState before) {
  clean_.store(breaker_.clean(), std::memory_order_release);
  const BreakerState after = breaker_.state();
  if (after == before) return;
  state_.store(after, std::memory_order_release);
  reporter_.StoreMoved(inner_.Name(), before, after, breaker_.last_error(), breaker_.rules());
}

}  // namespace caudal
