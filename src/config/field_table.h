// Field tables: each config field is one row (its name, the shape of its value, its default and
// a line of documentation) that the parser, the unknown-field check, every error's field path and
// the generated reference (config_reference.h) all read. A table holds the fields of one map
// (`store`, `server.tls`, `policies[]`); a row's value may be a scalar, a list, another table, a
// list of tables, or a scalar or a table (`lease: off` / `lease: {ttl: 250ms}`).
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
#include <initializer_list>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "caudal/clock.h"
#include "caudal/rate.h"
#include "caudal/status.h"
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

  const std::vector<Field<T>>& fields() const { return fields_; }
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

// "a, b or c", as the choices' error messages list them.
std::string OrList(std::span<const std::string> words);
// "empty path" for an empty string: the check of every path field.
Status NonEmptyPath(std::string_view text);

template <typename T>
struct Rows {
  template <typename Get>
  using Member = std::remove_cvref_t<std::invoke_result_t<Get, T&>>;

  // A string; `check` (if any) refuses some with its message; `what` names it for the reference.
  template <typename Get>
  static Value<T> Text(Get get, std::string_view what = {},
                       Status (*check)(std::string_view) = nullptr) {
    return {.shape = {.kind = Shape::Kind::kText, .what = std::string(what)},
            .read = [get, check](const YamlReader& r, const YAML::Node& n, const std::string& path,
                                 T& out) -> Status {
              auto text = r.String(n, path);
              if (!text.ok()) return text.status();
              if (check != nullptr) {
                if (Status s = check(*text); !s.ok()) return r.Error(n, path, s.message());
              }
              std::invoke(get, out) = std::move(*text);
              return Status::Ok();
            },
            .show = [get](const T& d) { return std::string(std::invoke(get, d)); }};
  }

  // A file's path, relative to the config file's directory; not empty.
  template <typename Get>
  static Value<T> Path(Get get) {
    return Text(get, "path", NonEmptyPath);
  }

  template <typename Get>
  static Value<T> Bool(Get get) {
    return Switch(get, Member<Get>{true}, Member<Get>{false});
  }

  // true and false stand for two values of another type (shadow: true is Enforcement::kShadow).
  template <typename Get>
  static Value<T> Switch(Get get, Member<Get> on, Member<Get> off) {
    return {.shape = {.kind = Shape::Kind::kBool},
            .read = [get, on, off](const YamlReader& r, const YAML::Node& n,
                                   const std::string& path, T& out) -> Status {
              auto b = r.Bool(n, path);
              if (!b.ok()) return b.status();
              std::invoke(get, out) = *b ? on : off;
              return Status::Ok();
            },
            .show = [get, on](const T& d) { return std::invoke(get, d) == on ? "true" : "false"; }};
  }

  template <typename Get>
  static Value<T> Integer(Get get, int64_t min, int64_t max) {
    return {.shape = {.kind = Shape::Kind::kInteger, .min = min, .max = max},
            .read = [get, min, max](const YamlReader& r, const YAML::Node& n,
                                    const std::string& path, T& out) -> Status {
              auto v = r.Integer(n, path, min, max);
              if (!v.ok()) return v.status();
              std::invoke(get, out) = static_cast<Member<Get>>(*v);
              return Status::Ok();
            },
            .show = [get](const T& d) { return std::to_string(std::invoke(get, d)); }};
  }

  // A duration from min to max (any, when max is 0).
  template <typename Get>
  static Value<T> Duration(Get get, Micros min = Micros(0), Micros max = Micros(0)) {
    return {.shape = {.kind = Shape::Kind::kDuration, .min = min.count(), .max = max.count()},
            .read = [get, min, max](const YamlReader& r, const YAML::Node& n,
                                    const std::string& path, T& out) -> Status {
              auto d = r.Duration(n, path);
              if (!d.ok()) return d.status();
              if (max.count() != 0 && (*d < min || *d > max)) {
                return r.Error(
                    n, path,
                    Cat("expected between ", FormatDuration(min), " and ", FormatDuration(max)));
              }
              std::invoke(get, out) = *d;
              return Status::Ok();
            },
            .show = [get](const T& d) { return FormatDuration(std::invoke(get, d)); }};
  }

  // One of `values`, spelled as `name` spells them and read by `parse` (whose message is the
  // error). The member may be an optional (unset: a default from elsewhere, see default_note).
  template <typename Get, typename E>
  static Value<T> Choice(Get get, Result<E> (*parse)(std::string_view), std::string_view (*name)(E),
                         std::type_identity_t<std::span<const E>> values) {
    Shape shape{.kind = Shape::Kind::kChoice};
    for (E e : values) shape.choices.emplace_back(name(e));
    return {.shape = std::move(shape),
            .read = [get, parse](const YamlReader& r, const YAML::Node& n, const std::string& path,
                                 T& out) -> Status {
              auto text = r.String(n, path);
              if (!text.ok()) return text.status();
              auto value = parse(*text);
              if (!value.ok()) return r.Error(n, path, value.status().message());
              std::invoke(get, out) = *value;
              return Status::Ok();
            },
            .show =
                [get, name](const T& d) {
                  const auto& v = std::invoke(get, d);
                  if constexpr (requires { v.has_value(); }) {
                    return v.has_value() ? std::string(name(*v)) : std::string();
                  } else {
                    return std::string(name(v));
                  }
                }};
  }

  // One of a few words, each standing for a value (metrics: open | protected → a bool).
  template <typename Get>
  static Value<T> Choice(Get get,
                         std::initializer_list<std::pair<std::string_view, Member<Get>>> words) {
    using V = Member<Get>;
    std::vector<std::pair<std::string_view, V>> table(words);
    Shape shape{.kind = Shape::Kind::kChoice};
    for (const auto& w : table) shape.choices.emplace_back(w.first);
    std::string expected = Cat("expected ", OrList(shape.choices));
    return {.shape = std::move(shape),
            .read = [get, table, expected](const YamlReader& r, const YAML::Node& n,
                                           const std::string& path, T& out) -> Status {
              auto text = r.String(n, path);
              if (!text.ok()) return text.status();
              for (const auto& [word, value] : table) {
                if (word == *text) {
                  std::invoke(get, out) = value;
                  return Status::Ok();
                }
              }
              return r.Error(n, path, Cat(expected, " (got ", Quoted(*text), ')'));
            },
            .show =
                [get, table](const T& d) {
                  for (const auto& [word, value] : table) {
                    if (value == std::invoke(get, d)) return std::string(word);
                  }
                  return std::string();
                }};
  }

  // A list of at most max_items items; the member is a std::vector of the item's type.
  template <typename Get, typename E>
  static Value<T> List(Get get, size_t max_items, Item<E> item) {
    Value<T> v{.shape = {.kind = Shape::Kind::kList,
                         .max_items = max_items,
                         .item = std::make_shared<const Shape>(item.shape)}};
    v.read = [get, max_items, read = item.read](const YamlReader& r, const YAML::Node& n,
                                                const std::string& path, T& out) -> Status {
      if (Status s = r.ExpectSequence(n, path, max_items); !s.ok()) return s;
      std::vector<E> values;
      for (size_t i = 0; i < n.size(); ++i) {
        auto e = read(r, n[i], Cat(path, '[', i, ']'));
        if (!e.ok()) return e.status();
        values.push_back(std::move(e).value());
      }
      std::invoke(get, out) = std::move(values);
      return Status::Ok();
    };
    if (item.show) {
      v.show = [get, show = item.show](const T& d) {
        std::string text;
        for (const E& e : std::invoke(get, d)) text += Cat(text.empty() ? "" : ", ", show(e));
        return Cat('[', text, ']');
      };
    }
    if (item.sections) {
      v.sections = [sections = item.sections](FieldVisitor& visitor, const std::string& path,
                                              const T&) { sections(visitor, Cat(path, "[]")); };
    }
    return v;
  }

  // A nested table. An optional member stays unset when the node is null (YAML's `~`).
  template <typename Get, typename W>
  static Value<T> Map(Get get, const Table<W>& table) {
    return {.shape = {.kind = Shape::Kind::kMap},
            .read = [get, &table](const YamlReader& r, const YAML::Node& n, const std::string& path,
                                  T& out) -> Status {
              auto& member = std::invoke(get, out);
              if constexpr (std::is_same_v<Member<Get>, std::optional<W>>) {
                if (n.IsNull()) return Status::Ok();
                return table.Read(r, n, path, member.emplace());
              } else {
                return table.Read(r, n, path, member);
              }
            },
            .sections =
                [get, &table](FieldVisitor& v, const std::string& path, const T& d) {
                  if constexpr (std::is_same_v<Member<Get>, std::optional<W>>) {
                    table.Visit(v, path, W{});
                  } else {
                    table.Visit(v, path, std::invoke(get, d));
                  }
                }};
  }

  // A scalar or a map (`lease: off` or `lease: {ttl: 250ms}`): `map` reads a map, `scalar` the
  // rest.
  static Value<T> Either(Value<T> scalar, Value<T> map) {
    return {.shape = {.kind = Shape::Kind::kScalarOrMap,
                      .item = std::make_shared<const Shape>(scalar.shape)},
            .read =
                [read_scalar = scalar.read, read_map = map.read](
                    const YamlReader& r, const YAML::Node& n, const std::string& path, T& out) {
                  return n.IsMap() ? read_map(r, n, path, out) : read_scalar(r, n, path, out);
                },
            .show = scalar.show,
            .sections = map.sections};
  }

  // `value`, refused with `error` unless `allowed` holds of the rows read before it (store.tls
  // needs a TLS store.url).
  static Value<T> Only(bool (*allowed)(const T&), std::string_view error, Value<T> value) {
    value.read = [allowed, error, read = std::move(value.read)](
                     const YamlReader& r, const YAML::Node& n, const std::string& path, T& out) {
      return allowed(out) ? read(r, n, path, out) : r.Error(n, path, error);
    };
    return value;
  }

  // `value`, or nothing when the node is null (`~`, or a key with no value): envoyproxy/
  // ratelimit's reading of a null list or map.
  static Value<T> Nullable(Value<T> value) {
    value.read = [read = std::move(value.read)](const YamlReader& r, const YAML::Node& n,
                                                const std::string& path, T& out) {
      return n.IsNull() ? Status::Ok() : read(r, n, path, out);
    };
    return value;
  }

  // A value with a reader of its own; `what` says what it takes, for the reference.
  static Value<T> Custom(std::string_view what, typename Value<T>::Read read,
                         std::function<std::string(const T&)> show = nullptr) {
    return {.shape = {.kind = Shape::Kind::kCustom, .what = std::string(what)},
            .read = std::move(read),
            .show = std::move(show)};
  }
};

// A string item; `check` (if any) refuses some with its message.
Item<std::string> TextItem(std::string_view what = {}, Status (*check)(std::string_view) = nullptr);

// An item parsed from a string by `parse` (whose message is the error).
template <typename E>
Item<E> ParsedItem(std::string_view what, Result<E> (*parse)(std::string_view),
                   std::type_identity_t<std::string (*)(const E&)> show = nullptr) {
  Item<E> item{.shape = {.kind = Shape::Kind::kText, .what = std::string(what)}};
  item.read = [parse](const YamlReader& r, const YAML::Node& n,
                      const std::string& path) -> Result<E> {
    auto text = r.String(n, path);
    if (!text.ok()) return text.status();
    auto value = parse(*text);
    if (!value.ok()) return r.Error(n, path, value.status().message());
    return value;
  };
  if (show != nullptr) item.show = show;
  return item;
}

// A map item read by `table` into a W, then made an E by `convert` (whose message is the error,
// at the item).
template <typename E, typename W>
Item<E> MapItem(const Table<W>& table, std::type_identity_t<Result<E> (*)(const W&)> convert) {
  return {.shape = {.kind = Shape::Kind::kMap},
          .read = [&table, convert](const YamlReader& r, const YAML::Node& n,
                                    const std::string& path) -> Result<E> {
            W w{};
            if (Status s = table.Read(r, n, path, w); !s.ok()) return s;
            auto e = convert(w);
            if (!e.ok()) return r.Error(n, path, e.status().message());
            return e;
          },
          .sections = [&table](FieldVisitor& v,
                               const std::string& path) { table.Visit(v, path, W{}); }};
}

template <typename W>
Item<W> MapItem(const Table<W>& table) {
  return MapItem<W, W>(table, [](const W& w) -> Result<W> { return w; });
}

}  // namespace caudal::config_internal
