#include "cli/overrides.h"

#include "caudal/observe/log.h"
#include "common/cat.h"
#include "config/store_registry.h"

namespace caudal::cli {
namespace {

Status SetStoreUrl(Config& config, const std::string& url, std::string_view from) {
  if (Status s = ValidateStoreUrl(url); !s.ok())
    return Status::InvalidArgument(Cat(from, ": ", s.message()));
  config.store.url = url;
  return Status::Ok();
}

Status SetAddress(std::string& out, const std::string& address, std::string_view from) {
  if (auto hp = ParseHostPort(address); !hp.ok()) {
    return Status::InvalidArgument(Cat(from, ": ", hp.status().message()));
  }
  out = address;
  return Status::Ok();
}

Status SetHttpIo(Config& config, const std::string& text, std::string_view from) {
  auto io = ParseHttpIo(text);
  if (!io.ok()) return Status::InvalidArgument(Cat(from, ": ", io.status().message()));
  config.server.http_io = *io;
  return Status::Ok();
}

}  // namespace

Status ApplyOverrides(Config& config, const Overrides& flags, const GetEnv& getenv) {
  const auto env = [&](const char* name) -> std::string {
    const char* v = getenv(name);
    return v == nullptr ? std::string() : std::string(v);
  };
  if (const std::string v = env("CAUDAL_STORE_URL"); !v.empty()) {
    if (Status s = SetStoreUrl(config, v, "CAUDAL_STORE_URL"); !s.ok()) return s;
  }
  if (const std::string v = env("CAUDAL_STORE_PASSWORD"); !v.empty()) {
    if (v.size() > kMaxPasswordBytes) {
      return Status::InvalidArgument(
          Cat("CAUDAL_STORE_PASSWORD: longer than ", kMaxPasswordBytes, " bytes"));
    }
    config.store.password = v;
  }
  if (const std::string v = env("CAUDAL_AUTH_TOKEN"); !v.empty()) {
    if (v.size() > kMaxSecretBytes) {
      return Status::InvalidArgument(
          Cat("CAUDAL_AUTH_TOKEN: longer than ", kMaxSecretBytes, " bytes"));
    }
    config.server.auth.token = v;
  }
  if (const std::string v = env("CAUDAL_ADMIN_TOKEN"); !v.empty()) {
    if (v.size() > kMaxSecretBytes) {
      return Status::InvalidArgument(
          Cat("CAUDAL_ADMIN_TOKEN: longer than ", kMaxSecretBytes, " bytes"));
    }
    config.server.admin.token = v;
  }
  if (const std::string v = env("CAUDAL_HTTP"); !v.empty()) {
    if (Status s = SetAddress(config.server.http, v, "CAUDAL_HTTP"); !s.ok()) return s;
  }
  if (const std::string v = env("CAUDAL_GRPC"); !v.empty()) {
    if (Status s = SetAddress(config.server.grpc, v, "CAUDAL_GRPC"); !s.ok()) return s;
  }
  if (const std::string v = env("CAUDAL_HTTP_IO"); !v.empty()) {
    if (Status s = SetHttpIo(config, v, "CAUDAL_HTTP_IO"); !s.ok()) return s;
  }
  if (!flags.store_url.empty()) {
    if (Status s = SetStoreUrl(config, flags.store_url, "--store"); !s.ok()) return s;
  }
  if (!flags.http.empty()) {
    if (Status s = SetAddress(config.server.http, flags.http, "--http"); !s.ok()) return s;
  }
  if (!flags.grpc.empty()) {
    if (Status s = SetAddress(config.server.grpc, flags.grpc, "--grpc"); !s.ok()) return s;
  }
  if (!flags.http_io.empty()) {
    if (Status s = SetHttpIo(config, flags.http_io, "--http-io"); !s.ok()) return s;
  }
  if (!flags.envoy_config.empty()) config.envoy.config = flags.envoy_config;
  if (!flags.log_level.empty()) {
    auto level = ParseLogLevel(flags.log_level);
    if (!level.ok()) return Status::InvalidArgument(Cat("--log-level: ", level.status().message()));
    config.logging.level = *level;
  }
  if (!flags.log_format.empty()) {
    auto format = ParseLogFormat(flags.log_format);
    if (!format.ok())
      return Status::InvalidArgument(Cat("--log-format: ", format.status().message()));
    config.logging.format = *format;
  }
  return Status::Ok();
}

}  // namespace caudal::cli
