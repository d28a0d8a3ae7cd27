// A config made ready to serve: every file it names read and checked, so that Start and Reload
// either take all of it or refuse it before anything changes; and which fields a running
// service cannot take.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "caudal/common/status.h"
#include "caudal/config/config.h"
#include "caudal/engine/engine.h"
#include "caudal/engine/ratelimit_config.h"
#include "redis/redis_tls.h"

namespace boost::asio::ssl {
class context;
}

namespace caudal::service_internal {

struct PrepareOptions {
  // Also read and check the Redis store's TLS files (store.tls): on a reload, when a store over
  // TLS is registered to take them; in `caudal validate`, when the config names any.
  bool redis_tls = false;
};

struct PreparedConfig {
  Config config;  // with server.auth.token read from its file
  // The HTTP listener's TLS context; null when it serves plaintext.
  std::shared_ptr<boost::asio::ssl::context> http_tls;
  RedisTlsContext redis_tls;                              // null unless asked for
  std::shared_ptr<const envoy::RateLimitConfig> domains;  // null without envoy_config
};

// kInvalidArgument naming the field or file at fault.
Result<PreparedConfig> Prepare(Config config, PrepareOptions options);

// store.on_failure and store.instances apply to Envoy's domains as to the policies.
DomainOptions DomainOptionsFrom(const Config& config);

// The fields `next` changes against `running` that take effect on restart only, by path.
std::vector<std::string> RestartOnlyChanges(const Config& running, const Config& next);
// Gives `next` the running values of those fields: what stays in force until a restart.
void KeepRestartOnly(const Config& running, Config& next);

}  // namespace caudal::service_internal
