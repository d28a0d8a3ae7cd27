#include "redis/native_count.h"

#include <hiredis/hiredis.h>

#include <algorithm>
#include <charconv>
#include <string_view>

#include "caudal/algorithms/limit.h"
#include "redis/resp.h"

namespace caudal::redis {
namespace {

std::string Encode(std::initializer_list<std::string_view> argv) {
  std::string out;
  AppendCommand(std::span<const std::string_view>(argv.begin(), argv.size()), out);
  return out;
}

int64_t CeilDiv(int64_t a, int64_t b) { return a <= 0 ? 0 : (a + b - 1) / b; }

// A refund: up to ARGV[1] units off the counter, never below 0 (a DECRBY alone could take a
// window below zero, and so admit past its limit); returns the count after. Refunds are rare:
// EVAL, which Redis compiles once and keeps.
constexpr std::string_view kRefundScript =
    "local c = tonumber(redis.call('GET', KEYS[1]) or '0') "
    "local b = math.min(c, tonumber(ARGV[1])) "
    "if b > 0 then return redis.call('DECRBY', KEYS[1], b) end return c";

}  // namespace

void NativeClock::Observe(int64_t redis_us, int64_t sent_us, int64_t received_us) {
  const int64_t mid = sent_us + (received_us - sent_us) / 2;
  offset_us_ = redis_us - mid;
  error_us_ = std::max<int64_t>(0, (received_us - sent_us) / 2);
  observed_at_us_ = received_us;
  known_ = true;
}

std::vector<std::string> BuildNativeCall(std::span<EncodedRequest* const> requests, int64_t now_us,
                                         int64_t slack_ms) {
  std::vector<std::string> out;
  for (EncodedRequest* r : requests) {
    r->native_now_us = now_us;
    for (size_t i = 0; i < r->native.size(); ++i) {
      NativeCount& c = r->native[i];
      c.start_us = now_us / c.window_us * c.window_us;
      const std::string key = r->keys[i] + "|w" + std::to_string(c.start_us);
      const std::string cost = std::to_string(c.cost);
      // To the window's end in whole ms, rounded up, and the margin.
      const std::string ttl = std::to_string(CeilDiv(c.start_us + c.window_us - now_us, 1000) +
                                             kNativeExpiryMarginMs + slack_ms);
      out.push_back(c.refund ? Encode({"EVAL", kRefundScript, "1", key, cost})
                             : Encode({"INCRBY", key, cost}));
      out.push_back(Encode({"PEXPIRE", key, ttl}));
    }
  }
  return out;
}

std::optional<int64_t> TimeMicros(const redisReply& r) {
  if (r.type != REDIS_REPLY_ARRAY || r.elements != 2) return std::nullopt;
  int64_t parts[2];
  for (size_t i = 0; i < 2; ++i) {
    const redisReply& e = *r.element[i];
    if (e.type != REDIS_REPLY_STRING) return std::nullopt;
    const char* end = e.str + e.len;
    if (std::from_chars(e.str, end, parts[i]).ptr != end || parts[i] < 0) return std::nullopt;
  }
  return parts[0] * 1'000'000 + parts[1];
}

Status NativeReplyToInts(std::span<const EncodedRequest* const> requests, const redisReply& replies,
                         std::vector<int64_t>& ints) {
  size_t entries = 0;
  for (const EncodedRequest* r : requests) entries += r->native.size();
  if (replies.type != REDIS_REPLY_ARRAY || replies.elements != 2 * entries || entries == 0) {
    return Status::Unavailable("redis: a native count's replies do not match its commands");
  }
  const int64_t now = requests.front()->native_now_us;
  ints.clear();
  size_t at = 0;
  for (const EncodedRequest* r : requests) {
    const size_t first = ints.size();
    ints.push_back(1);
    for (size_t i = 0; i < r->native.size(); ++i, at += 2) {
      for (size_t k = at; k < at + 2; ++k) {  // the count, and PEXPIRE's 0 or 1
        const redisReply& reply = *replies.element[k];
        if (reply.type != REDIS_REPLY_INTEGER) {
          return Status::Unavailable("redis: a native counter " +
                                     std::string(reply.type == REDIS_REPLY_ERROR
                                                     ? Text(reply)
                                                     : std::string_view("is not an integer")));
        }
      }
      const redisReply& counted = *replies.element[at];
      const NativeCount& c = r->native[i];
      const int64_t max = r->limits[i];
      const int64_t count = counted.integer;
      // Counted in the window the call picked; `now` may lie past it by the estimate's error.
      const int64_t reset = std::clamp<int64_t>(c.start_us + c.window_us - now, 0, c.window_us);
      Verdict v = Verdict::kAllowed;
      if (c.refund) {
        // Never refused, and applied whatever the request's other entries decide.
      } else if (c.cost > max) {
        v = Verdict::kNeverFits;
      } else if (count > max) {
        v = Verdict::kDenied;
      }
      if (v != Verdict::kAllowed) ints[first] = 0;
      ints.push_back(static_cast<int64_t>(v));
      ints.push_back(std::max<int64_t>(max - count, -kMaxCapacity));
      ints.push_back(count > 0 ? reset : 0);
      // A refusal waits for the next window (at least 1 µs, so it says when).
      ints.push_back(v == Verdict::kDenied ? std::max<int64_t>(reset, 1) : 0);
    }
  }
  ints.push_back(now);
  return Status::Ok();
}

}  // namespace caudal::redis
