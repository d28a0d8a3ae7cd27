#include "envoy/rlqs_ledger.h"

#include <algorithm>
#include <limits>

#include "algorithms/exact_math.h"

namespace caudal::envoy {
namespace {

using i128 = exact::Int128;
constexpr int64_t kMaxU32 = std::numeric_limits<uint32_t>::max();
constexpr int64_t kSecond = 1'000'000;  // µs

// What an assignment of `b` may admit beyond what is paid: its rate over `ttl`, rounded down.
int64_t Credit(const RlqsTokenBucket& b, Micros ttl) {
  return static_cast<int64_t>(static_cast<exact::Int128>(b.tokens_per_fill) * ttl.count() /
                              b.fill_interval.count());
}

// `d` rounded down to whole seconds (what Envoy reads of a time to live).
Micros WholeSeconds(Micros d) {
  return Micros(std::max<int64_t>(0, d.count()) / kSecond * kSecond);
}

int64_t FloorDiv(i128 a, i128 b) { return static_cast<int64_t>(a / b); }  // a >= 0, b > 0
int64_t CeilDiv(i128 a, i128 b) { return static_cast<int64_t>((a + b - 1) / b); }

// What a token bucket may admit from `start` to `end`: M + ceil(F·(end − start)/I).
int64_t MostAdmitted(const RlqsTokenBucket& b, Micros start, Micros end) {
  const i128 refill =
      static_cast<i128>(b.tokens_per_fill) * std::max<int64_t>(0, (end - start).count());
  return b.max_tokens + CeilDiv(refill, b.fill_interval.count());
}

}  // namespace

std::optional<RlqsTokenBucket> TokenBucketFor(RlqsRate rate, Micros burst) {
  const int64_t period = std::max<int64_t>(1, rate.period.count());
  const int64_t interval = (period + kSecond - 1) / kSecond * kSecond;
  const int64_t per_fill = std::min<int64_t>(
      kMaxU32, FloorDiv(static_cast<i128>(std::max<int64_t>(0, rate.count)) * interval, period));
  if (per_fill < 1) return std::nullopt;
  const int64_t m =
      FloorDiv(static_cast<i128>(per_fill) * std::max<int64_t>(0, burst.count()), interval);
  return RlqsTokenBucket{.max_tokens = std::clamp<int64_t>(m, 1, per_fill),
                         .tokens_per_fill = per_fill,
                         .fill_interval = Micros(interval)};
}

int64_t RlqsLedger::LeastPaid() const {
  return paid_.empty() ? 0 : *std::min_element(paid_.begin(), paid_.end());
}

int64_t RlqsLedger::committed() const {
  if (active_ && active_->kind == RlqsStrategy::Kind::kTokenBucket) {
    return closed_ + MostAdmitted(active_->bucket, start_, end_);
  }
  return closed_;
}

void RlqsLedger::Close(Micros now) {
  if (active_ && active_->kind == RlqsStrategy::Kind::kTokenBucket) {
    closed_ += MostAdmitted(active_->bucket, start_, std::min(now, end_));
  }
  active_.reset();
}

RlqsAssignment RlqsLedger::Assign(Micros now, std::optional<RlqsRate> rate, Micros max_ttl,
                                  Micros deny_ttl, Micros burst) {
  std::optional<RlqsTokenBucket> wanted =
      rate ? TokenBucketFor(*rate, burst) : std::optional<RlqsTokenBucket>();
  if (!wanted) return Blanket(now, RlqsStrategy::Kind::kDenyAll, deny_ttl);
  if (active_ && active_->kind == RlqsStrategy::Kind::kTokenBucket && now < end_) {
    const RlqsTokenBucket& b = active_->bucket;
    const i128 asked = static_cast<i128>(wanted->tokens_per_fill) * b.fill_interval.count();
    const i128 held = static_cast<i128>(b.tokens_per_fill) * wanted->fill_interval.count();
    // Kept when the new rate is at most a twentieth above the active one, never below it (an
    // Envoy never holds a rate above its allocation), or when Envoy would take the new bucket
    // for the active one (it compares M and F only).
    const bool same_to_envoy =
        wanted->max_tokens == b.max_tokens && wanted->tokens_per_fill == b.tokens_per_fill;
    const bool close_above = asked >= held && (asked - held) * 20 <= held;
    if (same_to_envoy && !close_above) {
      // A slower rate Envoy would take for the active one: told apart by its burst.
      wanted->max_tokens += wanted->max_tokens > 1 ? -1 : 1;
    }
    if (close_above) {
      // Envoy counts the time to live again from the receipt: the end is now + ttl, as far as
      // what is paid and the credit cover.
      const int64_t room = LeastPaid() + Credit(b, max_ttl) - closed_ - b.max_tokens;
      Micros covered(0);
      if (room > 0) {
        covered =
            Micros(FloorDiv(static_cast<i128>(room) * b.fill_interval.count(), b.tokens_per_fill));
      }
      const Micros ttl = WholeSeconds(std::min(start_ + covered - now, max_ttl));
      if (ttl >= Micros(kSecond)) {
        end_ = now + ttl;
        return {.strategy = *active_, .ttl = ttl, .extends = true};
      }
      // Not a second left to cover: a new assignment (below) or a DENY_ALL.
    }
  }
  Close(now);
  RlqsTokenBucket b = *wanted;
  const int64_t avail = LeastPaid() + Credit(b, max_ttl) - closed_;
  b.max_tokens = std::min(b.max_tokens, avail);
  Micros ttl(0);
  if (b.max_tokens >= 1) {
    ttl = WholeSeconds(std::min(
        max_ttl, Micros(FloorDiv(static_cast<i128>(avail - b.max_tokens) * b.fill_interval.count(),
                                 b.tokens_per_fill))));
  }
  if (b.max_tokens < 1 || ttl < Micros(kSecond)) {
    return Blanket(now, RlqsStrategy::Kind::kDenyAll, deny_ttl);
  }
  active_ = RlqsStrategy{.kind = RlqsStrategy::Kind::kTokenBucket, .bucket = b};
  start_ = now;
  end_ = now + ttl;
  return {.strategy = *active_, .ttl = ttl, .extends = false};
}

RlqsAssignment RlqsLedger::Blanket(Micros now, RlqsStrategy::Kind kind, Micros ttl) {
  ttl = std::max(Micros(kSecond), WholeSeconds(ttl));
  const RlqsStrategy strategy{.kind = kind};
  const bool extends = active_ && *active_ == strategy && now < end_;
  Close(now);
  active_ = strategy;
  start_ = now;
  end_ = now + ttl;
  return {.strategy = strategy, .ttl = ttl, .extends = extends};
}

RlqsAssignment RlqsLedger::ExpireNow(Micros now) {
  const RlqsStrategy strategy =
      active_.value_or(RlqsStrategy{.kind = RlqsStrategy::Kind::kDenyAll});
  Close(now);
  return {.strategy = strategy, .ttl = Micros(0), .extends = false};
}

std::optional<RlqsAssignment> RlqsLedger::KeepActive(Micros now, Micros ttl) {
  if (!active_ || now >= end_) return std::nullopt;
  ttl = std::max(Micros(kSecond), WholeSeconds(ttl));
  end_ = now + ttl;
  return RlqsAssignment{.strategy = *active_, .ttl = ttl, .extends = true};
}

}  // namespace caudal::envoy
