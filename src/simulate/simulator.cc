#include "simulate/simulator.h"

#include <algorithm>
#include <cassert>
#include <functional>
#include <queue>

#include "algorithms/algorithm.h"
#include "algorithms/exact_math.h"
#include "algorithms/sliding_window_log.h"
#include "caudal/engine/policy.h"
#include "simulate/window_tracker.h"

namespace caudal::simulate {
namespace {

Result<Limit> LimitFor(Algorithm a, const SimulationOptions& o) {
  if (IsWindowAlgorithm(a)) {
    return Limit::Create(LimitSpec::Window(a, o.limit.count, o.limit.period));
  }
  return Limit::Create(LimitSpec::Bucket(a, o.burst, o.limit));
}

// Decides one algorithm's requests with per-key state, one copy of it per region. A region's
// write is sent to every other region and lands there `lag` later, replacing that region's copy
// unless the copy was written after it (last writer wins, in the order the writes happened).
class Decider {
 public:
  Decider(const Limit& limit, size_t keys, const Simulation& sim)
      : limit_(limit),
        lag_(sim.replication_lag),
        partitions_(sim.partitions),
        copies_(static_cast<size_t>(sim.regions), std::vector<Copy>(keys)) {}

  bool Admit(const Request& r, size_t region) {
    const Micros now(r.at_us);
    Deliver(now);
    Copy& copy = copies_[region][r.key];
    bool allowed = false;
    bool changed = false;
    if (HasLogState(limit_.algorithm())) {
      const LogFunctions& log = LogFunctionsOf(limit_);
      allowed = log.evaluate(limit_, copy.log, now, r.cost).allowed();
      changed = allowed && r.cost > 0;
      if (changed) log.commit(limit_, copy.log, now, r.cost);
    } else {
      const Step step = DecideCompact(limit_, copy.seen ? &copy.state : nullptr, now, r.cost);
      allowed = step.decision.allowed();
      changed = step.changed;
      if (changed) {
        copy.state = step.next;
        copy.seen = true;
      }
    }
    if (changed) copy.written = ++writes_;
    if (changed && lag_) {
      for (size_t other = 0; other < copies_.size(); ++other) {
        if (other != region) in_flight_.push({Lands(region, other, now), other, r.key, copy});
      }
    }
    return allowed;
  }

 private:
  struct Copy {
    CompactState state;
    bool seen = false;
    sliding_window_log::LogState log;
    uint64_t written = 0;  // which write made it (0: none), for last-writer-wins
  };
  struct Write {
    Micros lands;
    size_t region;
    uint32_t key;
    Copy copy;
    bool operator>(const Write& o) const {
      return lands != o.lands ? lands > o.lands : copy.written > o.copy.written;
    }
  };

  // When a write sent by `from` at `now` lands in `to`: `lag` later, or `lag` after the heal of a
  // partition that cuts either of them off meanwhile.
  Micros Lands(size_t from, size_t to, Micros now) const {
    Micros lands = now + *lag_;
    for (const Partition& p : partitions_) {
      const auto cut = static_cast<size_t>(p.region);
      const bool sent_cut = cut == from && p.from <= now && now < p.until;
      const bool lands_cut = cut == to && p.from < lands && now < p.until;
      if (sent_cut || lands_cut) lands = std::max(lands, p.until + *lag_);
    }
    return lands;
  }

  void Deliver(Micros now) {
    while (!in_flight_.empty() && in_flight_.top().lands <= now) {
      Write w = in_flight_.top();
      in_flight_.pop();
      Copy& target = copies_[w.region][w.key];
      if (w.copy.written > target.written) target = std::move(w.copy);
    }
  }

  const Limit& limit_;
  const std::optional<Micros> lag_;
  const std::vector<Partition>& partitions_;
  std::vector<std::vector<Copy>> copies_;                                     // [region][key]
  std::priority_queue<Write, std::vector<Write>, std::greater<>> in_flight_;  // by landing
  uint64_t writes_ = 0;
};

AlgorithmRun Run(const Limit& limit, const Traffic& traffic, const Simulation& sim) {
  AlgorithmRun run;
  run.algorithm = limit.algorithm();
  run.bound =
      IsWindowAlgorithm(run.algorithm) ? limit.capacity() : limit.capacity() + limit.rate().count;
  Decider decider(limit, traffic.keys.size(), sim);
  WindowTracker tracker(sim.window, traffic.keys.size());
  SeriesRecorder series(sim.series_times, run.series);
  for (const Request& r : traffic.requests) {
    series.Before(Micros(r.at_us), tracker);
    const auto region = static_cast<size_t>(run.offered % sim.regions);
    ++run.offered;
    if (!decider.Admit(r, region)) continue;
    ++run.admitted;
    series.Admitted(tracker.Admit(r.key, Micros(r.at_us), r.cost));
  }
  series.Finish(tracker);
  run.rejected = run.offered - run.admitted;
  run.max_in_window = tracker.max_in_window();
  if (sim.leases) {
    run.leases = RunLeaseRegions(limit, traffic,
                                 {.regions = sim.regions,
                                  .one_way = *sim.replication_lag,
                                  .ttl = sim.lease_ttl,
                                  .max_share_ppm = sim.lease_max_share_ppm,
                                  .partitions = sim.partitions,
                                  .window = sim.window,
                                  .series_times = sim.series_times,
                                  .start = sim.start});
    // The leases' bound over a window W: B + r·(W + ttl), the extra r·ttl rounded up.
    run.lease_bound = run.bound;
    if (!IsWindowAlgorithm(run.algorithm) && SupportsLease(run.algorithm)) {
      const exact::Int128 extra = (exact::Int128{limit.refill_count()} * sim.lease_ttl.count() +
                                   exact::Int128{limit.refill_period_us()} * 1000 - 1) /
                                  (exact::Int128{limit.refill_period_us()} * 1000);
      run.lease_bound += static_cast<int64_t>(extra);
    }
  }
  return run;
}

std::vector<Micros> SeriesTimes(Micros start, Micros end, size_t points) {
  std::vector<Micros> times;
  const exact::Int128 span = std::max<int64_t>(end.count() - start.count(), 1);
  for (size_t j = 1; j <= points; ++j) {
    times.emplace_back(start.count() + static_cast<int64_t>(span * j / points));
  }
  return times;
}

}  // namespace

Status ValidateLimit(const Rate& limit) {
  return LimitFor(Algorithm::kFixedWindow, {.limit = limit, .burst = 1}).status();
}

Status ValidateBurst(int64_t burst, const Rate& limit) {
  return LimitFor(Algorithm::kTokenBucket, {.limit = limit, .burst = burst}).status();
}

Status ValidateLeases(const SimulationOptions& o) {
  for (const Partition& p : o.partitions) {
    if (p.region < 0 || p.region >= o.regions) {
      return Status::InvalidArgument("partition: no region " + std::to_string(p.region));
    }
    if (p.until < p.from) return Status::InvalidArgument("partition: ends before it starts");
  }
  if (!o.leases) return Status::Ok();
  if (!o.replication_lag) {
    return Status::InvalidArgument("leases: need a finite replication lag (the way to the store)");
  }
  const LeaseTerms terms{
      .enabled = true, .ttl = o.lease_ttl, .max_share_ppm = o.lease_max_share_ppm};
  if (Status s = ValidateLeaseTerms(terms); !s.ok())
    return Status::InvalidArgument("leases: " + s.message());
  return Status::Ok();
}

Status ValidateRegions(int64_t regions) {
  if (regions >= 1 && regions <= kMaxRegions) return Status::Ok();
  return Status::InvalidArgument("regions: expected 1 to " + std::to_string(kMaxRegions) +
                                 " (got " + std::to_string(regions) + ")");
}

Result<Simulation> Simulate(const Traffic& traffic, const SimulationOptions& options) {
  if (Status s = ValidateLimit(options.limit); !s.ok()) return s;
  if (Status s = ValidateBurst(options.burst, options.limit); !s.ok()) return s;
  if (options.chart_points > kMaxChartPoints) {
    return Status::InvalidArgument("at most " + std::to_string(kMaxChartPoints) + " chart points");
  }
  if (Status s = ValidateRegions(options.regions); !s.ok()) return s;
  if (options.replication_lag && options.replication_lag->count() < 0) {
    return Status::InvalidArgument("replication lag: must not be negative");
  }
  if (Status s = ValidateLeases(options); !s.ok()) return s;
  Simulation sim;
  sim.window = options.limit.period;
  sim.regions = options.regions;
  sim.replication_lag = options.replication_lag;
  sim.leases = options.leases;
  sim.lease_ttl = options.lease_ttl;
  sim.lease_max_share_ppm = options.lease_max_share_ppm;
  sim.partitions = options.partitions;
  sim.start = traffic.start;
  sim.end = traffic.end;
  sim.series_times = SeriesTimes(sim.start, sim.end, options.chart_points);
  for (const Algorithm a : kAllAlgorithms) {
    Result<Limit> limit = LimitFor(a, options);
    if (!limit.ok()) {
      // Only the log's own cap can fail once the two validations above passed.
      assert(HasLogState(a));
      sim.skipped.push_back(std::string(AlgorithmName(a)) + ": " + limit.status().message());
      continue;
    }
    sim.runs.push_back(Run(*limit, traffic, sim));
  }
  return sim;
}

}  // namespace caudal::simulate
