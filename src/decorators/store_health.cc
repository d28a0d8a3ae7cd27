#include "decorators/store_health.h"

#include "common/cat.h"

namespace caudal {
namespace {

constexpr std::string_view kProbeKey = "caudal:health:{probe}";

Limit ProbeLimit() {
  // Never refuses a probe, and is fresh again a microsecond after each: one tiny key that Redis
  // expires at once.
  return *Limit::Create(LimitSpec::Bucket(Algorithm::kTokenBucket, 1'000'000,
                                          Rate{1'000'000, std::chrono::seconds(1)}));
}

}  // namespace

StoreHealth::StoreHealth(Store& store, const Clock& clock, StoreHealthOptions options)
    : store_(store), clock_(clock), options_(options), probe_limit_(ProbeLimit()) {}

StoreHealth::~StoreHealth() {
  Stop();
  std::unique_lock lock(mu_);
  idle_.wait(lock, [this] { return !in_flight_.load(std::memory_order_acquire); });
}

void StoreHealth::Stop() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void StoreHealth::Start() {
  ProbeOnce();  // at once: a store that answers inline (not connected yet) is known before serving
  thread_ = std::thread([this] {
    std::unique_lock lock(mu_);
    while (!stopping_) {
      const Nanos next = clock_.Monotonic() + options_.interval;
      if (clock_.WaitUntil(wake_, lock, next, [this] { return stopping_; })) break;
      lock.unlock();
      ProbeOnce();
      lock.lock();
    }
  });
}

void StoreHealth::ProbeOnce() {
  {
    std::lock_guard lock(mu_);
    if (stopping_) return;
  }
  if (in_flight_.exchange(true, std::memory_order_acq_rel)) return;
  const ConsumeEntry probe{.key = kProbeKey, .limit = &probe_limit_, .cost = 1};
  store_.DecideAsync({.consumes = {&probe, 1}},
                     [this](Result<DecideResponse> r) { Record(r.status()); });
}

void StoreHealth::Record(const Status& s) {
  std::lock_guard lock(mu_);
  last_ = s;
  if (s.ok()) last_ok_ = clock_.Monotonic();
  in_flight_.store(false, std::memory_order_release);
  idle_.notify_all();
}

Status StoreHealth::Ready() const {
  std::lock_guard lock(mu_);
  if (!last_.ok())
    return Status::Unavailable(Cat("store ", Quoted(store_.Name()), ": ", last_.ToString()));
  if (last_ok_.count() < 0 || clock_.Monotonic() - last_ok_ > options_.stale_after) {
    return Status::Unavailable(
        Cat("store ", Quoted(store_.Name()), ": no answer to the probes of the last ",
            std::chrono::duration_cast<std::chrono::milliseconds>(options_.stale_after).count(),
            " ms"));
  }
  if (options_.also) {
    if (Status s = options_.also(); !s.ok()) {
      return Status::Unavailable(Cat("store ", Quoted(store_.Name()), ": ", s.message()));
    }
  }
  return Status::Ok();
}

}  // namespace caudal
