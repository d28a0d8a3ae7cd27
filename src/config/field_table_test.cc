// The field-table engine on small tables of its own: each kind of value, nested maps, lists of
// maps, a scalar or a map, variants, required rows, the checks, and what a visitor sees.
#include "config/field_table.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <optional>
#include <vector>

#include "config/field_values.h"

namespace caudal::config_internal {
namespace {

using std::chrono::milliseconds;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

// What a future `store.lease` could be: `lease: off`, or `lease: {ttl: 250ms, max_share: 10}`.
struct Lease {
  bool enabled = true;
  Micros ttl = milliseconds(100);
  int64_t max_share = 5;
};

struct Item {
  std::string name;
  int64_t weight = 1;
};

enum class Mode : uint8_t { kFast, kSafe };
std::string_view ModeName(Mode m) { return m == Mode::kFast ? "fast" : "safe"; }
Result<Mode> ParseMode(std::string_view text) {
  if (text == "fast") return Mode::kFast;
  if (text == "safe") return Mode::kSafe;
  return Status::InvalidArgument("expected fast or safe");
}
constexpr Mode kModes[] = {Mode::kFast, Mode::kSafe};

struct Sample {
  std::string url = "none://";
  std::string file;
  bool on = true;
  int64_t count = 3;
  Micros wait = milliseconds(10);
  Mode mode = Mode::kSafe;
  std::optional<Mode> override_mode;
  std::vector<std::string> tags;
  Lease lease;
  std::vector<Item> items;
  std::optional<Item> extra;
};

Status NoSpaces(std::string_view text) {
  return text.find(' ') == text.npos ? Status::Ok() : Status::InvalidArgument("no spaces");
}

const Table<Lease>& LeaseTable() {
  using R = Rows<Lease>;
  static const Table<Lease> table({
      {.name = "ttl",
       .value = R::Duration(&Lease::ttl, milliseconds(1), std::chrono::seconds(1)),
       .doc = "how long"},
      {.name = "max_share", .value = R::Integer(&Lease::max_share, 1, 100), .doc = "how much"},
  });
  return table;
}

const Table<Item>& ItemTable() {
  using R = Rows<Item>;
  static const Table<Item> table({
      {.name = "name", .value = R::Text(&Item::name), .doc = "its name", .need = Need::kRequired},
      {.name = "weight", .value = R::Integer(&Item::weight, 1, 9), .doc = "its weight"},
  });
  return table;
}

const Table<Sample>& SampleTable() {
  using R = Rows<Sample>;
  static const Table<Sample> table(
      {
          {.name = "url", .value = R::Text(&Sample::url, "url", NoSpaces), .doc = "a url"},
          {.name = "file", .value = R::Path(&Sample::file), .doc = "a file"},
          {.name = "on", .value = R::Bool(&Sample::on), .doc = "a switch"},
          {.name = "count", .value = R::Integer(&Sample::count, 0, 10), .doc = "a count"},
          {.name = "wait",
           .value = R::Duration(&Sample::wait, milliseconds(1), std::chrono::hours(1)),
           .doc = "a wait"},
          {.name = "mode",
           .value = R::Choice(&Sample::mode, ParseMode, ModeName, kModes),
           .doc = "a mode"},
          {.name = "override_mode",
           .value = R::Choice(&Sample::override_mode, ParseMode, ModeName, kModes),
           .doc = "another mode",
           .default_note = "mode"},
          {.name = "tags", .value = R::List(&Sample::tags, 2, TextItem()), .doc = "some tags"},
          {.name = "lease",
           .value = R::Either(R::Bool([](auto& s) -> auto& { return s.lease.enabled; }),
                              R::Map(&Sample::lease, LeaseTable())),
           .doc = "off, or how"},
          {.name = "items",
           .value = R::List(&Sample::items, 3, MapItem(ItemTable())),
           .doc = "items"},
          {.name = "extra",
           .value = R::Nullable(R::Map(&Sample::extra, ItemTable())),
           .doc = "one more"},
      },
      {.check = [](const YamlReader& r, const YAML::Node& n, const std::string& path,
                   Sample& out) -> Status {
        if (out.count == 7) return r.Error(n, JoinPath(path, "count"), "seven is unlucky");
        return Status::Ok();
      }});
  return table;
}

Result<Sample> Read(const std::string& yaml) {
  const YamlReader r("s.yaml");
  Sample s;
  if (Status st = SampleTable().Read(r, YAML::Load(yaml), "top", s); !st.ok()) return st;
  return s;
}

std::string ErrorOf(const std::string& yaml) {
  auto s = Read(yaml);
  EXPECT_FALSE(s.ok()) << yaml;
  return s.ok() ? "" : s.status().message();
}

TEST(FieldTable, ReadsEachKindOfValueIntoItsMember) {
  auto s = Read(R"(
url: a://b
file: f.pem
on: false
count: 10
wait: 2s
mode: fast
override_mode: safe
tags: [x, y]
lease: {ttl: 250ms}
items: [{name: a}, {name: b, weight: 9}]
extra: {name: c}
)");
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->url, "a://b");
  EXPECT_EQ(s->file, "f.pem");
  EXPECT_FALSE(s->on);
  EXPECT_EQ(s->count, 10);
  EXPECT_EQ(s->wait, std::chrono::seconds(2));
  EXPECT_EQ(s->mode, Mode::kFast);
  EXPECT_EQ(s->override_mode, Mode::kSafe);
  EXPECT_THAT(s->tags, ElementsAre("x", "y"));
  EXPECT_TRUE(s->lease.enabled);
  EXPECT_EQ(s->lease.ttl, milliseconds(250));
  EXPECT_EQ(s->lease.max_share, 5);  // its own default, untouched
  ASSERT_EQ(s->items.size(), 2u);
  EXPECT_EQ(s->items[0].weight, 1);
  EXPECT_EQ(s->items[1].name, "b");
  EXPECT_EQ(s->items[1].weight, 9);
  ASSERT_TRUE(s->extra.has_value());
  EXPECT_EQ(s->extra->name, "c");
}

TEST(FieldTable, LeavesTheDefaultsOfFieldsNotGiven) {
  auto s = Read("{}");
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  const Sample defaults;
  EXPECT_EQ(s->url, defaults.url);
  EXPECT_EQ(s->count, defaults.count);
  EXPECT_EQ(s->wait, defaults.wait);
  EXPECT_FALSE(s->override_mode.has_value());
  EXPECT_FALSE(s->extra.has_value());
  auto null_extra = Read("extra: ~");  // Nullable: a null map is no map
  ASSERT_TRUE(null_extra.ok()) << null_extra.status().ToString();
  EXPECT_FALSE(null_extra->extra.has_value());
}

TEST(FieldTable, AScalarOrAMap) {
  auto off = Read("lease: false");
  ASSERT_TRUE(off.ok()) << off.status().ToString();
  EXPECT_FALSE(off->lease.enabled);
  EXPECT_EQ(off->lease.ttl, milliseconds(100));
  EXPECT_EQ(ErrorOf("lease: maybe"),
            "s.yaml:1:8: top.lease: expected true or false (got \"maybe\")");
  EXPECT_EQ(ErrorOf("lease: {ttl: 2s}"), "s.yaml:1:14: top.lease.ttl: expected between 1ms and 1s");
  EXPECT_THAT(
      ErrorOf("lease: {tll: 2s}"),
      HasSubstr("s.yaml:1:9: top.lease.tll: unknown field (expected one of: ttl, max_share)"));
}

TEST(FieldTable, ErrorsNameTheRowsPathAndPosition) {
  EXPECT_EQ(ErrorOf("url: 'a b'"), "s.yaml:1:6: top.url: no spaces");
  EXPECT_EQ(ErrorOf("file: ''"), "s.yaml:1:7: top.file: empty path");
  EXPECT_EQ(ErrorOf("on: yes"), "s.yaml:1:5: top.on: expected true or false (got \"yes\")");
  EXPECT_EQ(ErrorOf("count: 11"),
            "s.yaml:1:8: top.count: expected an integer from 0 to 10 (got \"11\")");
  EXPECT_EQ(ErrorOf("wait: 2h"), "s.yaml:1:7: top.wait: expected between 1ms and 1h");
  EXPECT_EQ(ErrorOf("mode: slow"), "s.yaml:1:7: top.mode: expected fast or safe");
  EXPECT_EQ(ErrorOf("tags: [a, b, c]"), "s.yaml:1:7: top.tags: expected at most 2 items (got 3)");
  EXPECT_EQ(ErrorOf("tags: [a, [b]]"), "s.yaml:1:11: top.tags[1]: expected a string (got a list)");
  EXPECT_EQ(ErrorOf("items: [{name: a}, {weight: 2}]"), "s.yaml:1:20: top.items[1]: missing name");
  EXPECT_EQ(ErrorOf("items: [{name: a, weight: 0}]"),
            "s.yaml:1:27: top.items[0].weight: expected an integer from 1 to 9 (got \"0\")");
  EXPECT_EQ(ErrorOf("extra: {name: a, colour: red}"),
            "s.yaml:1:18: top.extra.colour: unknown field (expected one of: name, weight)");
  EXPECT_EQ(ErrorOf("count: 1\ncount: 2"), "s.yaml:2:1: top.count: given twice");
  EXPECT_EQ(ErrorOf("[]"),
            "s.yaml:1:1: top: expected a map with url, file, on, count, wait, mode, override_mode, "
            "tags, lease, items, extra (got a list)");
  EXPECT_EQ(ErrorOf("count: 7"), "s.yaml:1:1: top.count: seven is unlucky");  // the check
}

// A limit's shape: the selector row is read first and chooses the other rows.
struct Shaped {
  bool window = false;
  int64_t capacity = 0;
  int64_t limit = 0;
};

const Table<Shaped>& ShapedTable() {
  using R = Rows<Shaped>;
  static const Table<Shaped> table(
      {
          {.name = "kind",
           .value = R::Choice(&Shaped::window, {{"bucket", false}, {"window", true}}),
           .doc = "the kind",
           .need = Need::kRequired},
          {.name = "capacity",
           .value = R::Integer(&Shaped::capacity, 1, 9),
           .doc = "a bucket's",
           .need = Need::kRequired,
           .variants = 1},
          {.name = "limit",
           .value = R::Integer(&Shaped::limit, 1, 9),
           .doc = "a window's",
           .variants = 2},
      },
      {.selector = "kind",
       .shape_error = "expected a map with a kind",
       .variant = [](const Shaped& s) -> uint8_t { return s.window ? 2 : 1; },
       .variant_names = {"bucket", "window"}});
  return table;
}

TEST(FieldTable, TheSelectorChoosesTheOtherRows) {
  const YamlReader r("v.yaml");
  const auto read = [&](const std::string& yaml) {
    Shaped s;
    Status st = ShapedTable().Read(r, YAML::Load(yaml), "l", s);
    return st.ok() ? std::string("ok") : st.message();
  };
  EXPECT_EQ(read("{kind: bucket, capacity: 3}"), "ok");
  EXPECT_EQ(read("{kind: window, limit: 3}"), "ok");
  EXPECT_EQ(read("{kind: window}"), "ok");  // limit is optional
  EXPECT_EQ(read("{kind: bucket}"), "v.yaml:1:1: l: missing capacity");
  EXPECT_EQ(read("{kind: bucket, limit: 3}"),
            "v.yaml:1:16: l.limit: unknown field (expected one of: kind, capacity)");
  EXPECT_EQ(read("{capacity: 3}"), "v.yaml:1:1: l: expected a map with a kind");
  EXPECT_EQ(read("{kind: cone}"), "v.yaml:1:8: l.kind: expected bucket or window (got \"cone\")");
}

TEST(FieldTable, OnlyRefusesAValueTheEarlierRowsDoNotAllow) {
  struct Pair {
    bool tls = false;
    std::string ca;
  };
  using R = Rows<Pair>;
  const Table<Pair> table({
      {.name = "tls", .value = R::Bool(&Pair::tls), .doc = "on"},
      {.name = "ca",
       .value = R::Only([](const Pair& p) { return p.tls; }, "needs tls: true", R::Path(&Pair::ca)),
       .doc = "a file"},
  });
  const YamlReader r("o.yaml");
  Pair p;
  EXPECT_EQ(table.Read(r, YAML::Load("{ca: x}"), "p", p).message(),
            "o.yaml:1:6: p.ca: needs tls: true");
  EXPECT_TRUE(table.Read(r, YAML::Load("{tls: true, ca: x}"), "p", p).ok());
  EXPECT_EQ(p.ca, "x");
}

class RowCollector final : public FieldVisitor {
 public:
  void Section(const std::string& path, std::string_view doc) override {
    sections.push_back(path);
    docs.emplace_back(doc);
  }
  void Field(const FieldInfo& f) override { rows.push_back(f); }
  std::vector<std::string> sections;
  std::vector<std::string> docs;
  std::vector<FieldInfo> rows;

  const FieldInfo& Row(std::string_view path) const {
    for (const FieldInfo& f : rows) {
      if (f.path == path) return f;
    }
    static const FieldInfo none;
    ADD_FAILURE() << "no row " << path;
    return none;
  }
};

TEST(FieldTable, AVisitorSeesEverySectionAndRowWithTheStructsDefaults) {
  RowCollector c;
  SampleTable().Visit(c, "top", Sample{});
  EXPECT_THAT(c.sections, ElementsAre("top", "top.lease", "top.items[]", "top.extra"));
  EXPECT_EQ(c.rows.size(), 11u + 2u + 2u + 2u);
  EXPECT_EQ(c.Row("top.url").default_value, "none://");
  EXPECT_EQ(c.Row("top.url").shape->what, "url");
  EXPECT_EQ(c.Row("top.on").default_value, "true");
  EXPECT_EQ(c.Row("top.count").default_value, "3");
  EXPECT_EQ(c.Row("top.count").shape->max, 10);
  EXPECT_EQ(c.Row("top.wait").default_value, "10ms");
  EXPECT_EQ(c.Row("top.mode").default_value, "safe");
  EXPECT_THAT(c.Row("top.mode").shape->choices, ElementsAre("fast", "safe"));
  EXPECT_EQ(c.Row("top.override_mode").default_value, "");
  EXPECT_EQ(c.Row("top.override_mode").default_note, "mode");
  EXPECT_EQ(c.Row("top.tags").default_value, "[]");
  EXPECT_EQ(c.Row("top.lease").shape->kind, Shape::Kind::kScalarOrMap);
  EXPECT_EQ(c.Row("top.lease").default_value, "true");
  EXPECT_EQ(c.Row("top.lease.ttl").default_value, "100ms");
  EXPECT_TRUE(c.Row("top.items[].name").required);
  EXPECT_EQ(c.Row("top.items[].weight").default_value, "1");

  // The defaults are read from the object given, not written in the table.
  Sample other;
  other.count = 4;
  other.lease.ttl = milliseconds(300);
  RowCollector d;
  SampleTable().Visit(d, "top", other);
  EXPECT_EQ(d.Row("top.count").default_value, "4");
  EXPECT_EQ(d.Row("top.lease.ttl").default_value, "300ms");

  RowCollector v;
  ShapedTable().Visit(v, "l", Shaped{});
  EXPECT_EQ(v.Row("l.kind").variant, "");
  EXPECT_EQ(v.Row("l.capacity").variant, "bucket");
  EXPECT_EQ(v.Row("l.limit").variant, "window");
}

}  // namespace
}  // namespace caudal::config_internal
