// The values of field-table rows (field_table.h): Rows<T>::Integer(&StoreConfig::instances, 1,
// kMaxInstances) and the like. Each reads a node into a member (a member pointer, or a lambda
// returning a reference for one further down), shows the member's default for the reference
// and carries its shape; each error is at the node and names the row's path.
#pragma once

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

#include "caudal/common/clock.h"
#include "config/field_table.h"

namespace caudal::config_internal {

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

  // The member may be an optional (unset: not given; see default_note).
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
            .show =
                [get](const T& d) {
                  const auto& v = std::invoke(get, d);
                  if constexpr (requires { v.has_value(); }) {
                    return v.has_value() ? std::to_string(*v) : std::string();
                  } else {
                    return std::to_string(v);
                  }
                }};
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
                    static_cast<void>(get);  // used by the other branch (clang warns otherwise)
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
