#include "envoy/rlqs_service.h"

#include <grpcpp/grpcpp.h>
#include <grpcpp/support/proto_buffer_reader.h>

#include <algorithm>
#include <condition_variable>
#include <cstdio>
#include <deque>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <thread>
#include <vector>

#include "algorithms/exact_math.h"
#include "common/cat.h"
#include "decorators/lease_table.h"
#include "envoy/rlqs_ledger.h"
#include "envoy/rlqs_wire.h"
#include "envoy/service/rate_limit_quota/v3/rlqs.grpc.pb.h"
#include "observe/metrics.h"

namespace caudal::envoy {
namespace {

namespace rlqs = ::envoy::service::rate_limit_quota::v3;
using RawQuotaService = rlqs::RateLimitQuotaService::WithRawCallbackMethod_StreamRateLimitQuotas<
    rlqs::RateLimitQuotaService::Service>;
using Reactor = grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>;

// How often idle buckets are looked for.
constexpr Nanos kSweepInterval = std::chrono::milliseconds(100);

Micros ToMicros(Nanos n) { return std::chrono::duration_cast<Micros>(n); }

std::string Hex(uint64_t v) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

// A stream refused before it starts: finished with `status` at once.
class Refused final : public Reactor {
 public:
  explicit Refused(const grpc::Status& status) { Finish(status); }
  void OnDone() override { delete this; }
};

void SetDuration(google::protobuf::Duration* d, Micros m) {
  d->set_seconds(m.count() / 1'000'000);
  d->set_nanos(static_cast<int32_t>((m.count() % 1'000'000) * 1'000));
}

void SetStrategy(::envoy::type::v3::RateLimitStrategy* out, const RlqsStrategy& s) {
  switch (s.kind) {
    case RlqsStrategy::Kind::kAllowAll:
      out->set_blanket_rule(::envoy::type::v3::RateLimitStrategy::ALLOW_ALL);
      return;
    case RlqsStrategy::Kind::kDenyAll:
      out->set_blanket_rule(::envoy::type::v3::RateLimitStrategy::DENY_ALL);
      return;
    case RlqsStrategy::Kind::kTokenBucket: {
      ::envoy::type::v3::TokenBucket* b = out->mutable_token_bucket();
      b->set_max_tokens(static_cast<uint32_t>(s.bucket.max_tokens));
      b->mutable_tokens_per_fill()->set_value(static_cast<uint32_t>(s.bucket.tokens_per_fill));
      SetDuration(b->mutable_fill_interval(), s.bucket.fill_interval);
      return;
    }
  }
}

std::string_view ActionName(const RlqsAssignment& a) {
  if (a.ttl == Micros(0)) return "expire";
  if (a.extends) return "extend";
  switch (a.strategy.kind) {
    case RlqsStrategy::Kind::kTokenBucket:
      return "token_bucket";
    case RlqsStrategy::Kind::kAllowAll:
      return "allow_all";
    case RlqsStrategy::Kind::kDenyAll:
      break;
  }
  return "deny_all";
}

}  // namespace

struct Stream;

struct RlqsService::Core : std::enable_shared_from_this<RlqsService::Core> {
  Core(Engine& e, std::shared_ptr<const RlqsBuckets> b, RlqsServiceOptions o)
      : engine(e), options(std::move(o)), buckets(std::move(b)), rng(std::random_device{}()) {}

  Engine& engine;
  RlqsServiceOptions options;
  mutable std::mutex mu;
  std::condition_variable changed;  // a stream ended, or the sweeper should stop
  std::shared_ptr<const RlqsBuckets> buckets;
  std::function<grpc::Status(const grpc::CallbackServerContext&)> check_caller;
  std::set<std::shared_ptr<Stream>> streams;
  bool shutting_down = false;
  bool stop_sweeping = false;
  std::mt19937_64 rng;
  std::thread sweeper;

  void Count(MetricId id, std::string_view label, uint64_t n = 1) {
    if (options.metrics != nullptr && n > 0) options.metrics->Series(id, {label}).fetch_add(n);
  }
  void Gauges();  // caudal_rlqs_streams and caudal_rlqs_buckets, from the streams
  Reactor* Open(grpc::CallbackServerContext* context);
  void Ended(const std::shared_ptr<Stream>& s);
  void Sweep();
};

// A renewal's store calls and what they point into, alive until their answers.
struct Renewal {
  Engine::PolicyQuota quota;
  std::string consumer, group;
  std::vector<ShareEntry> entries;
  std::vector<ChargeEntry> charges;  // the credit charged ahead, per limit short of it
  std::vector<size_t> charged;       // the limit of each charge
  RlqsLedger next{0};                // the ledger once the assignment is paid for
  RlqsAssignment assignment;
  Micros now{0};
};

// One bucket of a stream.
struct Bucket {
  rlqs::BucketId id;  // as reported, for the actions
  RlqsTarget target;
  std::string consumer;  // its consumers' name in the store (with the group, when shared)
  RlqsLedger ledger{0};
  PolicyCounters* counters = nullptr;  // its policy's, api rlqs
  // The last report that counted a request for it (its subscription's, at first): Envoy reports
  // every bucket it holds each time, idle or not, so idleness is a bucket's requests stopping.
  Micros last_active{0};
  Micros last_renewal{Micros::min()};
  uint64_t requests = 0;  // reported since the last renewal
  uint64_t allowed = 0;   // reported since its subscription
  uint64_t denied = 0;
  bool in_flight = false;
};

// The state of one stream, shared by its reactor, its store calls and the service.
struct Stream : std::enable_shared_from_this<Stream> {
  class Io;

  std::shared_ptr<RlqsService::Core> core;
  std::mutex mu;
  Io* io = nullptr;   // null once gRPC is done with the stream
  uint64_t name = 0;  // random: its consumers' names
  uint64_t serial = 0;
  std::string domain;
  std::shared_ptr<const RlqsBuckets> buckets;  // the mapping taken at the first report
  std::map<RlqsBucketId, Bucket> table;
  rlqs::RateLimitQuotaResponse pending;  // the actions of the report being renewed
  int waiting = 0;                       // its renewals at the store
  std::deque<grpc::ByteBuffer> out;
  bool writing = false;
  bool finishing = false;  // Finish once the writes are out
  grpc::Status finish_status;
  bool finished = false;
  bool read_done = false;  // the client closed its side, or the stream broke

  // What to do with the reactor once the lock is released (gRPC may run reactions inline).
  struct Ops {
    bool read = false;
    bool write = false;  // the front of `out`, which stays there until its OnWriteDone
    std::optional<grpc::Status> finish;
    // Store calls to send: a store may answer inline, into Renewed, which takes mu.
    std::vector<std::function<void()>> calls;
  };

  Micros Now() const { return ToMicros(core->options.clock->Monotonic()); }
  void Received(const grpc::ByteBuffer* message);
  void Written(bool ok);
  void Done();
  // Ends the stream with `status` once what is queued is written. Under mu.
  void EndLocked(const grpc::Status& status, std::string_view reason, Ops& ops);
  // Queues the pending actions, if any, as one message. Under mu.
  void FlushLocked(Ops& ops);
  void WriteLocked(rlqs::RateLimitQuotaResponse& message, Ops& ops);
  void NextLocked(Ops& ops);  // the next step once nothing is queued or in flight
  void Apply(Ops ops);
  // A renewal's answer for `bucket`.
  void Renewed(const RlqsBucketId& key, const Result<ShareResponse>& got,
               const std::shared_ptr<Renewal>& call);
  // The answer to the charge of an assignment's credit (Renewed's second step).
  void Charged(const RlqsBucketId& key, const Status& status, const std::shared_ptr<Renewal>& call);
  // A renewal that failed with `status`: the domain's answer for a full key, else the policy's
  // failure mode. Under mu.
  void FailedLocked(Bucket& b, const Status& status, FailureMode on_failure);
  // One renewal answered (waiting − 1): the message goes out once the report's renewals are.
  void RenewalDoneLocked(Ops& ops);
  // Renews `b` (under mu): a blanket at once, or a share call (waiting + 1).
  void RenewLocked(const RlqsBucketId& key, Bucket& b, const RlqsDomainConfig& served, Ops& ops);
  void AddAction(const Bucket& b, const RlqsAssignment& a);
};

class Stream::Io final : public Reactor {
 public:
  explicit Io(std::shared_ptr<Stream> s) : stream_(std::move(s)) {}
  void Start() { StartRead(&in_); }
  void OnReadDone(bool ok) override { stream_->Received(ok ? &in_ : nullptr); }
  void OnWriteDone(bool ok) override { stream_->Written(ok); }
  void OnDone() override {
    stream_->Done();
    delete this;
  }
  grpc::ByteBuffer& in() { return in_; }

 private:
  std::shared_ptr<Stream> stream_;
  grpc::ByteBuffer in_;
};

void Stream::Apply(Ops ops) {
  // gRPC keeps the reactor until OnDone, which follows Finish and every operation started: one
  // decided here, under mu, before `finished` was set, is still valid to start.
  Io* r = nullptr;
  const grpc::ByteBuffer* front = nullptr;
  {
    std::lock_guard lock(mu);
    r = io;
    if (ops.write && !out.empty()) front = &out.front();  // a deque's front stays put
  }
  if (r != nullptr) {
    if (front != nullptr) r->StartWrite(front);
    if (ops.read) r->StartRead(&r->in());
    if (ops.finish) r->Finish(*ops.finish);
  }
  for (const auto& call : ops.calls) call();
}

void Stream::WriteLocked(rlqs::RateLimitQuotaResponse& message, Ops& ops) {
  grpc::ByteBuffer buffer;
  bool own = false;
  if (!grpc::SerializationTraits<rlqs::RateLimitQuotaResponse>::Serialize(message, &buffer, &own)
           .ok()) {
    return;
  }
  core->Count(MetricId::kRlqsMessages, "sent");
  out.push_back(std::move(buffer));
  if (!writing && !finished) {
    writing = true;
    ops.write = true;
  }
}

void Stream::FlushLocked(Ops& ops) {
  if (finishing || finished) pending.Clear();
  if (pending.bucket_action_size() == 0) return;
  WriteLocked(pending, ops);
  pending.Clear();
}

void Stream::EndLocked(const grpc::Status& status, std::string_view reason, Ops& ops) {
  if (finishing || finished) return;
  finishing = true;
  finish_status = status;
  if (!reason.empty()) core->Count(MetricId::kRlqsRefused, reason);
  if (!writing) {
    finished = true;
    ops.finish = finish_status;
  }
}

void Stream::NextLocked(Ops& ops) {
  if (finished || finishing || waiting > 0) return;
  if (read_done) {
    EndLocked(grpc::Status::OK, "", ops);
    return;
  }
  ops.read = true;
}

void Stream::AddAction(const Bucket& b, const RlqsAssignment& a) {
  auto* action = pending.add_bucket_action();
  *action->mutable_bucket_id() = b.id;
  auto* assign = action->mutable_quota_assignment_action();
  SetDuration(assign->mutable_assignment_time_to_live(), a.ttl);
  SetStrategy(assign->mutable_rate_limit_strategy(), a.strategy);
  core->Count(MetricId::kRlqsActions, ActionName(a));
}

void Stream::RenewLocked(const RlqsBucketId& key, Bucket& b, const RlqsDomainConfig& served,
                         Ops& ops) {
  const RlqsConfig& config = buckets->config();
  const Micros now = Now();
  const Micros previous = b.last_renewal;
  b.last_renewal = now;
  auto blanket = [&](RlqsNoMatch m) {
    if (m == RlqsNoMatch::kNone) return;
    AddAction(b, b.ledger.Blanket(now,
                                  m == RlqsNoMatch::kAllowAll ? RlqsStrategy::Kind::kAllowAll
                                                              : RlqsStrategy::Kind::kDenyAll,
                                  config.assignment_ttl));
  };
  if (b.target.rule == nullptr) return blanket(served.no_match);
  auto quota = core->engine.QuotaOf(b.target.rule->policy, b.target.descriptors);
  if (!quota.ok()) return blanket(served.no_match);  // the policy went, or no identity in it
  // Its demand: the requests reported since the last renewal (allowed and denied) over the time
  // since, per each limit's rate period, a tenth more and one. Envoy's reports say their time in
  // whole seconds, often 0: this instance's clock measures it. The first renewal knows nothing
  // of the bucket's rate (its report counts one request): it asks for the whole limit, which
  // max-min divides like any demand; the next report says the real one.
  const bool first = previous == Micros::min();
  const Micros elapsed = first ? Micros(0) : now - previous;
  const uint64_t requests = b.requests;
  b.requests = 0;
  auto call = std::make_shared<Renewal>();
  call->quota = std::move(*quota);
  call->group = call->quota.shared ? engine_internal::ShareGroupName(call->quota.identity) : "";
  call->consumer = call->group.empty() ? b.consumer : Cat(call->group, '@', b.consumer);
  const Micros ttl = std::clamp(config.assignment_ttl, kMinShareTtl, kMaxShareTtl);
  for (size_t k = 0; k < call->quota.limits.size(); ++k) {
    const Limit& l = call->quota.limits[k];
    const exact::Int128 asked = first ? static_cast<exact::Int128>(l.rate().count)
                                      : static_cast<exact::Int128>(requests) *
                                            l.rate().period.count() /
                                            std::max<int64_t>(1, elapsed.count());
    int64_t demand = static_cast<int64_t>(std::min<exact::Int128>(asked, kMaxCost));
    demand = std::min<int64_t>(kMaxCost, demand + demand / 10 + 1);
    call->entries.push_back({.key = call->quota.keys[k],
                             .limit = &l,
                             .consumer = call->consumer,
                             .group = call->group,
                             .demand = demand,
                             .weight = call->quota.weight,
                             .ttl = ttl,
                             .fairness = call->quota.fairness});
  }
  b.in_flight = true;
  ++waiting;
  std::weak_ptr<Stream> self = weak_from_this();
  ops.calls.push_back([self, call, key, &store = core->engine.store()] {
    store.ShareAsync(call->entries, [self, call, key](Result<ShareResponse> got) {
      if (auto s = self.lock()) s->Renewed(key, got, call);
    });
  });
}

void Stream::FailedLocked(Bucket& b, const Status& status, FailureMode on_failure) {
  const Micros ttl = buckets->config().assignment_ttl;
  const Micros now = Now();
  if (status.code() == StatusCode::kResourceExhausted) {
    // The key holds as many consumers as it takes: none for this one until some expire.
    AddAction(b, b.ledger.Blanket(now, RlqsStrategy::Kind::kDenyAll, ttl));
  } else if (on_failure == FailureMode::kAllow) {
    AddAction(b, b.ledger.Blanket(now, RlqsStrategy::Kind::kAllowAll, ttl));
  } else if (on_failure == FailureMode::kLocal) {
    if (auto kept = b.ledger.KeepActive(now, ttl)) {
      AddAction(b, *kept);
    } else {
      AddAction(b, b.ledger.Blanket(now, RlqsStrategy::Kind::kDenyAll, ttl));
    }
  } else {
    AddAction(b, b.ledger.Blanket(now, RlqsStrategy::Kind::kDenyAll, ttl));
  }
}

void Stream::RenewalDoneLocked(Ops& ops) {
  if (--waiting == 0) {
    FlushLocked(ops);
    NextLocked(ops);
  }
}

void Stream::Renewed(const RlqsBucketId& key, const Result<ShareResponse>& got,
                     const std::shared_ptr<Renewal>& call) {
  Ops ops;
  {
    std::lock_guard lock(mu);
    auto it = table.find(key);
    Bucket* b = it != table.end() && !finishing && !finished ? &it->second : nullptr;
    const std::vector<Limit>& limits = call->quota.limits;
    const bool answered =
        got.ok() && got->decisions.size() == limits.size() && got->shares.size() == limits.size();
    if (b != nullptr && !answered) {
      b->in_flight = false;
      FailedLocked(*b, got.ok() ? Status::Internal("a share answered out of shape") : got.status(),
                   call->quota.on_failure);
    } else if (b != nullptr) {
      const RlqsConfig& config = buckets->config();
      // A policy whose limits changed (a reload) starts a new ledger: the units paid for the
      // old limits pay for nothing of the new.
      if (b->ledger.limits() != limits.size()) b->ledger = RlqsLedger(limits.size());
      std::optional<RlqsRate> rate;
      for (size_t k = 0; k < limits.size(); ++k) {
        b->ledger.Pay(k, got->decisions[k].leased);
        const RlqsRate r{.count = got->shares[k].allocation, .period = limits[k].rate().period};
        // The least rate: count/period below the other's, compared in integers.
        if (!rate || static_cast<exact::Int128>(r.count) * rate->period.count() <
                         static_cast<exact::Int128>(rate->count) * r.period.count()) {
          rate = r;
        }
      }
      // The assignment runs up to one credit ahead of what the grants paid: that credit is
      // charged in the store first (into debt where it does not fit), so every unit the Envoy
      // may spend is consumed there before it is sent.
      call->now = Now();
      call->next = b->ledger;
      call->assignment = call->next.Assign(call->now, rate, config.assignment_ttl,
                                           config.assignment_ttl, config.assignment_ttl / 20);
      for (size_t k = 0; k < limits.size(); ++k) {
        const int64_t short_of = call->next.committed() - call->next.paid(k);
        if (short_of <= 0) continue;
        call->charges.push_back(
            {.key = call->quota.keys[k], .limit = &limits[k], .cost = short_of});
        call->charged.push_back(k);
      }
      if (call->charges.empty()) {
        b->in_flight = false;
        b->ledger = std::move(call->next);
        AddAction(*b, call->assignment);
      } else {
        std::weak_ptr<Stream> self = weak_from_this();
        ops.calls.push_back([self, call, key, &store = core->engine.store()] {
          store.DecideAsync({.charges = call->charges},
                            [self, call, key](Result<DecideResponse> r) {
                              if (auto s = self.lock()) s->Charged(key, r.status(), call);
                            });
        });
      }
    }
    if (ops.calls.empty()) RenewalDoneLocked(ops);
  }
  Apply(std::move(ops));
}

void Stream::Charged(const RlqsBucketId& key, const Status& status,
                     const std::shared_ptr<Renewal>& call) {
  Ops ops;
  {
    std::lock_guard lock(mu);
    auto it = table.find(key);
    if (it != table.end() && !finishing && !finished) {
      Bucket& b = it->second;
      b.in_flight = false;
      if (status.ok()) {
        // Paid now: the ledger as planned, with the charges counted.
        b.ledger = std::move(call->next);
        for (size_t i = 0; i < call->charges.size(); ++i) {
          b.ledger.Pay(call->charged[i], call->charges[i].cost);
        }
        AddAction(b, call->assignment);
      } else {
        FailedLocked(b, status, call->quota.on_failure);
      }
    }
    RenewalDoneLocked(ops);
  }
  Apply(std::move(ops));
}

void Stream::Received(const grpc::ByteBuffer* message) {
  Ops ops;
  {
    std::lock_guard lock(mu);
    if (message == nullptr) {  // the client is done sending, or the stream broke
      read_done = true;
      NextLocked(ops);
    } else if (!finishing && !finished) {
      core->Count(MetricId::kRlqsMessages, "received");
      auto refuse = [&](grpc::StatusCode code, std::string what, std::string_view reason) {
        EndLocked({code, std::move(what)}, reason, ops);
      };
      std::vector<grpc::Slice> slices;
      std::string bytes;
      if (message->Dump(&slices).ok()) {
        for (const grpc::Slice& s : slices) {
          bytes.append(reinterpret_cast<const char*>(s.begin()), s.size());
        }
      }
      const RlqsConfig& config = buckets->config();
      auto report = ParseRlqsReport(bytes, static_cast<size_t>(config.max_buckets));
      if (!report.ok()) {
        const bool many = report.status().code() == StatusCode::kResourceExhausted;
        refuse(many ? grpc::StatusCode::RESOURCE_EXHAUSTED : grpc::StatusCode::INVALID_ARGUMENT,
               std::string(report.status().message()), many ? "too_many_buckets" : "malformed");
      } else if (domain.empty() && report->domain.empty()) {
        refuse(grpc::StatusCode::INVALID_ARGUMENT,
               "domain: the first report of a stream must name its domain", "malformed");
      } else if (!domain.empty() && !report->domain.empty() && report->domain != domain) {
        refuse(grpc::StatusCode::INVALID_ARGUMENT,
               Cat("domain: a stream keeps one domain (", Quoted(domain),
                   "); open another "
                   "stream for ",
                   Quoted(report->domain)),
               "domain");
      } else if (buckets->Domain(domain.empty() ? report->domain : domain) == nullptr) {
        refuse(grpc::StatusCode::INVALID_ARGUMENT,
               Cat("domain ", Quoted(report->domain), " is not served (rlqs.domains)"), "domain");
      } else {
        if (domain.empty()) domain = report->domain;
        const RlqsDomainConfig& d = *buckets->Domain(domain);
        size_t fresh = 0;
        for (const RlqsUsage& u : report->usages) fresh += table.count(u.bucket) == 0 ? 1 : 0;
        if (table.size() + fresh > static_cast<size_t>(config.max_buckets)) {
          refuse(
              grpc::StatusCode::RESOURCE_EXHAUSTED,
              Cat("a stream reports at most ", config.max_buckets, " buckets (rlqs.max_buckets)"),
              "too_many_buckets");
        } else {
          const Micros now = Now();
          const Micros gap = config.assignment_ttl / 20;
          for (const RlqsUsage& u : report->usages) {
            auto [it, added] = table.try_emplace(u.bucket);
            Bucket& b = it->second;
            if (added) {
              for (const auto& [k, v] : u.bucket) (*b.id.mutable_bucket())[k] = v;
              b.target = buckets->Map(d, u.bucket);
              b.consumer = Hex(name ^ (++serial * 0x9e3779b97f4a7c15ull));
              if (b.target.rule != nullptr && core->options.metrics != nullptr) {
                b.counters = &core->options.metrics->ForPolicy(Api::kRlqs, b.target.rule->policy);
              }
            }
            if (added || u.allowed + u.denied > 0) b.last_active = now;
            b.requests += u.allowed + u.denied;
            b.allowed += u.allowed;
            b.denied += u.denied;
            if (b.counters != nullptr) {
              b.counters->allowed.fetch_add(u.allowed, std::memory_order_relaxed);
              b.counters->denied.fetch_add(u.denied, std::memory_order_relaxed);
            }
            if (!b.in_flight && (added || now - b.last_renewal >= gap)) {
              RenewLocked(u.bucket, b, d, ops);
            }
          }
          if (waiting == 0) {
            FlushLocked(ops);
            NextLocked(ops);
          }
        }
      }
    }
  }
  Apply(std::move(ops));
}

void Stream::Written(bool ok) {
  Ops ops;
  {
    std::lock_guard lock(mu);
    out.pop_front();
    writing = false;
    if (!ok) {  // the stream broke: nothing more goes out
      out.clear();
      read_done = true;
    }
    if (!out.empty() && !finished) {
      writing = true;
      ops.write = true;
    } else if (finishing && !finished) {
      finished = true;
      ops.finish = finish_status;
    }
  }
  Apply(std::move(ops));
}

void Stream::Done() {
  {
    std::lock_guard lock(mu);
    io = nullptr;
    finished = true;
  }
  core->Ended(shared_from_this());
}

Reactor* RlqsService::Core::Open(grpc::CallbackServerContext* context) {
  std::shared_ptr<Stream> s;
  {
    std::lock_guard lock(mu);
    const auto refuse = [this](grpc::StatusCode code, std::string what, std::string_view reason) {
      Count(MetricId::kRlqsRefused, reason);
      return new Refused({code, std::move(what)});
    };
    if (shutting_down) {
      return refuse(grpc::StatusCode::UNAVAILABLE, "caudal is shutting down", "shutdown");
    }
    if (check_caller) {
      if (grpc::Status auth = check_caller(*context); !auth.ok()) {
        Count(MetricId::kRlqsRefused, "unauthenticated");
        return new Refused(auth);
      }
    }
    if (streams.size() >= static_cast<size_t>(buckets->config().max_streams)) {
      return refuse(
          grpc::StatusCode::RESOURCE_EXHAUSTED,
          Cat("more than ", buckets->config().max_streams, " streams open (rlqs.max_streams)"),
          "too_many_streams");
    }
    s = std::make_shared<Stream>();
    s->core = shared_from_this();
    s->name = rng();
    s->buckets = buckets;  // the stream maps its buckets by the configuration it opened under
    streams.insert(s);
  }
  auto* io = new Stream::Io(s);
  {
    std::lock_guard lock(s->mu);
    s->io = io;
  }
  io->Start();
  return io;
}

void RlqsService::Core::Ended(const std::shared_ptr<Stream>& s) {
  {
    std::lock_guard lock(mu);
    streams.erase(s);
  }
  changed.notify_all();
}

void RlqsService::Core::Gauges() {
  if (options.metrics == nullptr) return;
  std::vector<std::shared_ptr<Stream>> open;
  {
    std::lock_guard lock(mu);
    open.reserve(streams.size());
    for (const std::shared_ptr<Stream>& s : streams) open.push_back(s);
  }
  uint64_t buckets_held = 0;
  for (const auto& s : open) {
    std::lock_guard lock(s->mu);
    buckets_held += s->table.size();
  }
  options.metrics->Set(MetricId::kRlqsStreams, open.size());
  options.metrics->Set(MetricId::kRlqsBuckets, buckets_held);
}

void RlqsService::Core::Sweep() {
  std::unique_lock lock(mu);
  while (!stop_sweeping) {
    const Nanos next = options.clock->Monotonic() + kSweepInterval;
    options.clock->WaitUntil(changed, lock, next, [this] { return stop_sweeping; });
    if (stop_sweeping) break;
    std::vector<std::shared_ptr<Stream>> open;
    open.reserve(streams.size());
    for (const std::shared_ptr<Stream>& s : streams) open.push_back(s);
    const Micros abandon_after = buckets->config().abandon_after;
    lock.unlock();
    for (const auto& s : open) {
      Stream::Ops ops;
      {
        std::lock_guard stream_lock(s->mu);
        if (s->finishing || s->finished) continue;
        const Micros now = s->Now();
        rlqs::RateLimitQuotaResponse abandon;
        for (auto it = s->table.begin(); it != s->table.end();) {
          if (!it->second.in_flight && now - it->second.last_active >= abandon_after) {
            auto* action = abandon.add_bucket_action();
            *action->mutable_bucket_id() = it->second.id;
            action->mutable_abandon_action();
            Count(MetricId::kRlqsActions, "abandon");
            it = s->table.erase(it);
          } else {
            ++it;
          }
        }
        if (abandon.bucket_action_size() > 0) s->WriteLocked(abandon, ops);
      }
      s->Apply(std::move(ops));
    }
    Gauges();
    lock.lock();
  }
}

RlqsService::RlqsService(Engine& engine, std::shared_ptr<const RlqsBuckets> buckets,
                         RlqsServiceOptions options)
    : core_(std::make_shared<Core>(engine, std::move(buckets), std::move(options))) {
  core_->check_caller = core_->options.check_caller;
  core_->sweeper = std::thread([core = core_.get()] { core->Sweep(); });
}

RlqsService::~RlqsService() {
  Shutdown(core_->options.clock->Monotonic());
  {
    std::lock_guard lock(core_->mu);
    core_->stop_sweeping = true;
  }
  core_->changed.notify_all();
  core_->sweeper.join();
}

void RlqsService::SetBuckets(std::shared_ptr<const RlqsBuckets> buckets) {
  std::lock_guard lock(core_->mu);
  core_->buckets = std::move(buckets);
}

void RlqsService::SetCallerCheck(
    std::function<grpc::Status(const grpc::CallbackServerContext&)> check) {
  std::lock_guard lock(core_->mu);
  core_->check_caller = std::move(check);
}

std::optional<RlqsService::Held> RlqsService::HeldBy(
    std::string_view policy, std::vector<std::pair<std::string, std::string>> descriptors) const {
  std::sort(descriptors.begin(), descriptors.end());
  std::vector<std::shared_ptr<Stream>> open;
  {
    std::lock_guard lock(core_->mu);
    for (const std::shared_ptr<Stream>& s : core_->streams) open.push_back(s);
  }
  Held held;
  for (const auto& s : open) {
    std::lock_guard lock(s->mu);
    for (const auto& [key, b] : s->table) {
      if (b.target.rule == nullptr || b.target.rule->policy != policy) continue;
      std::vector<std::pair<std::string, std::string>> mine;
      for (const Descriptor& d : b.target.descriptors) mine.emplace_back(d.name, d.value);
      std::sort(mine.begin(), mine.end());
      if (mine != descriptors) continue;
      ++held.buckets;
      held.allowed += b.allowed;
      held.denied += b.denied;
      const auto& active = b.ledger.active();
      if (active && active->kind == RlqsStrategy::Kind::kTokenBucket && s->Now() < b.ledger.end()) {
        held.assigned_per_second += static_cast<double>(active->bucket.tokens_per_fill) * 1e6 /
                                    static_cast<double>(active->bucket.fill_interval.count());
      }
    }
  }
  if (held.buckets == 0) return std::nullopt;
  return held;
}

size_t RlqsService::streams() const {
  std::lock_guard lock(core_->mu);
  return core_->streams.size();
}

void RlqsService::Shutdown(Nanos deadline) {
  std::vector<std::shared_ptr<Stream>> open;
  {
    std::lock_guard lock(core_->mu);
    core_->shutting_down = true;
    open.reserve(core_->streams.size());
    for (const std::shared_ptr<Stream>& s : core_->streams) open.push_back(s);
  }
  for (const auto& s : open) {
    Stream::Ops ops;
    {
      std::lock_guard lock(s->mu);
      if (s->finishing || s->finished) continue;
      const Micros now = s->Now();
      rlqs::RateLimitQuotaResponse expire;
      for (auto& [key, b] : s->table) {
        if (!b.ledger.active()) continue;
        const RlqsAssignment a = b.ledger.ExpireNow(now);
        auto* action = expire.add_bucket_action();
        *action->mutable_bucket_id() = b.id;
        auto* assign = action->mutable_quota_assignment_action();
        SetDuration(assign->mutable_assignment_time_to_live(), Micros(0));
        SetStrategy(assign->mutable_rate_limit_strategy(), a.strategy);
        core_->Count(MetricId::kRlqsActions, "expire");
      }
      if (expire.bucket_action_size() > 0) s->WriteLocked(expire, ops);
      s->EndLocked({grpc::StatusCode::UNAVAILABLE, "caudal is shutting down"}, "shutdown", ops);
    }
    s->Apply(std::move(ops));
  }
  std::unique_lock lock(core_->mu);
  core_->options.clock->WaitUntil(core_->changed, lock, deadline,
                                  [this] { return core_->streams.empty(); });
}

class RlqsGrpcService final : public RawQuotaService {
 public:
  explicit RlqsGrpcService(RlqsService::Core& core) : core_(core) {}
  Reactor* StreamRateLimitQuotas(grpc::CallbackServerContext* context) override {
    return core_.Open(context);
  }

 private:
  RlqsService::Core& core_;
};

grpc::Service* RlqsService::service() {
  std::lock_guard lock(core_->mu);
  if (grpc_service_ == nullptr) grpc_service_ = std::make_unique<RlqsGrpcService>(*core_);
  return grpc_service_.get();
}

}  // namespace caudal::envoy
