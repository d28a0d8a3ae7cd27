#include "server/routes.h"

#include <boost/json/parse.hpp>
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

// A keyed request of `endpoint`: its first answer, once (server/idempotency.h). Keys are the
// caller's and the identity's: the identity is the body's descriptors (a check, a reserve) or
// its reservation (a settle), so that two identities never share a key's record. What the reply
// needs is copied: the request's pieces are views that end when Dispatch returns.
void DecideOnce(const Context& ctx, const Request& r, std::string_view endpoint,
                const std::string& key, idempotency::Idempotent::Decide decide,
                Responder& responder) {
  // The endpoint's parser has read the body (a JSON object); the error code keeps the data path
  // free of exceptions all the same.
  boost::json::error_code ec;
  const boost::json::value body = boost::json::parse(r.body, ec);
  const std::string scope = idempotency::IdentityScope(
      idempotency::CallerScope(ctx.auth.caller, r.identities), ec ? boost::json::value() : body);
  idempotency::Request keyed{
      .record = idempotency::RecordKey(endpoint, scope, key),
      .fingerprint = idempotency::Fingerprint(ec ? boost::json::value(r.body) : body)};
  ctx.idempotency->Run(ctx.auth.idempotency, std::move(keyed), std::move(decide),
                       [&responder](Reply reply) { responder.Reply(std::move(reply)); });
}

// A check's decision, and a reserve's, handed to `then` as its reply; by the failure modes when
// its Idempotency-Key record could not be read.
idempotency::Idempotent::Decide CheckDecision(Engine& engine, CheckRequest request,
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

bool IsGetOrHead(std::string_view m) { return m == "GET" || m == "HEAD"; }

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

std::optional<Reply> RefuseCaller(const CallerAuth& caller, std::string_view path,
                                  const Request& r) {
  if (!caller.enabled()) return std::nullopt;
  const bool decision = path == "/v1/check" || path == "/v1/auth" || path == "/v1/release" ||
                        path == "/v1/reserve" || path == "/v1/settle";
  // The status JSON holds the refused identities /v1/top-refused shows; the page itself is a
  // static document that stays open (it then says it cannot read /v1/status).
  const bool metrics = path == "/metrics" || path == "/v1/top-refused" || path == "/v1/status" ||
                       path == "/v1/status/chart";
  if (!decision && !(metrics && caller.protect_metrics)) return std::nullopt;
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

void Dispatch(const Context& ctx, const Request& r, Responder& responder) {
  const auto done = [&responder](Reply reply) { responder.Reply(std::move(reply)); };
  std::string_view path = r.target;
  if (const size_t q = path.find('?'); q != std::string_view::npos) path = path.substr(0, q);
  // The admin API has its own token, and never takes the callers'.
  if (path.starts_with("/v1/admin/")) {
    return admin_api::Dispatch(ctx.admin, ctx.auth.admin_token, ctx.metrics, r, responder);
  }
  if (auto refused = RefuseCaller(ctx.auth.caller, path, r)) return done(std::move(*refused));

  if (path == "/v1/auth") {
    const http_api::ParsedAuthQuery query = http_api::ParseAuthQuery(r.target);
    if (query.error) return done(http_api::ErrorReply(*query.error));
    ForwardAuth derived = ForwardAuthDescriptors(ctx.auth, r);
    if (derived.error) return done(http_api::ErrorReply(*derived.error));
    Decide(ctx, {.descriptors = std::move(derived.descriptors), .cost = std::nullopt},
           http_api::Endpoint::kAuth, responder, query.statuses);
    return;
  }
  if (path == "/v1/check") {
    if (r.method != "POST") return done(MethodNotAllowed(r.method, "POST"));
    if (auto bad = http_api::RefuseCheckQuery(r.target)) return done(http_api::ErrorReply(*bad));
    const std::optional<idempotency::ParsedKey> key = KeyOf(ctx, r);
    if (key && key->error) return done(http_api::ErrorReply(*key->error));
    http_api::ParsedCheck parsed = http_api::ParseCheckBody(r.body);
    if (parsed.error) return done(http_api::ErrorReply(*parsed.error));
    if (key) {
      return DecideOnce(ctx, r, "/v1/check", key->key,
                        CheckDecision(ctx.engine, std::move(parsed.request), CheckReply),
                        responder);
    }
    Decide(ctx, std::move(parsed.request), http_api::Endpoint::kCheck, responder);
    return;
  }
  if (path == "/v1/release") {
    if (r.method != "POST") return done(MethodNotAllowed(r.method, "POST"));
    http_api::ParsedRelease parsed = http_api::ParseReleaseBody(r.body);
    if (parsed.error) return done(http_api::ErrorReply(*parsed.error));
    ctx.engine.ReleaseAsync(parsed.hold, [&responder](Result<ReleaseResult> result) {
      responder.Reply(http_api::ReleaseReply(result));
    });
    return;
  }
  if (path == "/v1/reserve") {
    if (r.method != "POST") return done(MethodNotAllowed(r.method, "POST"));
    const std::optional<idempotency::ParsedKey> key = KeyOf(ctx, r);
    if (key && key->error) return done(http_api::ErrorReply(*key->error));
    http_api::ParsedCheck parsed = http_api::ParseReserveBody(r.body);
    if (parsed.error) return done(http_api::ErrorReply(*parsed.error));
    idempotency::Idempotent::Decide decide =
        CheckDecision(ctx.engine, std::move(parsed.request), http_api::ReserveReply);
    if (key) return DecideOnce(ctx, r, "/v1/reserve", key->key, std::move(decide), responder);
    decide(Status::Ok(), [&responder](Reply reply) { responder.Reply(std::move(reply)); });
    return;
  }
  if (path == "/v1/settle") {
    if (r.method != "POST") return done(MethodNotAllowed(r.method, "POST"));
    const std::optional<idempotency::ParsedKey> key = KeyOf(ctx, r);
    if (key && key->error) return done(http_api::ErrorReply(*key->error));
    http_api::ParsedSettle parsed = http_api::ParseSettleBody(r.body);
    if (parsed.error) return done(http_api::ErrorReply(*parsed.error));
    idempotency::Idempotent::Decide decide = [&engine = ctx.engine,
                                              reservation = std::move(parsed.reservation),
                                              cost = parsed.cost](const Status& records,
                                                                  std::function<void(Reply)> then) {
      // A settle has no failure mode: the store's failure is its 503.
      if (!records.ok()) return then(http_api::SettleReply(records));
      engine.SettleAsync(reservation, cost, [then = std::move(then)](Result<SettleResult> result) {
        then(http_api::SettleReply(result));
      });
    };
    if (key) return DecideOnce(ctx, r, "/v1/settle", key->key, std::move(decide), responder);
    decide(Status::Ok(), [&responder](Reply reply) { responder.Reply(std::move(reply)); });
    return;
  }
  if (path == "/v1/top-refused" && ctx.refusals != nullptr) {
    if (!IsGetOrHead(r.method)) return done(MethodNotAllowed(r.method, "GET, HEAD"));
    return done(TopRefusedReply(*ctx.refusals, r.target));
  }
  if (ctx.status != nullptr && ctx.status->enabled() &&
      (path == "/" || path == "/v1/status" || path == "/v1/status/chart")) {
    if (!IsGetOrHead(r.method)) return done(MethodNotAllowed(r.method, "GET, HEAD"));
    return done(StatusReply(*ctx.status, path, r.target));
  }
  if (path == "/v1/openapi.json") {
    if (!IsGetOrHead(r.method)) return done(MethodNotAllowed(r.method, "GET, HEAD"));
    return done(Text(200, std::string(http_api::OpenApiJson()), "application/json"));
  }
  if (path == "/metrics" || path == "/healthz" || path == "/readyz") {
    if (!IsGetOrHead(r.method)) return done(MethodNotAllowed(r.method, "GET, HEAD"));
    if (path == "/metrics") {
      return done(Text(200, ctx.metrics.RenderPrometheus(), "text/plain; version=0.0.4"));
    }
    if (path == "/healthz") return done(Text(200, "ok\n"));
    if (ctx.draining) return done(Text(503, "not ready: shutting down\n"));
    const Status s = ctx.health.Ready();
    if (s.ok()) return done(Text(200, "ready\n"));
    return done(Text(503, Cat("not ready: ", s.message(), '\n')));
  }
  done(http_api::ErrorReply({.status = 404,
                             .code = "not_found",
                             .message = Cat("path ", Quoted(path.substr(0, 200)),
                                            ": not found (try POST /v1/check or /v1/auth)")}));
}

}  // namespace caudal::routes
