#include "simulate/dimension_run.h"

#include <algorithm>
#include <unordered_map>

#include "caudal/engine/engine.h"
#include "caudal/store/memory_store.h"
#include "common/cat.h"
#include "decorators/lease_store.h"
#include "simulate/sim_clock.h"

namespace caudal::simulate {
namespace {

constexpr size_t kMaxStoreKeys = size_t{1} << 24;

bool Contains(std::span<const std::string> names, std::string_view name) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

// A row of the tally for each limit of each policy and tier, and where each Limit's row is.
struct LimitRows {
  std::vector<LimitTally> rows;
  std::vector<bool> own;  // a policy's own limit: reported even if no row met it
  std::unordered_map<const Limit*, size_t> by_limit;

  void Add(const PolicySet::Policy& p, const std::vector<Limit>& limits, std::string_view from,
           bool is_own, size_t points) {
    for (size_t k = 0; k < limits.size(); ++k) {
      by_limit.emplace(&limits[k], rows.size());
      rows.push_back({.policy = p.spec.name,
                      .field = Cat(from, "limits[", k, ']'),
                      .limit = &limits[k],
                      .shadow = p.shadow(),
                      .peak_series = std::vector<int64_t>(points, 0)});
      own.push_back(is_own);
    }
  }

  LimitTally& Of(const PolicyResult& r, size_t k, size_t points) {
    const Limit* l = r.limits[k];
    auto [it, added] = by_limit.try_emplace(l, rows.size());
    if (added) {  // not one of the set's (no such limit is expected here): reported apart
      rows.push_back({.policy = std::string(r.name),
                      .field = "(another)",
                      .limit = l,
                      .shadow = r.shadow,
                      .peak_series = std::vector<int64_t>(points, 0)});
      own.push_back(true);
    }
    return rows[it->second];
  }
};

// The identity fields of every policy, each once, in config order.
std::vector<std::string> IdentityFields(const PolicySet& set) {
  std::vector<std::string> fields;
  for (const PolicySet::Policy& p : set.policies()) {
    for (const std::string& f : p.spec.identity) {
      if (!Contains(fields, f)) fields.push_back(f);
    }
  }
  return fields;
}

// What `result`, a row's decision in step `point` (of `points`), adds to the limits' tallies.
void Tally(const CheckResult& result, size_t point, LimitRows& rows, size_t points) {
  for (const PolicyResult& r : result.results) {
    for (size_t k = 0; k < r.limits.size() && k < r.decisions.size(); ++k) {
      LimitTally& t = rows.Of(r, k, points);
      const Decision& d = r.decisions[k];
      ++t.requests;
      t.offered += r.CostOf(k);
      if (!d.allowed()) ++t.refusals;
      if (!result.allowed() || !d.allowed()) continue;
      t.admitted += r.CostOf(k);
      const int64_t used = d.limit - d.remaining + d.overdrawn;
      t.peak_used = std::max(t.peak_used, used);
      t.peak_series[point] = std::max(t.peak_series[point], used);
    }
  }
}

}  // namespace

Result<DimensionRun> RunDimensions(const CostTrace& trace, const DimensionRunOptions& o) {
  if (o.policies == nullptr || o.policies->policies().empty()) {
    return Status::InvalidArgument("no policy to replay the trace through");
  }
  const PolicySet& set = *o.policies;
  DimensionRun run;
  run.start = trace.start;
  const Micros span = trace.end - trace.start + Micros(1);
  const int64_t ms = std::chrono::milliseconds(1) / Micros(1);
  const int64_t steps = static_cast<int64_t>(std::max<size_t>(o.points, 1));
  run.step = Micros((span.count() + steps * ms - 1) / (steps * ms) * ms);
  const size_t points = static_cast<size_t>((trace.end - trace.start) / run.step) + 1;

  std::vector<bool> sent;  // per column: some limit of the set counts it
  for (const std::string& d : trace.dimensions) {
    if (!Contains(o.accepted, d)) {
      std::string names;
      for (const std::string& a : o.accepted) names += Cat(names.empty() ? "" : ", ", a);
      return Status::InvalidArgument(Cat(trace.name, ':', trace.header_line, ": column ", Quoted(d),
                                         ": no limit counts this dimension (the ",
                                         "configured ones: ", names, ')'));
    }
    sent.push_back(Contains(set.dimensions(), d));
    run.dimensions.push_back({.dimension = d,
                              .counted = sent.back(),
                              .admitted_series = std::vector<int64_t>(points, 0)});
  }
  LimitRows rows;
  size_t limit_count = 0;
  for (const PolicySet::Policy& p : set.policies()) {
    rows.Add(p, p.spec.limits, "", true, points);
    for (size_t i = 0; i < p.tiers.size(); ++i) {
      rows.Add(p, p.tiers[i].set.limits, Cat("overrides[", i, "]."), false, points);
    }
    limit_count += p.spec.limits.size();
  }

  SimClock clock;
  const MemoryStoreOptions sized{
      .max_keys = std::min(kMaxStoreKeys, trace.keys.size() * limit_count + 1024)};
  MemoryStore memory(clock, sized);
  MemoryStore local(clock, sized);  // for a `local` failure mode, which a memory store never meets
  LeaseStore leases(
      memory, clock,
      LeaseStoreOptions{
          .lease_by_default = false, .leases = false, .instances = 1, .consumer = "simulate"});
  Engine engine(leases, clock, EngineOptions{.local_store = &local});
  if (Status s = engine.SetPolicies(o.policies); !s.ok()) return s;

  const std::vector<std::string> fields = IdentityFields(set);
  Micros next_give_back = trace.start;
  for (const CostTrace::Row& row : trace.rows) {
    const Micros at(row.at_us);
    clock.Set(at);
    if (at >= next_give_back) {
      leases.ReturnEnded();
      next_give_back = at + kGiveBackEvery;
    }
    CheckRequest request;
    for (const std::string& f : fields) request.descriptors.push_back({f, trace.keys[row.key]});
    Costs costs;
    for (size_t j = 0; j < trace.dimensions.size(); ++j) {
      const int64_t units = trace.Units(row, j);
      if (units != kNotNamed && sent[j]) costs.push_back({trace.dimensions[j], units});
    }
    // A row naming only dimensions these policies do not count costs them nothing.
    if (costs.empty()) costs.push_back({std::string(kRequestsDimension), 0});
    request.costs = std::move(costs);

    const Result<CheckResult> r = engine.Check(std::move(request));
    const auto point = static_cast<size_t>((at - trace.start) / run.step);
    ++run.requests;
    const bool too_large = !r.ok() && r.status().reason() == engine_reason::kInvalidCost;
    if (!r.ok() && !too_large) {
      return Status::InvalidArgument(Cat(trace.name, ':', row.line, ": ", r.status().message()));
    }
    if (too_large && run.too_large++ == 0) {
      run.too_large_error = Cat(trace.name, ':', row.line, ": ", r.status().message());
    }
    const bool admitted = r.ok() && r->allowed();
    run.admitted += admitted ? 1 : 0;
    run.refused += r.ok() && !admitted ? 1 : 0;
    for (size_t j = 0; j < trace.dimensions.size(); ++j) {
      const int64_t units = trace.Units(row, j);
      if (units == kNotNamed) continue;
      DimensionTally& d = run.dimensions[j];
      ++d.requests;
      d.offered += units;
      if (!admitted) continue;
      d.admitted += units;
      d.admitted_series[point] += units;
    }
    if (r.ok()) Tally(*r, point, rows, points);
  }
  for (size_t i = 0; i < rows.rows.size(); ++i) {
    if (rows.own[i] || rows.rows[i].requests > 0) run.limits.push_back(std::move(rows.rows[i]));
  }
  return run;
}

}  // namespace caudal::simulate
