#include "caudal/envoy/rls_handler.h"

#include <atomic>
#include <future>
#include <unordered_map>
#include <vector>

#include "rls_plan.h"

namespace caudal::envoy {
namespace {

using internal::Plan;
using internal::Slot;
using internal::SlotKind;

// One ShouldRateLimit in flight. Store callbacks share it; the last one answers.
struct Call {
  Call(Store& st, const Clock& c, const RlsOptions& o, Plan p, RateLimitResponse* r,
       RlsHandler::Done d)
      : store(&st), clock(c), options(o), plan(std::move(p)), response(r), done(std::move(d)) {}

  Store* store;  // the shared store, or the local fallback once it failed (kLocal)
  bool local = false;
  const Clock& clock;
  const RlsOptions options;
  Plan plan;
  RateLimitResponse* response;
  RlsHandler::Done done;
  std::atomic<size_t> pending{0};
  std::mutex mu;
  Status failure;  // guarded by mu: the first store error
  std::weak_ptr<Call> self;

  void Fail(const Status& s) {
    std::lock_guard lock(mu);
    if (failure.ok()) failure = s;
  }

  void Finish();
};

void DecideAllOrNothing(const std::shared_ptr<Call>& call);
void DecideEach(const std::shared_ptr<Call>& call, std::vector<size_t> slots, bool consume);

// Starts deciding the plan's slots on call->store.
void Decide(const std::shared_ptr<Call>& call) {
  if (call->options.descriptor_mode == DescriptorMode::kAllOrNothing) {
    return DecideAllOrNothing(call);
  }
  std::vector<size_t> limited;
  for (size_t i = 0; i < call->plan.slots.size(); ++i) {
    if (call->plan.slots[i].kind == SlotKind::kLimited) limited.push_back(i);
  }
  DecideEach(call, std::move(limited), /*consume=*/true);
}

// Decides the call again on the local store (FailureMode::kLocal). False when it cannot.
bool RetryLocally(Call& call) {
  if (call.local || call.options.failure_mode != FailureMode::kLocal ||
      call.options.local_store == nullptr) {
    return false;
  }
  if (!internal::MakeLocal(call.plan, call.options.instances).ok()) return false;
  call.local = true;
  call.store = call.options.local_store;
  std::lock_guard lock(call.mu);
  call.failure = Status::Ok();
  return true;
}

void Call::Finish() {
  Status f;
  {
    std::lock_guard lock(mu);
    f = failure;
  }
  if (f.code() == StatusCode::kInvalidArgument) return done(f);
  if (!f.ok() && RetryLocally(*this)) {
    // The callbacks hold the call alive; Decide needs a shared_ptr of it.
    return Decide(self.lock());
  }
  if (!f.ok() && options.failure_mode == FailureMode::kDenyUnavailable) {
    return done(Status::Unavailable("rate limit store failed: " + f.ToString()));
  }
  internal::BuildResponse(plan, options, clock.Now(), f, local, response);
  done(Status::Ok());
}

// Decides each of `slots` in a store request of its own (cost 0 unless `consume`; refunds apply
// in any case); the last answer finishes the call.
void DecideEach(const std::shared_ptr<Call>& call, std::vector<size_t> slots, bool consume) {
  if (slots.empty()) return call->Finish();
  call->pending.store(slots.size());
  for (size_t i : slots) {
    Slot& s = call->plan.slots[i];
    const EntryRef entry{.key = s.key,
                         .limit = &*s.limit,
                         .cost = consume || s.refund ? s.cost : 0,
                         .op = s.refund ? EntryOp::kRefund : EntryOp::kConsume};
    call->store->DecideAsync(std::span(&entry, 1), [call, &s](Result<StoreResponse> r) {
      if (r.ok()) {
        s.decision = r->decisions.at(0);
      } else {
        call->Fail(r.status());
      }
      if (call->pending.fetch_sub(1) == 1) call->Finish();
    });
  }
}

// kAllOrNothing: the enforced slots in one store request (duplicates merged, since a store
// request holds each key once: hits and refunds on one key net out), then the shadow slots,
// which count only if the request passed. Refunds apply whatever the other descriptors decide.
void DecideAllOrNothing(const std::shared_ptr<Call>& call) {
  std::vector<size_t> shadows;
  std::vector<EntryRef> entries;
  std::vector<int64_t> net;  // per entry: hits minus refunds
  std::vector<size_t> entry_of(call->plan.slots.size(), 0);
  std::unordered_map<std::string_view, size_t> by_key;
  bool blocked = false;
  for (size_t i = 0; i < call->plan.slots.size(); ++i) {
    Slot& s = call->plan.slots[i];
    blocked |= s.kind == SlotKind::kBlocked && !s.shadow;
    if (s.kind != SlotKind::kLimited) continue;
    if (s.shadow) {
      shadows.push_back(i);
      continue;
    }
    auto [it, fresh] = by_key.emplace(s.key, entries.size());
    if (fresh) {
      entries.push_back({.key = s.key, .limit = &*s.limit, .cost = 0});
      net.push_back(0);
    }
    net[it->second] += s.refund ? -s.cost : s.cost;
    entry_of[i] = it->second;
  }
  if (entries.empty()) return DecideEach(call, std::move(shadows), !blocked);
  for (size_t j = 0; j < entries.size(); ++j) {
    EntryRef& e = entries[j];
    e.op = net[j] < 0 ? EntryOp::kRefund : EntryOp::kConsume;
    e.cost = std::min(net[j] < 0 ? -net[j] : net[j], kMaxCost);
    // The request is refused anyway: look, do not consume (a refund still applies).
    if (blocked && e.op == EntryOp::kConsume) e.cost = 0;
  }
  call->store->DecideAsync(entries, [call, entry_of = std::move(entry_of),
                                    shadows = std::move(shadows),
                                    blocked](Result<StoreResponse> r) mutable {
    if (!r.ok()) {
      call->Fail(r.status());
      return call->Finish();
    }
    for (size_t i = 0; i < call->plan.slots.size(); ++i) {
      Slot& s = call->plan.slots[i];
      if (s.kind == SlotKind::kLimited && !s.shadow) s.decision = r->decisions.at(entry_of[i]);
    }
    DecideEach(call, std::move(shadows), r->allowed && !blocked);
  });
}

}  // namespace

Result<DescriptorMode> ParseDescriptorMode(std::string_view s) {
  if (s == "all_or_nothing") return DescriptorMode::kAllOrNothing;
  if (s == "consume_each") return DescriptorMode::kConsumeEach;
  return Status::InvalidArgument("descriptor mode must be all_or_nothing or consume_each, not '" +
                                 std::string(s) + "'");
}

Result<FailureMode> ParseFailureMode(std::string_view s) {
  if (s == "allow") return FailureMode::kAllow;
  if (s == "deny") return FailureMode::kDenyOverLimit;
  if (s == "deny_unavailable") return FailureMode::kDenyUnavailable;
  if (s == "local") return FailureMode::kLocal;
  return Status::InvalidArgument("failure mode must be allow, deny, deny_unavailable or local, not '" +
                                 std::string(s) + "'");
}

Result<HeaderMode> ParseHeaderMode(std::string_view s) {
  if (s == "none") return HeaderMode::kNone;
  if (s == "ietf") return HeaderMode::kIetf;
  if (s == "ietf_and_x_ratelimit") return HeaderMode::kIetfAndXRateLimit;
  return Status::InvalidArgument("headers must be none, ietf or ietf_and_x_ratelimit, not '" +
                                 std::string(s) + "'");
}

RlsHandler::RlsHandler(Store& store, const Clock& clock,
                       std::shared_ptr<const RateLimitConfig> config, RlsOptions options)
    : store_(store), clock_(clock), options_(options), config_(std::move(config)) {}

void RlsHandler::SetConfig(std::shared_ptr<const RateLimitConfig> config) {
  std::lock_guard lock(config_mu_);
  config_ = std::move(config);
}

std::shared_ptr<const RateLimitConfig> RlsHandler::config() const {
  std::lock_guard lock(config_mu_);
  return config_;
}

void RlsHandler::ShouldRateLimit(const RateLimitRequest& request, RateLimitResponse* response,
                                 Done done) {
  const auto config = this->config();
  auto plan = internal::BuildPlan(request, *config, options_);
  if (!plan.ok()) return done(plan.status());
  auto call = std::make_shared<Call>(store_, clock_, options_, std::move(*plan), response,
                                     std::move(done));
  call->self = call;
  Decide(call);
}

Result<RateLimitResponse> RlsHandler::ShouldRateLimit(const RateLimitRequest& request) {
  RateLimitResponse response;
  std::promise<Status> promise;
  ShouldRateLimit(request, &response, [&promise](Status s) { promise.set_value(std::move(s)); });
  if (Status s = promise.get_future().get(); !s.ok()) return s;
  return response;
}

}  // namespace caudal::envoy
