#include "simulate/traffic.h"

#include <cmath>
#include <random>

#include "algorithms/exact_math.h"

namespace caudal::simulate {
namespace {

using exact::Int128;

constexpr std::string_view kPatternList = "boundary-burst, steady, poisson or on-off";

// How many of the evenly spaced times from + floor(i·P/C) fall before `to`: ceil((to−from)·C/P).
Int128 SteadyCount(int64_t from, int64_t to, const Rate& rate) {
  if (to <= from) return 0;
  const Int128 num = static_cast<Int128>(to - from) * rate.count;
  const Int128 p = rate.period.count();
  return (num + p - 1) / p;
}

void AppendSteady(int64_t from, int64_t to, const Rate& rate, std::vector<Request>& out) {
  const auto n = static_cast<int64_t>(SteadyCount(from, to, rate));
  for (int64_t i = 0; i < n; ++i) {
    const Int128 offset = static_cast<Int128>(i) * rate.period.count() / rate.count;
    out.push_back({.at_us = from + static_cast<int64_t>(offset)});
  }
}

Status TooMany(Int128 n) {
  const std::string count =
      n > Int128{1} << 62 ? "more than 2^62" : std::to_string(static_cast<int64_t>(n));
  return Status::InvalidArgument("the traffic would hold " + count + " requests; at most " +
                                 std::to_string(kMaxRequests) +
                                 " are simulated (lower --rate or --duration)");
}

// A uniform double in (0, 1] from the top 53 bits, the same on every platform.
double UnitInterval(std::mt19937_64& rng) {
  return (static_cast<double>(rng() >> 11) + 1.0) * 0x1.0p-53;
}

Result<std::vector<Request>> Poisson(int64_t from, int64_t to, const Rate& rate, uint64_t seed) {
  std::mt19937_64 rng(seed);
  const double mean_gap_us =
      static_cast<double>(rate.period.count()) / static_cast<double>(rate.count);
  std::vector<Request> out;
  double t = static_cast<double>(from);
  while (true) {
    t += -std::log(UnitInterval(rng)) * mean_gap_us;
    if (t >= static_cast<double>(to)) break;
    if (static_cast<int64_t>(out.size()) == kMaxRequests) return TooMany(kMaxRequests + 1);
    out.push_back({.at_us = static_cast<int64_t>(t)});
  }
  return out;
}

Result<std::vector<Request>> BoundaryBurst(const PatternOptions& o, int64_t to) {
  const int64_t w = o.limit.period.count();
  const int64_t n = o.limit.count;
  const int64_t boundary = w;
  const int64_t spread = std::max<int64_t>(w / 100, 1);
  const Int128 total = Int128{2} * n + SteadyCount(boundary + spread, to, o.rate);
  if (total > kMaxRequests) return TooMany(total);

  std::vector<Request> out;
  out.reserve(static_cast<size_t>(total));
  for (const int64_t base : {boundary - spread, boundary}) {
    for (int64_t i = 0; i < n; ++i) {
      out.push_back({.at_us = base + static_cast<int64_t>(static_cast<Int128>(i) * spread / n)});
    }
  }
  AppendSteady(boundary + spread, to, o.rate, out);
  return out;
}

std::vector<Request> OnOff(const PatternOptions& o, int64_t from, int64_t to) {
  const int64_t w = o.limit.period.count();
  std::vector<Request> out;
  for (int64_t on = from; on < to; on += w) {
    AppendSteady(on, std::min(on + w / 2, to), o.rate, out);
  }
  return out;
}

Status ValidatePattern(const PatternOptions& o) {
  if (o.rate.count <= 0 || o.rate.period.count() <= 0) {
    return Status::InvalidArgument("the rate must be a positive count per positive period");
  }
  if (o.limit.count <= 0 || o.limit.period.count() <= 0) {
    return Status::InvalidArgument("the limit must be a positive count per positive period");
  }
  if (Status s = ValidateDuration(o.pattern, o.limit, o.duration); !s.ok()) return s;
  // The exact count for the deterministic patterns, the expectation for poisson (which also
  // stops at the bound while drawing).
  const Int128 expected = SteadyCount(0, o.duration.count(), o.rate);
  if (expected > kMaxRequests) return TooMany(expected);
  return Status::Ok();
}

}  // namespace

std::string_view PatternName(Pattern p) {
  switch (p) {
    case Pattern::kBoundaryBurst:
      return "boundary-burst";
    case Pattern::kSteady:
      return "steady";
    case Pattern::kPoisson:
      return "poisson";
    case Pattern::kOnOff:
      return "on-off";
  }
  return "unknown";
}

Result<Pattern> ParsePattern(std::string_view name) {
  for (Pattern p : kAllPatterns) {
    if (PatternName(p) == name) return p;
  }
  return Status::InvalidArgument("unknown pattern \"" + std::string(name) + "\" (expected " +
                                 std::string(kPatternList) + ")");
}

Status ValidateDuration(Pattern pattern, const Rate& limit, Micros duration) {
  if (duration.count() <= 0) return Status::InvalidArgument("the duration must be positive");
  if (duration > kMaxDuration) {
    return Status::InvalidArgument("the duration must be at most " + FormatDuration(kMaxDuration) +
                                   ", got " + FormatDuration(duration));
  }
  if (pattern == Pattern::kOnOff && duration.count() / limit.period.count() > kMaxRequests) {
    return Status::InvalidArgument("on-off would run more than " + std::to_string(kMaxRequests) +
                                   " windows of " + FormatDuration(limit.period) +
                                   "; shorten the duration");
  }
  if (pattern == Pattern::kBoundaryBurst && duration < limit.period) {
    return Status::InvalidArgument(
        "boundary-burst needs a duration of at least the limit's window (" +
        FormatDuration(limit.period) + "), got " + FormatDuration(duration));
  }
  return Status::Ok();
}

Result<Traffic> Generate(const PatternOptions& o) {
  if (Status s = ValidatePattern(o); !s.ok()) return s;
  Traffic t;
  t.keys = {"client"};
  const int64_t from = o.pattern == Pattern::kBoundaryBurst ? o.limit.period.count() / 2 : 0;
  const int64_t to = from + o.duration.count();
  t.start = Micros(from);
  t.end = Micros(to);
  switch (o.pattern) {
    case Pattern::kBoundaryBurst: {
      auto r = BoundaryBurst(o, to);
      if (!r.ok()) return r.status();
      t.requests = std::move(*r);
      break;
    }
    case Pattern::kSteady:
      AppendSteady(from, to, o.rate, t.requests);
      break;
    case Pattern::kPoisson: {
      auto r = Poisson(from, to, o.rate, o.seed);
      if (!r.ok()) return r.status();
      t.requests = std::move(*r);
      break;
    }
    case Pattern::kOnOff:
      t.requests = OnOff(o, from, to);
      break;
  }
  return t;
}

}  // namespace caudal::simulate
