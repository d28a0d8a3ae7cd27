#include "envoy/rls_handler.h"

#include <future>

namespace caudal::envoy {

DomainRequest ToDomainRequest(const RateLimitRequest& request) {
  DomainRequest out;
  out.domain = request.domain();
  out.hits_addend = request.hits_addend();
  out.wire_bytes = request.ByteSizeLong();
  out.descriptors.resize(static_cast<size_t>(request.descriptors_size()));
  for (int i = 0; i < request.descriptors_size(); ++i) {
    const auto& d = request.descriptors(i);
    DomainDescriptor& o = out.descriptors[static_cast<size_t>(i)];
    o.entries.reserve(static_cast<size_t>(d.entries_size()));
    for (const auto& e : d.entries()) o.entries.push_back({e.key(), e.value()});
    if (d.has_hits_addend()) o.hits = d.hits_addend().value();
    if (d.has_limit()) {
      o.limit = DomainDescriptor::Override{.requests_per_unit = d.limit().requests_per_unit(),
                                           .unit = d.limit().unit()};
    }
    o.refund = d.is_negative_hits();
  }
  return out;
}

RlsHandler::RlsHandler(Engine& engine, RlsOptions options) : engine_(engine), options_(options) {}

void RlsHandler::ShouldRateLimit(const RateLimitRequest& request, RateLimitResponse* response,
                                 Done done) {
  engine_.CheckAsync(ToDomainRequest(request), [this, &request, response,
                                                done = std::move(done)](Result<CheckResult> r) {
    if (!r.ok()) return done(r.status());
    if (r->outcome == Outcome::kUnavailable && options_.deny_as == DenyAs::kUnavailable) {
      return done(Status::Unavailable("rate limit store failed (failure mode deny): " +
                                      r->store_error.ToString()));
    }
    BuildResponse(request, *r, options_, engine_.clock().Now(), response);
    done(Status::Ok());
  });
}

Result<RateLimitResponse> RlsHandler::ShouldRateLimit(const RateLimitRequest& request) {
  RateLimitResponse response;
  std::promise<Status> promise;
  ShouldRateLimit(request, &response, [&promise](Status s) { promise.set_value(std::move(s)); });
  if (Status s = promise.get_future().get(); !s.ok()) return s;
  return response;
}

}  // namespace caudal::envoy
