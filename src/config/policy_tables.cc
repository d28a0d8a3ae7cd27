// policies[], policies[].ip_prefix and policies[].limits[]: the rows of a policy.
#include <algorithm>
#include <charconv>
#include <optional>
#include <string>

#include "caudal/algorithms/calendar.h"
#include "caudal/algorithms/limit.h"
#include "caudal/common/clock.h"
#include "config/calendar_rows.h"
#include "config/config_tables.h"
#include "config/lease_rows.h"

namespace caudal::config_internal {
namespace {

constexpr uint8_t kBucket = 1;       // token_bucket, gcra: capacity and refill
constexpr uint8_t kWindow = 2;       // the window algorithms: limit and window
constexpr uint8_t kConcurrency = 4;  // concurrency: limit and hold

// What a policy's limit may be: every rate algorithm, and concurrency.
const std::vector<Algorithm>& PolicyAlgorithms() {
  static const std::vector<Algorithm> all = [] {
    std::vector<Algorithm> v(kAllAlgorithms.begin(), kAllAlgorithms.end());
    v.push_back(Algorithm::kConcurrency);
    return v;
  }();
  return all;
}

// A limit as written: the algorithm, then capacity and refill, or limit and window or hold
// (FieldsOf).
struct WrittenLimit {
  Algorithm algorithm = Algorithm::kTokenBucket;
  int64_t count = 0;  // capacity or limit
  Rate refill;
  Micros period{0};                             // window or hold
  std::optional<CalendarUnit> calendar_window;  // `window: 1 month` and the like
  std::optional<WrittenCalendar> calendar;
  std::vector<std::string> dimension;  // empty: requests
};

Result<Rate> ReadRate(std::string_view text) {
  auto rate = ParseRate(text);
  if (rate.ok()) return rate;
  return Status::InvalidArgument(
      Cat("expected \"<count>/<duration>\" such as \"100/1m\": ", rate.status().message()));
}

Result<Limit> ToLimit(const WrittenLimit& f) {
  if (f.calendar && !f.calendar_window) {
    return Status::InvalidArgument(
        "calendar: a calendar counts calendar windows: write window: 1 day, 1 week, 1 month or "
        "1 year");
  }
  if (f.calendar_window && f.algorithm != Algorithm::kFixedWindow) {
    return Status::InvalidArgument(Cat("window: only fixed_window counts calendar windows (1 ",
                                       CalendarUnitName(*f.calendar_window), "), not ",
                                       AlgorithmName(f.algorithm)));
  }
  if (f.calendar_window) {  // without `calendar`: in UTC
    auto calendar =
        Calendar::Create(*f.calendar_window, f.calendar ? f.calendar->time_zone : "UTC");
    if (!calendar.ok()) return calendar.status();
    LimitSpec spec = LimitSpec::CalendarWindow(f.count, *calendar);
    spec.dimension = f.dimension;
    return Limit::Create(spec);
  }
  LimitSpec spec = FieldsOf(f.algorithm).period_is_rate
                       ? LimitSpec::Bucket(f.algorithm, f.count, f.refill)
                       : LimitSpec::Window(f.algorithm, f.count, f.period);
  spec.dimension = f.dimension;
  return Limit::Create(spec);
}

// dimension: a name, or a list of names whose costs the limit counts the sum of.
Status ReadDimension(const YamlReader& r, const YAML::Node& n, const std::string& path,
                     WrittenLimit& out) {
  out.dimension.clear();
  if (n.IsSequence()) {
    if (n.size() == 0 || n.size() > kMaxDimensionsPerLimit) {
      return r.Error(n, path,
                     Cat("expected 1 to ", kMaxDimensionsPerLimit, " dimension names to sum"));
    }
    for (size_t i = 0; i < n.size(); ++i) {
      auto name = r.String(n[i], Cat(path, '[', i, ']'));
      if (!name.ok()) return name.status();
      out.dimension.push_back(std::move(*name));
    }
  } else {
    auto name = r.String(n, path);
    if (!name.ok()) return name.status();
    out.dimension.push_back(std::move(*name));
  }
  for (size_t i = 0; i < out.dimension.size(); ++i) {
    if (Status s = ValidateDimensionName(out.dimension[i]); !s.ok()) {
      return r.Error(n.IsSequence() ? n[i] : n, path, s.message());
    }
    for (size_t j = 0; j < i; ++j) {
      if (out.dimension[j] == out.dimension[i]) {
        return r.Error(n, path, Cat(Quoted(out.dimension[i]), " is named twice"));
      }
    }
  }
  return Status::Ok();
}

// "token_bucket, gcra" / "fixed_window, ...": the algorithms of one variant, from the table.
std::string AlgorithmsOf(bool window) {
  std::string names;
  for (Algorithm a : kAllAlgorithms) {
    if (IsWindowAlgorithm(a) == window) names += Cat(names.empty() ? "" : ", ", AlgorithmName(a));
  }
  return names;
}

// window: a duration, or a calendar window ("1 month").
Status ReadWindow(const YamlReader& r, const YAML::Node& n, const std::string& path,
                  WrittenLimit& out) {
  auto text = r.String(n, path);
  if (!text.ok()) return text.status();
  if (auto unit = ParseCalendarWindow(*text); unit.ok()) {
    out.calendar_window = *unit;
    return Status::Ok();
  }
  auto d = ParseDuration(*text);
  if (!d.ok()) {
    return r.Error(n, path,
                   Cat(d.status().message(),
                       "; or a calendar window: 1 day, 1 week, 1 month, "
                       "1 year"));
  }
  out.period = *d;
  return Status::Ok();
}

const Table<WrittenLimit>& LimitTable() {
  using R = Rows<WrittenLimit>;
  static const Table<WrittenLimit> table(
      {
          {.name = "algorithm",
           .value = R::Choice(&WrittenLimit::algorithm, ParseAlgorithm, AlgorithmName,
                              std::span<const Algorithm>(PolicyAlgorithms())),
           .doc = "how the limit counts (algorithms.md); it chooses the fields below",
           .need = Need::kRequired},
          {.name = "capacity",
           .value = R::Integer(&WrittenLimit::count, 1, kMaxCapacity),
           .doc = "the burst: how many requests a full bucket admits at once",
           .need = Need::kRequired,
           .variants = kBucket},
          {.name = "refill",
           .value = R::Custom("rate `<count>/<duration>` (`100/1m`)",
                              [](const YamlReader& r, const YAML::Node& n, const std::string& path,
                                 WrittenLimit& out) -> Status {
                                auto text = r.String(n, path);
                                if (!text.ok()) return text.status();
                                auto rate = ReadRate(*text);
                                if (!rate.ok()) return r.Error(n, path, rate.status().message());
                                out.refill = *rate;
                                return Status::Ok();
                              }),
           .doc = "how fast the bucket refills",
           .need = Need::kRequired,
           .variants = kBucket},
          {.name = "limit",
           .value = R::Integer(&WrittenLimit::count, 1, kMaxCapacity),
           .doc = "requests admitted per window; for concurrency, requests in flight at once "
                  "(at most 10,000)",
           .need = Need::kRequired,
           .variants = kWindow | kConcurrency},
          {.name = "window",
           .value =
               R::Custom("duration (`1m`), or `1 day`, `1 week`, `1 month`, `1 year`", ReadWindow),
           .doc = "the window's length, windows aligned to its multiples since the epoch; or a "
                  "calendar window (fixed_window only), in `calendar`'s time zone, UTC without one",
           .need = Need::kRequired,
           .variants = kWindow},
          {.name = "calendar",
           .value = R::Map(&WrittenLimit::calendar, CalendarTable()),
           .doc = "fixed_window: the time zone of a calendar `window`",
           .variants = kWindow},
          {.name = "dimension",
           .value =
               R::Custom("name, or list of names (`[input_tokens, output_tokens]`)", ReadDimension),
           .doc = "what it counts of a request: the costs the request gives in this dimension "
                  "(`costs`), or their sum over a list; a dimension a request does not name "
                  "costs it 0",
           .default_note = "`requests`",
           .variants = kBucket | kWindow},
          {.name = "hold",
           .value = R::Duration(&WrittenLimit::period, std::chrono::milliseconds(1), kMaxHold),
           .doc = "the longest a slot is held: one not released by then frees itself",
           .need = Need::kRequired,
           .variants = kConcurrency},
      },
      {.doc = "A policy's limits, all of which must pass.",
       .selector = "algorithm",
       .shape_error = "expected a map with an algorithm: {algorithm: token_bucket, capacity: "
                      "100, refill: 100/1m}, {algorithm: fixed_window, limit: 100, window: 1m} "
                      "or {algorithm: concurrency, limit: 10, hold: 30s}",
       .variant =
           [](const WrittenLimit& f) {
             return IsConcurrency(f.algorithm)       ? kConcurrency
                    : IsWindowAlgorithm(f.algorithm) ? kWindow
                                                     : kBucket;
           },
       .variant_names = {AlgorithmsOf(false), AlgorithmsOf(true), "concurrency"}});
  return table;
}

// overrides[].match: descriptor names to the values a request must hold, checked by
// ValidatePolicy (which the document's check runs, naming each value's node).
Status ReadMatch(const YamlReader& r, const YAML::Node& n, const std::string& path,
                 OverrideSpec& out) {
  if (!n.IsMap() || n.size() == 0) {
    return r.Error(n, path, "expected a map of descriptor names to values, such as {plan: pro}");
  }
  for (const auto& kv : n) {
    const std::string name = kv.first.IsScalar() ? kv.first.Scalar() : std::string();
    auto value = r.String(kv.second, Cat(path, '.', name));
    if (!value.ok()) return value.status();
    out.match.push_back({name, std::move(*value)});
  }
  return Status::Ok();
}

const Table<OverrideSpec>& OverrideTable() {
  using R = Rows<OverrideSpec>;
  static const Table<OverrideSpec> table(
      {
          {.name = "match",
           .value = R::Custom("map of descriptor name to value", ReadMatch),
           .doc = "the descriptor values a request must all hold: the identity's, or any other "
                  "(`{plan: pro}`); an `ip` may be a CIDR block",
           .need = Need::kRequired},
          {.name = "limits",
           .value = R::List(&OverrideSpec::limits, kMaxLimitsPerPolicy,
                            MapItem<Limit>(LimitTable(), ToLimit)),
           .doc = "the limits such requests get instead of the policy's, all of which must pass "
                  "(refused with `share`)",
           .default_note = "required without `share`"},
          {.name = "weight",
           .value = R::Integer(&OverrideSpec::weight, 1, kMaxShareWeight),
           .doc = "with `share`: the weight of each identity such requests hold in the division "
                  "of the policy's limits (refused without `share`); an identity no tier or "
                  "runtime override gives one weighs 1",
           .default_note = "required with `share`"},
      },
      {.doc = "A policy's tiers: the first override whose `match` a request meets gives its "
              "limits; a runtime override of the identity (http-api.md, Admin API) comes "
              "first."});
  return table;
}

constexpr ExpiryOutcome kExpiryOutcomes[] = {ExpiryOutcome::kKeep, ExpiryOutcome::kGiveBack};

std::string_view ExpiryOutcomeName(ExpiryOutcome o) {
  return o == ExpiryOutcome::kKeep ? "keep" : "give_back";
}

Result<ExpiryOutcome> ParseExpiryOutcome(std::string_view text) {
  if (text == "keep") return ExpiryOutcome::kKeep;
  if (text == "give_back") return ExpiryOutcome::kGiveBack;
  return Status::InvalidArgument(Cat("expected keep or give_back (got ", Quoted(text), ')'));
}

const Table<ReservationTerms>& ReservationTable() {
  using R = Rows<ReservationTerms>;
  static const Table<ReservationTerms> table(
      {
          {.name = "on_expiry",
           .value = R::Choice(&ReservationTerms::on_expiry, ParseExpiryOutcome, ExpiryOutcomeName,
                              kExpiryOutcomes),
           .doc = "what a reservation not settled by its ttl does: keep its estimate consumed, "
                  "or give it back (what still counts of it)"},
          {.name = "max_open",
           .value = R::Integer(&ReservationTerms::max_open, 1, kMaxOpenReservations),
           .doc = "open reservations one identity holds at most; a reserve past them is "
                  "refused (429)"},
      },
      {.doc = "A policy's reservations (POST /v1/reserve, POST /v1/settle; http-api.md)."});
  return table;
}

constexpr Fairness kFairnesses[] = {Fairness::kMaxMin, Fairness::kProportional};

const Table<ShareTerms>& ShareTable() {
  using R = Rows<ShareTerms>;
  static const Table<ShareTerms> table(
      {
          {.name = "fairness",
           .value = R::Choice(&ShareTerms::fairness, ParseFairness, FairnessName, kFairnesses),
           .doc = "how the capacity is divided: max_min (no identity gets more than it asks, the "
                  "rest alike by weight) or proportional (by weight times demand)"},
          // At least a few round trips, so that an identity between two requests stays active;
          // at most an hour, so that one gone quiet gives its part back the same hour.
          {.name = "window",
           .value = R::Duration(&ShareTerms::window, kMinShareWindow, kMaxShareWindow),
           .doc = "how long a share lives: each instance renews an active identity's every half "
                  "window, and an identity silent for 3/4 of it wants nothing until it asks again"},
      },
      {.doc = "A policy's limits as one capacity divided among its active identities."});
  return table;
}

}  // namespace

const Table<IpPrefix>& IpPrefixTable() {
  using R = Rows<IpPrefix>;
  static const Table<IpPrefix> table({
      {.name = "v4",
       .value = R::Integer(&IpPrefix::v4, 0, 32),
       .doc = "leading bits of an IPv4 address"},
      {.name = "v6",
       .value = R::Integer(&IpPrefix::v6, 0, 128),
       .doc = "leading bits of an IPv6 address"},
  });
  return table;
}

const Table<PolicySpec>& PolicyTable() {
  using R = Rows<PolicySpec>;
  static const Table<PolicySpec> table({
      {.name = "name",
       .value = R::Text(&PolicySpec::name, "name: `[A-Za-z0-9_.-]`, 1 to 64"),
       .doc = "the policy's name, unique; it names the limits' state in the store",
       .need = Need::kRequired},
      {.name = "identity",
       .value = R::List(&PolicySpec::identity, kMaxIdentityFields, TextItem("descriptor names")),
       .doc = "the descriptors whose values form the key: api_key, tenant, account, ip, any "
              "name",
       .need = Need::kRequired},
      {.name = "ip_prefix",
       .value = R::Map(&PolicySpec::ip_prefix, IpPrefixTable()),
       .doc = "an `ip` identity keyed by its network (IPv6 clients often own a /64)"},
      {.name = "limits",
       .value =
           R::List(&PolicySpec::limits, kMaxLimitsPerPolicy, MapItem<Limit>(LimitTable(), ToLimit)),
       .doc = "the limits, all of which must pass",
       .need = Need::kRequired},
      {.name = "cost",
       .value = R::Integer(&PolicySpec::cost, 1, kMaxCapacity),
       .doc = "what a request that names no cost costs; at most the smallest capacity"},
      {.name = "shadow",
       .value = R::Switch(&PolicySpec::enforcement, Enforcement::kShadow, Enforcement::kEnforce),
       .doc = "decide, count and log, but always allow (a dark launch)"},
      {.name = "count_rejected",
       .value = R::Switch(&PolicySpec::count_rejected, RejectedCounting::kCounted,
                          RejectedCounting::kNotCounted),
       .doc = "charge this policy even when the request is refused (when it has room)"},
      {.name = "on_failure",
       .value =
           R::Choice(&PolicySpec::on_failure, ParseFailureMode, FailureModeName, kFailureModes),
       .doc = "what this policy does when the store cannot answer",
       .default_note = "store.on_failure"},
      {.name = "overrides",
       .value = R::List(&PolicySpec::overrides, kMaxOverridesPerPolicy, MapItem(OverrideTable())),
       .doc = "tiers: other limits for requests holding some descriptor values; first match "
              "wins"},
      {.name = "lease",
       .value = LeaseValue<PolicySpec>(&PolicySpec::lease),
       .doc = "this policy's leases: off, on, or its own terms",
       .default_note = "store.lease"},
      {.name = "reservations",
       .value = R::Map(&PolicySpec::reservations, ReservationTable()),
       .doc = "how this policy's reservations (reserve, then settle) expire and how many one "
              "identity holds"},
      {.name = "share",
       .value = R::Map(&PolicySpec::share, ShareTable()),
       .doc = "the limits are one capacity shared by all identities, each active one getting "
              "its part (weighted by its tier's or runtime override's `weight`); token_bucket, "
              "gcra and fixed_window only",
       .default_note = "none: each identity has the limits to itself"},
  });
  return table;
}

YAML::Node NodeForField(const YAML::Node& policy, const std::string& field) {
  // Walks "overrides[0].match.plan" one step at a time: a name, then an index or a name. Nodes
  // are rebound with reset(): assigning one yaml-cpp node to another writes into the first.
  YAML::Node at;
  at.reset(policy);
  size_t pos = 0;
  while (pos < field.size()) {
    const YAML::Node& here = at;  // const: a missing key is not added
    YAML::Node next;
    if (field[pos] == '[') {
      size_t i = 0;
      const auto [end, ec] =
          std::from_chars(field.data() + pos + 1, field.data() + field.size(), i);
      if (ec != std::errc() || !here.IsSequence() || i >= here.size()) break;
      next.reset(here[i]);
      pos = static_cast<size_t>(end - field.data()) + 1;
    } else {
      if (field[pos] == '.') ++pos;
      const size_t stop = std::min(field.find('.', pos), field.find('[', pos));
      if (!here.IsMap()) break;
      const YAML::Node child = here[field.substr(pos, stop - pos)];
      if (!child) break;  // a missing field: its map (reset() throws on an invalid node)
      next.reset(child);
      pos = stop;
    }
    if (!next) break;
    at.reset(next);
  }
  return at;
}

}  // namespace caudal::config_internal
