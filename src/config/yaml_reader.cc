#include "config/yaml_reader.h"

#include <charconv>

#include "caudal/common/clock.h"
#include "common/cat.h"

namespace caudal::config_internal {
namespace {

std::string Shown(const YAML::Node& n) {
  if (n.IsScalar()) {
    std::string s = n.Scalar();
    if (s.size() > 60) s = s.substr(0, 60) + "...";
    return Quoted(s);
  }
  if (n.IsMap()) return "a map";
  if (n.IsSequence()) return "a list";
  return "nothing";
}

}  // namespace

Status YamlReader::ErrorAt(const YAML::Mark& mark, std::string_view field,
                           std::string_view message) const {
  std::string m = Cat(file_, ':', mark.line + 1, ':', mark.column + 1, ": ");
  if (!field.empty()) m += Cat(field, ": ");
  m += message;
  return Status::InvalidArgument(std::move(m));
}

Status YamlReader::Error(const YAML::Node& at, std::string_view field,
                         std::string_view message) const {
  return ErrorAt(at.Mark(), field, message);
}

Status YamlReader::ExpectMap(const YAML::Node& n, std::string_view field,
                             std::span<const std::string_view> allowed) const {
  std::string names;
  for (std::string_view a : allowed) names += Cat(names.empty() ? "" : ", ", a);
  if (!n.IsMap())
    return Error(n, field, Cat("expected a map with ", names, " (got ", Shown(n), ')'));
  std::vector<std::string> seen;
  for (const auto& kv : n) {
    const std::string key = kv.first.IsScalar() ? kv.first.Scalar() : std::string();
    const std::string where = field.empty() ? key : Cat(field, '.', key);
    bool known = false;
    for (std::string_view a : allowed) known = known || a == key;
    if (!known) {
      return Error(kv.first, where, Cat("unknown field (expected one of: ", names, ')'));
    }
    for (const std::string& s : seen) {
      if (s == key) return Error(kv.first, where, "given twice");
    }
    seen.push_back(key);
  }
  return Status::Ok();
}

Status YamlReader::ExpectSequence(const YAML::Node& n, std::string_view field,
                                  size_t max_items) const {
  if (!n.IsSequence()) return Error(n, field, Cat("expected a list (got ", Shown(n), ')'));
  if (n.size() > max_items) {
    return Error(n, field, Cat("expected at most ", max_items, " items (got ", n.size(), ')'));
  }
  return Status::Ok();
}

Result<std::string> YamlReader::String(const YAML::Node& n, std::string_view field) const {
  if (!n.IsScalar()) return Error(n, field, Cat("expected a string (got ", Shown(n), ')'));
  return n.Scalar();
}

Result<int64_t> YamlReader::Integer(const YAML::Node& n, std::string_view field, int64_t min,
                                    int64_t max) const {
  const std::string expected = Cat("expected an integer from ", min, " to ", max);
  if (!n.IsScalar()) return Error(n, field, Cat(expected, " (got ", Shown(n), ')'));
  const std::string& s = n.Scalar();
  int64_t v = 0;
  const auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || ptr != s.data() + s.size() || v < min || v > max) {
    return Error(n, field, Cat(expected, " (got ", Shown(n), ')'));
  }
  return v;
}

Result<bool> YamlReader::Bool(const YAML::Node& n, std::string_view field) const {
  if (n.IsScalar() && n.Scalar() == "true") return true;
  if (n.IsScalar() && n.Scalar() == "false") return false;
  return Error(n, field, Cat("expected true or false (got ", Shown(n), ')'));
}

Result<Micros> YamlReader::Duration(const YAML::Node& n, std::string_view field) const {
  if (!n.IsScalar()) {
    return Error(n, field, Cat("expected a duration such as 5ms, 10s or 1m (got ", Shown(n), ')'));
  }
  auto d = ParseDuration(n.Scalar());
  if (!d.ok()) {
    return Error(n, field,
                 Cat("expected a duration such as 5ms, 10s or 1m: ", d.status().message()));
  }
  return *d;
}

}  // namespace caudal::config_internal
