#include "server/http_api.h"

#include <algorithm>
#include <boost/container/small_vector.hpp>
#include <boost/json.hpp>
#include <cctype>

#include "common/cat.h"
#include "common/utf8.h"
#include "server/json_keys.h"

namespace caudal::http_api {
namespace json = boost::json;
namespace {

__extension__ typedef __int128 Wide;

constexpr std::string_view kProblemJson = "application/problem+json";
constexpr std::string_view kJson = "application/json";

int64_t Ms(Micros d) { return (d.count() + 999) / 1000; }  // rounded up: never earlier

// The first `max` bytes of `s`, or fewer so as not to split a UTF-8 sequence.
std::string_view Utf8Prefix(std::string_view s, size_t max) {
  if (s.size() <= max) return s;
  size_t cut = max;
  while (cut > 0 && (static_cast<unsigned char>(s[cut]) & 0xC0) == 0x80) --cut;
  return s.substr(0, cut);
}

ApiError Bad(std::string code, std::string message) {
  return {.status = 400, .code = std::move(code), .message = std::move(message)};
}

std::optional<ApiError> ReadCost(const json::value& v, CheckRequest& out) {
  int64_t cost = 0;
  if (v.is_int64()) {
    cost = v.get_int64();
  } else if (v.is_uint64()) {
    cost = kMaxCost + 1;  // beyond int64: certainly too large
  } else {
    return Bad("invalid_cost",
               Cat("cost: expected a positive integer (got ", JsonTypeName(v), ')'));
  }
  if (cost < 1 || cost > kMaxCost) {
    return Bad("invalid_cost",
               Cat("cost: expected a positive integer up to 2^40 (got ", json::serialize(v), ')'));
  }
  out.cost = cost;
  return std::nullopt;
}

}  // namespace

std::optional<ApiError> ReadCosts(const json::value& v, Costs& out) {
  if (!v.is_object()) {
    return Bad("invalid_cost", Cat("costs: expected an object of dimension names to integers (got ",
                                   JsonTypeName(v), ')'));
  }
  const json::object& o = v.get_object();
  if (o.empty() || o.size() > kMaxCostDimensions) {
    return Bad("invalid_cost", Cat("costs: expected 1 to ", kMaxCostDimensions, " dimensions (got ",
                                   o.size(), ')'));
  }
  for (const auto& kv : o) {
    const std::string_view name = Utf8Prefix(kv.key(), 64);
    const json::value& units = kv.value();
    const bool in_range =
        units.is_int64() && units.get_int64() >= 0 && units.get_int64() <= kMaxCost;
    if (!in_range) {
      return Bad(
          "invalid_cost",
          units.is_int64() || units.is_uint64()
              ? Cat("costs.", name, ": expected an integer from 0 to 2^40 (got ",
                    json::serialize(units), ')')
              : Cat("costs.", name, ": expected an integer (got ", JsonTypeName(units), ')'));
    }
    out.push_back({.dimension = std::string(kv.key()), .units = units.get_int64()});
  }
  return std::nullopt;
}

namespace {

std::optional<ApiError> ReadDescriptors(const json::value& v, CheckRequest& out) {
  if (!v.is_object()) {
    return Bad("invalid_descriptors",
               Cat("descriptors: expected an object of strings (got ", JsonTypeName(v), ')'));
  }
  const json::object& o = v.get_object();
  if (o.empty()) return Bad("invalid_descriptors", "descriptors: expected at least one descriptor");
  if (o.size() > kMaxDescriptors) {
    return Bad("invalid_descriptors",
               Cat("descriptors: at most ", kMaxDescriptors, " (got ", o.size(), ')'));
  }
  for (const auto& kv : o) {
    const std::string_view name = Utf8Prefix(kv.key(), 64);
    if (!kv.value().is_string()) {
      return Bad("invalid_descriptors", Cat("descriptors.", name, ": expected a string (got ",
                                            JsonTypeName(kv.value()), ')'));
    }
    const json::string& s = kv.value().get_string();
    if (auto problem = IdentityValueProblem({s.data(), s.size()})) {
      return Bad("invalid_descriptors", Cat("descriptors.", name, ": ", *problem));
    }
    out.descriptors.push_back({std::string(kv.key()), std::string(s.data(), s.size())});
  }
  return std::nullopt;
}

json::object PolicyJson(const PolicyResult& r) {
  json::object p;
  p["name"] = r.name;
  p["allowed"] = r.allowed;
  p["shadow"] = r.shadow;
  p["decided_by"] = DecidedByName(r.decided_by);
  p["cost"] = r.cost;
  const int t = r.Tightest();
  if (t >= 0) {
    const Decision& d = r.decisions[static_cast<size_t>(t)];
    p["limit"] = d.limit;
    p["remaining"] = d.remaining;
    p["reset_after_ms"] = Ms(d.reset_after);
    p["retry_after_ms"] = Ms(d.retry_after);
    if (d.share >= 0) p["share"] = d.share;  // a shared capacity: the identity's share here
  }
  json::array limits;
  for (size_t i = 0; i < r.decisions.size(); ++i) {
    const Decision& d = r.decisions[i];
    const Limit& l = *r.limits[i];
    json::object o{{"limit", l.ToString()},
                   {"dimension", l.DimensionText()},
                   {"cost", r.CostOf(i)},
                   {"allowed", d.allowed()},
                   {"remaining", d.remaining},
                   {"reset_after_ms", Ms(d.reset_after)},
                   {"retry_after_ms", Ms(d.retry_after)}};
    if (d.share >= 0) o["share"] = d.share;
    limits.push_back(std::move(o));
  }
  p["limits"] = std::move(limits);
  return p;
}

// The window of a limit as the draft's `w`: the window, or the time a bucket takes to refill.
int64_t WindowSeconds(const Limit& l) {
  if (IsWindowAlgorithm(l.algorithm())) return CeilSeconds(l.window());
  const Wide us = static_cast<Wide>(l.capacity()) * l.refill_period_us() / l.refill_count();
  return CeilSeconds(Micros(static_cast<int64_t>(us)));
}

}  // namespace

std::string_view JsonTypeName(const json::value& v) {
  switch (v.kind()) {
    case json::kind::null:
      return "null";
    case json::kind::bool_:
      return "a boolean";
    case json::kind::int64:
    case json::kind::uint64:
      return "an integer";
    case json::kind::double_:
      return "a number with a fraction";
    case json::kind::string:
      return "a string";
    case json::kind::array:
      return "an array";
    case json::kind::object:
      return "an object";
  }
  return "?";
}

std::string ValidUtf8(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  while (!s.empty()) {
    const size_t n = Utf8SequenceLength(s);
    out.append(n == 0 ? std::string_view("\xEF\xBF\xBD") : s.substr(0, n));
    s.remove_prefix(n == 0 ? 1 : n);
  }
  return out;
}

int64_t CeilSeconds(Micros d) {
  if (d.count() <= 0) return 0;
  return (d.count() + 999'999) / 1'000'000;
}

Reply ErrorReply(const ApiError& e) {
  Reply r;
  r.status = e.status;
  r.content_type = kJson;
  r.body = json::serialize(
      json::object{{"error", json::object{{"code", e.code}, {"message", ValidUtf8(e.message)}}}});
  return r;
}

ParsedObject ParseObjectBody(std::string_view body, size_t max_depth) {
  ParsedObject out;
  ParsedJson parsed = ParseJson(body, max_depth);
  if (parsed.error) {
    out.error = Bad("invalid_json", Cat("body: not valid JSON (", parsed.error.message(), ')'));
    return out;
  }
  out.value = std::move(parsed.value);
  if (!out.value.is_object()) {
    out.error = Bad("invalid_body",
                    Cat("body: expected a JSON object (got ", JsonTypeName(out.value), ')'));
  } else if (parsed.repeated) {
    out.error = Bad("duplicate_field", Cat(Utf8Prefix(*parsed.repeated, 128),
                                           ": given more than once (ambiguous; refused)"));
  }
  return out;
}

ParsedCheck ParseCheckBody(std::string_view body) {
  ParsedObject parsed = ParseObjectBody(body, kCheckBodyDepth);
  if (parsed.error) return {.request = {}, .error = std::move(parsed.error)};
  return ReadCheckBody(parsed.value.get_object());
}

ParsedCheck ReadCheckBody(const json::object& o) {
  ParsedCheck out;
  for (const auto& kv : o) {
    if (kv.key() != "descriptors" && kv.key() != "cost" && kv.key() != "costs" &&
        kv.key() != "refund") {
      const std::string_view key = Utf8Prefix(kv.key(), 64);
      out.error = Bad("unknown_field", Cat(Quoted(key),
                                           ": unknown field (expected descriptors, cost or costs, "
                                           "and refund)"));
      return out;
    }
  }
  if (o.contains("cost") && o.contains("costs")) {
    out.error = Bad("invalid_cost",
                    "cost and costs: give one of them (cost is the requests dimension of costs)");
    return out;
  }
  const json::value* d = o.if_contains("descriptors");
  if (d == nullptr) {
    out.error = Bad("missing_descriptors", "descriptors: required");
    return out;
  }
  if (auto e = ReadDescriptors(*d, out.request)) {
    out.error = std::move(e);
    return out;
  }
  if (const json::value* c = o.if_contains("cost")) {
    if (auto e = ReadCost(*c, out.request)) {
      out.error = std::move(e);
      return out;
    }
  }
  if (const json::value* c = o.if_contains("costs")) {
    out.request.costs.emplace();
    if (auto e = ReadCosts(*c, *out.request.costs)) {
      out.error = std::move(e);
      return out;
    }
  }
  if (const json::value* r = o.if_contains("refund")) {
    if (!r->is_bool()) {
      out.error =
          Bad("invalid_refund", Cat("refund: expected true or false (got ", JsonTypeName(*r), ')'));
      return out;
    }
    out.request.refund = r->get_bool();
  }
  return out;
}

std::optional<std::string> IdentityValueProblem(std::string_view value) {
  for (size_t at = 0; at < value.size();) {
    if (const auto c = static_cast<unsigned char>(value[at]); c >= 0x20 && c < 0x7F) {
      ++at;  // printable ASCII, the usual value
      continue;
    }
    const std::string_view rest = value.substr(at);
    const size_t n = Utf8SequenceLength(rest);
    if (n == 0) return Cat("not well-formed UTF-8 (byte ", at, ')');
    const auto c0 = static_cast<unsigned char>(rest[0]);
    const auto c1 = n == 2 ? static_cast<unsigned char>(rest[1]) : 0;
    if (c0 == 0) return Cat("a NUL character (byte ", at, ')');
    if (c0 < 0x20 || c0 == 0x7F || (c0 == 0xC2 && c1 < 0xA0)) {  // C0, DEL, C1 (U+0080..9F)
      return Cat("a control character (byte ", at, ')');
    }
    at += n;
  }
  return std::nullopt;
}

ApiError FromStatus(const Status& s) {
  int status = 500;
  switch (s.code()) {
    case StatusCode::kInvalidArgument:
      status = 400;
      break;
    case StatusCode::kNotFound:
      status = 404;
      break;
    case StatusCode::kResourceExhausted:
      // A bounded table is full: the request conflicts with what it holds. 429 stays the
      // limiter's own answer, a decision's.
      status = 409;
      break;
    case StatusCode::kUnavailable:
    case StatusCode::kDeadlineExceeded:
      status = 503;
      break;
    case StatusCode::kOk:
    case StatusCode::kInternal:
      break;
  }
  std::string code(s.reason());
  if (code.empty()) {
    code = StatusCodeName(s.code());
    std::transform(code.begin(), code.end(), code.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  }
  return {.status = status, .code = std::move(code), .message = s.message()};
}

ApiError FromEngineError(const Status& s) {
  return FromStatus(s.reason().empty() ? s.WithReason(engine_reason::kInvalidDescriptors) : s);
}

IpAddress ClientAddress(const IpAddress& peer, std::string_view forwarded_for,
                        const std::vector<CidrBlock>& trusted) {
  const auto is_trusted = [&](const IpAddress& a) {
    for (const CidrBlock& b : trusted) {
      if (b.Contains(a)) return true;
    }
    return false;
  };
  IpAddress client = peer;
  if (!is_trusted(peer)) return client;
  std::string_view rest = forwarded_for;
  while (!rest.empty()) {
    const size_t comma = rest.rfind(',');
    std::string_view hop = comma == std::string_view::npos ? rest : rest.substr(comma + 1);
    rest = comma == std::string_view::npos ? std::string_view() : rest.substr(0, comma);
    while (!hop.empty() && (hop.front() == ' ' || hop.front() == '\t')) hop.remove_prefix(1);
    while (!hop.empty() && (hop.back() == ' ' || hop.back() == '\t')) hop.remove_suffix(1);
    auto a = IpAddress::Parse(hop);
    if (!a.ok()) return client;  // garbage: trust no further than the last good hop
    client = *a;
    if (!is_trusted(client)) return client;
  }
  return client;
}

std::optional<std::string_view> HeaderList::Get(std::string_view name) const {
  std::string_view rest = lines_;
  while (!rest.empty()) {
    const size_t eol = rest.find("\r\n");
    const std::string_view line = rest.substr(0, eol);
    rest.remove_prefix(eol + 2);
    if (line.size() >= name.size() + 2 && line.starts_with(name) &&
        line.substr(name.size(), 2) == ": ") {
      return line.substr(name.size() + 2);
    }
  }
  return std::nullopt;
}

void AddRateLimitFields(const CheckResult& result, HeaderList& out) {
  // Per dimension the enforced checks count: the decision closest to its limit.
  struct Pick {
    const PolicyResult* policy;
    size_t i;
    const Limit& limit() const { return *policy->limits[i]; }
    const Decision& decision() const { return policy->decisions[i]; }
  };
  boost::container::small_vector<Pick, 4> picks;
  for (const PolicyResult& r : result.results) {
    if (r.shadow) continue;
    for (size_t i = 0; i < r.decisions.size() && i < r.limits.size(); ++i) {
      const Pick pick{&r, i};
      auto same = std::find_if(picks.begin(), picks.end(), [&](const Pick& k) {
        return k.limit().dimension() == pick.limit().dimension();
      });
      if (same == picks.end()) {
        picks.push_back(pick);
      } else if (CloserToLimit(pick.decision(), same->decision())) {
        *same = pick;
      }
    }
  }
  if (picks.empty()) return;
  std::stable_partition(picks.begin(), picks.end(),
                        [](const Pick& k) { return k.limit().counts_requests(); });
  if (picks.size() == 1 && picks[0].limit().counts_requests() && picks[0].decision().share < 0) {
    // The usual case, written straight into the fields (no string built on the hot path).
    const Limit& l = picks[0].limit();
    const Decision& d = picks[0].decision();
    const std::string_view name = picks[0].policy->name;
    out.Add("RateLimit-Policy", '"', name, "\";q=", l.capacity(), ";w=", WindowSeconds(l));
    out.Add("RateLimit", '"', name, "\";r=", d.remaining, ";t=", CeilSeconds(d.reset_after));
    return;
  }
  std::string policy_field, limit_field;
  for (const Pick& k : picks) {
    const Limit& l = k.limit();
    const Decision& d = k.decision();
    // A policy name is [A-Za-z0-9_.-] and a dimension [a-z0-9_+]: nothing to escape. Another
    // dimension than requests names its item "<policy>/<unit>" (a policy's items stay apart)
    // and gives its unit as `qu`, the dimension with '-' for '_' ("input-tokens").
    std::string unit;
    if (!l.counts_requests()) {
      unit = l.DimensionText();
      std::replace(unit.begin(), unit.end(), '_', '-');
    }
    const std::string name =
        unit.empty() ? std::string(k.policy->name) : Cat(k.policy->name, '/', unit);
    const std::string qu = unit.empty() ? std::string() : Cat(";qu=\"", unit, '"');
    const char* sep = policy_field.empty() ? "" : ", ";
    if (d.share >= 0) {
      // A shared capacity's: the identity's share, units per rate period, over w whole seconds.
      const Micros period = l.rate().period;
      const int64_t w = std::max<int64_t>(1, CeilSeconds(period));
      const Wide q =
          static_cast<Wide>(d.share) * w * 1'000'000 / std::max<int64_t>(1, period.count());
      policy_field += Cat(sep, '"', name, "\";q=", static_cast<int64_t>(q), qu, ";w=", w);
    } else {
      policy_field += Cat(sep, '"', name, "\";q=", l.capacity(), qu, ";w=", WindowSeconds(l));
    }
    limit_field += Cat(sep, '"', name, "\";r=", d.remaining, ";t=", CeilSeconds(d.reset_after));
  }
  out.Add("RateLimit-Policy", policy_field);
  out.Add("RateLimit", limit_field);
}

Reply DecisionReply(const CheckResult& result, Endpoint endpoint, AuthStatuses statuses) {
  Reply r;
  AddRateLimitFields(result, r.headers);
  if (result.degraded) r.headers.Add("Caudal-Degraded", "store_unavailable");
  // Forward-auth has no body to carry it: a proxy passes the header on to release the slots.
  if (endpoint == Endpoint::kAuth && !result.hold.empty())
    r.headers.Add("Caudal-Hold", result.hold);
  if (endpoint == Endpoint::kAuth && result.outcome == Outcome::kAllowed) return r;  // hot path
  json::array violated;
  for (const PolicyResult* p : result.Refused()) violated.push_back(json::string(p->name));
  json::object body;
  switch (result.outcome) {
    case Outcome::kAllowed:
      r.status = 200;
      break;
    case Outcome::kDenied: {
      r.status = statuses.refused;
      const int64_t secs = std::max<int64_t>(1, CeilSeconds(result.retry_after));
      r.headers.Add("Retry-After", secs);
      body["type"] = "urn:caudal:problem:quota-exceeded";
      body["title"] = "Quota exceeded";
      body["status"] = r.status;
      body["detail"] = Cat("refused by ", json::serialize(violated), "; retry after ", secs, " s");
      body["violated_policies"] = violated;
      body["retry_after_ms"] = Ms(result.retry_after);
      break;
    }
    case Outcome::kUnavailable:
      r.status = statuses.unavailable;
      r.headers.Add("Retry-After", 1);
      body["type"] = "urn:caudal:problem:store-unavailable";
      body["title"] = "Rate-limit store unavailable";
      body["status"] = r.status;
      body["reason"] = "store_unavailable";
      body["detail"] =
          "the rate-limit store cannot answer and a policy fails closed; the client "
          "did nothing wrong";
      body["violated_policies"] = violated;
      break;
  }
  if (endpoint == Endpoint::kCheck) {
    body["allowed"] = result.allowed();
    body["outcome"] = OutcomeName(result.outcome);
    body["degraded"] = result.degraded;
    json::array policies;
    for (const PolicyResult& p : result.results) policies.push_back(PolicyJson(p));
    body["policies"] = std::move(policies);
    body["refused_by"] = violated;
    if (!result.hold.empty()) body["hold"] = result.hold;
    if (!result.reservation.empty()) {  // POST /v1/reserve (reserve_api.h)
      body["reservation"] = result.reservation;
      body["expires_in_ms"] = Ms(result.reservation_ttl);
    }
  }
  r.content_type = r.status == 200 ? kJson : kProblemJson;
  r.body = json::serialize(body);
  return r;
}

std::string TopRefusedJson(const Refusals& refusals, size_t top) {
  json::array checks;
  for (const CheckRefusals& c : refusals.Top(std::clamp<size_t>(top, 1, kSketchSize))) {
    json::array hitters;
    for (const HeavyHitter& h : c.top) {
      hitters.push_back(json::object{
          {"identity", ValidUtf8(h.identity)}, {"count", h.count}, {"error", h.error}});
    }
    checks.push_back(json::object{{"api", ApiName(c.api)},
                                  {"check", ValidUtf8(c.check)},
                                  {"refused", c.total},
                                  {"top", std::move(hitters)}});
  }
  return json::serialize(json::object{{"sketch_size", kSketchSize}, {"checks", std::move(checks)}});
}

}  // namespace caudal::http_api
