// RlsStack: an Engine with Envoy domains installed and an RlsHandler over it, as `caudal serve`
// builds them, for the envoy layer's tests.
#pragma once

#include <memory>

#include "caudal/engine/engine.h"
#include "caudal/engine/ratelimit_config.h"
#include "envoy/rls_handler.h"

namespace caudal::envoy::testing {

struct RlsSetup {
  DomainOptions domains{};
  RlsOptions rls{};
  Store* local_store = nullptr;
  Metrics* metrics = nullptr;
};

class RlsStack {
 public:
  RlsStack(Store& store, const Clock& clock, std::shared_ptr<const RateLimitConfig> config,
           RlsSetup setup = {})
      : engine_(store, clock, {.local_store = setup.local_store, .metrics = setup.metrics}),
        handler_(engine_, setup.rls) {
    status_ = engine_.SetDomains(std::move(config), setup.domains);
  }

  Status status() const { return status_; }  // of installing the domains
  Engine& engine() { return engine_; }
  RlsHandler& handler() { return handler_; }

 private:
  Engine engine_;
  RlsHandler handler_;
  Status status_;
};

}  // namespace caudal::envoy::testing
