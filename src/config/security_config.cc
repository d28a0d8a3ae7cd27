#include "config/security_config.h"

#include <fstream>

#include "common/cat.h"

namespace caudal {

std::string_view ClientCertModeName(ClientCertMode m) {
  switch (m) {
    case ClientCertMode::kNone:
      return "none";
    case ClientCertMode::kOptional:
      return "optional";
    case ClientCertMode::kRequire:
      return "require";
  }
  return "none";
}

Result<ClientCertMode> ParseClientCertMode(std::string_view text) {
  for (ClientCertMode m :
       {ClientCertMode::kNone, ClientCertMode::kOptional, ClientCertMode::kRequire}) {
    if (ClientCertModeName(m) == text) return m;
  }
  return Status::InvalidArgument(
      Cat("expected none, optional or require (got ", Quoted(text), ')'));
}

Result<std::string> ReadSecretFile(const std::string& path, std::string_view field) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::InvalidArgument(Cat(field, ": cannot read ", Quoted(path)));
  std::string secret(kMaxSecretBytes + 1, '\0');
  in.read(secret.data(), static_cast<std::streamsize>(secret.size()));
  secret.resize(static_cast<size_t>(in.gcount()));
  if (secret.size() > kMaxSecretBytes) {
    return Status::InvalidArgument(
        Cat(field, ": ", Quoted(path), " is longer than ", kMaxSecretBytes, " bytes"));
  }
  while (!secret.empty() && (secret.back() == '\n' || secret.back() == '\r')) secret.pop_back();
  if (secret.empty()) return Status::InvalidArgument(Cat(field, ": ", Quoted(path), " is empty"));
  return secret;
}

Status LoadCallerToken(Config& config) {
  CallerAuthConfig& auth = config.server.auth;
  if (auth.token_file.empty() || !auth.token.empty()) return Status::Ok();
  auto token = ReadSecretFile(auth.token_file, "server.auth.token_file");
  if (!token.ok()) return token.status();
  auth.token = std::move(*token);
  return Status::Ok();
}

namespace config_internal {
namespace {

constexpr size_t kMaxAllowedClients = 1024;
constexpr size_t kMaxIdentityBytes = 1024;

// A non-empty path at n[name], stored into `out`.
Status Path(const YamlReader& r, const YAML::Node& n, std::string_view section, const char* name,
            std::string& out) {
  if (!n[name]) return Status::Ok();
  const std::string field = Cat(section, '.', name);
  auto path = r.String(n[name], field);
  if (!path.ok()) return path.status();
  if (path->empty()) return r.Error(n[name], field, "empty path");
  out = *path;
  return Status::Ok();
}

void Resolve(std::string& path, const std::string& dir) {
  if (!path.empty() && path.front() != '/') path = dir + path;
}

}  // namespace

Status ParseServerTls(const YamlReader& r, const YAML::Node& n, ServerTlsConfig& out) {
  constexpr std::string_view kSection = "server.tls";
  if (Status s = r.ExpectMap(
          n, kSection, {"cert_file", "key_file", "client_ca_file", "client_cert", "listeners"});
      !s.ok()) {
    return s;
  }
  for (const auto& [name, value] :
       {std::pair{"cert_file", &out.cert_file}, std::pair{"key_file", &out.key_file},
        std::pair{"client_ca_file", &out.client_ca_file}}) {
    if (Status s = Path(r, n, kSection, name, *value); !s.ok()) return s;
  }
  if (out.cert_file.empty() || out.key_file.empty()) {
    return r.Error(n, kSection, "expected both cert_file and key_file (PEM files)");
  }
  out.client_cert = out.client_ca_file.empty() ? ClientCertMode::kNone : ClientCertMode::kRequire;
  if (n["client_cert"]) {
    auto text = r.String(n["client_cert"], "server.tls.client_cert");
    if (!text.ok()) return text.status();
    auto mode = ParseClientCertMode(*text);
    if (!mode.ok())
      return r.Error(n["client_cert"], "server.tls.client_cert", mode.status().message());
    out.client_cert = *mode;
  }
  const YAML::Node mode_at = n["client_cert"] ? n["client_cert"] : n;
  if (out.client_cert != ClientCertMode::kNone && out.client_ca_file.empty()) {
    return r.Error(mode_at, "server.tls.client_cert",
                   Cat(ClientCertModeName(out.client_cert),
                       " needs client_ca_file: the CAs that sign client certificates"));
  }
  if (out.client_cert == ClientCertMode::kNone && !out.client_ca_file.empty()) {
    return r.Error(mode_at, "server.tls.client_cert",
                   "none with a client_ca_file: say optional or require, or drop client_ca_file");
  }
  if (const YAML::Node l = n["listeners"]) {
    const std::string field = "server.tls.listeners";
    if (Status s = r.ExpectSequence(l, field, 2); !s.ok()) return s;
    if (l.size() == 0) return r.Error(l, field, "expected [http], [grpc] or [http, grpc]");
    out.http = out.grpc = false;
    for (size_t i = 0; i < l.size(); ++i) {
      auto name = r.String(l[i], Cat(field, '[', i, ']'));
      if (!name.ok()) return name.status();
      bool& on = *name == "http" ? out.http : out.grpc;
      if ((*name != "http" && *name != "grpc") || on) {
        return r.Error(l[i], Cat(field, '[', i, ']'),
                       Cat("expected http or grpc, each once (got ", Quoted(*name), ')'));
      }
      on = true;
    }
  }
  return Status::Ok();
}

Status ParseCallerAuth(const YamlReader& r, const YAML::Node& n, CallerAuthConfig& out) {
  constexpr std::string_view kSection = "server.auth";
  if (Status s = r.ExpectMap(n, kSection, {"token_file", "allowed_clients", "metrics"}); !s.ok()) {
    return s;
  }
  if (Status s = Path(r, n, kSection, "token_file", out.token_file); !s.ok()) return s;
  if (const YAML::Node a = n["allowed_clients"]) {
    const std::string field = "server.auth.allowed_clients";
    if (Status s = r.ExpectSequence(a, field, kMaxAllowedClients); !s.ok()) return s;
    for (size_t i = 0; i < a.size(); ++i) {
      const std::string at = Cat(field, '[', i, ']');
      auto id = r.String(a[i], at);
      if (!id.ok()) return id.status();
      if (id->empty() || id->size() > kMaxIdentityBytes) {
        return r.Error(
            a[i], at,
            Cat("expected a certificate CN or SAN of 1 to ", kMaxIdentityBytes, " bytes"));
      }
      out.allowed_clients.push_back(*id);
    }
  }
  if (n["metrics"]) {
    auto text = r.String(n["metrics"], "server.auth.metrics");
    if (!text.ok()) return text.status();
    if (*text != "open" && *text != "protected") {
      return r.Error(n["metrics"], "server.auth.metrics",
                     Cat("expected open or protected (got ", Quoted(*text), ')'));
    }
    out.protect_metrics = *text == "protected";
  }
  return Status::Ok();
}

Status ParseStoreTls(const YamlReader& r, const YAML::Node& n, StoreTlsConfig& out) {
  constexpr std::string_view kSection = "store.tls";
  if (Status s = r.ExpectMap(n, kSection, {"ca_file", "cert_file", "key_file", "server_name"});
      !s.ok()) {
    return s;
  }
  for (const auto& [name, value] :
       {std::pair{"ca_file", &out.ca_file}, std::pair{"cert_file", &out.cert_file},
        std::pair{"key_file", &out.key_file}}) {
    if (Status s = Path(r, n, kSection, name, *value); !s.ok()) return s;
  }
  if (out.cert_file.empty() != out.key_file.empty()) {
    return r.Error(n, kSection, "expected cert_file and key_file together (a client certificate)");
  }
  if (n["server_name"]) {
    auto name = r.String(n["server_name"], "store.tls.server_name");
    if (!name.ok()) return name.status();
    if (name->empty() || name->size() > 253 ||
        name->find_first_of(" /:@\t\r\n") != std::string::npos) {
      return r.Error(n["server_name"], "store.tls.server_name", "expected a host name");
    }
    out.server_name = *name;
  }
  return Status::Ok();
}

Status CheckServerSecurity(const YamlReader& r, const YAML::Node& at, const ServerConfig& server) {
  if (!server.auth.allowed_clients.empty() && server.tls.client_ca_file.empty()) {
    return r.Error(at, "server.auth.allowed_clients",
                   "needs server.tls.client_ca_file: identities come from client certificates");
  }
  return Status::Ok();
}

void ResolveSecurityPaths(Config& config, const std::string& dir) {
  for (std::string* path :
       {&config.server.tls.cert_file, &config.server.tls.key_file,
        &config.server.tls.client_ca_file, &config.server.auth.token_file,
        &config.store.tls.ca_file, &config.store.tls.cert_file, &config.store.tls.key_file}) {
    Resolve(*path, dir);
  }
}

}  // namespace config_internal
}  // namespace caudal
