// Every row of caudal's config tables and of envoyproxy/ratelimit's is probed through the real
// parsers: a value in its range is accepted, one out of it is refused with file:line:column and
// the row's own path. The values come from each row's shape (an integer's min and max, a
// duration's bounds, a choice's words), so a changed range is probed at its new edges; the few
// rows whose values a shape cannot give (a URL, a header map) have samples below, and a row with
// neither fails the test by name. Every section refuses an unknown field, and every required
// row is missed by name.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "caudal/config/config.h"
#include "config/config_tables.h"
#include "config/envoy_yaml_reader.h"
#include "config/ratelimit_config_yaml.h"

namespace caudal::config_internal {
namespace {

using ShapeKind = Shape::Kind;

// A valid file that holds every section, so that a probe changes one field only.
constexpr const char* kPoliciesBase = R"(
store:
  url: rediss://r:6380
  tls: {cert_file: c.pem, key_file: c.key}
server:
  tls: {cert_file: s.pem, key_file: s.key, client_ca_file: ca.pem}
policies:
  - name: p
    identity: [a]
    limits: [{algorithm: token_bucket, capacity: 100, refill: 100/1s}]
    overrides:
      - match: {plan: pro}
        limits: [{algorithm: token_bucket, capacity: 100, refill: 100/1s}]
)";
// kPoliciesBase is the file without rlqs, whose buckets name the policy: for the probes that
// change the policy's name, identity or enforcement.
const std::string kConfigBase = std::string(kPoliciesBase) + R"(rlqs:
  domains:
    - domain: envoy
      buckets: [{match: {name: b}, policy: p, identity: {a: tenant}}]
)";

constexpr const char* kEnvoyBase = R"(
domain: d
descriptors:
  - key: k
    value: v
    rate_limit: {unit: second, requests_per_unit: 5, name: n, replaces: [{name: other}]}
)";

constexpr const char* kMax = "1099511627776";  // kMaxCapacity

// A policy with share, whose tier gives a weight rather than limits.
constexpr const char* kShareBase =
    "policies: [{name: p, identity: [a], share: {}, limits: [{algorithm: gcra, capacity: 1, "
    "refill: 1/1s}], overrides: [{match: {a: b}, weight: 2}]}]";

// Values for a row, and the file they go into when the base will not do.
struct Probe {
  std::vector<std::string> good{};
  std::vector<std::string> bad{};
  std::string base{};  // empty: the format's base
};

const std::map<std::string, Probe>& ConfigProbes() {
  static const std::map<std::string, Probe> probes = {
      {"store.url",
       {.good = {"memory://", "redis://r:6379"},
        .bad = {"http://x", "[a]"},
        .base = "policies: []"}},
      // in_progress (10s by default) may not be longer than the window.
      {"server.idempotency.window",
       {.good = {"1s", "24h"},
        .bad = {"999ms", "25h", "x"},
        .base = "server: {idempotency: {in_progress: 100ms}}\npolicies: []"}},
      {"store.tls.server_name", {.good = {"redis.example"}, .bad = {"'a b'", "''"}}},
      {"store.address_map",
       {.good = {"{'10.0.0.1:6379': '127.0.0.1:7001', 'node-b:6380': '[::1]:7002'}", "{}"},
        .bad = {"{'10.0.0.1': '127.0.0.1:7001'}", "{'h:1': 'bad host:2'}", "{'h:1': [a]}", "[a]",
                "x"},
        .base = "store: {url: 'redis-cluster://r:6379'}\npolicies: []"}},
      {"server.http", {.good = {"'127.0.0.1:0'", "'[::1]:9000'"}, .bad = {"localhost", "':80'"}}},
      {"server.grpc", {.good = {"'localhost:8081'"}, .bad = {"'1.2.3.4'"}}},
      {"server.trusted_proxies", {.good = {"[10.0.0.0/8, '::1']"}, .bad = {"[10.0.0.1/8]", "x"}}},
      {"server.descriptor_headers",
       {.good = {"{user: X-User}"}, .bad = {"{ip: X-Real-IP}", "{user: 'X User'}", "[a]"}}},
      {"server.tls.client_cert", {.good = {"optional", "require"}, .bad = {"none", "maybe"}}},
      {"server.tls.listeners", {.good = {"[http]", "[grpc, http]"}, .bad = {"[http, http]", "[]"}}},
      {"server.auth.allowed_clients",
       {.good = {"[envoy, 'spiffe://mesh/ns/edge']"}, .bad = {"['']", "x"}}},
      {"store.module", {.good = {"true", "false"}, .bad = {"maybe", "1"}}},
      {"store.lease", {.good = {"off", "on", "false", "{ttl: 1s}", "{}"}, .bad = {"maybe", "[a]"}}},
      {"store.lease.ttl", {.good = {"1ms", "10s"}, .bad = {"0s", "11s", "fast"}}},
      {"store.lease.max_share",
       {.good = {"0.1", "1", "0.000001"}, .bad = {"0", "1.5", "0.0000001", "x", "[a]"}}},
      {"policies[].lease",
       {.good = {"off", "on", "false", "{ttl: 1s}", "{}"}, .bad = {"maybe", "[a]"}}},
      {"policies[].lease.ttl", {.good = {"1ms", "10s"}, .bad = {"0s", "11s", "fast"}}},
      {"policies[].lease.max_share",
       {.good = {"0.1", "1", "0.000001"}, .bad = {"0", "1.5", "0.0000001", "x", "[a]"}}},
      {"policies[].name", {.good = {"p.1-a_b"}, .bad = {"'p q'", "[a]"}, .base = kPoliciesBase}},
      {"policies[].identity",
       {.good = {"[api_key, ip]"}, .bad = {"[]", "['a b']", "x"}, .base = kPoliciesBase}},
      {"policies[].shadow", {.good = {"true", "false"}, .bad = {"x"}, .base = kPoliciesBase}},
      {"policies[].cost",
       {.good = {"1", kMax},
        .bad = {"0", "1099511627777", "x"},
        .base = "policies: [{name: p, identity: [a], limits: [{algorithm: token_bucket, "
                "capacity: 1099511627776, refill: 1099511627776/1s}]}]"}},
      {"policies[].limits[].capacity",
       {.good = {"1", kMax},
        .bad = {"0", "1099511627777"},
        .base = "policies: [{name: p, identity: [a], limits: [{algorithm: gcra, capacity: 1, "
                "refill: 1099511627776/1s}]}]"}},
      {"policies[].limits[].algorithm",
       {.good = {"token_bucket", "gcra"}, .bad = {"leaky", "[a]"}}},
      {"policies[].limits[].refill", {.good = {"100/1m", "1/s"}, .bad = {"fast", "0/1s"}}},
      {"policies[].limits[].limit",
       {.good = {"1", kMax},
        .bad = {"0", "1099511627777"},
        .base = "policies: [{name: p, identity: [a], limits: [{algorithm: fixed_window, limit: 5, "
                "window: 1s}]}]"}},
      {"policies[].limits[].window",
       {.good = {"1s", "1d"},
        .bad = {"fast", "[a]"},
        .base = "policies: [{name: p, identity: [a], limits: [{algorithm: sliding_window_counter, "
                "limit: 5, window: 1s}]}]"}},
      {"policies[].limits[].hold",
       {.good = {"1ms", "1d"},
        .bad = {"fast", "[a]", "0s", "25h"},
        .base = "policies: [{name: p, identity: [a], limits: [{algorithm: concurrency, "
                "limit: 5, hold: 1s}]}]"}},
      {"policies[].limits[].dimension",
       {.good = {"input_tokens", "[input_tokens, output_tokens]", "requests", "usd_micros"},
        .bad = {"Input", "[a, a]", "[]", "'1x'", "{a: 1}", "a-b"},
        .base = "policies: [{name: p, identity: [a], limits: [{algorithm: token_bucket, "
                "capacity: 5, refill: 5/1s, dimension: tokens}]}]"}},
      {"policies[].overrides[].limits[].dimension",
       {.good = {"input_tokens", "[requests, images]"},
        .bad = {"Input", "[a, a]", "[]"},
        .base = "policies: [{name: p, identity: [a], limits: [{algorithm: gcra, capacity: 1, "
                "refill: 1/1s}], overrides: [{match: {a: b}, limits: [{algorithm: fixed_window, "
                "limit: 5, window: 1m, dimension: tokens}]}]}]"}},
      {"policies[].limits[].calendar.time_zone",
       {.good = {"UTC", "Europe/Madrid", "Asia/Kathmandu"},
        .bad = {"Mars/Olympus", "''", "[a]"},
        .base = "policies: [{name: p, identity: [a], limits: [{algorithm: fixed_window, limit: 5, "
                "window: 1 month, calendar: {time_zone: UTC}}]}]"}},
      {"policies[].overrides[].limits[].calendar.time_zone",
       {.good = {"UTC", "America/New_York"},
        .bad = {"Mars/Olympus", "''", "[a]"},
        .base = "policies: [{name: p, identity: [a], limits: [{algorithm: gcra, capacity: 1, "
                "refill: 1/1s}], overrides: [{match: {a: b}, limits: [{algorithm: fixed_window, "
                "limit: 5, window: 1 week, calendar: {time_zone: UTC}}]}]}]"}},
      {"policies[].share.fairness",
       {.good = {"max_min", "proportional"}, .bad = {"fair", "[a]"}, .base = kShareBase}},
      {"policies[].share.window",
       {.good = {"100ms", "1h"}, .bad = {"99ms", "61m", "fast"}, .base = kShareBase}},
      {"policies[].overrides[].weight",
       {.good = {"1", "4096"}, .bad = {"0", "4097", "x"}, .base = kShareBase}},
      {"policies[].overrides[].match",
       {.good = {"{plan: max}", "{a: acme, ip: 10.0.0.0/8}"},
        .bad = {"x", "{}", "{plan: ''}", "{ip: 10.0.0.1/8}", "{'p q': x}"}}},
      {"policies[].overrides[].limits[].capacity",
       {.good = {"1", kMax},
        .bad = {"0", "1099511627777"},
        .base = "policies: [{name: p, identity: [a], limits: [{algorithm: gcra, capacity: 1, "
                "refill: 1/1s}], overrides: [{match: {a: b}, limits: [{algorithm: gcra, "
                "capacity: 1, refill: 1099511627776/1s}]}]}]"}},
      {"policies[].overrides[].limits[].algorithm",
       {.good = {"token_bucket", "gcra"}, .bad = {"leaky", "[a]"}}},
      {"policies[].overrides[].limits[].refill",
       {.good = {"100/1m", "1/s"}, .bad = {"fast", "0/1s"}}},
      {"policies[].overrides[].limits[].limit",
       {.good = {"1", kMax},
        .bad = {"0", "1099511627777"},
        .base = "policies: [{name: p, identity: [a], limits: [{algorithm: gcra, capacity: 1, "
                "refill: 1/1s}], overrides: [{match: {a: b}, limits: [{algorithm: fixed_window, "
                "limit: 5, window: 1s}]}]}]"}},
      {"policies[].overrides[].limits[].window",
       {.good = {"1s", "1d"},
        .bad = {"fast", "[a]"},
        .base = "policies: [{name: p, identity: [a], limits: [{algorithm: gcra, capacity: 1, "
                "refill: 1/1s}], overrides: [{match: {a: b}, limits: [{algorithm: "
                "sliding_window_counter, limit: 5, window: 1s}]}]}]"}},
      {"rlqs.domains[].buckets[].match",
       {.good = {"{}", "{name: b, env: prod}"}, .bad = {"x", "[a]", "{name: ''}", "{'': b}"}}},
      {"rlqs.domains[].buckets[].identity",
       {.good = {"{a: tenant}"}, .bad = {"{}", "x", "{a: ''}", "{b: tenant}"}}},
      {"rlqs.domains[].buckets[].policy", {.good = {"p"}, .bad = {"q", "[a]"}}},
      {"rlqs.domains[].domain", {.good = {"other"}, .bad = {"''", "[a]"}}},
      {"policies[].overrides[].limits[].hold",
       {.good = {"1ms", "1d"},
        .bad = {"fast", "[a]", "0s", "25h"},
        .base = "policies: [{name: p, identity: [a], limits: [{algorithm: gcra, capacity: 1, "
                "refill: 1/1s}], overrides: [{match: {a: b}, limits: [{algorithm: "
                "concurrency, limit: 5, hold: 1s}]}]}]"}},
  };
  return probes;
}

const std::map<std::string, Probe>& EnvoyProbes() {
  static const std::map<std::string, Probe> probes = {
      {"descriptors", {.good = {"[]", "[{key: a}]"}, .bad = {"x"}}},
      {"descriptors[].descriptors", {.good = {"[{key: c}]"}, .bad = {"x", "[{value: c}]"}}},
      {"descriptors[].key", {.good = {"other", "500"}, .bad = {"''", "[a]", "1.5"}}},
      {"descriptors[].metadata", {.good = {"{a: [1, yes]}"}, .bad = {"[a]", "x"}}},
      {"descriptors[].share_threshold",
       {.good = {"true", "no"},
        .bad = {"x"},
        .base = "domain: d\ndescriptors: [{key: k, value: 'v*'}]"}},
      {"descriptors[].rate_limit.unlimited",
       {.good = {"true", "on"},
        .bad = {"x"},
        .base = "domain: d\ndescriptors: [{key: k, rate_limit: {name: n, unlimited: true}}]"}},
      {"descriptors[].rate_limit.lease",
       {.good = {"off", "on", "false", "{ttl: 1s}", "{}"},
        .bad = {"maybe", "[a]"},
        .base = "domain: d\ndescriptors: [{key: k, rate_limit: {unit: second, requests_per_unit: "
                "5}}]"}},
      {"descriptors[].rate_limit.lease.ttl",
       {.good = {"1ms", "10s"},
        .bad = {"0s", "11s", "fast"},
        .base = "domain: d\ndescriptors: [{key: k, rate_limit: {unit: second, requests_per_unit: "
                "5}}]"}},
      {"descriptors[].rate_limit.lease.max_share",
       {.good = {"0.1", "1", "0.000001"},
        .bad = {"0", "1.5", "0.0000001", "x", "[a]"},
        .base = "domain: d\ndescriptors: [{key: k, rate_limit: {unit: second, requests_per_unit: "
                "5}}]"}},
      {"descriptors[].rate_limit.always_charge",
       {.good = {"true", "false", "on"},
        .bad = {"x", "[a]"},
        .base = "domain: d\ndescriptors: [{key: k, rate_limit: {unit: minute, requests_per_unit: "
                "10, algorithm: token_bucket, capacity: 20}}]"}},
      {"descriptors[].rate_limit.calendar.time_zone",
       {.good = {"UTC", "Australia/Adelaide"},
        .bad = {"Mars/Olympus", "''", "[a]"},
        .base = "domain: d\ndescriptors: [{key: k, rate_limit: {unit: month, requests_per_unit: "
                "5, calendar: {time_zone: UTC}}}]"}},
      {"descriptors[].rate_limit.capacity",
       {.good = {"1", kMax},
        .bad = {"0", "1099511627777"},
        .base = "domain: d\ndescriptors: [{key: k, rate_limit: {unit: second, requests_per_unit: "
                "4294967295, algorithm: token_bucket}}]"}},
  };
  return probes;
}

struct Row {
  FieldInfo info{};
  std::string section{};
};

class Collect final : public FieldVisitor {
 public:
  void Section(const std::string& path, std::string_view) override {
    section_ = path;
    sections.push_back(path);
  }
  void Field(const FieldInfo& f) override { rows.push_back({f, section_}); }
  std::vector<std::string> sections;
  std::vector<Row> rows;

 private:
  std::string section_;
};

// "policies[].limits[].capacity" → "policies[0].limits[0].capacity".
std::string Concrete(std::string path) {
  for (size_t i = path.find("[]"); i != std::string::npos; i = path.find("[]", i)) {
    path.replace(i, 2, "[0]");
  }
  return path;
}

// The node at a concrete path, made if missing.
YAML::Node At(YAML::Node root, const std::string& path) {
  YAML::Node n = root;
  size_t start = 0;
  while (start < path.size()) {
    size_t end = path.find_first_of(".[", start);
    if (end == std::string::npos) end = path.size();
    if (end > start) n.reset(n[path.substr(start, end - start)]);
    if (end < path.size() && path[end] == '[') {
      const size_t close = path.find(']', end);
      n.reset(n[std::stoul(path.substr(end + 1, close - end - 1))]);
      end = close + 1;
    }
    start = end < path.size() && path[end] == '.' ? end + 1 : end;
  }
  return n;
}

// The base with the field at `path` set to `value` (YAML text); an empty value removes it.
std::string With(const std::string& base, const std::string& path, const std::string& value) {
  YAML::Node root = YAML::Load(base);
  const size_t dot = path.rfind('.');
  const std::string parent = dot == std::string::npos ? "" : path.substr(0, dot);
  const std::string key = dot == std::string::npos ? path : path.substr(dot + 1);
  YAML::Node map = parent.empty() ? root : At(root, parent);
  if (value.empty()) {
    map.remove(key);
  } else {
    map[key] = YAML::Load(value);
  }
  return YAML::Dump(root) + "\n";
}

// A format: its tables, its base file and how to parse a file.
struct Format {
  std::function<void(FieldVisitor&)> walk{};
  std::string base{};
  const std::map<std::string, Probe>* probes = nullptr;
  std::function<Status(const std::string&)> parse{};
};

Format CaudalFormat() {
  return {.walk = [](FieldVisitor& v) { DocumentTable().Visit(v, "", Document{}); },
          .base = kConfigBase,
          .probes = &ConfigProbes(),
          .parse = [](const std::string& text) { return ParseConfig(text, "t.yaml").status(); }};
}

Format EnvoyFormat() {
  return {.walk = [](FieldVisitor& v) { EnvoyDocumentTable().Visit(v, "", EnvoyDocument{}); },
          .base = kEnvoyBase,
          .probes = &EnvoyProbes(),
          .parse =
              [](const std::string& text) {
                return envoy::ParseRateLimitConfigText(text, "t.yaml").status();
              }};
}

std::string Duration(int64_t us) { return FormatDuration(Micros(us)); }

// Values for a row that its shape gives; false when the shape cannot give them.
bool FromShape(const Shape& s, Probe& p) {
  switch (s.kind) {
    case ShapeKind::kBool:
      p = {.good = {"true", "false"}, .bad = {"x"}};
      return true;
    case ShapeKind::kInteger:
      p = {.good = {std::to_string(s.min), std::to_string(s.max)},
           .bad = {std::to_string(s.min - 1), std::to_string(s.max + 1), "x"}};
      return true;
    case ShapeKind::kDuration:
      if (s.max == 0) {
        p = {.good = {"1s"}, .bad = {"fast"}};
      } else {
        p = {.good = {Duration(s.min), Duration(s.max)},
             .bad = {Duration(s.min - 1), Duration(s.max + 1), "fast"}};
      }
      return true;
    case ShapeKind::kChoice:
      p = {.good = s.choices, .bad = {"bogus"}};
      return true;
    case ShapeKind::kText:
      if (!s.what.empty() && s.what != "path") return false;
      p = {.good = {"some.file"}, .bad = {"[a]"}};
      if (s.what == "path") p.bad.push_back("''");
      return true;
    case ShapeKind::kList:
      if (s.item != nullptr && s.item->kind == ShapeKind::kMap) {
        p = {.good = {}, .bad = {"x"}};  // its items' rows are probed on their own
        return true;
      }
      if (s.item == nullptr || s.item->kind != ShapeKind::kText || !s.item->what.empty())
        return false;
      p = {.good = {"[a, b]"}, .bad = {"x", "[[a]]"}};
      return true;
    case ShapeKind::kMap:
      p = {.good = {}, .bad = {"x", "[a]"}};  // its rows are probed on their own
      return true;
    case ShapeKind::kScalarOrMap:
    case ShapeKind::kCustom:
      return false;
  }
  return false;
}

// `message` is an error at file:line:column naming `path`, or an item or a field of it
// (server.trusted_proxies[0], server.descriptor_headers.ip).
bool NamesPath(std::string_view message, std::string_view path) {
  const auto digits = [&] {
    const size_t n = message.find_first_not_of("0123456789");
    if (n == 0 || n == std::string_view::npos || message[n] != ':') return false;
    message.remove_prefix(n + 1);
    return true;
  };
  if (!message.starts_with("t.yaml:")) return false;
  message.remove_prefix(7);
  if (!digits() || !digits() || !message.starts_with(' ')) return false;
  message.remove_prefix(1);
  if (!message.starts_with(path)) return false;
  message.remove_prefix(path.size());
  return message.starts_with(": ") || message.starts_with('[') || message.starts_with('.');
}

void ProbeEveryRow(const Format& format) {
  Collect c;
  format.walk(c);
  ASSERT_FALSE(c.rows.empty());
  for (const Row& row : c.rows) {
    const std::string& path = row.info.path;
    Probe p;
    const auto explicit_probe = format.probes->find(path);
    if (explicit_probe != format.probes->end()) {
      p = explicit_probe->second;
    } else if (!FromShape(*row.info.shape, p)) {
      ADD_FAILURE() << path << ": no values to probe it with; add them to this test";
      continue;
    }
    EXPECT_FALSE(p.bad.empty()) << path << ": nothing to refuse";
    const std::string base = p.base.empty() ? format.base : p.base;
    ASSERT_TRUE(format.parse(base).ok()) << path << ": the base file is refused";
    const std::string at = Concrete(path);
    for (const std::string& v : p.good) {
      const Status s = format.parse(With(base, at, v));
      EXPECT_TRUE(s.ok()) << path << ": " << v << " refused: " << s.message();
    }
    for (const std::string& v : p.bad) {
      const Status s = format.parse(With(base, at, v));
      EXPECT_FALSE(s.ok()) << path << ": " << v << " accepted";
      EXPECT_TRUE(NamesPath(s.message(), at)) << path << ": " << v << ": " << s.message();
    }
  }
}

void EverySectionRefusesAnUnknownField(const Format& format) {
  Collect c;
  format.walk(c);
  for (const std::string& section : c.sections) {
    const std::string at = Concrete(JoinPath(section, "bogus_field"));
    Status s = format.parse(With(format.base, at, "1"));
    // A section only some variants hold (a fixed_window's calendar): in its rows' base.
    for (const auto& [path, probe] : *format.probes) {
      if (NamesPath(s.message(), at)) break;
      if (path.starts_with(section + ".") && !probe.base.empty()) {
        s = format.parse(With(probe.base, at, "1"));
      }
    }
    EXPECT_TRUE(NamesPath(s.message(), at)) << at << ": " << s.message();
    EXPECT_THAT(s.message(), ::testing::HasSubstr(": unknown field (expected one of: ")) << at;
  }
}

void EveryRequiredRowIsMissedByName(const Format& format) {
  Collect c;
  format.walk(c);
  int required = 0;
  for (const Row& row : c.rows) {
    if (!row.info.required) continue;
    ++required;
    const std::string at = Concrete(row.info.path);
    const auto p = format.probes->find(row.info.path);
    const std::string base =
        p != format.probes->end() && !p->second.base.empty() ? p->second.base : format.base;
    const Status s = format.parse(With(base, at, ""));
    const std::string name = at.substr(at.rfind('.') + 1);
    EXPECT_TRUE(NamesPath(s.message(), Concrete(row.section))) << at << ": " << s.message();
    EXPECT_THAT(s.message(), ::testing::HasSubstr(name)) << at;
  }
  EXPECT_GT(required, 0);
}

TEST(ConfigTable, EveryRowIsAcceptedInRangeAndRefusedOutOfItByPath) {
  ProbeEveryRow(CaudalFormat());
}
TEST(ConfigTable, EverySectionRefusesAnUnknownField) {
  EverySectionRefusesAnUnknownField(CaudalFormat());
}
TEST(ConfigTable, EveryRequiredRowIsMissedByName) {
  EveryRequiredRowIsMissedByName(CaudalFormat());
}

TEST(EnvoyTable, EveryRowIsAcceptedInRangeAndRefusedOutOfItByPath) { ProbeEveryRow(EnvoyFormat()); }
TEST(EnvoyTable, EverySectionRefusesAnUnknownField) {
  EverySectionRefusesAnUnknownField(EnvoyFormat());
}

TEST(EnvoyTable, CaudalsAdditionsAreMarkedAndKnownFieldsElsewhereAreNamedAsSuch) {
  Collect c;
  EnvoyFormat().walk(c);
  std::vector<std::string> additions;
  for (const Row& row : c.rows) {
    if (row.info.extension) additions.push_back(row.info.path);
  }
  EXPECT_THAT(additions, ::testing::ElementsAre("descriptors[].rate_limit.algorithm",
                                                "descriptors[].rate_limit.capacity",
                                                "descriptors[].rate_limit.lease",
                                                "descriptors[].rate_limit.calendar",
                                                "descriptors[].rate_limit.always_charge"));
  // A reference field at the wrong level is "misplaced", read from the tables; an addition is
  // not the reference's, so it is merely unknown there.
  const auto parse = EnvoyFormat().parse;
  EXPECT_THAT(parse(With(kEnvoyBase, "descriptors[0].requests_per_unit", "1")).message(),
              ::testing::HasSubstr("does not belong here (it goes in rate_limit)"));
  EXPECT_THAT(parse(With(kEnvoyBase, "descriptors[0].rate_limit.quota_mode", "true")).message(),
              ::testing::HasSubstr("does not belong here (it goes in a descriptor)"));
  EXPECT_THAT(parse(With(kEnvoyBase, "descriptors[0].rate_limit.domain", "x")).message(),
              ::testing::HasSubstr("does not belong here (it goes at the top of the file)"));
  EXPECT_THAT(parse(With(kEnvoyBase, "descriptors[0].capacity", "1")).message(),
              ::testing::HasSubstr("descriptors[0].capacity: unknown field"));
}

}  // namespace
}  // namespace caudal::config_internal
