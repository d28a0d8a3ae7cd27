#include "support/fake_store.h"

#include <cassert>
#include <utility>

#include "store/store_reference_model.h"

namespace caudal::testing {

FakeStore::FakeStore(const Clock& clock, std::string name)
    : clock_(&clock), name_(std::move(name)), model_(std::make_unique<ReferenceModel>()) {}

FakeStore::FakeStore(std::unique_ptr<Store> inner) : clock_(nullptr), inner_(std::move(inner)) {}

FakeStore::~FakeStore() = default;

void FakeStore::DecideBatchAsync(std::span<const EntryRef> entries, DecideCallback done) {
  if (std::optional<Status> failure = TakeFailure(entries)) {
    return Deliver(*std::move(failure), std::move(done));
  }
  if (inner_ == nullptr) return Deliver(DecideOnModel(entries), std::move(done));
  bool plain = true;
  for (const EntryRef& e : entries) plain &= e.op == EntryOp::kConsume && e.cost > 0;
  caudal::DecideBatchAsync(*inner_, entries,
                           [this, plain, done = std::move(done)](Result<DecideResponse> r) mutable {
                             if (plain && r.ok() && !r->allowed) MaybeOverAdmit(*r);
                             Deliver(std::move(r), std::move(done));
                           });
}

void FakeStore::MaybeOverAdmit(StoreResponse& r) {
  std::lock_guard lock(mu_);
  if (over_admit_one_in_ == 0 || ++refusals_seen_ % over_admit_one_in_ != 0) return;
  for (const Decision& d : r.decisions) {
    if (d.verdict != Verdict::kAllowed && d.verdict != Verdict::kDenied) return;
  }
  r.allowed = true;
  for (Decision& d : r.decisions) {
    d.verdict = Verdict::kAllowed;
    d.retry_after = Micros(0);
  }
  ++over_admitted_;
}

void FakeStore::OverAdmitOneIn(uint64_t one_in) {
  std::lock_guard lock(mu_);
  over_admit_one_in_ = one_in;
  refusals_seen_ = 0;
}

uint64_t FakeStore::over_admitted() const {
  std::lock_guard lock(mu_);
  return over_admitted_;
}

Status FakeStore::Ping() {
  {
    std::lock_guard lock(mu_);
    if (failure_.has_value() && failing_ == Failing::kEveryCall) return *failure_;
  }
  return inner_ != nullptr ? inner_->Ping() : Status::Ok();
}

std::string_view FakeStore::Name() const { return inner_ != nullptr ? inner_->Name() : name_; }

void FakeStore::FailWith(Status status, Failing which) {
  assert(!status.ok() && "FailWith takes an error; Recover() ends the failure");
  std::lock_guard lock(mu_);
  failure_ = std::move(status);
  failing_ = which;
}

void FakeStore::Recover() {
  std::lock_guard lock(mu_);
  failure_.reset();
}

void FakeStore::FailNext(std::vector<Status> statuses) {
  std::lock_guard lock(mu_);
  for (Status& s : statuses) fail_next_.push_back(std::move(s));
}

void FakeStore::Hold() {
  std::lock_guard lock(mu_);
  holding_ = true;
}

void FakeStore::ReleaseHeld() {
  for (Parked& p : TakeHeld()) p.done(std::move(p.answer));
}

void FakeStore::ReleaseHeld(const Status& status) {
  assert(!status.ok() && "ReleaseHeld(status) answers with an error; ReleaseHeld() as decided");
  for (Parked& p : TakeHeld()) p.done(status);
}

size_t FakeStore::held() const {
  std::lock_guard lock(mu_);
  return held_.size();
}

bool FakeStore::WaitForHeld(size_t n, std::chrono::seconds patience) const {
  std::unique_lock lock(mu_);
  return parked_.wait_for(lock, patience, [&] { return held_.size() >= n; });
}

uint64_t FakeStore::calls() const {
  std::lock_guard lock(mu_);
  return calls_;
}

std::optional<Status> FakeStore::TakeFailure(std::span<const EntryRef> entries) {
  std::lock_guard lock(mu_);
  ++calls_;
  if (!fail_next_.empty()) {
    Status next = std::move(fail_next_.front());
    fail_next_.pop_front();
    if (!next.ok()) return next;
    return std::nullopt;  // an Ok entry lets this call through
  }
  if (!failure_.has_value()) return std::nullopt;
  if (failing_ == Failing::kWrites) {
    bool writes = false;
    for (const EntryRef& e : entries) writes = writes || e.cost > 0;
    if (!writes) return std::nullopt;
  }
  return failure_;
}

Result<StoreResponse> FakeStore::DecideOnModel(std::span<const EntryRef> entries) {
  if (Status s = ValidateEntries(entries); !s.ok()) return s;
  const Micros now = std::chrono::duration_cast<Micros>(clock_->Now());
  std::lock_guard lock(mu_);
  return model_->Decide(entries, now);
}

void FakeStore::Deliver(Result<StoreResponse> answer, DecideCallback done) {
  {
    std::lock_guard lock(mu_);
    if (holding_) {
      held_.push_back({.answer = std::move(answer), .done = std::move(done)});
      parked_.notify_all();
      return;
    }
  }
  done(std::move(answer));
}

std::vector<FakeStore::Parked> FakeStore::TakeHeld() {
  std::lock_guard lock(mu_);
  return std::exchange(held_, {});
}

}  // namespace caudal::testing
