#include "caudal/algorithms/limit.h"

#include <algorithm>
#include <numeric>

#include "algorithms/algorithm.h"
#include "algorithms/exact_math.h"
#include "common/cat.h"

namespace caudal {

std::string_view VerdictName(Verdict v) {
  switch (v) {
    case Verdict::kAllowed:
      return "allowed";
    case Verdict::kDenied:
      return "denied";
    case Verdict::kNeverFits:
      return "never_fits";
  }
  return "unknown";
}

Result<Limit> Limit::Create(const LimitSpec& spec) {
  if (static_cast<size_t>(spec.algorithm) >= kAlgorithmCount) {
    return Status::InvalidArgument("unknown algorithm " +
                                   std::to_string(static_cast<int>(spec.algorithm)));
  }
  const bool concurrency = IsConcurrency(spec.algorithm);
  const LimitFields fields = FieldsOf(spec.algorithm);
  const bool window = !fields.period_is_rate;
  const std::string cap_name(fields.count);
  const std::string period_name = window ? std::string(fields.period) : "refill period";
  if (spec.capacity < 1 || spec.capacity > kMaxCapacity) {
    return Status::InvalidArgument(std::string(cap_name) + " must be between 1 and 2^40 (got " +
                                   std::to_string(spec.capacity) + ")");
  }
  if (spec.rate.period < kMinPeriod || spec.rate.period > kMaxPeriod) {
    return Status::InvalidArgument(std::string(period_name) +
                                   " must be between 1ms and 365d (got " +
                                   FormatDuration(spec.rate.period) + ")");
  }
  if (spec.rate.period.count() % 1000 != 0 && window) {
    return Status::InvalidArgument(std::string(period_name) +
                                   " must be a whole number of milliseconds (got " +
                                   FormatDuration(spec.rate.period) + ")");
  }
  if (concurrency && spec.capacity > kMaxConcurrencyLimit) {
    return Status::InvalidArgument(
        "concurrency keeps one entry per slot held, so its limit is capped at " +
        std::to_string(kMaxConcurrencyLimit) + " (got " + std::to_string(spec.capacity) + ")");
  }
  if (concurrency && spec.rate.period > kMaxHold) {
    return Status::InvalidArgument("hold must be at most 24h (got " +
                                   FormatDuration(spec.rate.period) + ")");
  }
  if (window) {
    if (spec.rate.count != spec.capacity) {
      return Status::InvalidArgument(
          std::string(concurrency ? "a concurrency limit holds `limit` slots"
                                  : "a window limit counts `limit` per `window`") +
          "; the rate count (" + std::to_string(spec.rate.count) + ") must equal the limit (" +
          std::to_string(spec.capacity) + ")");
    }
    if (HasLogState(spec.algorithm) && spec.capacity > kMaxLogLimit) {
      return Status::InvalidArgument(
          std::string(AlgorithmName(spec.algorithm)) +
          " keeps one entry per admitted request, so its limit is capped at " +
          std::to_string(kMaxLogLimit) + " (got " + std::to_string(spec.capacity) +
          "); use sliding_window_counter or token_bucket for larger limits");
    }
  } else if (spec.rate.count < 1 || spec.rate.count > kMaxRateCount) {
    return Status::InvalidArgument("refill count must be between 1 and 2^40 (got " +
                                   std::to_string(spec.rate.count) + ")");
  }

  if (spec.calendar) {
    if (spec.algorithm != Algorithm::kFixedWindow) {
      return Status::InvalidArgument(
          Cat("calendar: only fixed_window counts calendar windows, not ",
              AlgorithmName(spec.algorithm)));
    }
    if (spec.rate.period != spec.calendar->nominal()) {
      return Status::InvalidArgument(Cat("a calendar window's length is its calendar's nominal ",
                                         FormatDuration(spec.calendar->nominal()), " (got ",
                                         FormatDuration(spec.rate.period), ")"));
    }
  }

  std::vector<std::string> dimension = spec.dimension;
  if (dimension.size() > kMaxDimensionsPerLimit) {
    return Status::InvalidArgument(Cat("dimension: a sum of at most ", kMaxDimensionsPerLimit,
                                       " dimensions (got ", dimension.size(), ')'));
  }
  for (const std::string& name : dimension) {
    if (Status s = ValidateDimensionName(name); !s.ok()) return s;
  }
  std::sort(dimension.begin(), dimension.end());
  if (auto twice = std::adjacent_find(dimension.begin(), dimension.end());
      twice != dimension.end()) {
    return Status::InvalidArgument(Cat("dimension: ", Quoted(*twice), " is named twice"));
  }
  if (dimension.size() == 1 && dimension[0] == kRequestsDimension) dimension.clear();
  if (concurrency && !dimension.empty()) {
    return Status::InvalidArgument(
        "dimension: a concurrency limit counts requests in flight (a slot each), not another "
        "dimension");
  }

  Limit l;
  l.algorithm_ = spec.algorithm;
  l.dimension_ = std::move(dimension);
  l.capacity_ = spec.capacity;
  l.rate_ = spec.rate;
  l.calendar_ = spec.calendar;
  const int64_t g = std::gcd(spec.rate.count, spec.rate.period.count());
  l.n_ = spec.rate.count / g;
  l.p_ = spec.rate.period.count() / g;
  if (!window) {
    const exact::Int128 fill = (static_cast<exact::Int128>(l.capacity_) * l.p_ + l.n_ - 1) / l.n_;
    if (fill > kMaxFillTime.count()) {
      return Status::InvalidArgument("capacity " + std::to_string(l.capacity_) + " at refill " +
                                     FormatRate(l.rate_) +
                                     " takes more than 100 years to refill; raise the rate");
    }
  }
  return l;
}

std::string Limit::ToString() const {
  const LimitFields fields = FieldsOf(algorithm_);
  std::string text =
      calendar_
          ? Cat(AlgorithmName(algorithm_), ' ', fields.count, '=', capacity_, ' ', fields.period,
                "=1 ", CalendarUnitName(calendar_->unit()), " calendar=", calendar_->time_zone())
          : Cat(AlgorithmName(algorithm_), ' ', fields.count, '=', capacity_, ' ', fields.period,
                '=', fields.period_is_rate ? FormatRate(rate_) : FormatDuration(rate_.period));
  if (!dimension_.empty()) text += Cat(" dimension=", DimensionText());
  return text;
}

std::string Limit::DimensionText() const {
  if (dimension_.empty()) return std::string(kRequestsDimension);
  std::string text;
  for (const std::string& name : dimension_) text += Cat(text.empty() ? "" : "+", name);
  return text;
}

Status ValidateDimensionName(std::string_view name) {
  const bool ok = !name.empty() && name.size() <= kMaxDimensionNameLength && name[0] >= 'a' &&
                  name[0] <= 'z' && std::all_of(name.begin(), name.end(), [](char c) {
                    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_';
                  });
  if (ok) return Status::Ok();
  return Status::InvalidArgument(
      Cat("dimension: ", Quoted(name.substr(0, kMaxDimensionNameLength + 8)),
          " is not a dimension name (1 to 32 characters of [a-z0-9_], starting with a letter)"));
}

}  // namespace caudal
