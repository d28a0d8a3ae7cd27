// RlqsService: Envoy's rate limit quota service,
// envoy.service.rate_limit_quota.v3.RateLimitQuotaService/StreamRateLimitQuotas, served on
// server.grpc beside RLS (RlsGrpcServer registers it).
//
// One bidirectional stream per Envoy filter. Each usage report names buckets (BucketIds); the
// first report of a bucket subscribes the stream to it. RlqsBuckets maps each to a policy and an
// identity (or the domain's no_match). For a mapped bucket the stream is one consumer of a share
// of each of the identity's limits (store.h's Share: consumer "<hex>" of its own group, or of the
// identity's group in a policy whose identities share one capacity, with the identity's weight),
// its demand the requests it reported (allowed and denied) over the time they took, a tenth more
// and one; each renewal's grants pay into the bucket's RlqsLedger (rlqs_ledger.h), which turns
// them into a token bucket assignment no larger than what is paid. So every unit an Envoy may
// spend is consumed in the store before the assignment is sent, whichever instance its stream
// reaches (docs/algorithms.md, "RLQS").
//
// Renewals: a report renews the buckets it names, each at most every assignment_ttl/20 (a report
// sooner only adds to its demand), and the stream's next message is read once the renewals are
// answered, so a client that floods reports waits for the store. A bucket whose reports count no
// request for rlqs.abandon_after (Envoy reports idle buckets too) is abandoned (AbandonAction)
// and forgotten; its shares expire in the store.
// While the store cannot answer a renewal, the bucket follows its policy's failure mode: deny is a
// DENY_ALL, allow an ALLOW_ALL, local keeps the active assignment (extended) — the last two
// outside the bound, by the operator's choice.
//
// Refused, with nothing charged: a first message without a domain, a domain not configured or
// changed mid-stream (INVALID_ARGUMENT), a message that is no RateLimitQuotaUsageReports or holds
// an empty or malformed BucketId (INVALID_ARGUMENT, rlqs_wire.h), more than rlqs.max_buckets
// buckets on a stream (RESOURCE_EXHAUSTED), more than rlqs.max_streams streams (RESOURCE_EXHAUSTED
// at once), a caller the server does not allow (its check). Such a stream ends with that status.
//
// Shutdown: every open stream's buckets get their active strategy with a time to live of 0 (Envoy
// applies its expired_assignment_behavior), then the stream ends UNAVAILABLE; new streams are
// refused UNAVAILABLE.
//
// Thread-safety: every method may be called from any thread.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "caudal/common/clock.h"
#include "caudal/engine/engine.h"
#include "envoy/rlqs_buckets.h"

namespace grpc {
class CallbackServerContext;
class Service;
class Status;
}  // namespace grpc

namespace caudal {
class Logger;
class Metrics;
}  // namespace caudal

namespace caudal::envoy {

struct RlqsServiceOptions {
  const Clock* clock = nullptr;  // required
  Metrics* metrics = nullptr;    // null: not counted
  // Checks a new stream's caller (the RLS server's CheckCaller); unset: every caller.
  std::function<grpc::Status(const grpc::CallbackServerContext&)> check_caller = nullptr;
};

class RlqsService {
 public:
  RlqsService(Engine& engine, std::shared_ptr<const RlqsBuckets> buckets,
              RlqsServiceOptions options);
  ~RlqsService();
  RlqsService(const RlqsService&) = delete;
  RlqsService& operator=(const RlqsService&) = delete;

  // What streams opened from now on map their buckets by (a reload); an open stream keeps the
  // mapping it opened under, and its buckets the limits in force at each renewal.
  void SetBuckets(std::shared_ptr<const RlqsBuckets> buckets);
  void SetCallerCheck(std::function<grpc::Status(const grpc::CallbackServerContext&)> check);
  // The generated service, for a grpc::ServerBuilder.
  grpc::Service* service();
  // Expires every stream's assignments (time to live 0) and ends the streams; refuses new ones.
  // Returns when every stream has ended or at `deadline` (options.clock's Monotonic()).
  void Shutdown(Nanos deadline);
  size_t streams() const;

  // The buckets of this instance's streams mapped to `policy` for the identity `descriptors`
  // (names and values, in any order): how many, their active token buckets' rates summed (per
  // second), and the requests their Envoys reported. Nullopt when none.
  struct Held {
    int64_t buckets = 0;
    double assigned_per_second = 0;
    uint64_t allowed = 0;
    uint64_t denied = 0;
  };
  std::optional<Held> HeldBy(std::string_view policy,
                             std::vector<std::pair<std::string, std::string>> descriptors) const;

  struct Core;  // in rlqs_service.cc

 private:
  std::shared_ptr<Core> core_;
  std::unique_ptr<grpc::Service> grpc_service_;
};

}  // namespace caudal::envoy
