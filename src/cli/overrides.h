// Settings a deployment gives outside the config file, applied over it in this order: the file,
// then the environment, then the command line. For containers, where the file is baked into an
// image or a ConfigMap and the secrets and addresses come from the environment:
//
//   CAUDAL_STORE_URL        store.url
//   CAUDAL_STORE_PASSWORD   the store's password (never printed; the URL need not hold it)
//   CAUDAL_AUTH_TOKEN       the callers' bearer token (server.auth; never printed)
//   CAUDAL_HTTP             server.http
//   CAUDAL_GRPC             server.grpc
//   CAUDAL_HTTP_IO          server.http_io
#pragma once

#include <functional>
#include <string>

#include "caudal/common/status.h"
#include "caudal/config/config.h"

namespace caudal::cli {

// The same settings as flags, and --envoy-config, --log-level, --log-format; empty: not given.
struct Overrides {
  std::string store_url;
  std::string http;
  std::string grpc;
  std::string http_io;
  std::string envoy_config;
  std::string log_level;
  std::string log_format;
};

using GetEnv = std::function<const char*(const char*)>;

// kInvalidArgument naming the variable or flag that holds a bad value.
Status ApplyOverrides(Config& config, const Overrides& flags, const GetEnv& getenv);

}  // namespace caudal::cli
