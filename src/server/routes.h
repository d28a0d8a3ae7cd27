// Routes: one HTTP request → one reply, over the Engine. No sockets: the transport hands in the
// request's pieces and a callback, so routing and forward-auth are tested without a network.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "caudal/engine/engine.h"
#include "caudal/engine/ip.h"
#include "decorators/store_health.h"
#include "observe/metrics.h"
#include "server/http_api.h"
#include "server/server.h"
#include "server/status_page.h"

namespace caudal::routes {

struct Request {
  std::string_view method;
  std::string_view target;  // path and query
  std::string_view body;
  IpAddress peer;
  std::function<std::string_view(std::string_view)> header;  // "" when absent
  std::function<size_t(std::string_view)> header_count;      // how many fields have that name
  std::string_view forwarded_for;  // every X-Forwarded-For value, comma-joined, in order
  std::span<const std::string> identities = {};  // a verified client certificate's CN and SANs
};

struct Context {
  Engine& engine;
  Metrics& metrics;
  const StoreHealth& health;
  const Refusals* refusals;
  StatusPage* status;  // `/`, /v1/status and its charts; null or disabled: 404
  const ForwardAuthOptions& auth;
  Admin* admin = nullptr;  // /v1/admin/ (with auth.admin_token); null: 404
  // Idempotency-Key on POST /v1/check (with auth.idempotency); null: the field is ignored.
  const Idempotency* idempotency = nullptr;
  bool draining = false;  // shutting down: /readyz answers 503
};

// Takes the reply to one request. The transport implements it and keeps it alive until Reply()
// has run; routes hold it by reference, so answering allocates no callback.
class Responder {
 public:
  virtual void Reply(http_api::Reply reply) = 0;

 protected:
  ~Responder() = default;
};

// Who may call a route.
enum class Access : uint8_t {
  kAnyone,   // health, readiness, the OpenAPI document
  kCaller,   // the decision endpoints: the callers' credentials (server.caller), when configured
  kMetrics,  // what counts and names refused identities: the same, when caller.protect_metrics
  kAdmin,    // the admin API: its own token (server.admin), never the callers'
};

struct Call;  // one request on its way through the table (routes.cc)

// A row of the route table: the one place a path's methods, callers, body and handler are set.
struct Route {
  std::string_view path;
  bool prefix = false;       // matches every path that starts with `path` (the admin API's rows)
  std::string_view methods;  // "POST", "GET, HEAD" (a 405's Allow field); empty: any method
  Access access = Access::kAnyone;
  // Above 0: the body is a JSON object nested at most this deep, parsed once (a 400 otherwise)
  // before the handler reads it; 0: the body is not read.
  size_t body_depth = 0;
  bool idempotent = false;  // honours Idempotency-Key (server.idempotency; server/idempotency.h)
  // Refuses the request's query, before its key and body are read; null: the query is the
  // handler's.
  std::optional<http_api::ApiError> (*query)(std::string_view target) = nullptr;
  bool (*available)(const Context& ctx) = nullptr;  // null: always; false: a 404
  void (*handle)(Call& call) = nullptr;
};

// Every route, in the order Dispatch matches them.
std::span<const Route> RouteTable();
// The row that serves `path` (without its query), or null.
const Route* FindRoute(std::string_view path);

// Answers `r` through its row of the table: who may call, then the method, the query, the
// Idempotency-Key and the body, each refused with its 4xx before anything is decided; then the
// handler. `responder.Reply()` runs exactly once (inline, or on a store thread for decisions).
void Dispatch(const Context& ctx, const Request& r, Responder& responder);

// The descriptors forward-auth derives from a request: ip, then each configured header present.
// An identity header given twice (ambiguous_identity) or whose value IdentityValueProblem
// refuses (invalid_identity) is a 400, and then nothing is decided.
struct ForwardAuth {
  Descriptors descriptors;
  std::optional<http_api::ApiError> error;
};
// The reply refusing a caller that CallerAuth turns away (401 with WWW-Authenticate, or 403);
// nullopt when it may go on. Asked for routes of Access::kCaller, and of kMetrics when
// caller.protect_metrics.
std::optional<http_api::Reply> RefuseCaller(const CallerAuth& caller, Access access,
                                            const Request& r);

ForwardAuth ForwardAuthDescriptors(const ForwardAuthOptions& auth, const Request& r);

}  // namespace caudal::routes
