#include "server/routes.h"

#include <boost/json/value.hpp>
#include <charconv>
#include <cstdint>

#include "common/cat.h"
#include "server/admin_api.h"
#include "server/auth_query.h"
#include "server/idempotency.h"
#include "server/openapi.h"
#include "server/query_string.h"
#include "server/release_api.h"
#include "server/reserve_api.h"

namespace caudal::routes {
namespace {

using http_api::ApiError;
using http_api::Reply;

Reply Text(int status, std::string body, std::string_view type = "text/plain; charset=utf-8") {
  Reply r;
  r.status = status;
  r.content_type = type;
  r.body = std::move(body);
  return r;
}

Reply MethodNotAllowed(std::string_view method, std::string_view allow) {
  Reply r = http_api::ErrorReply(
      {.status = 405,
       .code = "method_not_allowed",
       .message = Cat("method ", method, " is not allowed here (use ", allow, ')')});
  r.headers.Add("Allow", allow);
  return r;
}

void Decide(const Context& ctx, CheckRequest request, http_api::Endpoint endpoint,
            Responder& responder, http_api::AuthStatuses statuses = {}) {
  // Trivially copyable captures within two words: std::function keeps them inline, without an
  // allocation.
  ctx.engine.CheckAsync(
      std::move(request), [&responder, endpoint, statuses](Result<CheckResult> r) {
        if (!r.ok()) {
          responder.Reply(http_api::ErrorReply(http_api::FromEngineError(r.status())));
          return;
        }
        responder.Reply(http_api::DecisionReply(*r, endpoint, statuses));
      });
}

// The Idempotency-Key field of `r`, parsed: nullopt when absent (or no records are kept), its
// 400 (counted) when malformed.
std::optional<idempotency::ParsedKey> KeyOf(const Context& ctx, const Request& r) {
  const size_t n = r.header_count(idempotency::kHeader);
  if (n == 0 || ctx.idempotency == nullptr) return std::nullopt;
  idempotency::ParsedKey key = idempotency::ParseKeyField(r.header(idempotency::kHeader), n);
  if (key.error) ctx.idempotency->CountInvalid();
  return key;
}

}  // namespace

// One request on its way through the table: what Dispatch has read of it for its route.
struct Call {
  const Context& ctx;
  const Request& r;
  std::string_view path;
  boost::json::value body;  // the body Dispatch parsed (an object), or null if the route reads none
  std::optional<idempotency::ParsedKey> key;  // Idempotency-Key, on an idempotent route
  Responder& responder;

  void Done(Reply reply) const { responder.Reply(std::move(reply)); }
};

namespace {

// A keyed request of `endpoint`: its first answer, once (server/idempotency.h). Keys are the
// caller's and the identity's: the identity is the body's descriptors (a check, a reserve) or
// its reservation (a settle), so that two identities never share a key's record. The record's
// scope and fingerprint come from the body Dispatch parsed; what the reply needs is copied, as
// the request's pieces are views that end when Dispatch returns.
void DecideOnce(const Call& c, idempotency::Decide decide) {
  const std::string scope = idempotency::IdentityScope(
      idempotency::CallerScope(c.ctx.auth.caller, c.r.identities), c.body);
  idempotency::Run(*c.ctx.idempotency, c.ctx.auth.idempotency,
                   idempotency::RecordKey(c.path, scope, c.key->key),
                   idempotency::Fingerprint(c.body), std::move(decide),
                   [&responder = c.responder](Reply reply) { responder.Reply(std::move(reply)); });
}

// A check's decision, and a reserve's, handed to `then` as its reply; by the failure modes when
// its Idempotency-Key record could not be read.
idempotency::Decide CheckDecision(Engine& engine, CheckRequest request,
                                  Reply (*reply)(const CheckResult&)) {
  return [&engine, request = std::move(request), reply](const Status& records,
                                                        std::function<void(Reply)> then) mutable {
    request.store_failed = records;
    engine.CheckAsync(request, [then = std::move(then), reply](Result<CheckResult> result) {
      if (!result.ok()) {
        return then(http_api::ErrorReply(http_api::FromEngineError(result.status())));
      }
      then(reply(*result));
    });
  };
}

Reply CheckReply(const CheckResult& result) {
  return http_api::DecisionReply(result, http_api::Endpoint::kCheck);
}

// GET /v1/top-refused[?top=N]: N from 1 (a larger one is the sketch's size, 0 is 1); other
// parameters are ignored.
Reply TopRefusedReply(const Refusals& refusals, std::string_view target) {
  const http_api::ParsedQuery query = http_api::ParseQuery(target);
  if (query.error) return http_api::ErrorReply(*query.error);
  size_t top = 10;
  if (const std::string* n = query.Find("top")) {
    const auto [end, ec] = std::from_chars(n->data(), n->data() + n->size(), top);
    if ((ec != std::errc() && ec != std::errc::result_out_of_range) ||
        end != n->data() + n->size()) {
      return http_api::ErrorReply(
          {.status = 400,
           .code = "invalid_parameter",
           .message = Cat("top: expected an integer (got ", Quoted(n->substr(0, 64)), ')')});
    }
    if (ec == std::errc::result_out_of_range) top = SIZE_MAX;
  }
  return Text(200, http_api::TopRefusedJson(refusals, top), "application/json");
}

Reply StatusReply(StatusPage& page, std::string_view path, std::string_view target) {
  if (path == "/") {
    Reply r = Text(200, std::string(StatusPageHtml()), "text/html; charset=utf-8");
    r.headers.Add("Content-Security-Policy", StatusPageCsp());
    r.headers.Add("X-Content-Type-Options", "nosniff");
    r.headers.Add("X-Frame-Options", "DENY");
    r.headers.Add("Referrer-Policy", "no-referrer");
    r.headers.Add("Cache-Control", "no-store");
    return r;
  }
  if (path == "/v1/status") {
    Reply r = Text(200, page.Json(), "application/json");
    r.headers.Add("Cache-Control", "no-store");
    return r;
  }
  const http_api::ParsedQuery query = http_api::ParseQuery(target);
  if (query.error) return http_api::ErrorReply(*query.error);
  const std::string* policy = query.Find("policy");
  const std::string* limit = query.Find("limit");
  const std::string_view index = limit != nullptr ? std::string_view(*limit) : std::string_view();
  size_t i = 0;
  const auto [end, ec] = std::from_chars(index.data(), index.data() + index.size(), i);
  if (policy == nullptr || policy->empty() || ec != std::errc() ||
      end != index.data() + index.size()) {
    return http_api::ErrorReply({.status = 400,
                                 .code = "invalid_parameter",
                                 .message = "expected ?policy=NAME&limit=I (I from 0)"});
  }
  Result<std::string> svg = page.Chart(*policy, i);
  if (!svg.ok()) {
    const bool missing = svg.status().code() == StatusCode::kNotFound;
    return http_api::ErrorReply({.status = missing ? 404 : 422,
                                 .code = missing ? "not_found" : "too_large_to_chart",
                                 .message = svg.status().message()});
  }
  Reply r = Text(200, std::move(*svg), "image/svg+xml");
  r.headers.Add("Content-Security-Policy", "default-src 'none'");
  r.headers.Add("X-Content-Type-Options", "nosniff");
  r.headers.Add("Cache-Control", "no-store");
  return r;
}

}  // namespace

ForwardAuth ForwardAuthDescriptors(const ForwardAuthOptions& auth, const Request& r) {
  ForwardAuth out;
  Descriptors& d = out.descriptors;
  d.reserve(1 + auth.descriptor_headers.size());
  const IpAddress client = http_api::ClientAddress(r.peer, r.forwarded_for, auth.trusted_proxies);
  d.push_back({"ip", client.ToString()});
  for (const HeaderDescriptor& h : auth.descriptor_headers) {
    const std::string_view v = r.header(h.header);
    if (v.empty()) continue;
    // Proxies and applications disagree on which of two values counts (the first, the last,
    // both joined): the one caudal charged could be another than the one the backend trusts.
    if (const size_t n = r.header_count(h.header); n > 1) {
      out.error = {.status = 400,
                   .code = "ambiguous_identity",
                   .message = Cat("header ", h.header, ": given ", n,
                                  " times (an identity header must be given once)")};
      return out;
    }
    if (auto problem = http_api::IdentityValueProblem(v)) {
      out.error = {.status = 400,
                   .code = "invalid_identity",
                   .message = Cat("header ", h.header, ": ", *problem)};
      return out;
    }
    d.push_back({h.descriptor, std::string(v)});
  }
  return out;
}

std::optional<Reply> RefuseCaller(const CallerAuth& caller, Access access, const Request& r) {
  if (!caller.enabled()) return std::nullopt;
  // The status JSON holds the refused identities /v1/top-refused shows; the page itself is a
  // static document that stays open (it then says it cannot read /v1/status).
  if (access != Access::kCaller && !(access == Access::kMetrics && caller.protect_metrics)) {
    return std::nullopt;
  }
  // Which of two credentials counts is a guess (a proxy may check one, caudal the other), as it
  // is for an identity header given twice: refused the same way.
  if (const size_t n = r.header_count("Authorization"); n > 1) {
    return http_api::ErrorReply(
        {.status = 400,
         .code = "ambiguous_identity",
         .message = Cat("header Authorization: given ", n,
                        " times (the caller's credentials must be given once)")});
  }
  const CallerVerdict verdict = CheckCaller(caller, r.header("Authorization"), r.identities);
  if (verdict == CallerVerdict::kAllowed) return std::nullopt;
  if (verdict == CallerVerdict::kNotAllowed) {
    return http_api::ErrorReply({.status = 403,
                                 .code = "forbidden",
                                 .message = "the client certificate's identity is not allowed"});
  }
  const bool bad = verdict == CallerVerdict::kBadToken;
  Reply reply = http_api::ErrorReply(
      {.status = 401,
       .code = "unauthenticated",
       .message = bad ? "the Authorization header does not hold the caller token"
                      : "credentials needed: Authorization: Bearer <token>"});
  reply.headers.Add("WWW-Authenticate", bad ? "Bearer realm=\"caudal\", error=\"invalid_token\""
                                            : "Bearer realm=\"caudal\"");
  return reply;
}

namespace {

void AuthRoute(Call& c) {
  const http_api::ParsedAuthQuery query = http_api::ParseAuthQuery(c.r.target);
  if (query.error) return c.Done(http_api::ErrorReply(*query.error));
  ForwardAuth derived = ForwardAuthDescriptors(c.ctx.auth, c.r);
  if (derived.error) return c.Done(http_api::ErrorReply(*derived.error));
  Decide(c.ctx, {.descriptors = std::move(derived.descriptors), .cost = std::nullopt},
         http_api::Endpoint::kAuth, c.responder, query.statuses);
}

void CheckRoute(Call& c) {
  http_api::ParsedCheck parsed = http_api::ReadCheckBody(c.body.get_object());
  if (parsed.error) return c.Done(http_api::ErrorReply(*parsed.error));
  if (c.key)
    return DecideOnce(c, CheckDecision(c.ctx.engine, std::move(parsed.request), CheckReply));
  Decide(c.ctx, std::move(parsed.request), http_api::Endpoint::kCheck, c.responder);
}

void ReleaseRoute(Call& c) {
  http_api::ParsedRelease parsed = http_api::ReadReleaseBody(c.body.get_object());
  if (parsed.error) return c.Done(http_api::ErrorReply(*parsed.error));
  c.ctx.engine.ReleaseAsync(parsed.hold, [&responder = c.responder](Result<ReleaseResult> result) {
    responder.Reply(http_api::ReleaseReply(result));
  });
}

void ReserveRoute(Call& c) {
  http_api::ParsedCheck parsed = http_api::ReadReserveBody(c.body.get_object());
  if (parsed.error) return c.Done(http_api::ErrorReply(*parsed.error));
  idempotency::Decide decide =
      CheckDecision(c.ctx.engine, std::move(parsed.request), http_api::ReserveReply);
  if (c.key) return DecideOnce(c, std::move(decide));
  decide(Status::Ok(),
         [&responder = c.responder](Reply reply) { responder.Reply(std::move(reply)); });
}

void SettleRoute(Call& c) {
  http_api::ParsedSettle parsed = http_api::ReadSettleBody(c.body.get_object());
  if (parsed.error) return c.Done(http_api::ErrorReply(*parsed.error));
  idempotency::Decide decide = [&engine = c.ctx.engine, reservation = std::move(parsed.reservation),
                                cost = parsed.cost, costs = std::move(parsed.costs)](
                                   const Status& records, std::function<void(Reply)> then) {
    // A settle has no failure mode: the store's failure is its 503.
    if (!records.ok()) return then(http_api::SettleReply(records));
    auto reply = [then = std::move(then)](Result<SettleResult> result) {
      then(http_api::SettleReply(result));
    };
    if (costs) return engine.SettleAsync(reservation, *costs, std::move(reply));
    engine.SettleAsync(reservation, cost, std::move(reply));
  };
  if (c.key) return DecideOnce(c, std::move(decide));
  decide(Status::Ok(),
         [&responder = c.responder](Reply reply) { responder.Reply(std::move(reply)); });
}

void AdminRoute(Call& c) {
  admin_api::Dispatch(c.ctx.admin, c.ctx.auth.admin_token, c.ctx.metrics, c.r, c.responder);
}

void TopRefusedRoute(Call& c) { c.Done(TopRefusedReply(*c.ctx.refusals, c.r.target)); }

void StatusRoute(Call& c) { c.Done(StatusReply(*c.ctx.status, c.path, c.r.target)); }

void OpenApiRoute(Call& c) {
  c.Done(Text(200, std::string(http_api::OpenApiJson()), "application/json"));
}

void MetricsRoute(Call& c) {
  c.Done(Text(200, c.ctx.metrics.RenderPrometheus(), "text/plain; version=0.0.4"));
}

void HealthRoute(Call& c) { c.Done(Text(200, "ok\n")); }

void ReadyRoute(Call& c) {
  if (c.ctx.draining) return c.Done(Text(503, "not ready: shutting down\n"));
  const Status s = c.ctx.health.Ready();
  if (s.ok()) return c.Done(Text(200, "ready\n"));
  c.Done(Text(503, Cat("not ready: ", s.message(), '\n')));
}

bool HasRefusals(const Context& ctx) { return ctx.refusals != nullptr; }
bool HasStatusPage(const Context& ctx) { return ctx.status != nullptr && ctx.status->enabled(); }

constexpr std::string_view kPost = "POST";
constexpr std::string_view kGet = "GET, HEAD";
constexpr size_t kCheckDepth = http_api::kCheckBodyDepth;

constexpr Route kRoutes[] = {
    // The admin API has its own token, and its own rows (server/admin_api.h).
    {.path = "/v1/admin/",
     .prefix = true,
     .methods = {},
     .access = Access::kAdmin,
     .handle = AdminRoute},
    {.path = "/v1/auth",
     .methods = {},
     .access = Access::kCaller,
     .handle = AuthRoute},  // any method
    {.path = "/v1/check",
     .methods = kPost,
     .access = Access::kCaller,
     .body_depth = kCheckDepth,
     .idempotent = true,
     .query = http_api::RefuseCheckQuery,
     .handle = CheckRoute},
    {.path = "/v1/release",
     .methods = kPost,
     .access = Access::kCaller,
     .body_depth = http_api::kReleaseBodyDepth,
     .handle = ReleaseRoute},
    {.path = "/v1/reserve",
     .methods = kPost,
     .access = Access::kCaller,
     .body_depth = kCheckDepth,
     .idempotent = true,
     .handle = ReserveRoute},
    {.path = "/v1/settle",
     .methods = kPost,
     .access = Access::kCaller,
     .body_depth = http_api::kSettleBodyDepth,
     .idempotent = true,
     .handle = SettleRoute},
    {.path = "/v1/top-refused",
     .methods = kGet,
     .access = Access::kMetrics,
     .available = HasRefusals,
     .handle = TopRefusedRoute},
    // The page is a static document that stays open; what it reads is protected.
    {.path = "/", .methods = kGet, .available = HasStatusPage, .handle = StatusRoute},
    {.path = "/v1/status",
     .methods = kGet,
     .access = Access::kMetrics,
     .available = HasStatusPage,
     .handle = StatusRoute},
    {.path = "/v1/status/chart",
     .methods = kGet,
     .access = Access::kMetrics,
     .available = HasStatusPage,
     .handle = StatusRoute},
    {.path = "/v1/openapi.json", .methods = kGet, .handle = OpenApiRoute},
    {.path = "/metrics", .methods = kGet, .access = Access::kMetrics, .handle = MetricsRoute},
    {.path = "/healthz", .methods = kGet, .handle = HealthRoute},
    {.path = "/readyz", .methods = kGet, .handle = ReadyRoute},
};

bool Allows(std::string_view methods, std::string_view method) {
  if (methods.empty()) return true;
  while (!methods.empty()) {
    const size_t comma = methods.find(", ");
    if (methods.substr(0, comma) == method) return true;
    if (comma == std::string_view::npos) break;
    methods.remove_prefix(comma + 2);
  }
  return false;
}

}  // namespace

std::span<const Route> RouteTable() { return kRoutes; }

const Route* FindRoute(std::string_view path) {
  for (const Route& route : kRoutes) {
    if (route.prefix ? path.starts_with(route.path) : path == route.path) return &route;
  }
  return nullptr;
}

void Dispatch(const Context& ctx, const Request& r, Responder& responder) {
  std::string_view path = r.target;
  if (const size_t q = path.find('?'); q != std::string_view::npos) path = path.substr(0, q);
  Call call{.ctx = ctx, .r = r, .path = path, .body = {}, .key = {}, .responder = responder};
  const Route* route = FindRoute(path);
  if (route != nullptr && route->access != Access::kAdmin) {
    if (auto refused = RefuseCaller(ctx.auth.caller, route->access, r)) {
      return call.Done(std::move(*refused));
    }
  }
  if (route == nullptr || (route->available != nullptr && !route->available(ctx))) {
    return call.Done(
        http_api::ErrorReply({.status = 404,
                              .code = "not_found",
                              .message = Cat("path ", Quoted(path.substr(0, 200)),
                                             ": not found (try POST /v1/check or /v1/auth)")}));
  }
  if (!Allows(route->methods, r.method))
    return call.Done(MethodNotAllowed(r.method, route->methods));
  if (route->query != nullptr) {
    if (auto bad = route->query(r.target)) return call.Done(http_api::ErrorReply(*bad));
  }
  if (route->idempotent) {
    call.key = KeyOf(ctx, r);
    if (call.key && call.key->error) return call.Done(http_api::ErrorReply(*call.key->error));
  }
  if (route->body_depth > 0) {
    http_api::ParsedObject parsed = http_api::ParseObjectBody(r.body, route->body_depth);
    if (parsed.error) return call.Done(http_api::ErrorReply(*parsed.error));
    call.body = std::move(parsed.value);
  }
  route->handle(call);
}

}  // namespace caudal::routes
