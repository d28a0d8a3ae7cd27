// Limit: one validated rate-limit policy for one algorithm; and Decision, what a limit says about
// one request (below).
//
// Build a LimitSpec (plain data, e.g. from a config file) and turn it into a Limit with
// Limit::Create, which refuses anything the algorithms cannot decide exactly and says why.
// A Limit is immutable and cheap to copy.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "caudal/algorithms/calendar.h"
#include "caudal/common/clock.h"
#include "caudal/common/status.h"

namespace caudal {

// The rate-limit algorithms. Each has one entry in the algorithm table
// (algorithms/algorithm.h), in this order; the values travel to the Redis script.
enum class Algorithm : uint8_t {
  kFixedWindow,
  kSlidingWindowLog,
  kSlidingWindowCounter,
  kTokenBucket,
  kGcra,
  kConcurrency,  // requests in flight, not a rate (algorithms/concurrency.h)
};

// Every rate algorithm, in enum order (read from the algorithm table): all but concurrency,
// which counts requests in flight rather than a rate, and so keeps none of the rate
// algorithms' shared contract (refunds, exact retry_after, drift; compact_state.h).
extern const std::span<const Algorithm> kAllAlgorithms;

// The name configs use: "fixed_window", "sliding_window_log", "token_bucket", ...
std::string_view AlgorithmName(Algorithm a);
// kInvalidArgument listing the known names when `name` is none of them.
Result<Algorithm> ParseAlgorithm(std::string_view name);
// Window algorithms count requests per window; bucket algorithms refill continuously.
bool IsWindowAlgorithm(Algorithm a);
// A concurrency limit: `limit` slots, each held at most `hold` (LimitSpec::Concurrency).
bool IsConcurrency(Algorithm a);

// How a limit of an algorithm is written, in config files, the admin API and ToString: its count
// and its period. A bucket's period is a rate ("refill: 100/1m", LimitSpec::Bucket); every other
// algorithm's a duration ("window: 1m", "hold: 30s"), its spec LimitSpec::Window's.
struct LimitFields {
  std::string_view count;   // "capacity" or "limit"
  std::string_view period;  // "refill", "window" or "hold"
  bool period_is_rate = false;
};
LimitFields FieldsOf(Algorithm a);

// Bounds every Limit obeys. They keep every intermediate value of the exact arithmetic below
// 2^53, so the Redis scripts (Lua doubles) compute exactly what the C++ computes.
inline constexpr int64_t kMaxCapacity = int64_t{1} << 40;
inline constexpr int64_t kMaxRateCount = int64_t{1} << 40;
inline constexpr Micros kMinPeriod = std::chrono::milliseconds(1);
inline constexpr Micros kMaxPeriod = std::chrono::hours(24 * 365);
// The time a bucket takes to refill from empty to full (capacity / rate) must not exceed this.
inline constexpr Micros kMaxFillTime = std::chrono::hours(24 * 365 * 100);
// sliding_window_log keeps one entry per admitted request, so its limit is capped.
inline constexpr int64_t kMaxLogLimit = 10'000;
// A concurrency limit keeps one entry per slot held, so its limit is capped too; a slot is held
// at most a day.
inline constexpr int64_t kMaxConcurrencyLimit = 10'000;
inline constexpr Micros kMaxHold = std::chrono::hours(24);

// Dimensions: what a limit counts of a request. `requests` by default (one a request, or the
// request's `cost`); otherwise a name the request's costs give units of (caudal/engine/engine.h:
// input_tokens, output_tokens, usd_micros...), or the sum of several. A name is 1..32 characters
// of [a-z0-9_], starting with a letter.
inline constexpr std::string_view kRequestsDimension = "requests";
inline constexpr size_t kMaxDimensionNameLength = 32;
inline constexpr size_t kMaxDimensionsPerLimit = 8;
// kInvalidArgument saying what a dimension's name is, unless `name` is one.
Status ValidateDimensionName(std::string_view name);

struct LimitSpec {
  Algorithm algorithm = Algorithm::kTokenBucket;
  // Bucket algorithms: the burst B. Window algorithms: the limit per window. Concurrency: the
  // slots.
  int64_t capacity = 0;
  // Bucket algorithms: refill rate r. Window algorithms: {limit, window}; count must equal
  // capacity (use Window() to build one). Concurrency: {limit, hold} (use Concurrency()).
  Rate rate{};
  // A fixed_window's calendar (calendar.h): it counts per calendar window, and its rate's period
  // is the calendar's nominal length (use CalendarWindow() to build one). None: windows are
  // multiples of the period since the epoch.
  std::optional<Calendar> calendar{};
  // The dimensions whose costs it counts, summed: 1..kMaxDimensionsPerLimit names, none twice.
  // Empty: `requests`. A concurrency limit counts requests (a slot each).
  std::vector<std::string> dimension{};

  // Also a concurrency limit's, with its hold for the window (= Concurrency()).
  static LimitSpec Window(Algorithm a, int64_t limit, Micros window) {
    return {.algorithm = a, .capacity = limit, .rate = {.count = limit, .period = window}};
  }
  static LimitSpec CalendarWindow(int64_t limit, const Calendar& calendar) {
    return {.algorithm = Algorithm::kFixedWindow,
            .capacity = limit,
            .rate = {.count = limit, .period = calendar.nominal()},
            .calendar = calendar};
  }
  static LimitSpec Bucket(Algorithm a, int64_t capacity, Rate refill) {
    return {.algorithm = a, .capacity = capacity, .rate = refill};
  }
  static LimitSpec Concurrency(int64_t limit, Micros hold) {
    return {.algorithm = Algorithm::kConcurrency,
            .capacity = limit,
            .rate = {.count = limit, .period = hold}};
  }
};

class Limit {
 public:
  // kInvalidArgument naming the offending field when the spec is out of bounds.
  static Result<Limit> Create(const LimitSpec& spec);

  Algorithm algorithm() const { return algorithm_; }
  int64_t capacity() const { return capacity_; }
  Rate rate() const { return rate_; }
  // Window algorithms: the window length W (a calendar's nominal length). Bucket algorithms: the
  // rate's period. Concurrency: the longest a slot is held.
  Micros window() const { return rate_.period; }
  // A fixed_window counting calendar windows: its calendar; none for every other limit.
  const std::optional<Calendar>& calendar() const { return calendar_; }
  // The dimensions it counts the sum of, in ascending order; empty for `requests` alone (the
  // default), which counts_requests() says.
  const std::vector<std::string>& dimension() const { return dimension_; }
  bool counts_requests() const { return dimension_.empty(); }
  // "requests", "input_tokens", "input_tokens+output_tokens".
  std::string DimensionText() const;
  // The rate reduced to lowest terms: refill_count() tokens every refill_period_us() µs.
  int64_t refill_count() const { return n_; }
  int64_t refill_period_us() const { return p_; }

  // "token_bucket capacity=100 refill=100/1m" / "fixed_window limit=100 window=1m" /
  // "fixed_window limit=100 window=1 month calendar=Europe/Madrid" /
  // "concurrency limit=5 hold=30s"; a dimension other than requests follows:
  // "token_bucket capacity=1000 refill=1000/1m dimension=input_tokens".
  std::string ToString() const;

  friend bool operator==(const Limit&, const Limit&) = default;

 private:
  Limit() = default;
  Algorithm algorithm_ = Algorithm::kTokenBucket;
  int64_t capacity_ = 0;
  Rate rate_{};
  std::optional<Calendar> calendar_{};
  std::vector<std::string> dimension_{};
  int64_t n_ = 0;
  int64_t p_ = 0;
};

// Decision: what one limit says about one request. Over-limit is a result, not an error.
enum class Verdict : uint8_t {
  kAllowed,
  kDenied,     // over the limit now; retry_after says when a request of this cost could pass
  kNeverFits,  // cost exceeds the limit's capacity: no wait will ever admit it
};

std::string_view VerdictName(Verdict v);

// What a reserve or a settle did with its reservation (EntryOp::kReserve, kSettle: store.h).
enum class Reservation : uint8_t {
  kNone,      // neither a reserve nor a settle, or a reserve its request refused elsewhere
  kOpened,    // a reserve admitted and recorded it
  kFull,      // a reserve refused: the key already holds its most open reservations
  kSettled,   // a settle applied its cost
  kRepeated,  // a settle of the cost it was already settled with: the first settle's decision
  kConflict,  // a settle of another cost than the first one's: nothing changed
  kUnknown,   // a settle of no live reservation (never made, or expired): nothing changed
};

struct Decision {
  Verdict verdict = Verdict::kAllowed;
  int64_t limit = 0;      // the capacity (burst) or the per-window limit
  int64_t remaining = 0;  // whole units left after this decision
  // Units counted beyond `limit` (remaining is 0 then): only a fixed window that charges
  // overdrew (EntryOp::kCharge) has any. So limit - remaining + overdrawn is what the limit
  // counts as used, exactly, which envoyproxy/ratelimit's hit statistics need.
  int64_t overdrawn = 0;
  Micros reset_after{0};  // until the state is fresh again (full bucket, empty window)
  Micros retry_after{0};  // 0 unless kDenied: until a request of this cost could pass
  // Units taken beyond the cost as a lease (EntryRef::lease); `remaining` and `reset_after` are
  // after them. 0 unless the entry asked for a lease and the request was allowed.
  int64_t leased = 0;
  // leased > 0: the store's time of the grant (µs since the epoch, on the store's clock), which
  // giving the units back names (LeaseGrant).
  Micros leased_at{0};
  // A release (EntryOp::kRelease): the hold was live and is now freed.
  bool released = false;
  // A reserve or a settle: what it did with its reservation.
  Reservation reservation = Reservation::kNone;
  // A settle that settled (or repeats one): its cost above the estimate, of which it charged at
  // most `limit` (store.h).
  int64_t overrun = 0;
  // A consume of a capacity shared among identities (ConsumeEntry::share_of): the identity's
  // share at this instance, units per rate period of the limit, as last allotted; -1 otherwise.
  int64_t share = -1;

  bool allowed() const { return verdict == Verdict::kAllowed; }
  friend bool operator==(const Decision&, const Decision&) = default;
};

}  // namespace caudal
