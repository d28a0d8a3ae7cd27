#include "caudal/config/config.h"

#include <charconv>
#include <fstream>
#include <sstream>

#include "common/cat.h"
#include "common/port.h"
#include "config/config_tables.h"
#include "config/security_config.h"
#include "config/yaml_reader.h"

namespace caudal {
namespace {

using config_internal::YamlReader;

constexpr size_t kMaxConfigBytes = 4 << 20;

}  // namespace

namespace envoy {

std::string_view HeaderModeName(HeaderMode m) {
  switch (m) {
    case HeaderMode::kNone:
      return "none";
    case HeaderMode::kIetf:
      return "ietf";
    case HeaderMode::kIetfAndXRateLimit:
      return "ietf_and_x_ratelimit";
  }
  return "unknown";
}

Result<HeaderMode> ParseHeaderMode(std::string_view text) {
  for (HeaderMode m : {HeaderMode::kNone, HeaderMode::kIetf, HeaderMode::kIetfAndXRateLimit}) {
    if (HeaderModeName(m) == text) return m;
  }
  return Status::InvalidArgument("expected none, ietf or ietf_and_x_ratelimit (got \"" +
                                 std::string(text) + "\")");
}

std::string_view DenyAsName(DenyAs d) {
  switch (d) {
    case DenyAs::kOverLimit:
      return "over_limit";
    case DenyAs::kUnavailable:
      return "unavailable";
  }
  return "unknown";
}

Result<DenyAs> ParseDenyAs(std::string_view text) {
  for (DenyAs d : {DenyAs::kOverLimit, DenyAs::kUnavailable}) {
    if (DenyAsName(d) == text) return d;
  }
  return Status::InvalidArgument("expected over_limit or unavailable (got \"" + std::string(text) +
                                 "\")");
}

}  // namespace envoy

std::string_view RlqsNoMatchName(RlqsNoMatch m) {
  switch (m) {
    case RlqsNoMatch::kDenyAll:
      return "deny_all";
    case RlqsNoMatch::kAllowAll:
      return "allow_all";
    case RlqsNoMatch::kNone:
      return "none";
  }
  return "unknown";
}

Result<RlqsNoMatch> ParseRlqsNoMatch(std::string_view text) {
  for (RlqsNoMatch m : {RlqsNoMatch::kDenyAll, RlqsNoMatch::kAllowAll, RlqsNoMatch::kNone}) {
    if (RlqsNoMatchName(m) == text) return m;
  }
  return Status::InvalidArgument("expected deny_all, allow_all or none (got \"" +
                                 std::string(text) + "\")");
}

std::string_view HttpIoName(HttpIo io) {
  switch (io) {
    case HttpIo::kEpoll:
      return "epoll";
    case HttpIo::kIoUring:
      return "io_uring";
  }
  return "unknown";
}

Result<HttpIo> ParseHttpIo(std::string_view text) {
  for (HttpIo io : {HttpIo::kEpoll, HttpIo::kIoUring}) {
    if (HttpIoName(io) == text) return io;
  }
  return Status::InvalidArgument("expected epoll or io_uring (got \"" + std::string(text) + "\")");
}

Result<std::pair<std::string, uint16_t>> ParseHostPort(std::string_view text) {
  const size_t colon = text.rfind(':');
  const auto bad = [&] {
    return Status::InvalidArgument(
        Cat("expected host:port such as 127.0.0.1:8080 or [::1]:8080 (got ", Quoted(text), ')'));
  };
  if (colon == std::string_view::npos || colon == 0) return bad();
  std::string host(text.substr(0, colon));
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
    auto a = IpAddress::Parse(host);
    if (!a.ok() || a->family != IpFamily::kV6) return bad();
  } else if (host.find(':') != std::string::npos ||
             (host != "localhost" && !IpAddress::Parse(host).ok())) {
    return bad();
  }
  const std::optional<uint16_t> port = ParsePort(text.substr(colon + 1), 0);
  if (!port) return bad();
  return std::make_pair(host, *port);
}

Result<Config> ParseConfig(std::string_view yaml, std::string_view filename) {
  YamlReader reader(filename);
  if (yaml.size() > kMaxConfigBytes) {
    return Status::InvalidArgument(Cat(filename, ": larger than ", kMaxConfigBytes, " bytes"));
  }
  YAML::Node root;
  try {
    root = YAML::Load(std::string(yaml));
  } catch (const YAML::Exception& e) {
    return reader.ErrorAt(e.mark, "", Cat("not valid YAML: ", e.msg));
  }
  try {
    config_internal::Document doc;
    if (Status s = config_internal::DocumentTable().Read(reader, root, "", doc); !s.ok()) return s;
    doc.config.path = std::string(filename);
    return std::move(doc.config);
  } catch (const YAML::Exception& e) {
    // yaml-cpp throws on a few shapes the checks above should already refuse (e.g. aliases).
    return reader.ErrorAt(e.mark, "", Cat("unexpected YAML shape: ", e.msg));
  }
}

Result<Config> LoadConfigFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::NotFound(Cat(path, ": cannot read the file"));
  std::ostringstream text;
  text << in.rdbuf();
  auto config = ParseConfig(text.str(), path);
  // Paths in the file are relative to its directory.
  const size_t slash = path.rfind('/');
  if (config.ok() && slash != std::string::npos && !config->store.password_file.empty() &&
      config->store.password_file.front() != '/') {
    config->store.password_file = path.substr(0, slash + 1) + config->store.password_file;
  }
  if (config.ok() && slash != std::string::npos) {
    config_internal::ResolveSecurityPaths(*config, path.substr(0, slash + 1));
    if (!config->envoy.config.empty() && config->envoy.config.front() != '/') {
      config->envoy.config = path.substr(0, slash + 1) + config->envoy.config;
    }
  }
  return config;
}

}  // namespace caudal
