// The generated references: what a section looks like, that the markers are found and kept, and
// that a doc written from one table fails the check once a row of it changes.
#include "config/config_reference.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "config/field_values.h"

namespace caudal::config_internal {
namespace {

using ::testing::HasSubstr;

struct Knobs {
  int64_t depth = 4;
  std::string name = "knob";
  bool loud = false;
};

Table<Knobs> KnobTable(int64_t max_depth) {
  using R = Rows<Knobs>;
  return Table<Knobs>(
      {
          {.name = "depth", .value = R::Integer(&Knobs::depth, 1, max_depth), .doc = "how deep"},
          {.name = "name", .value = R::Text(&Knobs::name), .doc = "what | it is called"},
          {.name = "loud",
           .value = R::Bool(&Knobs::loud),
           .doc = "whether it shouts",
           .extension = true},
      },
      {.doc = "Some knobs."});
}

std::string Render(const Table<Knobs>& table, const Knobs& defaults = {}) {
  return RenderReference([&](FieldVisitor& v) { table.Visit(v, "knobs", defaults); });
}

constexpr const char* kBegin = "<!-- knobs:begin: generated, edit the table -->\n";
constexpr const char* kEnd = "<!-- knobs:end -->\n";

std::string Doc(const std::string& generated) {
  return Cat("# Knobs\n\nSome prose.\n\n", kBegin, '\n', generated, '\n', kEnd, "\nMore prose.\n");
}

TEST(ConfigReference, ASectionIsAHeadingItsDocAndARowPerField) {
  EXPECT_EQ(
      Render(KnobTable(9)),
      "### `knobs`\n\n"
      "Some knobs.\n\n"
      "| field | type | default | what |\n"
      "|---|---|---|---|\n"
      "| `knobs.depth` | integer, 1 to 9 | `4` | how deep |\n"
      "| `knobs.name` | string | `knob` | what \\| it is called |\n"
      "| `knobs.loud` | `true` or `false` | `false` | caudal's addition: whether it shouts |\n");
  Knobs other;
  other.depth = 2;  // the default shown is the struct's, never written in the table
  EXPECT_THAT(Render(KnobTable(9), other), HasSubstr("| `knobs.depth` | integer, 1 to 9 | `2` |"));
}

TEST(ConfigReference, ReplacesTheTextBetweenTheMarkersOnly) {
  const std::string doc = Doc("old text\n");
  auto updated = ReplaceGenerated(doc, "knobs", "new text\n");
  ASSERT_TRUE(updated.ok()) << updated.status().ToString();
  EXPECT_EQ(*updated, Doc("new text\n"));
  EXPECT_EQ(ReplaceGenerated(doc, "dials", "x").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(ReplaceGenerated(Cat(kEnd, kBegin), "knobs", "x").status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(ReplaceGenerated(Cat(kBegin, kBegin, kEnd), "knobs", "x").status().code(),
            StatusCode::kInvalidArgument);
}

TEST(ConfigReference, ADocWrittenFromTheTablesFailsTheCheckWhenARowChanges) {
  const std::string doc = Doc(Render(KnobTable(9)));
  auto same = ReplaceGenerated(doc, "knobs", Render(KnobTable(9)));
  ASSERT_TRUE(same.ok());
  EXPECT_EQ(*same, doc);  // the check passes
  auto changed = ReplaceGenerated(doc, "knobs", Render(KnobTable(10)));
  ASSERT_TRUE(changed.ok());
  EXPECT_NE(*changed, doc);  // the check fails
  EXPECT_THAT(*changed, HasSubstr("| `knobs.depth` | integer, 1 to 10 | `4` | how deep |"));
}

TEST(ConfigReference, CoversCaudalsConfigAndEnvoysRuleFormat) {
  const std::vector<GeneratedSection> sections = GeneratedSections();
  ASSERT_EQ(sections.size(), 2u);
  EXPECT_EQ(sections[0].name, "config-reference");
  EXPECT_THAT(
      sections[0].text,
      HasSubstr("| `store.timeout` | duration, 1ms to 10s | `10ms` | the store's deadline"));
  EXPECT_THAT(sections[0].text, HasSubstr("### `policies[].limits[]`"));
  EXPECT_EQ(sections[1].name, "envoy-reference");
  EXPECT_THAT(sections[1].text,
              HasSubstr("| `descriptors[].rate_limit.capacity` | integer, 1 to 1099511627776 | "
                        "requests_per_unit | caudal's addition: "));
}

}  // namespace
}  // namespace caudal::config_internal
