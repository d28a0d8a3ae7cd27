#include "simulate/lease_regions.h"

#include <algorithm>
#include <memory>
#include <queue>
#include <string>
#include <unordered_map>
#include <utility>

#include "caudal/store/memory_store.h"
#include "decorators/lease_table.h"
#include "simulate/sim_clock.h"
#include "simulate/window_tracker.h"

namespace caudal::simulate {
namespace {

using engine_internal::EndedLot;
using engine_internal::LeaseAsk;
using engine_internal::LeasePlan;
using engine_internal::LeaseTable;

enum class Kind { kRequest, kRenewal, kShare, kGiveBack };

struct Call {
  Kind kind = Kind::kRequest;
  size_t region = 0;
  Micros sent{0};
  uint32_t key = 0;      // a request's (its series)
  std::string name{};    // the key's name
  int64_t cost = 0;      // a request's cost, or a give-back's units
  int64_t ask = 0;       // the lease asked for, or 0
  int64_t demand = 0;    // a share renewal's
  Nanos ttl{0};          // a share renewal's
  LeaseGrant grant{};    // a give-back's
  bool reached = false;  // the store decided it
  bool allowed = false;  // the store's answer
  Decision decision{};
  ShareState share{};  // a share renewal's answer
};

struct Event {
  enum Type { kAtStore, kAnswer, kTick } type;
  Micros at;
  uint64_t seq;  // ties in the order they were made
  uint64_t id;   // the call, or the region (kTick)
  bool operator>(const Event& o) const { return at != o.at ? at > o.at : seq > o.seq; }
};

class Model {
 public:
  Model(const Limit& limit, const Traffic& traffic, const LeaseRegionsOptions& o)
      : limit_(limit),
        traffic_(traffic),
        o_(o),
        terms_{.enabled = true, .ttl = o.ttl, .max_share_ppm = o.max_share_ppm},
        store_(clock_),
        tracker_(o.window, traffic.keys.size()),
        series_(o.series_times, run_.series) {
    for (int64_t r = 0; r < o.regions; ++r) {
      tables_.push_back(std::make_unique<LeaseTable>(
          engine_internal::LeaseTableOptions{.defaults = terms_, .instances = o.regions}));
    }
    // Give-backs run until every lease has ended and its units could be back.
    ticks_until_ = traffic.end + std::chrono::duration_cast<Micros>(o.ttl) + 4 * o.one_way +
                   2 * kGiveBackEvery;
    for (int64_t r = 0; r < o.regions; ++r) {
      Push(Event::kTick, o.start + kGiveBackEvery, static_cast<uint64_t>(r));
    }
  }

  LeaseRun Run() {
    for (size_t i = 0; i < traffic_.requests.size(); ++i) {
      const Request& q = traffic_.requests[i];
      Drain(Micros(q.at_us));
      OnRequest(q, i % static_cast<size_t>(o_.regions), Micros(q.at_us));
    }
    Drain(Micros::max());
    series_.Finish(tracker_);
    run_.max_in_window = tracker_.max_in_window();
    run_.p99 = waited_ * 100 > run_.offered ? 2 * o_.one_way : Micros(0);
    return run_;
  }

 private:
  bool Cut(size_t region, Micros at) const {
    return std::any_of(o_.partitions.begin(), o_.partitions.end(), [&](const Partition& p) {
      return p.region == static_cast<int64_t>(region) && p.from <= at && at < p.until;
    });
  }

  void Push(Event::Type type, Micros at, uint64_t id) { events_.push({type, at, seq_++, id}); }

  void Drain(Micros until) {
    while (!events_.empty() && events_.top().at <= until) {
      const Event e = events_.top();
      events_.pop();
      if (e.type == Event::kTick) {
        Tick(e.id, e.at);
      } else if (e.type == Event::kAtStore) {
        AtStore(calls_.at(e.id), e.at);
        Push(Event::kAnswer, e.at + o_.one_way, e.id);
      } else {
        Answer(calls_.at(e.id), e.at);
        calls_.erase(e.id);
      }
    }
  }

  void Send(Call c) {
    const uint64_t id = next_call_++;
    const Micros at = c.sent + o_.one_way;
    calls_.emplace(id, std::move(c));
    Push(Event::kAtStore, at, id);
  }

  void Admit(uint32_t key, Micros at, int64_t cost) {
    series_.Before(at, tracker_);
    ++run_.admitted;
    series_.Admitted(tracker_.Admit(key, at, cost));
  }

  void OnRequest(const Request& q, size_t r, Micros now) {
    series_.Before(now, tracker_);
    ++run_.offered;
    const std::string& name = traffic_.keys[q.key];
    const ConsumeEntry e{.key = name, .limit = &limit_, .cost = q.cost, .lease_terms = &terms_};
    LeasePlan plan = tables_[r]->Begin({.consumes = {&e, 1}}, now);
    if (plan.local) {
      ++run_.local;
      plan.allowed ? Admit(q.key, now, q.cost) : void(++run_.rejected);
    } else if (Cut(r, now)) {  // its breaker is open: the failure mode, at once
      ++run_.local;
      ++run_.failed;
      ++run_.rejected;
      for (const LeaseAsk& a : plan.asks) tables_[r]->Granted(a.key, a.limit, now, false, nullptr);
    } else {
      ++waited_;
      Send({.kind = Kind::kRequest,
            .region = r,
            .sent = now,
            .key = q.key,
            .name = name,
            .cost = q.cost,
            .ask = plan.asks.empty() ? 0 : plan.asks[0].units});
    }
    for (const LeaseAsk& a : plan.renewals) {
      if (Cut(r, now)) {
        a.share ? void(tables_[r]->GrantedShare(a.key, a.limit, now, nullptr, nullptr))
                : void(tables_[r]->Granted(a.key, a.limit, now, false, nullptr));
      } else {
        Send({.kind = a.share ? Kind::kShare : Kind::kRenewal,
              .region = r,
              .sent = now,
              .name = a.key,
              .ask = a.units,
              .demand = a.demand,
              .ttl = a.ttl});
      }
    }
  }

  void AtStore(Call& c, Micros at) {
    if (Cut(c.region, at)) return;  // lost on the way
    clock_.Set(at);
    if (c.kind == Kind::kGiveBack) {
      const GiveBackEntry g{.key = c.name, .limit = &limit_, .units = c.cost, .grant = c.grant};
      const Result<GiveBackResponse> r = store_.GiveBack({&g, 1});
      c.reached = r.ok();
      if (!r.ok()) return;
      c.allowed = true;  // a give-back is always allowed
      if (!r->decisions.empty()) c.decision = r->decisions[0];
      return;
    }
    if (c.kind == Kind::kShare) {  // the region is the consumer
      const std::string consumer = "region-" + std::to_string(c.region);
      const ShareEntry e{
          .key = c.name,
          .limit = &limit_,
          .consumer = consumer,
          .demand = c.demand,
          .ttl = std::clamp(std::chrono::duration_cast<Micros>(c.ttl), kMinShareTtl, kMaxShareTtl)};
      const Result<ShareResponse> r = store_.Share({&e, 1});
      c.reached = r.ok() && !r->decisions.empty() && !r->shares.empty();
      if (!c.reached) return;
      c.allowed = true;
      c.decision = r->decisions[0];
      c.share = r->shares[0];
      return;
    }
    const ConsumeEntry e{.key = c.name, .limit = &limit_, .cost = c.cost, .lease = c.ask};
    const Result<DecideResponse> r = store_.Decide({.consumes = {&e, 1}});
    c.reached = r.ok();
    if (!r.ok()) return;
    c.allowed = r->allowed;
    if (!r->decisions.empty()) c.decision = r->decisions[0];
  }

  void Answer(const Call& c, Micros at) {
    if (c.kind == Kind::kGiveBack) return;
    LeaseTable& table = *tables_[c.region];
    const bool lost = !c.reached || Cut(c.region, at);
    if (c.reached && lost) {  // consumed in the store, never spent
      run_.unspent += c.allowed ? c.decision.leased + (c.kind == Kind::kRequest ? c.cost : 0) : 0;
    }
    if (!lost) table.ObserveRoundTrip(at - c.sent);
    if (c.kind == Kind::kRequest) {
      if (lost) {
        ++run_.failed;
        ++run_.rejected;
      } else {
        c.allowed ? Admit(c.key, at, c.cost) : void(++run_.rejected);
      }
    }
    if (c.kind == Kind::kShare) {
      table.GrantedShare(c.name, limit_, c.sent, lost ? nullptr : &c.decision,
                         lost ? nullptr : &c.share);
    } else if (c.ask > 0) {
      table.Granted(c.name, limit_, c.sent, !lost && c.allowed, lost ? nullptr : &c.decision);
    }
  }

  void Tick(uint64_t region, Micros at) {
    const auto r = static_cast<size_t>(region);
    for (EndedLot& lot : tables_[r]->TakeEnded(at)) {
      run_.unspent += lot.units;
      if (Cut(r, at)) continue;  // lost: it stays consumed
      Send({.kind = Kind::kGiveBack,
            .region = r,
            .sent = at,
            .name = std::move(lot.key),
            .cost = lot.units,
            .grant = lot.grant});
    }
    if (at < ticks_until_) Push(Event::kTick, at + kGiveBackEvery, region);
  }

  const Limit& limit_;
  const Traffic& traffic_;
  const LeaseRegionsOptions& o_;
  const LeaseTerms terms_;
  SimClock clock_;
  MemoryStore store_;
  std::vector<std::unique_ptr<LeaseTable>> tables_;  // per region
  LeaseRun run_;
  WindowTracker tracker_;
  SeriesRecorder series_;
  std::priority_queue<Event, std::vector<Event>, std::greater<>> events_;
  std::unordered_map<uint64_t, Call> calls_;  // in flight
  uint64_t seq_ = 0, next_call_ = 0;
  int64_t waited_ = 0;  // decisions that waited a round trip
  Micros ticks_until_{0};
};

}  // namespace

LeaseRun RunLeaseRegions(const Limit& limit, const Traffic& traffic, const LeaseRegionsOptions& o) {
  Model model(limit, traffic, o);
  return model.Run();
}

}  // namespace caudal::simulate
