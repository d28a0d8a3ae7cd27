// Routes: one HTTP request → one reply, over the Limiter. No sockets: the transport hands in the
// request's pieces and a callback, so routing and forward-auth are tested without a network.
#pragma once

#include <functional>
#include <string_view>

#include "caudal/ip.h"
#include "caudal/limiter.h"
#include "caudal/metrics.h"
#include "caudal/server.h"
#include "server/http_api.h"

namespace caudal::routes {

struct Request {
  std::string_view method;
  std::string_view target;  // path and query
  std::string_view body;
  IpAddress peer;
  std::function<std::string_view(std::string_view)> header;  // "" when absent
  std::string_view forwarded_for;  // every X-Forwarded-For value, comma-joined, in order
};

struct Context {
  Limiter& limiter;
  Metrics& metrics;
  const ForwardAuthOptions& auth;
  const DebugHandler& debug;
};

using ReplyCallback = std::function<void(http_api::Reply)>;

// Answers `r`; `done` runs exactly once (inline, or on a store thread for decisions).
void Dispatch(const Context& ctx, const Request& r, ReplyCallback done);

// The descriptors forward-auth derives from a request: ip, then each configured header present.
Descriptors ForwardAuthDescriptors(const ForwardAuthOptions& auth, const Request& r);

}  // namespace caudal::routes
