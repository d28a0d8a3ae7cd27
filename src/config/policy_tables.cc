// policies[], policies[].ip_prefix and policies[].limits[]: the rows of a policy.
#include <algorithm>
#include <charconv>

#include "caudal/algorithms/limit.h"
#include "caudal/common/rate.h"
#include "config/config_tables.h"
#include "config/lease_rows.h"

namespace caudal::config_internal {
namespace {

constexpr uint8_t kBucket = 1;  // token_bucket, gcra: capacity and refill
constexpr uint8_t kWindow = 2;  // the window algorithms: limit and window

// A limit as written: the algorithm, then capacity and refill, or limit and window.
struct LimitFields {
  Algorithm algorithm = Algorithm::kTokenBucket;
  int64_t count = 0;  // capacity or limit
  Rate refill;
  Micros window{0};
};

Result<Rate> ReadRate(std::string_view text) {
  auto rate = ParseRate(text);
  if (rate.ok()) return rate;
  return Status::InvalidArgument(
      Cat("expected \"<count>/<duration>\" such as \"100/1m\": ", rate.status().message()));
}

Result<Limit> ToLimit(const LimitFields& f) {
  return Limit::Create(IsWindowAlgorithm(f.algorithm)
                           ? LimitSpec::Window(f.algorithm, f.count, f.window)
                           : LimitSpec::Bucket(f.algorithm, f.count, f.refill));
}

// "token_bucket, gcra" / "fixed_window, ...": the algorithms of one variant, from the table.
std::string AlgorithmsOf(bool window) {
  std::string names;
  for (Algorithm a : kAllAlgorithms) {
    if (IsWindowAlgorithm(a) == window) names += Cat(names.empty() ? "" : ", ", AlgorithmName(a));
  }
  return names;
}

const Table<LimitFields>& LimitTable() {
  using R = Rows<LimitFields>;
  static const Table<LimitFields> table(
      {
          {.name = "algorithm",
           .value =
               R::Choice(&LimitFields::algorithm, ParseAlgorithm, AlgorithmName, kAllAlgorithms),
           .doc = "how the limit counts (algorithms.md); it chooses the fields below",
           .need = Need::kRequired},
          {.name = "capacity",
           .value = R::Integer(&LimitFields::count, 1, kMaxCapacity),
           .doc = "the burst: how many requests a full bucket admits at once",
           .need = Need::kRequired,
           .variants = kBucket},
          {.name = "refill",
           .value = R::Custom("rate `<count>/<duration>` (`100/1m`)",
                              [](const YamlReader& r, const YAML::Node& n, const std::string& path,
                                 LimitFields& out) -> Status {
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
           .value = R::Integer(&LimitFields::count, 1, kMaxCapacity),
           .doc = "requests admitted per window",
           .need = Need::kRequired,
           .variants = kWindow},
          {.name = "window",
           .value = R::Duration(&LimitFields::window),
           .doc = "the window's length",
           .need = Need::kRequired,
           .variants = kWindow},
      },
      {.doc = "A policy's limits, all of which must pass.",
       .selector = "algorithm",
       .shape_error = "expected a map with an algorithm: {algorithm: token_bucket, capacity: "
                      "100, refill: 100/1m} or {algorithm: fixed_window, limit: 100, window: 1m}",
       .variant =
           [](const LimitFields& f) { return IsWindowAlgorithm(f.algorithm) ? kWindow : kBucket; },
       .variant_names = {AlgorithmsOf(false), AlgorithmsOf(true)}});
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
      {.name = "lease",
       .value = LeaseValue<PolicySpec>(&PolicySpec::lease),
       .doc = "this policy's leases: off, on, or its own terms",
       .default_note = "store.lease"},
  });
  return table;
}

YAML::Node NodeForField(const YAML::Node& policy, const std::string& field) {
  const size_t bracket = field.find('[');
  const size_t dot = field.find('.');
  const std::string head = field.substr(0, std::min(bracket, dot));
  YAML::Node n = policy[head];
  if (!n) return policy;
  if (bracket != std::string::npos) {
    size_t i = 0;
    std::from_chars(field.data() + bracket + 1, field.data() + field.size(), i);
    if (n.IsSequence() && i < n.size()) return n[i];
  } else if (dot != std::string::npos) {
    YAML::Node sub = n[field.substr(dot + 1)];
    if (sub) return sub;
  }
  return n;
}

}  // namespace caudal::config_internal
