#include "simulate/simulator.h"

#include <algorithm>
#include <cassert>
#include <deque>

#include "algorithms/exact_math.h"
#include "caudal/algorithms/algorithm.h"
#include "caudal/algorithms/sliding_window_log.h"
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
  Decider(const Limit& limit, size_t keys, int64_t regions, std::optional<Micros> lag)
      : limit_(limit), lag_(lag), copies_(static_cast<size_t>(regions), std::vector<Copy>(keys)) {}

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
        if (other != region) in_flight_.push_back({now + *lag_, other, r.key, copy});
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
  };

  void Deliver(Micros now) {
    while (!in_flight_.empty() && in_flight_.front().lands <= now) {
      Write& w = in_flight_.front();
      Copy& target = copies_[w.region][w.key];
      if (w.copy.written > target.written) target = std::move(w.copy);
      in_flight_.pop_front();
    }
  }

  const Limit& limit_;
  const std::optional<Micros> lag_;
  std::vector<std::vector<Copy>> copies_;  // [region][key]
  std::deque<Write> in_flight_;  // in landing order: writes happen in time order, the lag is one
  uint64_t writes_ = 0;
};

// Fills run.series: before a request past the current interval's end, close the interval and
// carry what is still inside the window into the next one.
class SeriesRecorder {
 public:
  SeriesRecorder(const std::vector<Micros>& times, std::vector<int64_t>& series)
      : times_(times), series_(series) {
    series_.assign(times_.size(), 0);
  }

  void Before(Micros at, WindowTracker& tracker) {
    while (current_ < times_.size() && at > times_[current_]) {
      tracker.AdvanceTo(times_[current_]);
      ++current_;
      if (current_ < times_.size()) series_[current_] = tracker.CurrentMax();
    }
  }
  void Admitted(int64_t in_window) {
    if (current_ < series_.size()) series_[current_] = std::max(series_[current_], in_window);
  }
  void Finish(WindowTracker& tracker) { Before(Micros::max(), tracker); }

 private:
  const std::vector<Micros>& times_;
  std::vector<int64_t>& series_;
  size_t current_ = 0;
};

AlgorithmRun Run(const Limit& limit, const Traffic& traffic, const Simulation& sim) {
  AlgorithmRun run;
  run.algorithm = limit.algorithm();
  run.bound =
      IsWindowAlgorithm(run.algorithm) ? limit.capacity() : limit.capacity() + limit.rate().count;
  Decider decider(limit, traffic.keys.size(), sim.regions, sim.replication_lag);
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
  Simulation sim;
  sim.window = options.limit.period;
  sim.regions = options.regions;
  sim.replication_lag = options.replication_lag;
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
