#include "config/rlqs_rows.h"

#include <algorithm>
#include <string>

#include "algorithms/algorithm.h"
#include "caudal/algorithms/limit.h"
#include "common/cat.h"
#include "config/field_values.h"

namespace caudal::config_internal {
namespace {

constexpr RlqsNoMatch kNoMatches[] = {RlqsNoMatch::kDenyAll, RlqsNoMatch::kAllowAll,
                                      RlqsNoMatch::kNone};

// A map of names to text, in the order written: `match` (BucketId entries) and `identity`
// (descriptor <- BucketId key). Keys and values are 1..kMaxRlqsName bytes.
constexpr size_t kMaxRlqsName = 128;
Status ReadPairs(const YamlReader& r, const YAML::Node& n, const std::string& path,
                 std::vector<std::pair<std::string, std::string>>& out, bool allow_empty,
                 std::string_view example) {
  if (!n.IsMap() || (!allow_empty && n.size() == 0)) {
    return r.Error(n, path, Cat("expected a map such as ", example));
  }
  if (n.size() > kMaxRlqsMatchEntries) {
    return r.Error(n, path, Cat("at most ", kMaxRlqsMatchEntries, " entries (got ", n.size(), ')'));
  }
  for (const auto& kv : n) {
    const std::string name = kv.first.IsScalar() ? kv.first.Scalar() : std::string();
    if (name.empty() || name.size() > kMaxRlqsName) {
      return r.Error(kv.first, path, Cat("expected names of 1 to ", kMaxRlqsName, " bytes"));
    }
    auto value = r.String(kv.second, Cat(path, '.', name));
    if (!value.ok()) return value.status();
    if (value->empty() || value->size() > kMaxRlqsName) {
      return r.Error(kv.second, Cat(path, '.', name),
                     Cat("expected 1 to ", kMaxRlqsName, " bytes"));
    }
    out.emplace_back(name, std::move(*value));
  }
  return Status::Ok();
}

const Table<RlqsBucketRule>& BucketTable() {
  using R = Rows<RlqsBucketRule>;
  static const Table<RlqsBucketRule> table(
      {
          {.name = "match",
           .value = R::Custom("map of BucketId key to value",
                              [](const YamlReader& r, const YAML::Node& n, const std::string& path,
                                 RlqsBucketRule& out) {
                                return ReadPairs(r, n, path, out.match, true, "{name: per-tenant}");
                              }),
           .doc = "the entries a BucketId must all hold; `{}` matches any",
           .need = Need::kRequired},
          {.name = "policy",
           .value = R::Text(&RlqsBucketRule::policy),
           .doc = "the policy whose limits the matched buckets' Envoys share",
           .need = Need::kRequired},
          {.name = "identity",
           .value = R::Custom("map of descriptor name to BucketId key",
                              [](const YamlReader& r, const YAML::Node& n, const std::string& path,
                                 RlqsBucketRule& out) {
                                return ReadPairs(r, n, path, out.identity, false,
                                                 "{tenant: tenant}");
                              }),
           .doc = "each of the policy's identity descriptors, taken from a BucketId key",
           .need = Need::kRequired},
      },
      {.doc = "Maps a bucket to a policy and an identity: the first rule whose `match` the "
              "BucketId holds."});
  return table;
}

const Table<RlqsDomainConfig>& DomainTable() {
  using R = Rows<RlqsDomainConfig>;
  static const Table<RlqsDomainConfig> table(
      {
          {.name = "domain",
           .value = R::Text(&RlqsDomainConfig::domain),
           .doc = "the domain Envoy's filter reports (its `domain`)",
           .need = Need::kRequired},
          {.name = "buckets",
           .value =
               R::List(&RlqsDomainConfig::buckets, kMaxRlqsBucketRules, MapItem(BucketTable())),
           .doc = "how the domain's buckets map to policies, first match first",
           .need = Need::kRequired},
          {.name = "no_match",
           .value = R::Choice(&RlqsDomainConfig::no_match, ParseRlqsNoMatch, RlqsNoMatchName,
                              kNoMatches),
           .doc = "what a bucket no rule matches is assigned (none: no assignment, Envoy's "
                  "no_assignment_behavior applies)"},
      },
      {.doc = "One domain of Envoy's rate limit quota service."});
  return table;
}

std::string Listed(const std::vector<std::string>& names) {
  std::string out;
  for (const std::string& n : names) out += Cat(out.empty() ? "" : ", ", n);
  return out;
}

}  // namespace

const Table<RlqsConfig>& RlqsTable() {
  using R = Rows<RlqsConfig>;
  static const Table<RlqsConfig> table(
      {
          {.name = "domains",
           .value = R::List(&RlqsConfig::domains, kMaxRlqsDomains, MapItem(DomainTable())),
           .doc = "the domains served; a report of another domain ends its stream",
           .need = Need::kRequired},
          {.name = "assignment_ttl",
           .value = R::Duration(&RlqsConfig::assignment_ttl, std::chrono::seconds(2),
                                std::chrono::hours(1)),
           .doc = "how long an assignment lives unless renewed (whole seconds), and the window "
                  "its share accrues over; Envoy reports every 5s, so keep it at 10s or more"},
          {.name = "abandon_after",
           .value = R::Duration(&RlqsConfig::abandon_after, std::chrono::seconds(1),
                                std::chrono::hours(24)),
           .doc = "a bucket whose reports count no request for this long is abandoned"},
          {.name = "max_streams",
           .value = R::Integer(&RlqsConfig::max_streams, 1, 1'000'000),
           .doc = "streams open at once; more are refused with RESOURCE_EXHAUSTED"},
          {.name = "max_buckets",
           .value = R::Integer(&RlqsConfig::max_buckets, 1, 1'000'000),
           .doc = "buckets per stream; a report beyond them ends the stream with "
                  "RESOURCE_EXHAUSTED"},
      },
      {.doc = "Envoy's rate limit quota service (RLQS), on server.grpc (envoy.md).",
       .check = [](const YamlReader& r, const YAML::Node& n, const std::string& path,
                   RlqsConfig& out) -> Status {
         for (size_t i = 0; i < out.domains.size(); ++i) {
           const RlqsDomainConfig& d = out.domains[i];
           const std::string field = Cat(path, ".domains[", i, "].domain");
           if (d.domain.empty() || d.domain.size() > kMaxRlqsName) {
             return r.Error(n["domains"][i]["domain"], field,
                            Cat("expected 1 to ", kMaxRlqsName, " bytes"));
           }
           for (size_t j = 0; j < i; ++j) {
             if (out.domains[j].domain == d.domain) {
               return r.Error(n["domains"][i]["domain"], field,
                              Cat(Quoted(d.domain), " is already domains[", j, "]'s"));
             }
           }
         }
         return Status::Ok();
       }});
  return table;
}

Status CheckRlqs(const YamlReader& r, const YAML::Node& node, const Config& config) {
  for (size_t i = 0; i < config.rlqs.domains.size(); ++i) {
    const RlqsDomainConfig& d = config.rlqs.domains[i];
    for (size_t b = 0; b < d.buckets.size(); ++b) {
      const RlqsBucketRule& rule = d.buckets[b];
      const YAML::Node at = node["domains"][i]["buckets"][b];
      const std::string field = Cat("rlqs.domains[", i, "].buckets[", b, ']');
      const PolicySet::Policy* policy = nullptr;
      if (config.policies != nullptr) {
        for (const PolicySet::Policy& p : config.policies->policies()) {
          if (p.spec.name == rule.policy) policy = &p;
        }
      }
      if (policy == nullptr) {
        return r.Error(at["policy"], field + ".policy",
                       Cat(Quoted(rule.policy), " is no policy of this config"));
      }
      if (policy->shadow()) {
        return r.Error(at["policy"], field + ".policy",
                       Cat("policy ", Quoted(rule.policy),
                           " is in shadow mode, which decides nothing Envoy could enforce"));
      }
      auto limits_ok = [&](const std::vector<Limit>& limits, const std::string& where) -> Status {
        for (size_t k = 0; k < limits.size(); ++k) {
          if (!SupportsLease(limits[k].algorithm())) {
            return r.Error(at["policy"], field + ".policy",
                           Cat("policy ", Quoted(rule.policy), ' ', where, '[', k, "] is a ",
                               AlgorithmName(limits[k].algorithm()),
                               " limit, which cannot be divided among Envoys (token_bucket, "
                               "gcra and fixed_window can)"));
          }
          if (!limits[k].counts_requests()) {
            return r.Error(at["policy"], field + ".policy",
                           Cat("policy ", Quoted(rule.policy), ' ', where, '[', k, "] counts ",
                               limits[k].DimensionText(), ", and Envoy's quota counts requests"));
          }
        }
        return Status::Ok();
      };
      if (Status s = limits_ok(policy->spec.limits, "limits"); !s.ok()) return s;
      for (size_t t = 0; t < policy->tiers.size(); ++t) {
        if (Status s = limits_ok(policy->tiers[t].set.limits, Cat("overrides[", t, "].limits"));
            !s.ok()) {
          return s;
        }
      }
      // The identity maps each of the policy's descriptors once, and nothing else.
      const std::vector<std::string>& want = policy->spec.identity;
      for (const auto& [descriptor, key] : rule.identity) {
        if (std::find(want.begin(), want.end(), descriptor) == want.end()) {
          return r.Error(at["identity"], field + ".identity",
                         Cat(Quoted(descriptor), " is not an identity descriptor of policy ",
                             Quoted(rule.policy), " (", Listed(want), ')'));
        }
      }
      for (const std::string& descriptor : want) {
        const bool mapped = std::any_of(rule.identity.begin(), rule.identity.end(),
                                        [&](const auto& e) { return e.first == descriptor; });
        if (!mapped) {
          return r.Error(at["identity"], field + ".identity",
                         Cat("policy ", Quoted(rule.policy), "'s identity descriptor ",
                             Quoted(descriptor), " is not mapped from a BucketId key"));
        }
      }
    }
  }
  return Status::Ok();
}

}  // namespace caudal::config_internal
