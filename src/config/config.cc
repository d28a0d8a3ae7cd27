#include "caudal/config.h"

#include <algorithm>
#include <charconv>
#include <fstream>
#include <sstream>
#include <vector>

#include "caudal/rate.h"
#include "caudal/store_registry.h"
#include "common/cat.h"
#include "common/port.h"
#include "config/security_config.h"
#include "config/yaml_reader.h"

namespace caudal {
namespace {

using config_internal::YamlReader;

constexpr size_t kMaxConfigBytes = 4 << 20;

// A typed choice: the node's string parsed by `parse`, or the error at the node.
template <typename T>
Result<T> Choice(const YamlReader& r, const YAML::Node& n, std::string_view field,
                 Result<T> (*parse)(std::string_view)) {
  auto text = r.String(n, field);
  if (!text.ok()) return text.status();
  auto value = parse(*text);
  if (!value.ok()) return r.Error(n, field, value.status().message());
  return value;
}

Result<Limit> ParseLimit(const YamlReader& r, const YAML::Node& n, const std::string& field) {
  if (!n.IsMap() || !n["algorithm"]) {
    return r.Error(n, field,
                   "expected a map with an algorithm: {algorithm: token_bucket, "
                   "capacity: 100, refill: 100/1m} or {algorithm: fixed_window, "
                   "limit: 100, window: 1m}");
  }
  auto name = r.String(n["algorithm"], field + ".algorithm");
  if (!name.ok()) return name.status();
  auto algorithm = ParseAlgorithm(*name);
  if (!algorithm.ok())
    return r.Error(n["algorithm"], field + ".algorithm", algorithm.status().message());
  const bool window = IsWindowAlgorithm(*algorithm);
  if (Status s = window ? r.ExpectMap(n, field, {"algorithm", "limit", "window"})
                        : r.ExpectMap(n, field, {"algorithm", "capacity", "refill"});
      !s.ok()) {
    return s;
  }
  const char* count_name = window ? "limit" : "capacity";
  const char* rate_name = window ? "window" : "refill";
  if (!n[count_name]) return r.Error(n, field, Cat("missing ", count_name));
  if (!n[rate_name]) return r.Error(n, field, Cat("missing ", rate_name));
  auto count = r.Integer(n[count_name], Cat(field, '.', count_name), 1, kMaxCapacity);
  if (!count.ok()) return count.status();
  LimitSpec spec;
  const YAML::Node rate_node = n[rate_name];
  const std::string rate_field = Cat(field, '.', rate_name);
  if (window) {
    auto w = r.Duration(rate_node, rate_field);
    if (!w.ok()) return w.status();
    spec = LimitSpec::Window(*algorithm, *count, *w);
  } else {
    auto text = r.String(rate_node, rate_field);
    if (!text.ok()) return text.status();
    auto rate = ParseRate(*text);
    if (!rate.ok()) {
      return r.Error(
          rate_node, rate_field,
          Cat("expected \"<count>/<duration>\" such as \"100/1m\": ", rate.status().message()));
    }
    spec = LimitSpec::Bucket(*algorithm, *count, *rate);
  }
  auto limit = Limit::Create(spec);
  if (!limit.ok()) return r.Error(n, field, limit.status().message());
  return *limit;
}

// The node a PolicyError's field points at ("identity[1]" → policy["identity"][1]).
YAML::Node NodeForField(const YAML::Node& policy, const std::string& field) {
  const size_t bracket = field.find('[');
  const size_t dot = field.find('.');
  const std::string head = field.substr(0, std::min(bracket, dot));
  YAML::Node n = policy[head];
  if (!n) return policy;
  if (bracket != std::string::npos) {
    size_t i = 0;
    std::from_chars(field.data() + bracket + 1, field.data() + field.size(), i);
    if (n.IsSequence() && i < n.size()) return n[i];
  } else if (dot != std::string::npos) {
    YAML::Node sub = n[field.substr(dot + 1)];
    if (sub) return sub;
  }
  return n;
}

Result<PolicySpec> ParsePolicy(const YamlReader& r, const YAML::Node& n, const std::string& field,
                               const PolicySetOptions& options) {
  if (Status s = r.ExpectMap(n, field,
                             {"name", "identity", "ip_prefix", "limits", "cost", "shadow",
                              "count_rejected", "on_failure"});
      !s.ok()) {
    return s;
  }
  for (const char* required : {"name", "identity", "limits"}) {
    if (!n[required]) return r.Error(n, field, Cat("missing ", required));
  }
  PolicySpec spec;
  auto name = r.String(n["name"], field + ".name");
  if (!name.ok()) return name.status();
  spec.name = *name;
  const YAML::Node identity = n["identity"];
  if (Status s = r.ExpectSequence(identity, field + ".identity", kMaxIdentityFields); !s.ok()) {
    return s;
  }
  for (size_t i = 0; i < identity.size(); ++i) {
    auto f = r.String(identity[i], Cat(field, ".identity[", i, ']'));
    if (!f.ok()) return f.status();
    spec.identity.push_back(*f);
  }
  if (const YAML::Node p = n["ip_prefix"]) {
    if (Status s = r.ExpectMap(p, field + ".ip_prefix", {"v4", "v6"}); !s.ok()) return s;
    if (p["v4"]) {
      auto v = r.Integer(p["v4"], field + ".ip_prefix.v4", 0, 32);
      if (!v.ok()) return v.status();
      spec.ip_prefix.v4 = static_cast<int>(*v);
    }
    if (p["v6"]) {
      auto v = r.Integer(p["v6"], field + ".ip_prefix.v6", 0, 128);
      if (!v.ok()) return v.status();
      spec.ip_prefix.v6 = static_cast<int>(*v);
    }
  }
  const YAML::Node limits = n["limits"];
  if (Status s = r.ExpectSequence(limits, field + ".limits", kMaxLimitsPerPolicy); !s.ok())
    return s;
  for (size_t i = 0; i < limits.size(); ++i) {
    auto l = ParseLimit(r, limits[i], Cat(field, ".limits[", i, ']'));
    if (!l.ok()) return l.status();
    spec.limits.push_back(*l);
  }
  if (n["cost"]) {
    auto c = r.Integer(n["cost"], field + ".cost", 1, kMaxCapacity);
    if (!c.ok()) return c.status();
    spec.cost = *c;
  }
  if (n["shadow"]) {
    auto b = r.Bool(n["shadow"], field + ".shadow");
    if (!b.ok()) return b.status();
    spec.enforcement = *b ? Enforcement::kShadow : Enforcement::kEnforce;
  }
  if (n["count_rejected"]) {
    auto b = r.Bool(n["count_rejected"], field + ".count_rejected");
    if (!b.ok()) return b.status();
    spec.count_rejected = *b ? RejectedCounting::kCounted : RejectedCounting::kNotCounted;
  }
  if (n["on_failure"]) {
    auto mode = Choice(r, n["on_failure"], field + ".on_failure", ParseFailureMode);
    if (!mode.ok()) return mode.status();
    spec.on_failure = *mode;
  }
  if (auto e = ValidatePolicy(spec, options)) {
    return r.Error(NodeForField(n, e->field), Cat(field, '.', e->field), e->status.message());
  }
  return spec;
}

Status ParseStore(const YamlReader& r, const YAML::Node& n, StoreConfig& out) {
  if (Status s = r.ExpectMap(n, "store",
                             {"url", "password_file", "timeout", "on_failure", "instances",
                              "max_keys", "over_limit_cache", "tls"});
      !s.ok()) {
    return s;
  }
  if (n["url"]) {
    auto url = r.String(n["url"], "store.url");
    if (!url.ok()) return url.status();
    if (Status s = ValidateStoreUrl(*url); !s.ok())
      return r.Error(n["url"], "store.url", s.message());
    out.url = *url;
  }
  if (n["password_file"]) {
    auto path = r.String(n["password_file"], "store.password_file");
    if (!path.ok()) return path.status();
    if (path->empty()) return r.Error(n["password_file"], "store.password_file", "empty path");
    out.password_file = *path;
  }
  if (n["timeout"]) {
    auto t = r.Duration(n["timeout"], "store.timeout");
    if (!t.ok()) return t.status();
    if (*t < std::chrono::milliseconds(1) || *t > std::chrono::seconds(10)) {
      return r.Error(n["timeout"], "store.timeout", "expected between 1ms and 10s");
    }
    out.timeout = *t;
  }
  if (n["on_failure"]) {
    auto mode = Choice(r, n["on_failure"], "store.on_failure", ParseFailureMode);
    if (!mode.ok()) return mode.status();
    out.on_failure = *mode;
  }
  if (n["instances"]) {
    auto v = r.Integer(n["instances"], "store.instances", 1, kMaxInstances);
    if (!v.ok()) return v.status();
    out.instances = *v;
  }
  if (n["max_keys"]) {
    auto v = r.Integer(n["max_keys"], "store.max_keys", 1, int64_t{1} << 32);
    if (!v.ok()) return v.status();
    out.max_keys = *v;
  }
  if (n["over_limit_cache"]) {
    auto b = r.Bool(n["over_limit_cache"], "store.over_limit_cache");
    if (!b.ok()) return b.status();
    out.over_limit_cache = *b;
  }
  if (n["tls"]) {
    // Only a TLS URL reads store.tls: a plaintext one would silently ignore it.
    if (!out.url.starts_with("rediss://") && out.url.find("tls=true") == std::string::npos) {
      return r.Error(n["tls"], "store.tls",
                     "needs a TLS store.url: rediss://, or ?tls=true for redis-cluster:// and "
                     "redis-sentinel://");
    }
    return config_internal::ParseStoreTls(r, n["tls"], out.tls);
  }
  return Status::Ok();
}

bool IsHeaderName(std::string_view h) {
  if (h.empty() || h.size() > 64) return false;
  for (char c : h) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '-' || c == '_';
    if (!ok) return false;
  }
  return true;
}

Status ParseHeaders(const YamlReader& r, const YAML::Node& n, ServerConfig& out) {
  const std::string field = "server.descriptor_headers";
  if (!n.IsMap()) return r.Error(n, field, "expected a map of descriptor name to header name");
  out.descriptor_headers.clear();
  for (const auto& kv : n) {
    const std::string name = kv.first.IsScalar() ? kv.first.Scalar() : std::string();
    const std::string where = Cat(field, '.', name);
    if (!IsValidName(name) || name == "ip") {
      return r.Error(kv.first, where,
                     "expected a descriptor name of [A-Za-z0-9_.-] other than ip (the client "
                     "address is always the ip descriptor)");
    }
    auto header = r.String(kv.second, where);
    if (!header.ok()) return header.status();
    if (!IsHeaderName(*header)) {
      return r.Error(kv.second, where, "expected a header name of [A-Za-z0-9_-], up to 64");
    }
    for (const HeaderDescriptor& h : out.descriptor_headers) {
      if (h.descriptor == name) return r.Error(kv.first, where, "given twice");
    }
    out.descriptor_headers.push_back({name, *header});
  }
  return Status::Ok();
}

Status ParseServer(const YamlReader& r, const YAML::Node& n, ServerConfig& out) {
  if (Status s = r.ExpectMap(
          n, "server",
          {"http", "trusted_proxies", "descriptor_headers", "max_connections",
           "max_connections_per_client", "client_prefix", "header_timeout", "body_timeout",
           "idle_timeout", "threads", "grpc", "tls", "auth", "status_page"});
      !s.ok()) {
    return s;
  }
  if (n["status_page"]) {
    auto b = r.Bool(n["status_page"], "server.status_page");
    if (!b.ok()) return b.status();
    out.status_page = *b;
  }
  if (n["grpc"]) {
    auto text = r.String(n["grpc"], "server.grpc");
    if (!text.ok()) return text.status();
    auto hp = ParseHostPort(*text);
    if (!hp.ok()) return r.Error(n["grpc"], "server.grpc", hp.status().message());
    out.grpc = *text;
  }
  if (n["http"]) {
    auto text = r.String(n["http"], "server.http");
    if (!text.ok()) return text.status();
    auto hp = ParseHostPort(*text);
    if (!hp.ok()) return r.Error(n["http"], "server.http", hp.status().message());
    out.http = *text;
  }
  if (const YAML::Node p = n["trusted_proxies"]) {
    if (Status s = r.ExpectSequence(p, "server.trusted_proxies", 256); !s.ok()) return s;
    for (size_t i = 0; i < p.size(); ++i) {
      const std::string field = Cat("server.trusted_proxies[", i, ']');
      auto text = r.String(p[i], field);
      if (!text.ok()) return text.status();
      auto block = CidrBlock::Parse(*text);
      if (!block.ok()) return r.Error(p[i], field, block.status().message());
      out.trusted_proxies.push_back(*block);
    }
  }
  if (n["descriptor_headers"]) {
    if (Status s = ParseHeaders(r, n["descriptor_headers"], out); !s.ok()) return s;
  }
  if (n["max_connections"]) {
    auto v = r.Integer(n["max_connections"], "server.max_connections", 1, 1'000'000);
    if (!v.ok()) return v.status();
    out.max_connections = *v;
  }
  if (n["max_connections_per_client"]) {
    auto v = r.Integer(n["max_connections_per_client"], "server.max_connections_per_client", 1,
                       1'000'000);
    if (!v.ok()) return v.status();
    out.max_connections_per_client = *v;
  }
  if (const YAML::Node p = n["client_prefix"]) {
    if (Status s = r.ExpectMap(p, "server.client_prefix", {"v4", "v6"}); !s.ok()) return s;
    if (p["v4"]) {
      auto v = r.Integer(p["v4"], "server.client_prefix.v4", 0, 32);
      if (!v.ok()) return v.status();
      out.client_prefix.v4 = static_cast<int>(*v);
    }
    if (p["v6"]) {
      auto v = r.Integer(p["v6"], "server.client_prefix.v6", 0, 128);
      if (!v.ok()) return v.status();
      out.client_prefix.v6 = static_cast<int>(*v);
    }
  }
  if (n["threads"]) {
    auto v = r.Integer(n["threads"], "server.threads", 0, 256);
    if (!v.ok()) return v.status();
    out.threads = *v;
  }
  struct Timeout {
    const char* name;
    Micros* value;
  };
  for (Timeout t :
       {Timeout{"header_timeout", &out.header_timeout}, Timeout{"body_timeout", &out.body_timeout},
        Timeout{"idle_timeout", &out.idle_timeout}}) {
    if (!n[t.name]) continue;
    const std::string field = Cat("server.", t.name);
    auto d = r.Duration(n[t.name], field);
    if (!d.ok()) return d.status();
    if (*d < std::chrono::milliseconds(10) || *d > std::chrono::hours(1)) {
      return r.Error(n[t.name], field, "expected between 10ms and 1h");
    }
    *t.value = *d;
  }
  if (n["tls"]) {
    if (Status s = config_internal::ParseServerTls(r, n["tls"], out.tls); !s.ok()) return s;
  }
  if (n["auth"]) {
    if (Status s = config_internal::ParseCallerAuth(r, n["auth"], out.auth); !s.ok()) return s;
  }
  return config_internal::CheckServerSecurity(r, n["auth"] ? n["auth"] : n, out);
}

Status ParseEnvoy(const YamlReader& r, const YAML::Node& n, EnvoyConfig& out) {
  if (Status s = r.ExpectMap(n, "envoy",
                             {"descriptor_mode", "deny_as", "headers", "max_concurrent_calls",
                              "response_dynamic_metadata"});
      !s.ok()) {
    return s;
  }
  if (n["descriptor_mode"]) {
    auto v = Choice(r, n["descriptor_mode"], "envoy.descriptor_mode", ParseDescriptorMode);
    if (!v.ok()) return v.status();
    out.descriptor_mode = *v;
  }
  if (n["deny_as"]) {
    auto v = Choice(r, n["deny_as"], "envoy.deny_as", envoy::ParseDenyAs);
    if (!v.ok()) return v.status();
    out.deny_as = *v;
  }
  if (n["headers"]) {
    auto v = Choice(r, n["headers"], "envoy.headers", envoy::ParseHeaderMode);
    if (!v.ok()) return v.status();
    out.headers = *v;
  }
  if (n["max_concurrent_calls"]) {
    auto v = r.Integer(n["max_concurrent_calls"], "envoy.max_concurrent_calls", 1, 1'000'000);
    if (!v.ok()) return v.status();
    out.max_concurrent_calls = *v;
  }
  if (n["response_dynamic_metadata"]) {
    auto v = r.Bool(n["response_dynamic_metadata"], "envoy.response_dynamic_metadata");
    if (!v.ok()) return v.status();
    out.response_dynamic_metadata = *v;
  }
  return Status::Ok();
}

Status ParseLogging(const YamlReader& r, const YAML::Node& n, LoggingConfig& out) {
  if (Status s = r.ExpectMap(n, "logging", {"level", "format", "refusals", "identities"});
      !s.ok()) {
    return s;
  }
  if (n["level"]) {
    auto v = Choice(r, n["level"], "logging.level", ParseLogLevel);
    if (!v.ok()) return v.status();
    out.level = *v;
  }
  if (n["format"]) {
    auto v = Choice(r, n["format"], "logging.format", ParseLogFormat);
    if (!v.ok()) return v.status();
    out.format = *v;
  }
  if (n["refusals"]) {
    auto b = r.Bool(n["refusals"], "logging.refusals");
    if (!b.ok()) return b.status();
    out.refusals = *b;
  }
  if (n["identities"]) {
    auto v = Choice(r, n["identities"], "logging.identities", ParseIdentityDisplay);
    if (!v.ok()) return v.status();
    out.identities = *v;
  }
  return Status::Ok();
}

Result<Config> ParseRoot(const YamlReader& r, const YAML::Node& root) {
  if (Status s = r.ExpectMap(
          root, "",
          {"store", "server", "policies", "descriptor_mode", "envoy_config", "envoy", "logging"});
      !s.ok()) {
    return s;
  }
  Config config;
  DescriptorMode mode = DescriptorMode::kAllOrNothing;
  if (root["descriptor_mode"]) {
    auto v = Choice(r, root["descriptor_mode"], "descriptor_mode", ParseDescriptorMode);
    if (!v.ok()) return v.status();
    mode = *v;
  }
  if (root["envoy_config"]) {
    auto text = r.String(root["envoy_config"], "envoy_config");
    if (!text.ok()) return text.status();
    if (text->empty()) return r.Error(root["envoy_config"], "envoy_config", "empty path");
    config.envoy.config = *text;
  }
  if (root["envoy"]) {
    if (Status s = ParseEnvoy(r, root["envoy"], config.envoy); !s.ok()) return s;
  }
  if (root["logging"]) {
    if (Status s = ParseLogging(r, root["logging"], config.logging); !s.ok()) return s;
  }
  if (root["store"]) {
    if (Status s = ParseStore(r, root["store"], config.store); !s.ok()) return s;
  }
  if (root["server"]) {
    if (Status s = ParseServer(r, root["server"], config.server); !s.ok()) return s;
  }
  const PolicySetOptions options{
      .on_failure = config.store.on_failure, .instances = config.store.instances, .mode = mode};
  const YAML::Node policies = root["policies"];
  if (!policies && config.envoy.config.empty()) {
    return r.Error(root, "policies", "missing (expected a list of policies, or envoy_config)");
  }
  if (!policies) {  // Envoy only
    config.policies = *PolicySet::Create({}, options);
    return config;
  }
  if (Status s = r.ExpectSequence(policies, "policies", kMaxPolicies); !s.ok()) return s;
  std::vector<PolicySpec> specs;
  for (size_t i = 0; i < policies.size(); ++i) {
    const std::string field = Cat("policies[", i, ']');
    auto spec = ParsePolicy(r, policies[i], field, options);
    if (!spec.ok()) return spec.status();
    for (size_t j = 0; j < specs.size(); ++j) {
      if (specs[j].name == spec->name) {
        return r.Error(policies[i]["name"], field + ".name",
                       Cat(Quoted(spec->name), " is already the name of policies[", j, ']'));
      }
    }
    specs.push_back(std::move(spec).value());
  }
  auto set = PolicySet::Create(std::move(specs), options);
  if (!set.ok()) return r.Error(policies, "policies", set.status().message());
  config.policies = *set;
  return config;
}

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
    auto config = ParseRoot(reader, root);
    if (config.ok()) config->path = std::string(filename);
    return config;
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
