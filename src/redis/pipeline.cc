#include "redis/pipeline.h"

#include <boost/asio/post.hpp>
#include <optional>

#include "redis/hash_slot.h"
#include "redis/lua_protocol.h"

namespace caudal::redis {

namespace asio = boost::asio;

struct Request {
  DecideCallback done;
  Nanos submitted{0};
  Nanos undo_sent{-1};  // when the last undo was sent
  bool resolved = false;
  int reads_awaited = 0;  // sweeps that found it expired with a reply unread (kMaxReadWaits)
  std::vector<RequestPartPtr> parts;  // its decide parts: one, or one per slot group
  // Split requests only.
  size_t answered = 0;       // decide parts answered (or failed)
  size_t undos_waiting = 0;  // undos sent and not yet answered
  bool refused = false;
  std::optional<Status> error;
  StoreResponse response;  // decisions by entry, filled as parts answer
};

// How many times a request past its deadline waits for bytes its node already sent to be read.
constexpr int kMaxReadWaits = 4;

bool RequestPart::Abandoned() const {
  if (kind == Kind::kUndo) return false;  // an undo is never dropped
  const std::shared_ptr<Request> r = owner.lock();
  return r == nullptr || r->resolved;
}

namespace {

std::string Millis(std::chrono::microseconds d) {
  return d.count() % 1000 == 0 ? std::to_string(d.count() / 1000) + "ms"
                               : std::to_string(d.count()) + "us";
}

}  // namespace

Pipeline::Pipeline(asio::io_context& io, const Clock& clock, PipelineOptions options,
                   Router& router)
    : io_(io), clock_(clock), options_(std::move(options)), router_(router), sweep_timer_(io) {}

void Pipeline::Submit(std::span<const EntryRef> entries, DecideCallback done) {
  if (outstanding_.fetch_add(1) >= options_.max_outstanding) {
    outstanding_.fetch_sub(1);
    done(Status::ResourceExhausted("redis store: " + std::to_string(options_.max_outstanding) +
                                   " decisions already waiting for redis"));
    return;
  }
  auto r = std::make_shared<Request>();
  r->done = std::move(done);
  r->submitted = clock_.Monotonic();
  // The time a calendar window's boundaries are encoded around (lua_protocol.h); read only when
  // one is there.
  Micros near{0};
  for (const EntryRef& e : entries) {
    if (!e.limit->calendar()) continue;
    const Clock& c = options_.decision_clock != nullptr ? *options_.decision_clock : clock_;
    near = std::chrono::duration_cast<Micros>(c.Now());
    break;
  }
  if (!options_.split_by_slot) {
    auto part = std::make_shared<RequestPart>();
    part->owner = r;
    part->request = EncodeRequest(entries, options_.key_prefix, near);
    r->parts.push_back(std::move(part));
  } else {
    // Group the entries by the slot of their state key, in order of first appearance.
    std::vector<std::string> keys;
    std::vector<int> slots;
    keys.reserve(entries.size());
    for (const EntryRef& e : entries) {
      keys.push_back(StateKey(options_.key_prefix, e.key, e.limit->algorithm()));
      slots.push_back(HashSlot(keys.back()));
    }
    std::vector<bool> placed(entries.size(), false);
    for (size_t i = 0; i < entries.size(); ++i) {
      if (placed[i]) continue;
      auto part = std::make_shared<RequestPart>();
      part->owner = r;
      part->slot = slots[i];
      std::vector<std::string> group_keys;
      for (size_t j = i; j < entries.size(); ++j) {
        if (placed[j] || slots[j] != slots[i]) continue;
        placed[j] = true;
        part->entries.push_back(static_cast<uint16_t>(j));
        group_keys.push_back(std::move(keys[j]));
      }
      part->request = EncodeSubset(entries, part->entries, std::move(group_keys), near);
      r->parts.push_back(std::move(part));
    }
    if (r->parts.size() > 1) {
      counters_.split.fetch_add(1, std::memory_order_relaxed);
      r->response.decisions.resize(entries.size());
      if (entries[0].op == EntryOp::kShare) r->response.shares.resize(entries.size());
      for (const RequestPartPtr& part : r->parts) part->split = true;
    }
  }
  bool post = false;
  {
    std::lock_guard lock(mu_);
    incoming_.push_back(std::move(r));
    post = !flush_posted_;
    flush_posted_ = true;
  }
  if (post) asio::post(io_, [this] { Flush(); });
}

void Pipeline::Flush() {
  std::vector<std::shared_ptr<Request>> batch;
  {
    std::lock_guard lock(mu_);
    batch.swap(incoming_);
    flush_posted_ = false;
  }
  if (shut_down_) return;  // Shutdown() answered them
  for (std::shared_ptr<Request>& r : batch) {
    watch_.push_back(r);
    for (const RequestPartPtr& part : r->parts) router_.Route(part);
  }
  router_.Send();
  ArmSweep();
}

void Pipeline::OnReply(std::span<const RequestPartPtr> parts, std::span<const int64_t> ints) {
  // Each part's decisions, or none when the node did not serve it (a call spanning slots).
  std::vector<std::optional<Result<StoreResponse>>> decoded;
  decoded.reserve(parts.size());
  size_t pos = 0;
  size_t served = 0;
  Status broken;
  for (const RequestPartPtr& part : parts) {
    if (NotServedHere(ints, pos, part->request)) {
      decoded.emplace_back();
      continue;
    }
    decoded.emplace_back(DecodeResponse(ints, pos, part->request));
    ++served;
    // A refusal (a share's key full) is that part's answer; anything else breaks the reply.
    if (!decoded.back()->ok() &&
        decoded.back()->status().code() != StatusCode::kResourceExhausted) {
      broken = decoded.back()->status();
      break;
    }
  }
  Result<int64_t> now = broken.ok() ? DecodeCallTime(ints, pos) : Result<int64_t>(broken);
  if (!now.ok()) {
    for (const RequestPartPtr& part : parts) Fail(part, now.status());
    return;
  }
  // Counted before the callbacks run, so a caller that saw its answer sees it in Stats().
  counters_.requests.fetch_add(served, std::memory_order_relaxed);
  for (size_t i = 0; i < parts.size(); ++i) {
    if (decoded[i]) {
      OnAnswer(parts[i], std::move(*decoded[i]), *now);
    } else if (!router_.Resend(parts[i])) {
      Fail(parts[i], Status::Internal("redis: a server said a single-server call's keys are not "
                                      "its own"));
    }
  }
}

void Pipeline::Fail(const RequestPartPtr& part, const Status& why) { OnAnswer(part, why, 0); }

void Pipeline::OnAnswer(const RequestPartPtr& part, Result<StoreResponse> result, int64_t now) {
  if (part->kind == RequestPart::Kind::kUndo) {
    OnUndone(part, std::move(result));
    return;
  }
  if (!part->split) {
    // A late answer (after the deadline) is dropped: what it consumed stays consumed, as for
    // any request that timed out on one Redis.
    if (const std::shared_ptr<Request> r = part->owner.lock()) Resolve(*r, std::move(result));
    return;
  }
  OnGroupAnswer(part, std::move(result), now);
}

// One slot group of a split request answered: reserve, then commit or undo (pipeline.h).
void Pipeline::OnGroupAnswer(const RequestPartPtr& part, Result<StoreResponse> result,
                             int64_t now) {
  const std::shared_ptr<Request> owner = part->owner.lock();
  part->answered = true;
  if (result.ok() && result->allowed) {
    part->admitted = true;
    part->admitted_at = now;
    part->reserved = *result;
  }
  if (owner == nullptr) {  // answered (at its deadline) and gone: undo whatever it consumed
    if (part->admitted) Undo(*part);
    return;
  }
  Request& r = *owner;
  ++r.answered;
  if (!result.ok()) {
    if (!r.error) r.error = result.status();
    UndoAdmitted(r);
  } else {
    for (size_t j = 0; j < part->entries.size() && j < result->decisions.size(); ++j) {
      r.response.decisions[part->entries[j]] = result->decisions[j];
      if (j < result->shares.size()) r.response.shares[part->entries[j]] = result->shares[j];
    }
    if (!result->allowed) {
      r.refused = true;
      UndoAdmitted(r);
    } else if (r.refused || r.error || r.resolved) {
      Undo(*part);
    }
  }
  MaybeFinish(r);
}

void Pipeline::UndoAdmitted(Request& r) {
  for (const RequestPartPtr& p : r.parts) {
    if (p->admitted && !p->undone) Undo(*p);
  }
}

void Pipeline::Undo(RequestPart& part) {
  part.undone = true;
  auto undo = std::make_shared<RequestPart>();
  std::vector<uint16_t> undone;
  undo->request = EncodeUndo(part.request, part.reserved, part.admitted_at, undone);
  if (undo->request.keys.empty()) return;  // it consumed nothing
  undo->kind = RequestPart::Kind::kUndo;
  undo->split = true;
  undo->owner = part.owner;
  undo->slot = part.slot;
  for (const uint16_t i : undone) undo->entries.push_back(part.entries[i]);
  if (const std::shared_ptr<Request> r = part.owner.lock()) {
    ++r->undos_waiting;
    r->undo_sent = clock_.Monotonic();
  }
  counters_.undos.fetch_add(1, std::memory_order_relaxed);
  router_.Route(std::move(undo));
  router_.Send();
}

void Pipeline::OnUndone(const RequestPartPtr& undo, Result<StoreResponse> result) {
  if (!result.ok()) counters_.undo_failures.fetch_add(1, std::memory_order_relaxed);
  const std::shared_ptr<Request> r = undo->owner.lock();
  if (r == nullptr) return;
  --r->undos_waiting;
  if (result.ok() && !r->resolved) {
    // The entries report their state after the undo: without the consumption, as a refused
    // request's entries do.
    for (size_t j = 0; j < undo->entries.size() && j < result->decisions.size(); ++j) {
      r->response.decisions[undo->entries[j]] = result->decisions[j];
    }
  }
  MaybeFinish(*r);
}

void Pipeline::MaybeFinish(Request& r) {
  if (r.resolved || r.answered < r.parts.size() || r.undos_waiting > 0) return;
  if (r.error) {
    Resolve(r, *r.error);
    return;
  }
  r.response.allowed = !r.refused;
  if (r.refused) {  // a reserve its request refused elsewhere opened nothing (its undo deleted it)
    for (Decision& d : r.response.decisions) {
      if (d.reservation == Reservation::kOpened) d.reservation = Reservation::kNone;
    }
  }
  Resolve(r, std::move(r.response));
}

void Pipeline::Resolve(Request& r, Result<StoreResponse> result) {
  if (r.resolved) return;
  r.resolved = true;
  outstanding_.fetch_sub(1, std::memory_order_relaxed);
  DecideCallback done = std::move(r.done);
  done(std::move(result));
}

// Whether `r`'s wait is the store's fault (see pipeline.h). Precondition: `r` is a deadline old.
bool Pipeline::Expired(const Request& r, Nanos now) const {
  const Nanos budget = options_.deadline;
  if (r.answered == r.parts.size() && r.parts.size() > 1) {  // waiting for its undos
    return r.undo_sent.count() < 0 || now - r.undo_sent >= budget;
  }
  for (const RequestPartPtr& part : r.parts) {
    if (part->answered) continue;
    if (part->sent_at.count() >= 0 ? now - part->sent_at >= budget
                                   : router_.Late(*part, now, budget)) {
      return true;
    }
  }
  return false;
}

bool Pipeline::ReplyUnread(const Request& r) const {
  for (const RequestPartPtr& part : r.parts) {
    if (!part->answered && part->sent_at.count() >= 0 && router_.ReplyUnread(*part)) return true;
  }
  return false;
}

void Pipeline::TimeOut(Request& r, Nanos now) {
  counters_.timeouts.fetch_add(1, std::memory_order_relaxed);
  for (const RequestPartPtr& part : r.parts) {
    if (!part->answered && part->sent_at.count() >= 0) router_.DeadlinePassed(*part, now);
  }
  // Unavailable, as for any store that cannot answer; the message says it was the deadline.
  const Status late = Status::Unavailable("redis did not answer within the " +
                                          Millis(options_.deadline) + " deadline");
  if (r.parts.size() > 1) {  // whatever its groups consumed is undone as they answer
    if (!r.error) r.error = late;
    UndoAdmitted(r);
  }
  Resolve(r, late);
}

// Completes every request whose deadline passed by the store's fault and drops connections
// that stopped answering.
void Pipeline::Sweep() {
  const Nanos now = clock_.Monotonic();
  while (!watch_.empty()) {
    std::shared_ptr<Request>& r = watch_.front();
    if (!r->resolved) {
      if (r->submitted + options_.deadline > now) break;
      overdue_.push_back(std::move(r));
    }
    watch_.pop_front();
  }
  // A waiting part is looked at again this often, until it is sent or its node is late.
  const Nanos recheck = std::max<Nanos>(options_.deadline / 4, std::chrono::microseconds(250));
  overdue_check_.reset();
  std::vector<std::shared_ptr<Request>> overdue;
  overdue.swap(overdue_);
  for (std::shared_ptr<Request>& r : overdue) {
    if (r->resolved) continue;
    if (Expired(*r, now)) {
      if (r->reads_awaited < kMaxReadWaits && ReplyUnread(*r)) {
        // Its answer may sit in a socket the io thread has not read (it ran late): look again
        // right after the reactor's next pass, which reads sockets before it runs timers.
        ++r->reads_awaited;
        overdue_check_ = now;
        overdue_.push_back(std::move(r));
        continue;
      }
      TimeOut(*r, now);
      continue;
    }
    Nanos next = now + recheck;
    for (const RequestPartPtr& part : r->parts) {
      if (!part->answered && part->sent_at.count() >= 0) {
        next = std::min(next, part->sent_at + options_.deadline);
      }
    }
    if (!overdue_check_ || next < *overdue_check_) overdue_check_ = next;
    overdue_.push_back(std::move(r));
  }
  router_.CheckStalls(now);
  ArmSweep();
}

void Pipeline::ArmSweep() {
  while (!watch_.empty() && watch_.front()->resolved) watch_.pop_front();
  std::optional<Nanos> at = overdue_check_;
  if (!watch_.empty() && (!at || watch_.front()->submitted + options_.deadline < *at)) {
    at = watch_.front()->submitted + options_.deadline;
  }
  if (const std::optional<Nanos> stall = router_.NextStallCheck(); stall && (!at || *stall < *at)) {
    at = stall;
  }
  if (shut_down_ || !at || (sweep_at_ && *sweep_at_ <= *at)) return;
  sweep_at_ = at;
  sweep_timer_.expires_after(std::max(Nanos(0), *at - clock_.Monotonic()));
  sweep_timer_.async_wait([this](const boost::system::error_code& ec) {
    if (ec) return;  // re-armed earlier, or shutting down
    sweep_at_.reset();
    Sweep();
  });
}

void Pipeline::Shutdown(const Status& why) {
  shut_down_ = true;
  std::vector<std::shared_ptr<Request>> last;
  {
    std::lock_guard lock(mu_);
    last.swap(incoming_);
  }
  for (const std::shared_ptr<Request>& r : last) Resolve(*r, why);
  for (const std::shared_ptr<Request>& r : watch_) Resolve(*r, why);
  for (const std::shared_ptr<Request>& r : overdue_) Resolve(*r, why);
  watch_.clear();
  overdue_.clear();
  sweep_timer_.cancel();
}

}  // namespace caudal::redis
