// Routes: one HTTP request → one reply, over the Engine. No sockets: the transport hands in the
// request's pieces and a callback, so routing and forward-auth are tested without a network.
#pragma once

#include <functional>
#include <span>
#include <string>
#include <string_view>

#include "caudal/engine/engine.h"
#include "caudal/engine/ip.h"
#include "engine/store_health.h"
#include "observe/metrics.h"
#include "server/http_api.h"
#include "server/server.h"
#include "server/status_page.h"

namespace caudal::idempotency {
class Idempotent;  // server/idempotency.h
}  // namespace caudal::idempotency

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
  const idempotency::Idempotent* idempotency = nullptr;
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

// Answers `r`: `responder.Reply()` runs exactly once (inline, or on a store thread for decisions).
void Dispatch(const Context& ctx, const Request& r, Responder& responder);

// The descriptors forward-auth derives from a request: ip, then each configured header present.
// An identity header given twice (ambiguous_identity) or whose value IdentityValueProblem
// refuses (invalid_identity) is a 400, and then nothing is decided.
struct ForwardAuth {
  Descriptors descriptors;
  std::optional<http_api::ApiError> error;
};
// The reply refusing a caller that CallerAuth turns away (401 with WWW-Authenticate, or 403);
// nullopt when it may go on. Only the decision endpoints ask, and /metrics, /v1/top-refused,
// /v1/status and its charts when caller.protect_metrics.
std::optional<http_api::Reply> RefuseCaller(const CallerAuth& caller, std::string_view path,
                                            const Request& r);

ForwardAuth ForwardAuthDescriptors(const ForwardAuthOptions& auth, const Request& r);

}  // namespace caudal::routes
