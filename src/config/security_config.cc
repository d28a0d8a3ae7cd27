#include "config/security_config.h"

#include <fstream>

#include "common/caller_auth.h"
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

Status LoadAdminToken(Config& config) {
  AdminConfig& admin = config.server.admin;
  if (!admin.token_file.empty() && admin.token.empty()) {
    auto token = ReadSecretFile(admin.token_file, "server.admin.token_file");
    if (!token.ok()) return token.status();
    admin.token = std::move(*token);
  }
  // One token opening both doors would make every caller an admin.
  if (!admin.token.empty() && ConstantTimeEquals(admin.token, config.server.auth.token)) {
    return Status::InvalidArgument(
        "server.admin: the admin token must differ from the callers' (server.auth)");
  }
  return Status::Ok();
}

namespace config_internal {
namespace {

constexpr size_t kMaxAllowedClients = 1024;
constexpr size_t kMaxIdentityBytes = 1024;
constexpr ClientCertMode kClientCertModes[] = {ClientCertMode::kNone, ClientCertMode::kOptional,
                                               ClientCertMode::kRequire};

void Resolve(std::string& path, const std::string& dir) {
  if (!path.empty() && path.front() != '/') path = dir + path;
}

// server.tls.listeners: which listeners terminate TLS, each once.
Status ReadListeners(const YamlReader& r, const YAML::Node& l, const std::string& field,
                     ServerTlsConfig& out) {
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
  return Status::Ok();
}

std::string ShowListeners(const ServerTlsConfig& tls) {
  if (tls.http && tls.grpc) return "[http, grpc]";
  return tls.http ? "[http]" : "[grpc]";
}

// Both files; the client certificate mode follows client_ca_file unless given.
Status CheckServerTls(const YamlReader& r, const YAML::Node& n, const std::string& field,
                      ServerTlsConfig& out) {
  if (out.cert_file.empty() || out.key_file.empty()) {
    return r.Error(n, field, "expected both cert_file and key_file (PEM files)");
  }
  if (!n["client_cert"]) {
    out.client_cert = out.client_ca_file.empty() ? ClientCertMode::kNone : ClientCertMode::kRequire;
  }
  const YAML::Node mode_at = n["client_cert"] ? n["client_cert"] : n;
  const std::string mode_field = JoinPath(field, "client_cert");
  if (out.client_cert != ClientCertMode::kNone && out.client_ca_file.empty()) {
    return r.Error(mode_at, mode_field,
                   Cat(ClientCertModeName(out.client_cert),
                       " needs client_ca_file: the CAs that sign client certificates"));
  }
  if (out.client_cert == ClientCertMode::kNone && !out.client_ca_file.empty()) {
    return r.Error(mode_at, mode_field,
                   "none with a client_ca_file: say optional or require, or drop client_ca_file");
  }
  return Status::Ok();
}

Status ValidIdentity(std::string_view id) {
  if (!id.empty() && id.size() <= kMaxIdentityBytes) return Status::Ok();
  return Status::InvalidArgument(
      Cat("expected a certificate CN or SAN of 1 to ", kMaxIdentityBytes, " bytes"));
}

Status ValidServerName(std::string_view name) {
  if (!name.empty() && name.size() <= 253 && name.find_first_of(" /:@\t\r\n") == name.npos) {
    return Status::Ok();
  }
  return Status::InvalidArgument("expected a host name");
}

}  // namespace

const Table<ServerTlsConfig>& ServerTlsTable() {
  using R = Rows<ServerTlsConfig>;
  static const Table<ServerTlsConfig> table(
      {
          {.name = "cert_file",
           .value = R::Path(&ServerTlsConfig::cert_file),
           .doc = "the server's certificate chain (PEM); with key_file"},
          {.name = "key_file",
           .value = R::Path(&ServerTlsConfig::key_file),
           .doc = "its private key (PEM)"},
          {.name = "client_ca_file",
           .value = R::Path(&ServerTlsConfig::client_ca_file),
           .doc = "mTLS: the CAs (PEM) that sign client certificates"},
          {.name = "client_cert",
           .value = R::Choice(&ServerTlsConfig::client_cert, ParseClientCertMode,
                              ClientCertModeName, kClientCertModes),
           .doc = "whether a caller must show a certificate (optional: verified if sent)",
           .default_note = "`require` with client_ca_file, else `none`"},
          {.name = "listeners",
           .value = R::Custom("list of `http`, `grpc`", ReadListeners, ShowListeners),
           .doc = "the listeners where caudal terminates TLS"},
      },
      {.doc = "Off by default: plaintext (bind to loopback then). The files are read at start "
              "and on every `SIGHUP`.",
       .check = CheckServerTls});
  return table;
}

const Table<CallerAuthConfig>& CallerAuthTable() {
  using R = Rows<CallerAuthConfig>;
  static const Table<CallerAuthConfig> table(
      {
          {.name = "token_file",
           .value = R::Path(&CallerAuthConfig::token_file),
           .doc = "a bearer token callers send (or CAUDAL_AUTH_TOKEN); never printed"},
          {.name = "allowed_clients",
           .value = R::List(&CallerAuthConfig::allowed_clients, kMaxAllowedClients,
                            TextItem("certificate CNs or SANs", ValidIdentity)),
           .doc = "mTLS identities allowed: a client certificate's CN or SAN, exactly"},
          {.name = "metrics",
           .value = R::Choice(&CallerAuthConfig::protect_metrics,
                              {{"open", false}, {"protected", true}}),
           .doc = "protected: /metrics, /v1/top-refused and /v1/status need the credentials too"},
      },
      {.doc = "Who may call /v1/check, /v1/auth and ShouldRateLimit; off by default. With a token "
              "and identities, a caller passes with either."});
  return table;
}

const Table<AdminConfig>& AdminTable() {
  using R = Rows<AdminConfig>;
  static const Table<AdminConfig> table(
      {
          {.name = "token_file",
           .value = R::Path(&AdminConfig::token_file),
           .doc = "the admin's bearer token (or CAUDAL_ADMIN_TOKEN), not the callers'; never "
                  "printed"},
          {.name = "max_overrides",
           .value = R::Integer(&AdminConfig::max_overrides, 1,
                               static_cast<int64_t>(kMaxRuntimeOverrides)),
           .doc = "runtime overrides held at most, across every policy (beyond: 409); give every "
                  "instance of a store the same"},
      },
      {.doc = "Off by default: without a token every /v1/admin/ path is 404. Turning it on takes "
              "a restart; a new token, or none, applies on reload."});
  return table;
}

const Table<StoreTlsConfig>& StoreTlsTable() {
  using R = Rows<StoreTlsConfig>;
  static const Table<StoreTlsConfig> table(
      {
          {.name = "ca_file",
           .value = R::Path(&StoreTlsConfig::ca_file),
           .doc = "the CAs (PEM) that sign Redis's certificate; empty: the system's"},
          {.name = "cert_file",
           .value = R::Path(&StoreTlsConfig::cert_file),
           .doc = "a client certificate (PEM), for tls-auth-clients yes; with key_file"},
          {.name = "key_file",
           .value = R::Path(&StoreTlsConfig::key_file),
           .doc = "its private key (PEM)"},
          {.name = "server_name",
           .value = R::Text(&StoreTlsConfig::server_name, "host name", ValidServerName),
           .doc = "sent as SNI and verified against the certificate; empty: the URL's host"},
      },
      {.doc = "Only with a TLS store.url: rediss://, or ?tls=true on redis-cluster:// and "
              "redis-sentinel://.",
       .check = [](const YamlReader& r, const YAML::Node& n, const std::string& path,
                   StoreTlsConfig& out) -> Status {
         if (out.cert_file.empty() != out.key_file.empty()) {
           return r.Error(n, path,
                          "expected cert_file and key_file together (a client certificate)");
         }
         return Status::Ok();
       }});
  return table;
}

Status CheckServerSecurity(const YamlReader& r, const YAML::Node& at, const ServerConfig& server) {
  if (!server.auth.allowed_clients.empty() && server.tls.client_ca_file.empty()) {
    return r.Error(at, "server.auth.allowed_clients",
                   "needs server.tls.client_ca_file: identities come from client certificates");
  }
  return Status::Ok();
}

void ResolveSecurityPaths(Config& config, const std::string& dir) {
  for (std::string* path : {&config.server.tls.cert_file, &config.server.tls.key_file,
                            &config.server.tls.client_ca_file, &config.server.auth.token_file,
                            &config.server.admin.token_file, &config.store.tls.ca_file,
                            &config.store.tls.cert_file, &config.store.tls.key_file}) {
    Resolve(*path, dir);
  }
}

}  // namespace config_internal
}  // namespace caudal
