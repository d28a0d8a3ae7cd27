// RlsHandler: Envoy's ShouldRateLimit as a translation into the Engine and back. No sockets.
//
// A RateLimitRequest becomes a DomainRequest (one check per descriptor, matched against the
// domains installed with Engine::SetDomains); the engine decides it as it decides every request
// (all-or-nothing or consume-each, refunds, shadow, failure modes, metrics, logs); the result
// becomes a RateLimitResponse:
//
//  - one status per descriptor, in request order: OK or OVER_LIMIT, with the matched rule's
//    limit (requests_per_unit, unit, name), limit_remaining and duration_until_reset; an
//    unlimited rule answers OK with limit_remaining UINT32_MAX, no rule OK with nothing else;
//  - the store failing answers by failure mode: allow → OK, deny → OVER_LIMIT or, with
//    DenyAs::kUnavailable, the call fails with UNAVAILABLE so Envoy applies its own
//    failure_mode_deny; every degraded answer carries `Caudal-Degraded: store_unavailable`, as
//    `caudal serve` sends over HTTP;
//  - the IETF RateLimit / RateLimit-Policy headers (and, if asked, the x-ratelimit-* trio) for
//    the descriptors decided by a store.
//
// Thread-safety: ShouldRateLimit may be called from any number of threads.
#pragma once

#include <functional>

#include "caudal/common/status.h"
#include "caudal/config/config.h"
#include "caudal/engine/engine.h"
#include "envoy/service/ratelimit/v3/rls.pb.h"

namespace caudal::envoy {

using RateLimitRequest = ::envoy::service::ratelimit::v3::RateLimitRequest;
using RateLimitResponse = ::envoy::service::ratelimit::v3::RateLimitResponse;

struct RlsOptions {
  HeaderMode headers = HeaderMode::kIetf;
  DenyAs deny_as = DenyAs::kOverLimit;
  // The reference's RESPONSE_DYNAMIC_METADATA: `dynamic_metadata` carries "domain",
  // "descriptors" (each {"entries": ["key=value", ...], "hitsAddend" when given}), the request's
  // "hitsAddend" when not 0, and "metadata", the merge of the `metadata` of every rule whose
  // descriptor answered OK (the first one's value wins a conflict).
  bool dynamic_metadata = false;
};

class RlsHandler {
 public:
  using Done = std::function<void(Status)>;

  // `engine` must outlive the handler.
  RlsHandler(Engine& engine, RlsOptions options);

  // Decides `request` into `*response`. `done` runs exactly once, inline or on a store thread,
  // with Ok when `*response` is complete, or kInvalidArgument (a bad request; the message says
  // why) or kUnavailable (a deny failure mode with DenyAs::kUnavailable). `request` and
  // `response` must stay valid until `done` runs; `done` must not block.
  void ShouldRateLimit(const RateLimitRequest& request, RateLimitResponse* response, Done done);

  // Blocking form, for tests and tools. Must not be called from a store callback.
  Result<RateLimitResponse> ShouldRateLimit(const RateLimitRequest& request);

  Engine& engine() { return engine_; }

 private:
  Engine& engine_;
  const RlsOptions options_;
};

// The pure halves, for tests: the engine's request for an RLS request, and the response for the
// engine's result (`now` dates the reset of blocked descriptors).
DomainRequest ToDomainRequest(const RateLimitRequest& request);
void BuildResponse(const RateLimitRequest& request, const CheckResult& result,
                   const RlsOptions& options, Nanos now, RateLimitResponse* response);

}  // namespace caudal::envoy
