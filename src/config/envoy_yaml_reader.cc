#include "config/envoy_yaml_reader.h"

#include <algorithm>
#include <cctype>
#include <memory>
#include <optional>

#include "algorithms/algorithm.h"
#include "caudal/algorithms/calendar.h"
#include "common/cat.h"
#include "config/calendar_rows.h"
#include "config/lease_rows.h"
#include "config/yaml11_values.h"

namespace caudal::config_internal {
namespace {

using envoy::DescriptorNode;
using envoy::MetadataValue;
using envoy::RateLimitRule;
using envoy::Unit;

// Configuration is trusted more than requests, but still bounded.
constexpr size_t kMaxDepth = 32;
constexpr size_t kMaxDescriptors = 100'000;

constexpr std::string_view kUnits = "second, minute, hour, day, week, month or year";
constexpr Unit kAllUnits[] = {Unit::kSecond, Unit::kMinute, Unit::kHour, Unit::kDay,
                              Unit::kWeek,   Unit::kMonth,  Unit::kYear};

// A rate_limit as written; the check turns it into the rule.
struct RuleFields {
  RateLimitRule rule;
  std::string unit;
  Algorithm algorithm = Algorithm::kFixedWindow;
  int64_t capacity = 0;                     // 0: requests_per_unit
  std::optional<WrittenCalendar> calendar;  // caudal's: the unit as a calendar window
};

struct ReplaceFields {
  std::string name;
};

struct DescriptorFields {
  std::string key;
  std::string value;
  std::optional<RuleFields> rate_limit;
  YAML::Node descriptors;  // read by EnvoyReader::Descriptors, one level down
  bool shadow_mode = false;
  bool quota_mode = false;
  bool detailed_metric = false;
  bool value_to_metric = false;
  bool share_threshold = false;
  MetadataValue::Struct metadata;
};

const Table<RuleFields>& RuleTable();
const Table<DescriptorFields>& DescriptorTable();

// Where a field the reference knows belongs; empty for a field it does not know.
std::string_view HomeOf(std::string_view key) {
  if (const auto* f = RuleTable().Find(key); f != nullptr && !f->extension) return "in rate_limit";
  if (DescriptorTable().Find(key) != nullptr) return "in a descriptor";
  if (EnvoyDocumentTable().Find(key) != nullptr) return "at the top of the file";
  return {};
}

// A field the reference knows, at a level where it would silently ignore it, is named as such.
Status Misplaced(const YamlReader& r, const YAML::Node& n, const std::string& field,
                 std::span<const std::string_view> allowed) {
  if (!n.IsMap()) return Status::Ok();
  for (const auto& kv : n) {
    const std::string key = kv.first.IsScalar() ? kv.first.Scalar() : std::string();
    if (std::find(allowed.begin(), allowed.end(), key) != allowed.end()) continue;
    if (const std::string_view home = HomeOf(key); !home.empty()) {
      return r.Error(kv.first, JoinPath(field, key),
                     Cat("does not belong here (it goes ", home,
                         "); envoyproxy/ratelimit would ignore it, caudal refuses it"));
    }
  }
  return Status::Ok();
}

const Table<ReplaceFields>& ReplaceTable() {
  static const Table<ReplaceFields> table(
      {{.name = "name",
        .value = Yaml11String<ReplaceFields>(&ReplaceFields::name),
        .doc = "the name of a rule this one replaces in the same request"}},
      {.check =
           [](const YamlReader& r, const YAML::Node& n, const std::string& path,
              ReplaceFields& out) {
             return out.name.empty() ? r.Error(n, path, "should not have an empty replaces entry")
                                     : Status::Ok();
           },
       .misplaced = Misplaced});
  return table;
}

Result<Unit> ParseUnit(const YamlReader& r, const YAML::Node& n, const std::string& field,
                       std::string text) {
  std::transform(text.begin(), text.end(), text.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  for (Unit u : kAllUnits) {
    if (UnitName(u) == text) return u;
  }
  return r.Error(n, field,
                 Cat("invalid rate limit unit '", n.Scalar(), "' (expected ", kUnits, ')'));
}

// rate_limit.calendar: the rule's unit (a day, week, month or year) as a calendar window in the
// time zone, in place of the reference's fixed length from the epoch.
Status CalendarRule(const YamlReader& r, const YAML::Node& n, const std::string& field,
                    RuleFields& f) {
  std::optional<CalendarUnit> unit;
  switch (f.rule.unit) {
    case Unit::kDay:
      unit = CalendarUnit::kDay;
      break;
    case Unit::kWeek:
      unit = CalendarUnit::kWeek;
      break;
    case Unit::kMonth:
      unit = CalendarUnit::kMonth;
      break;
    case Unit::kYear:
      unit = CalendarUnit::kYear;
      break;
    default:
      break;
  }
  if (!unit) {
    return r.Error(
        n["calendar"], field,
        Cat("a calendar window is a day, week, month or year, not a ", UnitName(f.rule.unit)));
  }
  if (f.algorithm != Algorithm::kFixedWindow) {
    return r.Error(
        n["calendar"], field,
        Cat("only fixed_window counts calendar windows, not ", AlgorithmName(f.algorithm)));
  }
  auto calendar = Calendar::Create(*unit, f.calendar->time_zone);
  if (!calendar.ok()) return r.Error(n["calendar"], field, calendar.status().message());
  auto limit = Limit::Create(LimitSpec::CalendarWindow(f.rule.requests_per_unit, *calendar));
  if (!limit.ok()) return r.Error(n["calendar"], field, limit.status().message());
  f.rule.limit = *limit;
  return Status::Ok();
}

// The rules across a rate_limit's fields, as the reference checks them (and a few it lets pass).
Status CheckRule(const YamlReader& r, const YAML::Node& n, const std::string& field,
                 RuleFields& f) {
  RateLimitRule& rule = f.rule;
  const auto sub = [&](std::string_view name) { return JoinPath(field, name); };
  for (size_t i = 0; i < rule.replaces.size(); ++i) {
    if (rule.replaces[i] == rule.name) {
      return r.Error(n["replaces"][i], Cat(field, ".replaces[", i, ']'),
                     "replaces should not contain name of same descriptor");
    }
  }
  const YAML::Node unit = n["unit"];
  const YAML::Node rpu = n["requests_per_unit"];
  const auto uncharged = [&](std::string_view why) {
    return r.Error(n["always_charge"], sub("always_charge"), Cat("means nothing ", why));
  };
  if (rule.always_charge && rule.unlimited) return uncharged("when unlimited is true");
  if (rule.always_charge && rule.lease && rule.lease->enabled) {
    return r.Error(n["lease"], sub("lease"),
                   "an always_charge rule never leases: every hit is counted in the store, "
                   "whatever its verdict (remove lease, or set it off)");
  }
  if (rule.unlimited) {
    if (unit && !unit.IsNull()) {
      return r.Error(unit, sub("unit"), "should not specify rate limit unit when unlimited");
    }
    for (const char* name : {"requests_per_unit", "algorithm", "capacity"}) {
      if (n[name]) return r.Error(n[name], sub(name), "means nothing when unlimited is true");
    }
    return Status::Ok();
  }
  if (!unit || unit.IsNull()) {
    return r.Error(n, sub("unit"), Cat("missing (expected ", kUnits, "; or unlimited: true)"));
  }
  auto u = ParseUnit(r, unit, sub("unit"), f.unit);
  if (!u.ok()) return u.status();
  rule.unit = *u;
  if (!rpu || rpu.IsNull()) {
    return r.Error(n, sub("requests_per_unit"),
                   "missing (envoyproxy/ratelimit would read it as 0, which refuses every "
                   "request; write requests_per_unit: 0 if that is meant)");
  }
  if (rule.requests_per_unit == 0) {
    // The reference's way to block a value outright: every hit is over the limit.
    for (const char* name : {"algorithm", "capacity"}) {
      if (n[name])
        return r.Error(n[name], sub(name), "must not be set when requests_per_unit is 0");
    }
    if (rule.always_charge) return uncharged("when requests_per_unit is 0 (nothing is counted)");
    return Status::Ok();
  }
  if (auto problem = CheckRuleLimit(rule, f.algorithm)) {
    const std::string name(problem->field);
    return r.Error(n[name], sub(name), problem->message);
  }
  auto limit = MakeLimit(f.algorithm, rule.requests_per_unit, rule.unit, f.capacity);
  if (!limit.ok()) return r.Error(n, field, limit.status().message());
  rule.limit = *limit;
  if (f.calendar) return CalendarRule(r, n, sub("calendar"), f);
  return Status::Ok();
}

// rate_limit.unit: read as text, then checked with the other fields (CheckRule).
Value<RuleFields> UnitValue() {
  Value<RuleFields> unit = Yaml11String<RuleFields>(&RuleFields::unit);
  unit.shape = {.kind = Shape::Kind::kChoice, .what = "any case"};
  for (Unit u : kAllUnits) unit.shape.choices.emplace_back(UnitName(u));
  return unit;
}

Value<RuleFields> AlgorithmValue() {
  Shape shape{.kind = Shape::Kind::kChoice};
  for (Algorithm a : kAllAlgorithms) shape.choices.emplace_back(AlgorithmName(a));
  return {.shape = std::move(shape),
          .read = [](const YamlReader& r, const YAML::Node& n, const std::string& path,
                     RuleFields& out) -> Status {
            auto name = Yaml11Text(r, n, path);
            if (!name.ok()) return name.status();
            auto a = ParseAlgorithm(*name);
            if (!a.ok()) return r.Error(n, path, a.status().message());
            out.algorithm = *a;  // checked with the rule's other fields (CheckRule)
            return Status::Ok();
          },
          .show = [](const RuleFields& f) { return std::string(AlgorithmName(f.algorithm)); }};
}

Result<std::string> ReplacedName(const ReplaceFields& e) { return e.name; }

const Table<RuleFields>& RuleTable() {
  using R = Rows<RuleFields>;
  static const Table<RuleFields> table(
      {
          {.name = "unit",
           .value = UnitValue(),
           .doc = "the period requests_per_unit counts over (week 7 days, month 30, year 365)",
           .default_note = "required, unless unlimited"},
          {.name = "requests_per_unit",
           .value =
               Yaml11Count<RuleFields>([](auto& f) -> auto& { return f.rule.requests_per_unit; }),
           .doc = "requests allowed per unit; 0 refuses every request (the reference's block)",
           .default_note = "required, unless unlimited"},
          {.name = "unlimited",
           .value = Yaml11Bool<RuleFields>([](auto& f) -> auto& { return f.rule.unlimited; }),
           .doc = "no limit at all (no unit, no requests_per_unit)"},
          {.name = "name",
           .value = Yaml11String<RuleFields>([](auto& f) -> auto& { return f.rule.name; }),
           .doc = "the rule's name, for replaces"},
          {.name = "replaces",
           .value = R::Nullable(R::List(
               [](auto& f) -> auto& { return f.rule.replaces; }, kMaxDescriptors,
               MapItem<std::string>(ReplaceTable(), ReplacedName))),
           .doc = "rules this one replaces when both apply to a request"},
          {.name = "algorithm",
           .value = AlgorithmValue(),
           .doc = "the reference's fixed window by default, so a migrated file decides as before",
           .extension = true},
          {.name = "capacity",
           .value = R::Integer(&RuleFields::capacity, 1, kMaxCapacity),
           .doc = "the burst, for token_bucket and gcra (they refill requests_per_unit per unit)",
           .default_note = "requests_per_unit",
           .extension = true},
          {.name = "lease",
           .value = LeaseValue<RuleFields>([](auto& f) -> auto& { return f.rule.lease; }),
           .doc = "this rule's leases: off, on, or its own terms (store.lease)",
           .default_note = "store.lease; off when always_charge",
           .extension = true},
          {.name = "calendar",
           .value = R::Map(&RuleFields::calendar, CalendarTable()),
           .doc = "count per calendar day, week (from Monday), month or year from local midnight "
                  "in its time_zone, instead of the reference's 1, 7, 30 or 365 days from the "
                  "epoch (envoy.md, Calendar units)",
           .extension = true},
          {.name = "always_charge",
           .value = Yaml11Bool<RuleFields>([](auto& f) -> auto& { return f.rule.always_charge; }),
           .doc = "count every hit whatever the verdict, into debt past the limit, in either "
                  "descriptor mode (envoy.md, Always-charged rules)",
           .extension = true},
      },
      {.check = CheckRule, .misplaced = Misplaced});
  return table;
}

Status CheckDescriptor(const YamlReader& r, const YAML::Node& n, const std::string& field,
                       DescriptorFields& f) {
  if (f.key.empty()) {
    return r.Error(n["key"] ? n["key"] : n, JoinPath(field, "key"), "descriptor has empty key");
  }
  const std::string composite = DescriptorNode::ComposeKey(f.key, f.value);
  if (f.share_threshold && composite.find('*') == std::string::npos) {
    return r.Error(n["share_threshold"], JoinPath(field, "share_threshold"),
                   Cat("share_threshold can only be used with wildcard values (containing "
                       "'*'), but found key '",
                       composite, "'"));
  }
  return Status::Ok();
}

Status ReadMetadata(const YamlReader& r, const YAML::Node& n, const std::string& path,
                    DescriptorFields& out) {
  if (!n.IsMap()) return r.Error(n, path, "expected a map");
  auto metadata = Metadata(r, n, path, 1);
  if (!metadata.ok()) return metadata.status();
  out.metadata = std::get<MetadataValue::Struct>(metadata->kind);
  return Status::Ok();
}

const Table<DescriptorFields>& DescriptorTable() {
  using R = Rows<DescriptorFields>;
  using D = DescriptorFields;
  static const Table<DescriptorFields> table(
      {
          {.name = "key",
           .value = Yaml11String<D>(&D::key),
           .doc = "the descriptor entry's key it matches",
           .default_note = "required"},
          {.name = "value",
           .value = Yaml11String<D>(&D::value),
           .doc = "the entry's value; `*` matches any run of characters; empty: any value"},
          {.name = "rate_limit",
           .value = R::Map(&D::rate_limit, RuleTable()),
           .doc = "the limit of a request whose last entry lands here; none: no limit"},
          {.name = "descriptors",
           .value =
               R::Custom("list of descriptors, each as this one",
                         [](const YamlReader&, const YAML::Node& n, const std::string&, D& out) {
                           out.descriptors = n;
                           return Status::Ok();
                         }),
           .doc = "nested descriptors, matched against the request's next entry"},
          {.name = "shadow_mode",
           .value = Yaml11Bool<D>(&D::shadow_mode),
           .doc = "decide and count, but never refuse"},
          {.name = "quota_mode",
           .value = Yaml11Bool<D>(&D::quota_mode),
           .doc = "refuse only when every quota descriptor of the request is over its limit"},
          {.name = "detailed_metric",
           .value = Yaml11Bool<D>(&D::detailed_metric),
           .doc = "statistics per value (envoy.md, Statistics)"},
          {.name = "value_to_metric",
           .value = Yaml11Bool<D>(&D::value_to_metric),
           .doc = "the statistics key carries the request's value at this level"},
          {.name = "share_threshold",
           .value = Yaml11Bool<D>(&D::share_threshold),
           .doc = "wildcard values only: every value matched shares one counter"},
          {.name = "metadata",
           .value = R::Nullable(R::Custom("map, any YAML", ReadMetadata)),
           .doc = "returned in the response's dynamic metadata when the rule passes"},
      },
      {.check = CheckDescriptor, .misplaced = Misplaced});
  return table;
}

}  // namespace

namespace {

// The top level's descriptors, kept for EnvoyReader::Descriptors; documented as their table.
Value<EnvoyDocument> TopDescriptors() {
  Value<EnvoyDocument> v = Rows<EnvoyDocument>::Custom(
      "list of descriptors (below)",
      [](const YamlReader&, const YAML::Node& n, const std::string&, EnvoyDocument& out) {
        out.descriptors = n;
        return Status::Ok();
      });
  v.sections = [](FieldVisitor& visitor, const std::string& path, const EnvoyDocument&) {
    DescriptorTable().Visit(visitor, Cat(path, "[]"), DescriptorFields{});
  };
  return v;
}

}  // namespace

const Table<EnvoyDocument>& EnvoyDocumentTable() {
  static const Table<EnvoyDocument> table(
      {
          {.name = "domain",
           .value = Yaml11String<EnvoyDocument>(&EnvoyDocument::domain),
           .doc = "the domain Envoy's requests name; one file per domain",
           .default_note = "required"},
          {.name = "descriptors",
           .value = TopDescriptors(),
           .doc = "the descriptor tree, matched against a request's entries in order"},
      },
      {.doc = "One file (or each `*.yaml` / `*.yml` file of a directory).",
       .misplaced = Misplaced});
  return table;
}

Status EnvoyReader::Descriptors(const YAML::Node& list, DescriptorNode& parent,
                                const std::string& field, const std::string& path, size_t depth) {
  if (list.IsNull()) return Status::Ok();
  if (depth > kMaxDepth) return r_.Error(list, field, "nested deeper than 32 levels");
  if (Status s = r_.ExpectSequence(list, field, kMaxDescriptors); !s.ok()) return s;
  for (size_t i = 0; i < list.size(); ++i) {
    const YAML::Node d = list[i];
    const std::string at = Cat(field, '[', i, ']');
    DescriptorFields f;
    if (Status s = DescriptorTable().Read(r_, d, at, f); !s.ok()) return s;
    if (++descriptors_ > kMaxDescriptors) {
      return r_.Error(d, at, "more than 100000 descriptors in one file");
    }
    auto node = std::make_unique<DescriptorNode>();
    node->key = std::move(f.key);
    node->value = std::move(f.value);
    if (f.rate_limit) {
      RateLimitRule& rule = node->rule.emplace(std::move(f.rate_limit->rule));
      rule.source = Cat(r_.file(), ':', d.Mark().line + 1);
      rule.shadow_mode = f.shadow_mode;
      rule.quota_mode = f.quota_mode;
      rule.detailed_metric = f.detailed_metric;
      rule.metadata = std::move(f.metadata);
    }
    node->value_to_metric = f.value_to_metric;
    node->share_threshold = f.share_threshold;
    const std::string composite = DescriptorNode::ComposeKey(node->key, node->value);
    DescriptorNode* raw = node.get();
    if (!parent.AddChild(std::move(node)).ok()) {
      return r_.Error(d, at, Cat("duplicate descriptor composite key '", path, composite, "'"));
    }
    if (Status s = Descriptors(f.descriptors, *raw, JoinPath(at, "descriptors"),
                               Cat(path, composite, '.'), depth + 1);
        !s.ok()) {
      return s;
    }
  }
  return Status::Ok();
}

}  // namespace caudal::config_internal
