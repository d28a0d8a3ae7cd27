#include "server/admin_api.h"

#include <time.h>

#include <boost/json.hpp>

#include "caudal/common/clock.h"
#include "common/caller_auth.h"
#include "common/cat.h"
#include "server/json_keys.h"
#include "server/query_string.h"

namespace caudal::admin_api {
namespace json = boost::json;
namespace {

using http_api::ApiError;
using http_api::Reply;

constexpr std::string_view kPrefix = "/v1/admin/policies/";

ApiError Bad(std::string code, std::string message) {
  return {.status = 400, .code = std::move(code), .message = std::move(message)};
}

// The query's parameters are an identity's fields: the parser's bound is theirs.
static_assert(http_api::kMaxQueryParams == kMaxDescriptors);

std::optional<ApiError> ReadInteger(const json::value& v, const std::string& field, int64_t& out) {
  if (!v.is_int64() || v.get_int64() < 1) {
    return Bad("invalid_limits",
               Cat(field, ": expected a positive integer (got ",
                   v.is_number() ? json::serialize(v) : http_api::JsonTypeName(v), ')'));
  }
  out = v.get_int64();
  return std::nullopt;
}

std::optional<ApiError> ReadText(const json::value& v, const std::string& field,
                                 std::string_view& out) {
  if (!v.is_string()) {
    return Bad("invalid_limits",
               Cat(field, ": expected a string (got ", http_api::JsonTypeName(v), ')'));
  }
  out = v.get_string();
  return std::nullopt;
}

// One limit, spelled as in the config file.
std::optional<ApiError> ReadLimit(const json::value& v, const std::string& at,
                                  std::vector<Limit>& out) {
  if (!v.is_object()) {
    return Bad("invalid_limits",
               Cat(at, ": expected an object (got ", http_api::JsonTypeName(v), ')'));
  }
  const json::object& o = v.get_object();
  const json::value* a = o.if_contains("algorithm");
  if (a == nullptr) return Bad("invalid_limits", Cat(at, ".algorithm: required"));
  std::string_view name;
  if (auto e = ReadText(*a, at + ".algorithm", name)) return e;
  auto algorithm = ParseAlgorithm(name);
  if (!algorithm.ok()) {
    return Bad("invalid_limits", Cat(at, ".algorithm: ", algorithm.status().message()));
  }
  const LimitFields fields = FieldsOf(*algorithm);
  const std::string_view count_field = fields.count;
  const std::string_view rate_field = fields.period;
  for (const auto& kv : o) {
    if (kv.key() != "algorithm" && kv.key() != count_field && kv.key() != rate_field &&
        kv.key() != "dimension") {
      return Bad("unknown_field",
                 Cat(at, '.', kv.key().substr(0, 64), ": unknown field (expected algorithm, ",
                     count_field, ", ", rate_field, " and dimension)"));
    }
  }
  // dimension: a name, or a list of names to sum, as in the config file.
  std::vector<std::string> dimension;
  if (const json::value* d = o.if_contains("dimension")) {
    const bool list = d->is_array();
    const json::array one{*d};
    const json::array& names = list ? d->get_array() : one;
    if (names.empty() || names.size() > kMaxDimensionsPerLimit) {
      return Bad("invalid_limits",
                 Cat(at, ".dimension: expected 1 to ", kMaxDimensionsPerLimit, " names"));
    }
    for (const json::value& n : names) {
      std::string_view text;
      if (auto e = ReadText(n, at + ".dimension", text)) return e;
      dimension.emplace_back(text);
    }
  }
  const json::value* c = o.if_contains(count_field);
  const json::value* r = o.if_contains(rate_field);
  if (c == nullptr || r == nullptr) {
    return Bad("invalid_limits",
               Cat(at, '.', c == nullptr ? count_field : rate_field, ": required"));
  }
  int64_t count = 0;
  if (auto e = ReadInteger(*c, Cat(at, '.', count_field), count)) return e;
  std::string_view text;
  if (auto e = ReadText(*r, Cat(at, '.', rate_field), text)) return e;
  LimitSpec spec;
  if (!fields.period_is_rate) {
    auto w = ParseDuration(text);
    if (!w.ok()) {
      return Bad("invalid_limits", Cat(at, '.', rate_field, ": ", w.status().message()));
    }
    spec = LimitSpec::Window(*algorithm, count, *w);
  } else {
    auto rate = ParseRate(text);
    if (!rate.ok()) return Bad("invalid_limits", Cat(at, ".refill: ", rate.status().message()));
    spec = LimitSpec::Bucket(*algorithm, count, *rate);
  }
  spec.dimension = std::move(dimension);
  auto limit = Limit::Create(spec);
  if (!limit.ok()) return Bad("invalid_limits", Cat(at, ": ", limit.status().message()));
  out.push_back(*limit);
  return std::nullopt;
}

json::value LimitJson(const Limit& l) {
  const LimitFields fields = FieldsOf(l.algorithm());
  json::object o{{"algorithm", AlgorithmName(l.algorithm())}};
  o[fields.count] = l.capacity();
  o[fields.period] = fields.period_is_rate ? FormatRate(l.rate()) : FormatDuration(l.window());
  if (l.calendar()) {  // as the config writes it: `window: 1 month, calendar: {time_zone: ...}`
    o[fields.period] = Cat("1 ", CalendarUnitName(l.calendar()->unit()));
    o["calendar"] = json::object{{"time_zone", l.calendar()->time_zone()}};
  }
  if (!l.counts_requests()) {  // as written: one name, or the list of a sum
    if (l.dimension().size() == 1) {
      o["dimension"] = l.dimension()[0];
    } else {
      json::array names;
      for (const std::string& n : l.dimension()) names.emplace_back(n);
      o["dimension"] = std::move(names);
    }
  }
  return o;
}

json::object IdentityJson(const std::vector<std::pair<std::string, std::string>>& identity) {
  json::object o;
  for (const auto& [name, value] : identity) o[name] = http_api::ValidUtf8(value);
  return o;
}

std::string Rfc3339(Micros t) {
  const time_t secs = static_cast<time_t>(t.count() / 1'000'000);
  struct tm tm {};
  gmtime_r(&secs, &tm);
  char buf[40];
  const size_t n = strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%S", &tm);
  return Cat(std::string_view(buf, n), '.', (t.count() / 1000) % 1000 / 100,
             (t.count() / 1000) % 100 / 10, (t.count() / 1000) % 10, 'Z');
}

int64_t Ms(Micros d) { return (d.count() + 999) / 1000; }  // rounded up: never earlier

json::object OverrideObject(const OverrideView& v) {
  json::array limits;
  for (const Limit& l : v.spec.limits) limits.push_back(LimitJson(l));
  json::object o{{"policy", v.spec.policy},
                 {"kind", OverrideKindName(v.spec.kind)},
                 {"identity", IdentityJson(v.spec.identity)},
                 {"limits", std::move(limits)},
                 {"weight", nullptr},
                 {"expires_at", nullptr},
                 {"expires_in_ms", nullptr},
                 {"set_by", http_api::ValidUtf8(v.spec.set_by)}};
  if (v.spec.weight) o["weight"] = *v.spec.weight;
  if (v.spec.expires_at) o["expires_at"] = Rfc3339(*v.spec.expires_at);
  if (v.expires_in) o["expires_in_ms"] = Ms(*v.expires_in);
  return o;
}

Reply JsonReply(int status, std::string body) {
  Reply r;
  r.status = status;
  r.content_type = "application/json";
  r.body = std::move(body);
  r.headers.Add("Cache-Control", "no-store");
  return r;
}

Reply FailureReply(const Status& s) { return http_api::ErrorReply(http_api::FromStatus(s)); }

// Runs one admin request on the Admin's thread.
Reply Run(Admin& admin, std::string_view method, bool state, const AdminTarget& target,
          ParsedOverride body, const std::string& who) {
  if (state) {
    auto s = method == "GET" ? admin.GetState(target) : admin.ResetState(target, who);
    return s.ok() ? JsonReply(200, StateJson(*s)) : FailureReply(s.status());
  }
  if (method == "GET") {
    if (!target.params.empty()) {
      return http_api::ErrorReply(
          Bad("unknown_parameter", Cat("parameter ", Quoted(target.params[0].first.substr(0, 100)),
                                       ": listing the overrides takes no parameter")));
    }
    auto list = admin.ListOverrides(target.policy);
    return list.ok()
               ? JsonReply(200, OverrideListJson(target.policy, admin.KindOf(target.policy), *list))
               : FailureReply(list.status());
  }
  if (method == "DELETE") {
    auto removed = admin.DeleteOverride(target, who);
    return removed.ok() ? JsonReply(200, OverrideJson(*removed)) : FailureReply(removed.status());
  }
  auto set = admin.SetOverride(target, std::move(body.limits), body.expires_in, who, body.weight);
  if (!set.ok()) return FailureReply(set.status());
  return JsonReply(set->second ? 201 : 200, OverrideJson(set->first));
}

}  // namespace

std::optional<Reply> RefuseAdmin(std::string_view token, std::string_view authorization,
                                 size_t authorization_count) {
  if (token.empty()) {
    return http_api::ErrorReply(
        {.status = 404, .code = "not_found", .message = "the admin API is off (no admin token)"});
  }
  if (authorization_count > 1) {
    return http_api::ErrorReply(
        Bad("ambiguous_identity", Cat("header Authorization: given ", authorization_count,
                                      " times (the admin's credentials must be given once)")));
  }
  const std::string_view given = BearerToken(authorization);
  if (!given.empty() && ConstantTimeEquals(given, token)) return std::nullopt;
  Reply r = http_api::ErrorReply(
      {.status = 401,
       .code = "unauthenticated",
       .message = given.empty() ? "credentials needed: Authorization: Bearer <admin token>"
                                : "the Authorization header does not hold the admin token"});
  r.headers.Add("WWW-Authenticate", given.empty()
                                        ? "Bearer realm=\"caudal-admin\""
                                        : "Bearer realm=\"caudal-admin\", error=\"invalid_token\"");
  return r;
}

ParsedPath ParseAdminTarget(std::string_view target) {
  ParsedPath out;
  std::string_view path = target.substr(0, target.find('?'));
  const auto not_found = [&] {
    out.error = ApiError{.status = 404,
                         .code = "not_found",
                         .message = "expected /v1/admin/policies/{policy}/overrides or .../state"};
    return out;
  };
  if (!path.starts_with(kPrefix)) return not_found();
  path.remove_prefix(kPrefix.size());
  const size_t slash = path.find('/');
  if (slash == std::string_view::npos || slash == 0) return not_found();
  const std::string_view tail = path.substr(slash + 1);
  if (tail != "overrides" && tail != "state") return not_found();
  out.path.state = tail == "state";
  auto policy = http_api::PercentDecode(path.substr(0, slash), http_api::Plus::kLiteral);
  if (!policy || http_api::IdentityValueProblem(*policy)) {
    out.error = Bad("invalid_parameter", "the path's policy: bad percent-encoding or bytes");
    return out;
  }
  out.path.policy = std::move(*policy);
  http_api::ParsedQuery query = http_api::ParseQuery(target);
  if (query.error) {
    out.error = std::move(query.error);
    return out;
  }
  for (http_api::QueryParam& p : query.params) {
    for (const std::string* s : {&p.name, &p.value}) {
      if (auto problem = http_api::IdentityValueProblem(*s)) {
        out.error = Bad(
            "invalid_parameter",
            Cat("parameter ", Quoted(http_api::ValidUtf8(p.name.substr(0, 100))), ": ", *problem));
        return out;
      }
    }
    if (p.value.empty()) {
      out.error = Bad("invalid_parameter",
                      Cat("parameter ", Quoted(p.name.substr(0, 100)), ": expected a value"));
      return out;
    }
    out.path.params.emplace_back(std::move(p.name), std::move(p.value));
  }
  return out;
}

ParsedOverride ParseOverrideBody(std::string_view body) {
  ParsedOverride out;
  http_api::ParsedObject parsed = http_api::ParseObjectBody(body, 6);
  if (parsed.error) {
    out.error = std::move(parsed.error);
    return out;
  }
  const json::object& o = parsed.value.get_object();
  for (const auto& kv : o) {
    if (kv.key() != "limits" && kv.key() != "weight" && kv.key() != "expires_in") {
      out.error =
          Bad("unknown_field", Cat(Quoted(http_api::ValidUtf8(kv.key().substr(0, 64))),
                                   ": unknown field (expected limits, weight and expires_in)"));
      return out;
    }
  }
  // Whether the policy takes a weight (one with share) or limits is the Admin's to say.
  if (const json::value* w = o.if_contains("weight"); w != nullptr) {
    if (!w->is_int64() || w->get_int64() < 1 || w->get_int64() > kMaxShareWeight) {
      out.error = Bad("invalid_weight",
                      Cat("weight: expected an integer from 1 to ", kMaxShareWeight, " (got ",
                          w->is_number() ? json::serialize(*w) : http_api::JsonTypeName(*w), ')'));
      return out;
    }
    out.weight = w->get_int64();
  }
  const json::value* limits = o.if_contains("limits");
  const bool weight_alone = limits == nullptr && out.weight;  // a policy with share
  if (!weight_alone && (limits == nullptr || !limits->is_array() || limits->get_array().empty())) {
    out.error = Bad("missing_limits",
                    "limits: expected a non-empty array of limits (a policy with share: a weight)");
    return out;
  }
  const size_t count = limits == nullptr ? 0 : limits->get_array().size();
  if (count > kMaxLimitsPerPolicy) {
    out.error = Bad("invalid_limits", Cat("limits: at most ", kMaxLimitsPerPolicy, " limits"));
    return out;
  }
  for (size_t i = 0; i < count; ++i) {
    if (auto e = ReadLimit(limits->get_array()[i], Cat("limits[", i, ']'), out.limits)) {
      out.error = std::move(e);
      return out;
    }
  }
  if (const json::value* e = o.if_contains("expires_in"); e != nullptr && !e->is_null()) {
    auto d = e->is_string() ? ParseDuration(e->get_string())
                            : Result<Micros>(Status::InvalidArgument("expected a string"));
    if (!d.ok() || *d < std::chrono::seconds(1) || *d > std::chrono::hours(24 * 365)) {
      out.error = Bad("invalid_expires_in",
                      Cat("expires_in: expected a duration from 1s to 365d, such as \"1h\"",
                          d.ok() ? "" : Cat(" (", d.status().message(), ')')));
      return out;
    }
    out.expires_in = *d;
  }
  return out;
}

std::string OverrideJson(const OverrideView& v) { return json::serialize(OverrideObject(v)); }

std::string OverrideListJson(std::string_view policy, OverrideKind kind,
                             const std::vector<OverrideView>& list) {
  json::array items;
  for (const OverrideView& v : list) items.push_back(OverrideObject(v));
  return json::serialize(json::object{{"policy", policy},
                                      {"kind", OverrideKindName(kind)},
                                      {"count", list.size()},
                                      {"overrides", std::move(items)}});
}

std::string StateJson(const StateView& v) {
  json::array limits;
  for (const LimitState& l : v.limits) {
    json::object o{{"limit", LimitJson(l.limit)},
                   {"remaining", l.remaining},
                   {"reset_after_ms", Ms(l.reset_after)},
                   {"retry_after_ms", Ms(l.retry_after)}};
    if (l.shared) {
      // The capacity's state above; the identity's share at this instance (null: none held).
      o["share"] = l.share >= 0 ? json::value(l.share) : json::value(nullptr);
      o["share_held"] = l.share_held;
    }
    limits.push_back(std::move(o));
  }
  json::object out{{"policy", v.policy},
                   {"kind", OverrideKindName(v.kind)},
                   {"identity", IdentityJson(v.identity)},
                   {"limits_from", v.limits_from},
                   {"limits", std::move(limits)}};
  if (v.rlqs) {
    out["rlqs"] = json::object{{"buckets", v.rlqs->buckets},
                               {"assigned_per_second", v.rlqs->assigned_per_second},
                               {"allowed", v.rlqs->allowed},
                               {"denied", v.rlqs->denied}};
  }
  return json::serialize(out);
}

void Dispatch(Admin* admin, std::string_view token, Metrics& metrics, const routes::Request& r,
              routes::Responder& responder) {
  if (admin == nullptr) token = {};
  if (auto refused =
          RefuseAdmin(token, r.header("Authorization"), r.header_count("Authorization"))) {
    if (refused->status == 401) metrics.Add(MetricId::kAdminUnauthenticated);
    return responder.Reply(std::move(*refused));
  }
  ParsedPath parsed = ParseAdminTarget(r.target);
  if (parsed.error) return responder.Reply(http_api::ErrorReply(*parsed.error));
  const bool state = parsed.path.state;
  const std::string_view allow = state ? "GET, HEAD, DELETE" : "GET, HEAD, PUT, DELETE";
  // HEAD is a GET whose body the writer leaves out, as on every other GET path.
  const std::string method(r.method == "HEAD" ? std::string_view("GET") : r.method);
  const bool put = method == "PUT";
  if (!(method == "GET" || method == "DELETE" || (put && !state))) {
    Reply reply = http_api::ErrorReply(
        {.status = 405,
         .code = "method_not_allowed",
         .message = Cat("method ", r.method, " is not allowed here (use ", allow, ')')});
    reply.headers.Add("Allow", allow);
    return responder.Reply(std::move(reply));
  }
  ParsedOverride body;
  if (put) {
    if (r.body.size() > kMaxAdminBodyBytes) {
      return responder.Reply(
          http_api::ErrorReply({.status = 413,
                                .code = "body_too_large",
                                .message = Cat("body: at most ", kMaxAdminBodyBytes, " bytes")}));
    }
    body = ParseOverrideBody(r.body);
    if (body.error) return responder.Reply(http_api::ErrorReply(*body.error));
  }
  std::string who = r.identities.empty() ? r.peer.ToString() : r.identities.front();
  AdminTarget target{.policy = std::move(parsed.path.policy),
                     .params = std::move(parsed.path.params)};
  auto work = [admin, &responder, method, state, target = std::move(target), body = std::move(body),
               who = std::move(who)]() mutable {
    responder.Reply(Run(*admin, method, state, target, std::move(body), who));
  };
  if (!admin->Submit(std::move(work))) {
    return responder.Reply(http_api::ErrorReply(
        {.status = 503,
         .code = "admin_busy",
         .message = "too many admin requests are waiting on this instance; try again"}));
  }
}

}  // namespace caudal::admin_api
