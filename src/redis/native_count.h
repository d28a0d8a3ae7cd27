// Native counts (ChargeEntry::native, store.h): a call of fixed-window charges decided with
// Redis's own commands, as envoyproxy/ratelimit decides them, instead of the script. One call is
// a pipeline of, per entry,
//   INCRBY <state key>|w<window start> <cost> (a refund: a short EVAL that takes up to its units
//   off, never below 0) and PEXPIRE <that key> <ms to the window's end + kNativeExpiryMarginMs>
// whose replies, gathered into one array, become the integers the script would have returned
// for the same requests, so the pipeline decodes both alike (DecodeResponse). The window is
// picked when the call is sent, from the store's time as the node estimates it (NativeClock,
// kept fresh by a TIME at most kNativeClockRefreshUs old).
//
// Why no transaction: each INCRBY is atomic and its key names its window, so several instances
// count a window exactly without one; MULTI, TIME and EXEC would cost Redis more than the counts
// themselves. "|w" never appears in a key the engine builds past its hash tag (fields are
// length-prefixed), so a native counter never shares a name with a script's state.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "caudal/common/status.h"
#include "redis/lua_protocol.h"

struct redisReply;

namespace caudal::redis {

// A counter outlives its window by this much, so an estimate of Redis's time that is late by
// less never lets a window's counter expire before the window ends.
inline constexpr int64_t kNativeExpiryMarginMs = 1000;
// A node asks Redis for its TIME again when its last answer is older than this.
inline constexpr int64_t kNativeClockRefreshUs = 1'000'000;

// The estimate of Redis's clock a node keeps for native counts: the local wall clock plus the
// offset the last TIME showed, taken half way through the round trip that carried it.
class NativeClock {
 public:
  bool known() const { return known_; }
  // TIME read `redis_us`, in a reply to a command sent at local wall time `sent_us` and received
  // at `received_us`.
  void Observe(int64_t redis_us, int64_t sent_us, int64_t received_us);
  int64_t Now(int64_t local_us) const { return local_us + offset_us_; }
  // Whether the last observation is older than kNativeClockRefreshUs at local time `local_us`
  // (or none was made).
  bool Stale(int64_t local_us) const {
    return !known_ || local_us - observed_at_us_ > kNativeClockRefreshUs ||
           local_us < observed_at_us_;
  }
  // Half the round trip of the last observation: the estimate's error when it was made.
  int64_t error_us() const { return error_us_; }

 private:
  bool known_ = false;
  int64_t offset_us_ = 0;
  int64_t error_us_ = 0;
  int64_t observed_at_us_ = 0;
};

// The commands of one call carrying `requests` (native counts only) at store time `now_us`, one
// element per command (RESP-encoded), two per entry; records each entry's window, and `now_us`,
// in the requests. `slack_ms` is added to every expiry (kGivenTimeTtlSlackMs for a given clock).
std::vector<std::string> BuildNativeCall(std::span<EncodedRequest* const> requests, int64_t now_us,
                                         int64_t slack_ms);

// Redis's TIME reply in µs, or nullopt for anything else.
std::optional<int64_t> TimeMicros(const redisReply& r);

// The replies of such a call, one array in order, as the script's integers: per request, allowed
// and per entry verdict, remaining (negative: overdrawn), reset_after and retry_after, then the
// call's time (the requests' native_now_us). kUnavailable for an error reply (a counter holding
// something other than an integer, say) or a reply of the wrong shape.
Status NativeReplyToInts(std::span<const EncodedRequest* const> requests, const redisReply& replies,
                         std::vector<int64_t>& ints);

}  // namespace caudal::redis
