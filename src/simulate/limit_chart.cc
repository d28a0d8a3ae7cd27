#include "simulate/limit_chart.h"

#include <algorithm>

#include "simulate/simulator.h"
#include "simulate/svg_chart.h"
#include "simulate/traffic.h"

namespace caudal::simulate {
namespace {

constexpr size_t kChartPoints = 600;

// Requests boundary-burst offers over `windows` windows at twice the rate: a burst of N on each
// side of the boundary, then 2N per window (an upper bound).
int64_t RequestsFor(const Rate& rate, int64_t windows) {
  const int64_t n = std::min<int64_t>(rate.count, kMaxChartRequests + 1);
  return 2 * n + 2 * n * windows;
}

}  // namespace

ChartLimit ChartLimitOf(const Limit& limit) {
  return {.rate = limit.rate(), .burst = limit.capacity()};
}

Result<std::string> RenderLimitChart(const Limit& limit, std::string_view title) {
  const ChartLimit c = ChartLimitOf(limit);
  int64_t windows = 3;
  if (RequestsFor(c.rate, windows) > kMaxChartRequests) windows = 1;
  if (RequestsFor(c.rate, windows) > kMaxChartRequests) {
    return Status::InvalidArgument(
        "too many requests to chart here (more than " + std::to_string(kMaxChartRequests) +
        " in one window); run: caudal simulate --limit " + FormatRate(c.rate) + " --burst " +
        std::to_string(c.burst) + " --pattern boundary-burst --svg chart.svg");
  }
  const Rate offered{.count = 2 * c.rate.count, .period = c.rate.period};
  const Micros duration = c.rate.period * windows;
  Result<Traffic> traffic = Generate({.pattern = Pattern::kBoundaryBurst,
                                      .limit = c.rate,
                                      .rate = offered,
                                      .duration = duration,
                                      .seed = 1});
  if (!traffic.ok()) return traffic.status();
  Result<Simulation> sim =
      Simulate(*traffic, {.limit = c.rate, .burst = c.burst, .chart_points = kChartPoints});
  if (!sim.ok()) return sim.status();
  return RenderSvg(
      *sim, {.title = std::string(title) + ": boundary-burst at " + FormatRate(offered) +
                      ", limit " + FormatRate(c.rate) + ", burst " + std::to_string(c.burst)});
}

}  // namespace caudal::simulate
