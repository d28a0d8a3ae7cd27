// Trace-replay fuzzer for the five algorithms (in the spirit of Envoy's token bucket fuzzer).
//
// The input decodes into one limit spec (capacity, rate, window), a start time and a sequence of
// actions: consume(cost), advance(µs), step back(µs). The same trace runs through all five
// algorithms, each keeping its own state as a store would, and every decision is checked against
// the contract (compact_state.h) and the algorithm's bound:
// - remaining in [0, capacity]; kNeverFits iff cost > capacity; a peek always passes;
// - a refused request passes exactly retry_after later and not 1 µs sooner;
// - reset_after later the state decides as a fresh one;
// - every state word stays in [0, 2^53) (what the Redis scripts can hold exactly);
// while time has never gone backwards:
// - gcra decides exactly as token_bucket does;
// - token_bucket admits at most B + r·t in every interval between two decisions;
// - fixed_window never more than its limit in an aligned window, sliding_window_counter never
//   2·limit in a window;
// and whichever way the clock moves, sliding_window_log never holds more than its limit in a
// window of the times it recorded, until it is fresh (every entry out of the window).
#include <fuzzer/FuzzedDataProvider.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <optional>

#include "algorithms/exact_math.h"
#include "algorithms/replayer.h"
#include "fuzz_check.h"

namespace caudal {
namespace {

using exact::Int128;
using testing::Replayer;

constexpr int64_t kTwo53 = int64_t{1} << 53;
constexpr int64_t kLatest = int64_t{1} << 52;  // the contract's time bound
constexpr int64_t kYear = int64_t{365} * 24 * 3'600'000'000;

// The most admitted in any window (t − w, t], maintained as admissions arrive in time order.
class WindowSum {
 public:
  explicit WindowSum(int64_t w) : w_(w) {}
  int64_t Add(int64_t at, int64_t cost) {
    if (cost > 0) {
      live_.push_back({at, cost});
      sum_ += cost;
    }
    while (!live_.empty() && live_.front().first <= at - w_) {
      sum_ -= live_.front().second;
      live_.pop_front();
    }
    return sum_;
  }

 private:
  int64_t w_;
  int64_t sum_ = 0;
  std::deque<std::pair<int64_t, int64_t>> live_;
};

// B + r·t over every interval [t_i, t_j] of decision times, checked online (see properties_test).
class BucketBound {
 public:
  explicit BucketBound(const Limit& l)
      : b_(l.capacity()), n_(l.refill_count()), p_(l.refill_period_us()) {}
  bool Holds(int64_t at, int64_t admitted) {
    const Int128 start = before_ * p_ - n_ * at;
    if (first_ || start < min_start_) min_start_ = start;
    first_ = false;
    before_ += admitted;
    return before_ * p_ - n_ * at - min_start_ <= b_ * p_;
  }

 private:
  Int128 b_, n_, p_;
  Int128 before_ = 0;
  Int128 min_start_ = 0;
  bool first_ = true;
};

void CheckStateWords(const Replayer& r) {
  if (r.compact()) {
    for (int64_t word : r.compact()->w) FUZZ_CHECK(word >= 0 && word < kTwo53);
  }
  for (const auto& e : r.log().entries) FUZZ_CHECK(e.at_us >= 0 && e.cost > 0);
  FUZZ_CHECK(static_cast<int64_t>(r.log().entries.size()) <= kMaxLogLimit);
}

void CheckDecision(const Replayer& before, const Replayer& after, const Decision& d, int64_t now,
                   int64_t cost) {
  const int64_t cap = before.limit().capacity();
  FUZZ_CHECK(d.limit == cap);
  FUZZ_CHECK(d.remaining >= 0 && d.remaining <= cap);
  FUZZ_CHECK((d.verdict == Verdict::kNeverFits) == (cost > cap));
  if (cost == 0) FUZZ_CHECK(d.allowed());
  FUZZ_CHECK(d.reset_after.count() >= 0 && now + d.reset_after.count() < kTwo53);
  const Micros reset_at(now + d.reset_after.count());
  FUZZ_CHECK(after.Peek(reset_at, cost) == after.DecideFresh(reset_at, cost));
  if (d.verdict != Verdict::kDenied) {
    FUZZ_CHECK(d.retry_after.count() == 0);
  } else {
    FUZZ_CHECK(d.retry_after.count() > 0 && now + d.retry_after.count() < kTwo53);
    const Micros at(now + d.retry_after.count());
    FUZZ_CHECK(before.Peek(at, cost).allowed());
    FUZZ_CHECK(!before.Peek(at - Micros(1), cost).allowed());
  }
}

struct Lane {
  Replayer replayer;
  std::optional<WindowSum> window;
  std::optional<BucketBound> bound;
  int64_t fixed_start = -1;  // fixed_window: the aligned window being counted
  int64_t fixed_count = 0;
  int64_t log_newest = 0;  // sliding_window_log records at max(now, newest entry)
};

std::optional<Limit> DecodeLimit(FuzzedDataProvider& in, Algorithm a) {
  // Small values are the interesting ones; sometimes reach for the extremes.
  const int64_t cap = in.ConsumeBool() ? in.ConsumeIntegralInRange<int64_t>(1, 64)
                                       : in.ConsumeIntegralInRange<int64_t>(-5, kMaxCapacity + 5);
  const int64_t count = in.ConsumeBool()
                            ? in.ConsumeIntegralInRange<int64_t>(1, 64)
                            : in.ConsumeIntegralInRange<int64_t>(-5, kMaxRateCount + 5);
  const int64_t period_ms = in.ConsumeBool()
                                ? in.ConsumeIntegralInRange<int64_t>(1, 2'000)
                                : in.ConsumeIntegralInRange<int64_t>(-1, kYear / 1000 + 1);
  const int64_t period_us =
      period_ms * 1000 + (in.ConsumeBool() ? 0 : in.ConsumeIntegral<uint8_t>());
  const LimitSpec spec = IsWindowAlgorithm(a)
                             ? LimitSpec::Window(a, cap, Micros(period_us))
                             : LimitSpec::Bucket(a, cap, {count, Micros(period_us)});
  auto l = Limit::Create(spec);
  if (!l.ok()) {
    FUZZ_CHECK(l.status().code() == StatusCode::kInvalidArgument);
    FUZZ_CHECK(!l.status().message().empty());
    return std::nullopt;
  }
  return *l;
}

void Run(FuzzedDataProvider& in) {
  // One spec, read as a bucket (token_bucket, gcra) and as a window (the other three).
  const auto bucket = DecodeLimit(in, Algorithm::kTokenBucket);
  if (!bucket) return;
  const auto window = Limit::Create(LimitSpec::Window(
      Algorithm::kFixedWindow, bucket->capacity(), Micros(bucket->window().count() / 1000 * 1000)));
  if (!window.ok()) return;
  const int64_t w = window->window().count();
  const int64_t cap = bucket->capacity();

  std::vector<Lane> lanes;
  for (Algorithm a : kAllAlgorithms) {
    if (a == Algorithm::kSlidingWindowLog && cap > kMaxLogLimit) continue;
    const LimitSpec spec = IsWindowAlgorithm(a) ? LimitSpec::Window(a, cap, Micros(w))
                                                : LimitSpec::Bucket(a, cap, bucket->rate());
    const Limit l = *Limit::Create(spec);
    Lane lane{.replayer = Replayer(l)};
    if (IsWindowAlgorithm(a)) lane.window.emplace(w);
    if (!IsWindowAlgorithm(a)) lane.bound.emplace(l);
    lanes.push_back(std::move(lane));
  }

  int64_t now = in.ConsumeIntegralInRange<int64_t>(0, kLatest / 2);
  bool monotone = true;
  for (int steps = 0; steps < 400 && in.remaining_bytes() > 0; ++steps) {
    switch (in.ConsumeIntegralInRange<int>(0, 9)) {
      case 0:  // advance a little
        now += in.ConsumeIntegralInRange<int64_t>(0, 2 * w);
        break;
      case 1:  // advance a lot, up to years
        now += in.ConsumeIntegralInRange<int64_t>(0, 3 * kYear);
        break;
      case 2:  // step back
        now -= in.ConsumeIntegralInRange<int64_t>(1, 2 * w);
        monotone = false;
        break;
      default: {  // consume
        const uint8_t kind = in.ConsumeIntegral<uint8_t>();
        const int64_t cost = kind < 200   ? kind % (cap < 8 ? cap + 2 : 8)
                             : kind < 250 ? in.ConsumeIntegralInRange<int64_t>(0, cap + 1)
                                          : in.ConsumeIntegralInRange<int64_t>(0, kMaxCapacity);
        now = std::clamp<int64_t>(now, 0, kLatest);
        std::optional<Decision> token_bucket;
        for (Lane& lane : lanes) {
          const Algorithm a = lane.replayer.limit().algorithm();
          if (a == Algorithm::kSlidingWindowLog && lane.log_newest > 0 &&
              lane.log_newest <= now - w) {
            // Every entry has left the window: the log is fresh and gets emptied, so a clock
            // stepping back from here is judged as for a fresh key.
            lane.log_newest = 0;
            lane.window.emplace(w);
          }
          const Replayer before = lane.replayer;
          const Decision d = lane.replayer.Decide(Micros(now), cost);
          CheckDecision(before, lane.replayer, d, now, cost);
          CheckStateWords(lane.replayer);
          const int64_t admitted = d.allowed() ? cost : 0;
          if (a == Algorithm::kSlidingWindowLog && admitted > 0) {
            lane.log_newest = std::max(lane.log_newest, now);
            FUZZ_CHECK(lane.window->Add(lane.log_newest, admitted) <= cap);
          }
          if (!monotone) continue;
          if (a == Algorithm::kTokenBucket) token_bucket = d;
          if (a == Algorithm::kGcra) FUZZ_CHECK(token_bucket && *token_bucket == d);
          if (lane.bound) FUZZ_CHECK(lane.bound->Holds(now, admitted));
          if (a == Algorithm::kSlidingWindowCounter) {
            FUZZ_CHECK(lane.window->Add(now, admitted) < 2 * cap);
          }
          if (a == Algorithm::kFixedWindow) {
            const int64_t start = exact::WindowStart(now, w);
            if (start != lane.fixed_start) {
              lane.fixed_start = start;
              lane.fixed_count = 0;
            }
            lane.fixed_count += admitted;
            FUZZ_CHECK(lane.fixed_count <= cap);
          }
        }
        break;
      }
    }
    now = std::clamp<int64_t>(now, 0, kLatest);
  }
}

}  // namespace
}  // namespace caudal

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider in(data, size);
  caudal::Run(in);
  return 0;
}
