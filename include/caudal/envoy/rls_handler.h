// RlsHandler: Envoy's ShouldRateLimit decided on any Store, without sockets.
//
// Each descriptor of a RateLimitRequest finds its rule in the RateLimitConfig (or carries its own
// limit override) and becomes one store entry keyed by the limit, the domain and the request's
// entries, so every distinct value is counted apart, as in envoyproxy/ratelimit.
//
//  - hits: the descriptor's hits_addend when set (0 checks without consuming), else the
//    request's hits_addend, where 0 means unset and so 1 (proto3 cannot tell them apart).
//  - DescriptorMode::kAllOrNothing (default): the enforced descriptors are decided in one store
//    request, so when any is over its limit none is consumed. kConsumeEach decides each
//    descriptor alone, like the reference, which counts a hit on every descriptor even when
//    another refuses the request. Shadow-mode descriptors never refuse; in kAllOrNothing they
//    count a hit only when the request passed.
//  - unlimited: OK with limit_remaining UINT32_MAX and no store access; requests_per_unit 0:
//    always OVER_LIMIT; `replaces`: a matched rule named in another matched rule's replaces
//    list is dropped from the request, as in the reference.
//  - Refunds: is_negative_hits gives the descriptor's hits back to its limit (never past a
//    fresh state; see EntryOp::kRefund), whatever the other descriptors decide; the status is
//    OK with the limit_remaining after the refund. Hits and refunds on the same descriptor in one
//    request net out. A refund on a shadow-mode descriptor applies too.
//  - The store failing (kUnavailable, kDeadlineExceeded, kResourceExhausted, kInternal) gives the
//    configured FailureMode: kAllow answers OK, kDenyOverLimit answers OVER_LIMIT (both add the
//    header `Caudal-Degraded: store_unavailable`, as `caudal serve` does over HTTP),
//    kDenyUnavailable fails the call with kUnavailable so Envoy applies its own
//    failure_mode_deny, kLocal decides again in this instance's local store with each limit
//    divided among the instances (as `caudal serve`'s `local` failure mode). The store's own
//    deadline bounds how long that takes.
//
// Thread-safety: ShouldRateLimit may be called from any number of threads; SetConfig may run
// concurrently with it (a call uses the config it started with).
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <mutex>

#include "caudal/clock.h"
#include "caudal/envoy/ratelimit_config.h"
#include "caudal/status.h"
#include "caudal/store.h"
#include "envoy/service/ratelimit/v3/rls.pb.h"

namespace caudal::envoy {

using RateLimitRequest = ::envoy::service::ratelimit::v3::RateLimitRequest;
using RateLimitResponse = ::envoy::service::ratelimit::v3::RateLimitResponse;

enum class DescriptorMode : uint8_t {
  kAllOrNothing,  // one over-limit descriptor means no descriptor consumes
  kConsumeEach,   // the reference's behaviour: each descriptor counts on its own
};

enum class FailureMode : uint8_t {
  kAllow,             // OK, with a Caudal-Degraded header
  kDenyOverLimit,     // OVER_LIMIT, with a Caudal-Degraded header
  kDenyUnavailable,   // the RPC fails with UNAVAILABLE
  kLocal,             // decided in RlsOptions::local_store, limits divided among the instances,
                      // with a Caudal-Degraded header (OVER_LIMIT when that is impossible)
};

enum class HeaderMode : uint8_t {
  kNone,
  kIetf,                // RateLimit and RateLimit-Policy (draft-ietf-httpapi-ratelimit-headers-10)
  kIetfAndXRateLimit,   // also x-ratelimit-limit / -remaining / -reset
};

struct RlsOptions {
  DescriptorMode descriptor_mode = DescriptorMode::kAllOrNothing;
  FailureMode failure_mode = FailureMode::kAllow;
  HeaderMode headers = HeaderMode::kIetf;
  size_t max_request_bytes = 64 * 1024;  // larger requests are kInvalidArgument
  // FailureMode::kLocal: this instance's own store, and how many instances share the limits.
  Store* local_store = nullptr;
  int64_t instances = 1;
};

// Parse the spellings used on the command line and in config files.
Result<DescriptorMode> ParseDescriptorMode(std::string_view s);  // all_or_nothing|consume_each
Result<FailureMode> ParseFailureMode(std::string_view s);  // allow|deny|deny_unavailable|local
Result<HeaderMode> ParseHeaderMode(std::string_view s);    // none|ietf|ietf_and_x_ratelimit

class RlsHandler {
 public:
  using Done = std::function<void(Status)>;

  // `store` and `clock` must outlive the handler. The clock only dates the reset of limits that
  // never reach the store (requests_per_unit 0).
  RlsHandler(Store& store, const Clock& clock, std::shared_ptr<const RateLimitConfig> config,
             RlsOptions options = {});

  void SetConfig(std::shared_ptr<const RateLimitConfig> config);
  std::shared_ptr<const RateLimitConfig> config() const;
  const RlsOptions& options() const { return options_; }

  // Decides `request` into `*response`. `done` runs exactly once, inline or on a store thread,
  // with Ok when `*response` is complete, or kInvalidArgument (a bad request; the message says
  // why) or kUnavailable (FailureMode::kDenyUnavailable). `request` and `response` must stay
  // valid until `done` runs; `done` must not block.
  void ShouldRateLimit(const RateLimitRequest& request, RateLimitResponse* response, Done done);

  // Blocking form, for tests and tools. Must not be called from a store callback.
  Result<RateLimitResponse> ShouldRateLimit(const RateLimitRequest& request);

 private:
  Store& store_;
  const Clock& clock_;
  const RlsOptions options_;
  mutable std::mutex config_mu_;
  std::shared_ptr<const RateLimitConfig> config_;  // guarded by config_mu_
};

}  // namespace caudal::envoy
