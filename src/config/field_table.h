// Field tables: each config field is one row (its name, the shape of its value, its default and
// a line of documentation) that the parser, the unknown-field check, every error's field path and
// the generated reference (config_reference.h) all read. A table holds the fields of one map
// (`store`, `server.tls`, `policies[]`); a row's value (built by field_values.h) may be a scalar,
// a list, another table, a list of tables, or a scalar or a table (`lease: off` or
// `lease: {ttl: 250ms}`).
//
// Reading a map: every key must be a row (YamlReader::ExpectMap's errors), every required row
// must be there ("missing <name>"), each row present is read in table order into the object,
// then the table's check runs (rules across fields). Defaults are the object's own: a row's
// default in the reference is read from a default-constructed object, never written twice.
//
// Thread-safety: a table is immutable once built; build each once (a function-local static).
#pragma once

#include <yaml-cpp/yaml.h>

#include <cassert>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "caudal/common/clock.h"
#include "caudal/common/status.h"
#include "common/cat.h"
#include "config/yaml_reader.h"

namespace caudal::config_internal {

// What a value looks like: the reference's type column, and what tests probe.
struct Shape {
  enum class Kind : uint8_t {
    kText,         // a string; `what` says which ("path", "host:port"), empty for any
    kBool,         // true or false
    kInteger,      // from min to max
    kDuration,     // 250ms, 10s, ...; from min to max microseconds (both 0: any)
    kChoice,       // one of `choices`
    kList,         // at most max_items of `item`
    kMap,          // a table, in a section of its own
    kScalarOrMap,  // `item` (a scalar), or a table in a section of its own
    kCustom,       // read by a function of its own; `what` says what it takes
  };
  Kind kind = Kind::kText;
  std::string what{};
  int64_t min = 0;
  int64_t max = 0;
  std::vector<std::string> choices{};
  size_t max_items = 0;
  std::shared_ptr<const Shape> item{};
};

// Some tables read one field first and let it choose the others (a limit's algorithm chooses
// capacity/refill or limit/window). A row applies to the variants whose bits it has.
inline constexpr uint8_t kEveryVariant = 0xff;

// One row, as a FieldVisitor sees it.
struct FieldInfo {
  std::string path{};  // "server.tls.cert_file", "policies[].limits[].capacity"
  const Shape* shape = nullptr;
  std::string default_value{};      // the default object's value as YAML text; empty: none
  std::string_view default_note{};  // said instead of the value ("a quarter of max_connections")
  std::string_view doc{};
  bool required = false;
  bool extension = false;  // caudal's addition to a format it shares (envoyproxy/ratelimit's)
  std::string variant{};   // the variants it applies to ("token_bucket, gcra"); empty: all
};

// Walks tables: a section per table (in the order a reader meets them), its rows, then the
// sections of its nested tables.
class FieldVisitor {
 public:
  virtual void Section(const std::string& path, std::string_view doc) = 0;
  virtual void Field(const FieldInfo& field) = 0;

 protected:
  ~FieldVisitor() = default;
};

// "store" + "url" → "store.url"; "" + "store" → "store".
inline std::string JoinPath(std::string_view path, std::string_view name) {
  return path.empty() ? std::string(name) : Cat(path, '.', name);
}

// How one row's value is read into a T, shown as a default and documented.
template <typename T>
struct Value {
  using Read = std::function<Status(const YamlReader&, const YAML::Node&, const std::string&, T&)>;
  Shape shape{};
  Read read{};                                  // reads a node that is present
  std::function<std::string(const T&)> show{};  // the value in a default T; null: none shown
  std::function<void(FieldVisitor&, const std::string&, const T&)> sections{};  // nested tables
};

// One item of a list.
template <typename E>
struct Item {
  Shape shape{};
  std::function<Result<E>(const YamlReader&, const YAML::Node&, const std::string&)> read{};
  std::function<std::string(const E&)> show{};  // null: the list's default is not shown
  std::function<void(FieldVisitor&, const std::string&)> sections{};
};

enum class Need : uint8_t { kOptional, kRequired };

template <typename T>
struct Field {
  std::string_view name{};
  Value<T> value{};
  std::string_view doc{};  // one line
  Need need = Need::kOptional;
  std::string_view default_note = {};  // when the default's value alone would mislead
  uint8_t variants = kEveryVariant;
  bool extension = false;
};

template <typename T>
class Table {
 public:
  using Check = std::function<Status(const YamlReader&, const YAML::Node&, const std::string&, T&)>;
  using Misplaced = Status (*)(const YamlReader&, const YAML::Node&, const std::string&,
                               std::span<const std::string_view> allowed);
  struct Options {
    std::string_view doc{};  // a line under the section's heading
    Check check{};           // after every row: the rules across fields
    // The row read first, whose value chooses the variant (see kEveryVariant); the message when
    // the node is not a map holding it; the variant of an object with it read; variant names.
    std::string_view selector{};
    std::string_view shape_error{};
    uint8_t (*variant)(const T&) = nullptr;
    std::vector<std::string> variant_names{};
    Misplaced misplaced = nullptr;  // before the unknown-field check: a better message for some
  };

  explicit Table(std::vector<Field<T>> fields, Options options = {})
      : fields_(std::move(fields)), options_(std::move(options)) {
    assert(options_.selector.empty() || Find(options_.selector) != nullptr);
  }

  Status Read(const YamlReader& r, const YAML::Node& n, const std::string& path, T& out) const;
  void Visit(FieldVisitor& v, const std::string& path, const T& defaults) const;

  const Field<T>* Find(std::string_view name) const {
    for (const Field<T>& f : fields_) {
      if (f.name == name) return &f;
    }
    return nullptr;
  }
  std::vector<std::string_view> Names(uint8_t variants = kEveryVariant) const {
    std::vector<std::string_view> names;
    for (const Field<T>& f : fields_) {
      if ((f.variants & variants) != 0) names.push_back(f.name);
    }
    return names;
  }

 private:
  std::string VariantName(uint8_t variants) const;

  std::vector<Field<T>> fields_;
  Options options_;
};

template <typename T>
Status Table<T>::Read(const YamlReader& r, const YAML::Node& n, const std::string& path,
                      T& out) const {
  uint8_t active = kEveryVariant;
  for (const Field<T>& f : fields_) {
    if (options_.selector.empty() || f.name != options_.selector) continue;
    const std::string key(f.name);
    if (!n.IsMap() || !n[key]) return r.Error(n, path, options_.shape_error);
    if (Status s = f.value.read(r, n[key], JoinPath(path, f.name), out); !s.ok()) return s;
    active = options_.variant(out);
  }
  const std::vector<std::string_view> names = Names(active);
  if (options_.misplaced != nullptr) {
    if (Status s = options_.misplaced(r, n, path, names); !s.ok()) return s;
  }
  if (Status s = r.ExpectMap(n, path, names); !s.ok()) return s;
  for (const Field<T>& f : fields_) {
    if (f.need == Need::kRequired && (f.variants & active) != 0 && !n[std::string(f.name)]) {
      return r.Error(n, path, Cat("missing ", f.name));
    }
  }
  for (const Field<T>& f : fields_) {
    const YAML::Node value = n[std::string(f.name)];
    if ((f.variants & active) == 0 || f.name == options_.selector || !value) continue;
    if (Status s = f.value.read(r, value, JoinPath(path, f.name), out); !s.ok()) return s;
  }
  return options_.check ? options_.check(r, n, path, out) : Status::Ok();
}

template <typename T>
void Table<T>::Visit(FieldVisitor& v, const std::string& path, const T& defaults) const {
  v.Section(path, options_.doc);
  for (const Field<T>& f : fields_) {
    v.Field({.path = JoinPath(path, f.name),
             .shape = &f.value.shape,
             .default_value = f.value.show ? f.value.show(defaults) : std::string(),
             .default_note = f.default_note,
             .doc = f.doc,
             .required = f.need == Need::kRequired,
             .extension = f.extension,
             .variant = VariantName(f.variants)});
  }
  for (const Field<T>& f : fields_) {
    if (f.value.sections) f.value.sections(v, JoinPath(path, f.name), defaults);
  }
}

template <typename T>
std::string Table<T>::VariantName(uint8_t variants) const {
  std::string names;
  for (size_t i = 0; variants != kEveryVariant && i < options_.variant_names.size(); ++i) {
    if ((variants & (1u << i)) != 0)
      names += Cat(names.empty() ? "" : ", ", options_.variant_names[i]);
  }
  return names;
}

}  // namespace caudal::config_internal
