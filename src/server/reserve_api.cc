#include "server/reserve_api.h"

#include <algorithm>
#include <boost/json.hpp>

#include "caudal/common/clock.h"
#include "common/cat.h"

namespace caudal::http_api {
namespace json = boost::json;
namespace {

ApiError BadReserve(std::string code, std::string message) {
  return {.status = 400, .code = std::move(code), .message = std::move(message)};
}

int64_t CeilMs(Micros d) { return (d.count() + 999) / 1000; }  // rounded up, as /v1/check's

}  // namespace

ParsedCheck ParseReserveBody(std::string_view body) {
  ParsedObject parsed = ParseObjectBody(body, kCheckBodyDepth);
  if (parsed.error) return {.request = {}, .error = std::move(parsed.error)};
  return ReadReserveBody(parsed.value.get_object());
}

ParsedCheck ReadReserveBody(json::object o) {
  ParsedCheck out;
  for (const auto& kv : o) {
    if (kv.key() != "descriptors" && kv.key() != "cost" && kv.key() != "costs" &&
        kv.key() != "ttl") {
      out.error = BadReserve("unknown_field",
                             Cat(Quoted(ValidUtf8(kv.key().substr(0, 64))),
                                 ": unknown field (expected descriptors, cost or costs, and ttl)"));
      return out;
    }
  }
  Micros ttl = kDefaultReservationTtl;
  if (const json::value* t = o.if_contains("ttl")) {
    Result<Micros> d = t->is_string() ? ParseDuration(std::string_view(t->get_string()))
                                      : Result<Micros>(Status::InvalidArgument("not a string"));
    if (!d.ok() || *d < kMinReservationTtl || *d > kMaxReservationTtl) {
      out.error =
          BadReserve("invalid_ttl", "ttl: expected a duration from 1ms to 24h, such as \"60s\"");
      return out;
    }
    ttl = *d;
    o.erase("ttl");
  }
  // An estimate may be 0 (the settle then charges the whole cost), which a check's cost may not.
  const json::value* c = o.if_contains("cost");
  const bool zero = c != nullptr && c->is_int64() && c->get_int64() == 0;
  if (zero && !o.contains("costs")) o.erase("cost");
  out = ReadCheckBody(o);  // the check's own fields, read as /v1/check's
  if (zero && !out.error) out.request.cost = 0;
  out.request.reserve = ttl;
  return out;
}

Reply ReserveReply(const CheckResult& result) {
  Reply r = DecisionReply(result, Endpoint::kCheck);
  bool full = false;
  for (const PolicyResult& p : result.results) {
    for (const Decision& d : p.decisions) full |= d.reservation == Reservation::kFull;
  }
  if (result.outcome != Outcome::kDenied || !full) return r;
  json::value body = json::parse(r.body);
  body.as_object()["reason"] = "too_many_open_reservations";
  r.body = json::serialize(body);
  return r;
}

ParsedSettle ParseSettleBody(std::string_view body) {
  ParsedObject parsed = ParseObjectBody(body, kSettleBodyDepth);
  if (parsed.error) return {.reservation = {}, .cost = 0, .error = std::move(parsed.error)};
  return ReadSettleBody(parsed.value.get_object());
}

ParsedSettle ReadSettleBody(const json::object& o) {
  ParsedSettle out;
  for (const auto& kv : o) {
    if (kv.key() != "reservation" && kv.key() != "cost" && kv.key() != "costs") {
      out.error = BadReserve("unknown_field",
                             Cat(Quoted(ValidUtf8(kv.key().substr(0, 64))),
                                 ": unknown field (expected reservation, and cost or costs)"));
      return out;
    }
  }
  const json::value* id = o.if_contains("reservation");
  if (id == nullptr || !id->is_string()) {
    out.error = BadReserve(
        id == nullptr ? "missing_reservation" : "invalid_reservation",
        id == nullptr ? "reservation: required"
                      : Cat("reservation: expected a string (got ", JsonTypeName(*id), ')'));
    return out;
  }
  out.reservation = std::string(id->get_string());
  const json::value* c = o.if_contains("cost");
  const json::value* costs = o.if_contains("costs");
  if (c != nullptr && costs != nullptr) {
    out.error =
        BadReserve("invalid_cost",
                   "cost and costs: give one of them (cost is the requests dimension of costs)");
    return out;
  }
  if (costs != nullptr) {
    out.costs.emplace();
    if (auto e = ReadCosts(*costs, *out.costs)) out.error = std::move(e);
    return out;
  }
  if (c == nullptr) {
    out.error =
        BadReserve("missing_cost", "cost: required (the actual cost; or costs, per dimension)");
    return out;
  }
  const bool integer = c->is_int64() || c->is_uint64();
  const bool in_range = c->is_int64() && c->get_int64() >= 0 && c->get_int64() <= kMaxCost;
  if (!in_range) {
    out.error = BadReserve("invalid_cost",
                           integer ? "cost: expected an integer from 0 to 2^40"
                                   : Cat("cost: expected an integer (got ", JsonTypeName(*c), ')'));
    return out;
  }
  out.cost = c->get_int64();
  return out;
}

Reply SettleReply(const Result<SettleResult>& result) {
  if (!result.ok()) {
    if (result.status().code() == StatusCode::kInvalidArgument) {
      return ErrorReply(FromStatus(result.status()));
    }
    Reply r = ErrorReply({.status = 503,
                          .code = "store_unavailable",
                          .message = "the rate-limit store cannot answer; settle again"});
    r.headers.Add("Retry-After", 1);
    return r;
  }
  switch (result->outcome) {
    case Reservation::kUnknown:
      return ErrorReply({.status = 404,
                         .code = "unknown_reservation",
                         .message = "reservation: none is live (unknown, expired, or its "
                                    "policy's limits changed since)"});
    case Reservation::kConflict:
      return ErrorReply({.status = 409,
                         .code = "settled_with_another_cost",
                         .message = "reservation: already settled with another cost; nothing "
                                    "changed"});
    default:
      break;
  }
  json::array policies;
  for (const SettledLimit& l : result->limits) {
    const Decision& d = l.decision;
    const int64_t charged = std::min(d.overrun, d.limit);  // a settle charges its limit at most
    policies.push_back(json::object{{"name", l.policy},
                                    {"limit", l.limit->ToString()},
                                    {"dimension", l.limit->DimensionText()},
                                    {"remaining", d.remaining},
                                    {"overdrawn", d.overdrawn},
                                    {"overrun", charged},
                                    {"uncharged", d.overrun - charged},
                                    {"reset_after_ms", CeilMs(d.reset_after)}});
  }
  Reply r;
  r.content_type = "application/json";
  r.body = json::serialize(
      json::object{{"outcome", result->outcome == Reservation::kSettled ? "settled" : "repeated"},
                   {"policies", std::move(policies)}});
  return r;
}

}  // namespace caudal::http_api
