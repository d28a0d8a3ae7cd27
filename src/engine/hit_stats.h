// envoyproxy/ratelimit's per-rule hit statistics (its src/limiter/base_limiter.go): how one
// descriptor's hits count as within_limit, near_limit, over_limit and shadow_mode, given what
// its limit had counted before them. Pure.
//
// The reference counts with a counter that INCRBY raised from `before` to `after` = before +
// hits, against the limit L and the near-limit threshold N = floor(L × 0.8):
//   after ≤ L (OK):    within_limit += hits; near_limit += the hits above N
//                      (all of them if before ≥ N, else after − N, if after > N).
//   after > L (over):  over_limit += hits if before ≥ L, else after − L, and then
//                      near_limit += L − max(N, before) (the hits between N and L);
//                      a shadow_mode rule adds what over_limit added to shadow_mode.
// total_hits (every hit of a rule that applies) and over_limit_with_local_cache are counted by
// the engine, which knows how a descriptor was decided.
#pragma once

#include <cstdint>
#include <string>

namespace caudal::engine_internal {

// floor(L × 0.8) as the reference computes it (a float32 ratio and product).
int64_t NearLimitThreshold(int64_t limit);

struct HitSplit {
  uint64_t within_limit = 0;
  uint64_t near_limit = 0;
  uint64_t over_limit = 0;
  uint64_t shadow_mode = 0;
};

// The split of `hits` on a limit of `limit` that had counted `before` (see above).
// Preconditions: limit ≥ 0, before ≥ 0, hits ≥ 0.
HitSplit SplitHits(int64_t limit, int64_t before, int64_t hits, bool shadow);

// The reference's SanitizeStatName, in place: ':' and '|' become '_', and so does every dot of
// a run shaped like an IPv4 address (four groups of 1 to 3 digits). Beyond the reference, each
// control character (ControlCharacterLength: CR, ESC, DEL, C1, U+2028...) becomes one '_'.
void SanitizeStatName(std::string& name);

}  // namespace caudal::engine_internal
