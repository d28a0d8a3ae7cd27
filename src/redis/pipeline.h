// Pipeline: a Redis-backed store's requests, from DecideBatchAsync to their callback, whatever the
// topology behind it (one server, a Sentinel-managed primary, a Redis Cluster).
//
// DecideBatchAsync encodes a request on the caller's thread and queues it (one short mutex); the io
// thread hands its parts to the store's Router, which queues each on a Node. A request is one
// part, unless the store splits requests by hash slot (Redis Cluster): then each slot group is
// one part, and the request is decided by reserve, then commit or undo (docs/scaling.md has the
// guarantee): every group decides at once; if all admit, their consumption stands; as soon as
// one refuses or fails, every group that admitted is undone (lua_protocol.h), and each that
// admits later is undone when its answer comes; the request is answered once every undo came
// back. A request whose deadline passes is answered kUnavailable, and its admitting groups,
// before or after, are undone.
//
// The deadline is Redis's round trip, not caudal's queueing: a request times out when one of
// its parts was written a deadline ago and has no answer, or when it has waited here a deadline
// and the node it waits for is late (no connection, or every connection's oldest call a
// deadline old: Node::Late). So an answer takes at most about two deadlines, plus what the
// machine's scheduler adds (docs/reliability.md, what the store timeout counts).
//
// Thread-safety: Submit may be called from any thread; everything else runs on the io thread.
#pragma once

#include <atomic>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "caudal/common/clock.h"
#include "caudal/store/store.h"
#include "redis/node.h"
#include "store/batch.h"

namespace caudal::redis {

struct Request;

// One request's share of a script call: all of it, or one slot group of it.
struct RequestPart final : Part {
  enum class Kind : uint8_t { kDecide, kUndo };
  bool Abandoned() const override;

  // The request is kept alive by the pipeline until it is answered; an undo may outlive it.
  std::weak_ptr<Request> owner;
  Kind kind = Kind::kDecide;
  bool split = false;             // one of several slot groups of its request
  std::vector<uint16_t> entries;  // the request's entries this part carries, in its order
  int redirects = 0;              // MOVED, ASK and TRYAGAIN answers so far
  // A decide part of a split request that was admitted: what its undo needs.
  bool admitted = false;
  bool answered = false;  // its decision (or failure) came back
  bool undone = false;    // its undo was sent
  int64_t admitted_at = 0;
  StoreResponse reserved;
};
using RequestPartPtr = std::shared_ptr<RequestPart>;

// Where parts go; implemented by each store (io thread).
class Router {
 public:
  virtual ~Router() = default;
  // Queues `part` on the node that serves its slot, or fails it (Pipeline::Fail).
  virtual void Route(RequestPartPtr part) = 0;
  // Sends what Route() queued: parts routed together leave together, batched.
  virtual void Send() = 0;
  // Drops connections that stopped answering (see Node::CheckStalls).
  virtual void CheckStalls(Nanos now) = 0;
  virtual std::optional<Nanos> NextStallCheck() const = 0;
  // True when the node `part` waits for is late (Node::Late) by `budget` at `now`.
  virtual bool Late(const RequestPart& part, Nanos now, Nanos budget) const = 0;
  // `part`, sent, passed its deadline unanswered at `now` (for a breaker per node).
  virtual void DeadlinePassed(const RequestPart& /*part*/, Nanos /*now*/) {}
  // True when bytes from the node `part` was sent to wait unread on one of its connections with
  // calls in flight: an answer may have come in time and caudal not read it yet (the io thread
  // was late). Such a part's deadline waits for the read (Node::ReplyUnread).
  virtual bool ReplyUnread(const RequestPart& /*part*/) const { return false; }
  // The node did not serve `part` in a call spanning slots (lua_protocol.h: kNotServedHere):
  // sends it again with its keys declared, or fails it. False when the store never sends such
  // calls (the pipeline then fails the part).
  virtual bool Resend(const RequestPartPtr& /*part*/) { return false; }
};

struct PipelineOptions {
  std::chrono::microseconds deadline{5000};
  size_t max_outstanding = 100'000;
  bool split_by_slot = false;  // one part per hash slot (Redis Cluster)
  std::string key_prefix = "caudal:";
  // The store's decision clock (RedisStoreOptions::decision_clock); null: the pipeline's clock,
  // whose Now() is then near Redis's TIME. Calendar windows are encoded around its time.
  const Clock* decision_clock = nullptr;
};

struct PipelineCounters {
  std::atomic<uint64_t> requests{0};       // requests answered by Redis
  std::atomic<uint64_t> timeouts{0};       // requests completed at their deadline
  std::atomic<uint64_t> split{0};          // requests decided as several slot groups
  std::atomic<uint64_t> undos{0};          // undo calls sent for refused split requests
  std::atomic<uint64_t> undo_failures{0};  // undos that did not reach their node
  std::atomic<uint64_t> oom{0};            // calls Redis refused with OOM (over maxmemory)
};

class Pipeline {
 public:
  // `io`, `clock` and `router` must outlive the pipeline; `clock`'s Monotonic() is the deadline
  // clock.
  Pipeline(boost::asio::io_context& io, const Clock& clock, PipelineOptions options,
           Router& router);

  // DecideBatchAsync's work after validation: kResourceExhausted beyond max_outstanding, otherwise
  // queues the request (any thread).
  void Submit(std::span<const EntryRef> entries, DecideCallback done);

  // Replies (io thread). `ints` is the script's reply to a call carrying `parts` in order.
  void OnReply(std::span<const RequestPartPtr> parts, std::span<const int64_t> ints);
  // The part did not get an answer (error reply, lost connection, no node).
  void Fail(const RequestPartPtr& part, const Status& why);
  // Completes every request with `why`, now and for good (the store is shutting down).
  void Shutdown(const Status& why);
  // Arms the sweep timer for the next deadline or stall check (io thread).
  void ArmSweep();

  const PipelineCounters& counters() const { return counters_; }
  // A call Redis refused with OOM (io thread).
  void CountOom() { counters_.oom.fetch_add(1, std::memory_order_relaxed); }
  size_t outstanding() const { return outstanding_.load(std::memory_order_relaxed); }

 private:
  void Flush();
  void Sweep();
  void OnAnswer(const RequestPartPtr& part, Result<StoreResponse> result, int64_t now);
  void OnGroupAnswer(const RequestPartPtr& part, Result<StoreResponse> result, int64_t now);
  bool Expired(const Request& r, Nanos now) const;
  // Whether a sent, unanswered part of `r` has bytes waiting unread on its node.
  bool ReplyUnread(const Request& r) const;
  void TimeOut(Request& r, Nanos now);
  void UndoAdmitted(Request& r);
  void Undo(RequestPart& part);
  void OnUndone(const RequestPartPtr& undo, Result<StoreResponse> result);
  void MaybeFinish(Request& r);
  void Resolve(Request& r, Result<StoreResponse> result);

  boost::asio::io_context& io_;
  const Clock& clock_;
  const PipelineOptions options_;
  Router& router_;
  PipelineCounters counters_;
  std::atomic<size_t> outstanding_{0};

  std::mutex mu_;
  std::vector<std::shared_ptr<Request>> incoming_;  // guarded by mu_
  bool flush_posted_ = false;                       // guarded by mu_

  // io thread only.
  std::deque<std::shared_ptr<Request>> watch_;  // requests not yet a deadline old, oldest first
  // Requests older than a deadline, kept while their wait is caudal's (Expired() is false).
  std::vector<std::shared_ptr<Request>> overdue_;
  std::optional<Nanos> overdue_check_;  // when overdue_ must be looked at again
  boost::asio::steady_timer sweep_timer_;
  std::optional<Nanos> sweep_at_;
  bool shut_down_ = false;
};

}  // namespace caudal::redis
