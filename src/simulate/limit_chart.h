// The chart of one configured limit, as `caudal simulate --pattern boundary-burst --svg` draws
// it: every algorithm with the limit's rate and burst over the fixed window's worst case (a burst
// on each side of a window boundary, then twice the rate), so a policy's limit is seen against
// what the other algorithms would have admitted. The status page serves it.
//
// Bounded for a server: at most kMaxChartRequests simulated requests (three windows of traffic,
// or one when three would pass the bound), a few milliseconds of CPU.
//
// Thread-safety: a pure function.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "caudal/algorithms/limit.h"
#include "caudal/common/status.h"

namespace caudal::simulate {

inline constexpr int64_t kMaxChartRequests = 200'000;

// The SVG, titled `title`. kInvalidArgument when even one window of the traffic would pass
// kMaxChartRequests; the message gives the `caudal simulate` command that draws it anyway.
Result<std::string> RenderLimitChart(const Limit& limit, std::string_view title);

// The rate N/W and burst B the simulator runs for `limit`: a window algorithm's limit per window
// (B = N), a bucket's refill rate and capacity.
struct ChartLimit {
  Rate rate;
  int64_t burst = 0;
};
ChartLimit ChartLimitOf(const Limit& limit);

}  // namespace caudal::simulate
