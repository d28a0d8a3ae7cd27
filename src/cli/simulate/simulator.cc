#include "cli/simulate/simulator.h"

#include <algorithm>
#include <cassert>

#include "algorithms/exact_math.h"
#include "caudal/algorithms/algorithm.h"
#include "caudal/algorithms/sliding_window_log.h"
#include "cli/simulate/window_tracker.h"

namespace caudal::simulate {
namespace {

Result<Limit> LimitFor(Algorithm a, const SimulationOptions& o) {
  if (IsWindowAlgorithm(a)) {
    return Limit::Create(LimitSpec::Window(a, o.limit.count, o.limit.period));
  }
  return Limit::Create(LimitSpec::Bucket(a, o.burst, o.limit));
}

// Decides one algorithm's requests with per-key state; the window algorithms other than the
// log and both buckets share the compact path.
class Decider {
 public:
  Decider(const Limit& limit, size_t keys) : limit_(limit) {
    if (limit.algorithm() == Algorithm::kSlidingWindowLog) {
      logs_.resize(keys);
    } else {
      states_.resize(keys);
      seen_.resize(keys, 0);
    }
  }

  bool Admit(const Request& r) {
    const Micros now(r.at_us);
    if (limit_.algorithm() == Algorithm::kSlidingWindowLog) {
      auto& log = logs_[r.key];
      const Decision d = sliding_window_log::Evaluate(limit_, log, now, r.cost);
      if (d.allowed() && r.cost > 0) sliding_window_log::Commit(limit_, log, now, r.cost);
      return d.allowed();
    }
    const CompactState* state = seen_[r.key] ? &states_[r.key] : nullptr;
    const Step step = DecideCompact(limit_, state, now, r.cost);
    if (step.changed) {
      states_[r.key] = step.next;
      seen_[r.key] = 1;
    }
    return step.decision.allowed();
  }

 private:
  const Limit& limit_;
  std::vector<CompactState> states_;
  std::vector<uint8_t> seen_;
  std::vector<sliding_window_log::LogState> logs_;
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
  Decider decider(limit, traffic.keys.size());
  WindowTracker tracker(sim.window, traffic.keys.size());
  SeriesRecorder series(sim.series_times, run.series);
  for (const Request& r : traffic.requests) {
    series.Before(Micros(r.at_us), tracker);
    ++run.offered;
    if (!decider.Admit(r)) continue;
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

Result<Simulation> Simulate(const Traffic& traffic, const SimulationOptions& options) {
  if (Status s = ValidateLimit(options.limit); !s.ok()) return s;
  if (Status s = ValidateBurst(options.burst, options.limit); !s.ok()) return s;
  if (options.chart_points > kMaxChartPoints) {
    return Status::InvalidArgument("at most " + std::to_string(kMaxChartPoints) + " chart points");
  }
  Simulation sim;
  sim.window = options.limit.period;
  sim.start = traffic.start;
  sim.end = traffic.end;
  sim.series_times = SeriesTimes(sim.start, sim.end, options.chart_points);
  for (const Algorithm a : kAllAlgorithms) {
    Result<Limit> limit = LimitFor(a, options);
    if (!limit.ok()) {
      // Only the log's own cap can fail once the two validations above passed.
      assert(a == Algorithm::kSlidingWindowLog);
      sim.skipped.push_back(std::string(AlgorithmName(a)) + ": " + limit.status().message());
      continue;
    }
    sim.runs.push_back(Run(*limit, traffic, sim));
  }
  return sim;
}

}  // namespace caudal::simulate
