// Traffic: the requests `caudal simulate` replays through every algorithm, and the synthetic
// patterns that produce them.
//
// Patterns are pure functions of their options: the same options (seed included) always give
// the same requests, so runs are reproducible. Time is integer microseconds; pattern timestamps
// count from the Unix epoch, so their windows line up with fixed_window's aligned windows.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "caudal/common/clock.h"
#include "caudal/common/status.h"

namespace caudal::simulate {

// The most requests one simulation handles (patterns and traces alike). At 24 bytes a request
// this bounds the traffic to about 240 MB.
inline constexpr int64_t kMaxRequests = 10'000'000;

// The longest pattern duration (100 years), which keeps every timestamp far from overflow.
inline constexpr Micros kMaxDuration = std::chrono::hours(24 * 365 * 100);

struct Request {
  int64_t at_us = 0;
  uint32_t key = 0;  // index into Traffic::keys
  int64_t cost = 1;  // 0 is a peek
};

struct Traffic {
  std::vector<std::string> keys;  // at least one
  std::vector<Request> requests;  // in non-decreasing at_us order
  // The span the traffic describes, start <= every at_us <= end (a chart's x axis).
  Micros start{0};
  Micros end{0};
};

enum class Pattern : uint8_t {
  // `limit` requests in the last 1% of a window before a boundary and `limit` in the first 1%
  // after it, then steady traffic at `rate`: the fixed window's worst case.
  kBoundaryBurst,
  kSteady,   // evenly spaced at `rate`
  kPoisson,  // exponential inter-arrival times with mean 1/rate, drawn from `seed`
  kOnOff,    // `rate` during the first half of each window, silence in the second half
};

inline constexpr Pattern kAllPatterns[] = {Pattern::kBoundaryBurst, Pattern::kSteady,
                                           Pattern::kPoisson, Pattern::kOnOff};

// "boundary-burst", "steady", "poisson", "on-off".
std::string_view PatternName(Pattern p);
// kInvalidArgument listing the valid names.
Result<Pattern> ParsePattern(std::string_view name);

struct PatternOptions {
  Pattern pattern = Pattern::kSteady;
  Rate limit{};  // the limit under test: its window W places the bursts and the on-off phases
  Rate rate{};   // the offered rate
  Micros duration{0};
  uint64_t seed = 1;
};

// The duration errors of Generate alone (non-positive, above kMaxDuration, too short for
// boundary-burst, too many on-off windows), so a caller can attribute them to its flag.
// Preconditions: limit has a positive period.
Status ValidateDuration(Pattern pattern, const Rate& limit, Micros duration);

// One key ("client"), cost 1 per request. Traffic spans [0, duration), except boundary-burst,
// which spans [W/2, W/2 + duration) so that a quiet half window precedes the boundary at W.
// Errors (kInvalidArgument): a non-positive rate count, period or duration; a duration above
// kMaxDuration; boundary-burst with a duration shorter than W; on-off with more than
// kMaxRequests windows; more than kMaxRequests requests.
Result<Traffic> Generate(const PatternOptions& options);

}  // namespace caudal::simulate
