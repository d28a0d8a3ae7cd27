// Reading envoyproxy/ratelimit's YAML into RateLimitConfig. yaml-cpp reports malformed YAML by
// throwing; the exceptions are caught here, at the boundary, and become Status values.
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <charconv>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <set>
#include <sstream>

#include "caudal/envoy/ratelimit_config_yaml.h"

namespace caudal::envoy {
namespace {

// Configuration is trusted more than requests, but still bounded.
constexpr size_t kMaxDepth = 32;
constexpr size_t kMaxDescriptors = 100'000;
constexpr std::uintmax_t kMaxFileBytes = 16 << 20;

class Reader {
 public:
  explicit Reader(const std::string& file) : file_(file) {}

  Status Fail(const YAML::Node& at, std::string_view field, std::string_view message) const {
    std::string s = file_ + ":" + std::to_string(at.Mark().line + 1) + ": ";
    if (!field.empty()) s += "field '" + std::string(field) + "': ";
    s += message;
    return Status::InvalidArgument(std::move(s));
  }

  // Every key of `map` must be one of `allowed`; anything else is refused by name.
  Status CheckFields(const YAML::Node& map, std::string_view what,
                     std::initializer_list<std::string_view> allowed) const {
    if (!map.IsMap()) return Fail(map, "", std::string(what) + " must be a mapping");
    std::set<std::string> seen;
    for (const auto& kv : map) {
      if (!kv.first.IsScalar()) return Fail(kv.first, "", "keys must be plain strings");
      const std::string& k = kv.first.Scalar();
      if (std::find(allowed.begin(), allowed.end(), k) == allowed.end()) {
        std::string known;
        for (std::string_view a : allowed) known += (known.empty() ? "" : ", ") + std::string(a);
        return Fail(kv.first, k, "unknown field in " + std::string(what) +
                                     "; caudal does not support it (known: " + known + ")");
      }
      if (!seen.insert(k).second) return Fail(kv.first, k, "given twice");
    }
    return Status::Ok();
  }

  Result<std::string> String(const YAML::Node& n, std::string_view field) const {
    if (!n.IsScalar()) return Fail(n, field, "must be a string");
    return n.Scalar();
  }

  Result<bool> Bool(const YAML::Node& n, std::string_view field) const {
    bool b = false;
    if (!n.IsScalar() || !YAML::convert<bool>::decode(n, b)) {
      return Fail(n, field, "must be true or false");
    }
    return b;
  }

  Result<uint64_t> Unsigned(const YAML::Node& n, std::string_view field, uint64_t max) const {
    const std::string s = n.IsScalar() ? n.Scalar() : std::string();
    uint64_t v = 0;
    auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (s.empty() || ec != std::errc() || end != s.data() + s.size() || v > max) {
      return Fail(n, field, "must be an integer between 0 and " + std::to_string(max));
    }
    return v;
  }

  Result<Unit> ReadUnit(const YAML::Node& n) const {
    auto s = String(n, "unit");
    if (!s.ok()) return s.status();
    std::string lower = *s;
    std::transform(lower.begin(), lower.end(), lower.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    for (Unit u : {Unit::kSecond, Unit::kMinute, Unit::kHour, Unit::kDay, Unit::kMonth,
                   Unit::kYear}) {
      if (lower == UnitName(u)) return u;
    }
    if (lower == "week") {
      return Fail(n, "unit", "'week' has no value in the RLS API's RateLimit.Unit that Envoy "
                             "reads; caudal refuses it (use day with 7x requests_per_unit)");
    }
    return Fail(n, "unit", "invalid unit '" + *s + "' (second, minute, hour, day, month, year)");
  }

  Result<RateLimitRule> ReadRule(const YAML::Node& n) const;
  Status ReadDescriptors(const YAML::Node& list, DescriptorNode& parent, size_t depth);

 private:
  const std::string& file_;
  size_t descriptors_ = 0;
};

Result<RateLimitRule> Reader::ReadRule(const YAML::Node& n) const {
  if (Status s = CheckFields(n, "rate_limit", {"unit", "requests_per_unit", "unlimited", "name",
                                               "replaces", "algorithm", "capacity"});
      !s.ok()) {
    return s;
  }
  RateLimitRule rule;
  if (n["unlimited"]) {
    auto b = Bool(n["unlimited"], "unlimited");
    if (!b.ok()) return b.status();
    rule.unlimited = *b;
  }
  if (n["name"]) {
    auto s = String(n["name"], "name");
    if (!s.ok()) return s.status();
    rule.name = *s;
  }
  if (n["replaces"]) {
    const YAML::Node list = n["replaces"];
    if (!list.IsSequence()) return Fail(list, "replaces", "must be a list of {name: ...}");
    for (const YAML::Node& r : list) {
      if (Status s = CheckFields(r, "replaces entry", {"name"}); !s.ok()) return s;
      auto name = r["name"] ? String(r["name"], "name") : Result<std::string>(std::string());
      if (!name.ok()) return name.status();
      if (name->empty()) return Fail(r, "replaces", "an entry has an empty name");
      if (*name == rule.name) return Fail(r, "replaces", "a limit cannot replace itself");
      rule.replaces.push_back(*name);
    }
  }
  if (rule.unlimited) {
    for (const char* f : {"unit", "requests_per_unit", "algorithm", "capacity"}) {
      if (n[f]) return Fail(n[f], f, "must not be set when unlimited is true");
    }
    return rule;
  }
  if (!n["unit"]) return Fail(n, "unit", "missing (or set unlimited: true)");
  auto unit = ReadUnit(n["unit"]);
  if (!unit.ok()) return unit.status();
  rule.unit = *unit;
  if (!n["requests_per_unit"]) return Fail(n, "requests_per_unit", "missing");
  auto rpu = Unsigned(n["requests_per_unit"], "requests_per_unit", UINT32_MAX);
  if (!rpu.ok()) return rpu.status();
  rule.requests_per_unit = static_cast<uint32_t>(*rpu);
  Algorithm algorithm = Algorithm::kFixedWindow;
  if (rule.requests_per_unit == 0) {
    // The reference's way to block a value outright: every hit is over the limit.
    for (const char* f : {"algorithm", "capacity"}) {
      if (n[f]) return Fail(n[f], f, "must not be set when requests_per_unit is 0");
    }
    return rule;
  }
  if (n["algorithm"]) {
    auto name = String(n["algorithm"], "algorithm");
    if (!name.ok()) return name.status();
    auto a = ParseAlgorithm(*name);
    if (!a.ok()) return Fail(n["algorithm"], "algorithm", a.status().message());
    algorithm = *a;
  }
  int64_t capacity = 0;
  if (n["capacity"]) {
    auto c = Unsigned(n["capacity"], "capacity", kMaxCapacity);
    if (!c.ok()) return c.status();
    if (*c == 0) return Fail(n["capacity"], "capacity", "must be positive");
    capacity = static_cast<int64_t>(*c);
  }
  auto limit = MakeLimit(algorithm, rule.requests_per_unit, rule.unit, capacity);
  if (!limit.ok()) return Fail(n, "rate_limit", limit.status().message());
  rule.limit = *limit;
  return rule;
}

Status Reader::ReadDescriptors(const YAML::Node& list, DescriptorNode& parent, size_t depth) {
  if (!list.IsSequence()) return Fail(list, "descriptors", "must be a list");
  if (depth > kMaxDepth) return Fail(list, "descriptors", "nested deeper than 32 levels");
  for (const YAML::Node& d : list) {
    if (Status s = CheckFields(d, "descriptor", {"key", "value", "rate_limit", "descriptors",
                                                 "shadow_mode", "detailed_metric"});
        !s.ok()) {
      return s;
    }
    if (++descriptors_ > kMaxDescriptors) return Fail(d, "", "more than 100000 descriptors");
    auto node = std::make_unique<DescriptorNode>();
    auto key = d["key"] ? String(d["key"], "key") : Result<std::string>(std::string());
    if (!key.ok()) return key.status();
    if (key->empty()) return Fail(d, "key", "a descriptor needs a non-empty key");
    node->key = *key;
    if (d["value"] && !d["value"].IsNull()) {
      auto value = String(d["value"], "value");
      if (!value.ok()) return value.status();
      node->value = *value;
    }
    if (d["rate_limit"]) {
      auto rule = ReadRule(d["rate_limit"]);
      if (!rule.ok()) return rule.status();
      node->rule = std::move(*rule);
      node->rule->source = file_ + ":" + std::to_string(d.Mark().line + 1);
    }
    for (const char* f : {"shadow_mode", "detailed_metric"}) {
      if (!d[f]) continue;
      auto b = Bool(d[f], f);
      if (!b.ok()) return b.status();
      if (node->rule) (f[0] == 's' ? node->rule->shadow_mode : node->rule->detailed_metric) = *b;
    }
    const YAML::Node children = d["descriptors"];
    DescriptorNode* raw = node.get();
    auto added = parent.AddChild(std::move(node));
    if (!added.ok()) return Fail(d, "", added.status().message());
    if (children && !children.IsNull()) {
      if (Status s = ReadDescriptors(children, *raw, depth + 1); !s.ok()) return s;
    }
  }
  return Status::Ok();
}

Result<std::string> ReadFile(const std::filesystem::path& path) {
  std::error_code ec;
  const auto size = std::filesystem::file_size(path, ec);
  if (ec) return Status::InvalidArgument(path.string() + ": cannot read: " + ec.message());
  if (size > kMaxFileBytes) return Status::InvalidArgument(path.string() + ": larger than 16 MiB");
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  if (!in) return Status::InvalidArgument(path.string() + ": cannot read");
  return text.str();
}

}  // namespace

Result<RateLimitConfig> ParseRateLimitConfig(std::span<const RateLimitDocument> documents) {
  RateLimitConfig config;
  std::unordered_map<std::string, std::string> domain_file;
  for (const RateLimitDocument& doc : documents) {
    YAML::Node loaded;
    try {
      loaded = YAML::Load(doc.text);
    } catch (const YAML::Exception& e) {
      return Status::InvalidArgument(doc.name + ":" + std::to_string(e.mark.line + 1) +
                                     ": malformed YAML: " + e.msg);
    }
    const YAML::Node& root = loaded;  // const: reading a missing field must not add it
    Reader reader(doc.name);
    if (!root.IsMap()) return reader.Fail(root, "", "a configuration must be a mapping");
    if (Status s = reader.CheckFields(root, "the top level", {"domain", "descriptors"}); !s.ok()) {
      return s;
    }
    auto domain = root["domain"] ? reader.String(root["domain"], "domain")
                                 : Result<std::string>(std::string());
    if (!domain.ok()) return domain.status();
    if (domain->empty()) return reader.Fail(root, "domain", "missing or empty");
    if (auto [it, fresh] = domain_file.emplace(*domain, doc.name); !fresh) {
      return reader.Fail(root["domain"], "domain",
                         "domain '" + *domain + "' is already defined in " + it->second);
    }
    auto tree = std::make_shared<DescriptorNode>();
    if (root["descriptors"] && !root["descriptors"].IsNull()) {
      if (Status s = reader.ReadDescriptors(root["descriptors"], *tree, 1); !s.ok()) return s;
    }
    if (Status s = config.AddDomain(*domain, std::move(tree)); !s.ok()) return s;
  }
  return config;
}

Result<RateLimitConfig> ParseRateLimitConfigText(std::string_view text, std::string name) {
  const RateLimitDocument doc{.name = std::move(name), .text = std::string(text)};
  return ParseRateLimitConfig(std::span<const RateLimitDocument>(&doc, 1));
}

Result<RateLimitConfig> LoadRateLimitConfig(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  std::vector<RateLimitDocument> docs;
  if (fs::is_directory(path, ec)) {
    std::vector<fs::path> files;
    for (const auto& e : fs::directory_iterator(path, ec)) {
      const auto ext = e.path().extension();
      if (e.is_regular_file() && (ext == ".yaml" || ext == ".yml")) files.push_back(e.path());
    }
    if (ec) return Status::InvalidArgument(path + ": cannot list: " + ec.message());
    std::sort(files.begin(), files.end());
    if (files.empty()) return Status::InvalidArgument(path + ": no .yaml or .yml files");
    for (const auto& f : files) {
      auto text = ReadFile(f);
      if (!text.ok()) return text.status();
      docs.push_back({.name = f.string(), .text = std::move(*text)});
    }
  } else {
    auto text = ReadFile(path);
    if (!text.ok()) return text.status();
    docs.push_back({.name = path, .text = std::move(*text)});
  }
  return ParseRateLimitConfig(docs);
}

}  // namespace caudal::envoy
