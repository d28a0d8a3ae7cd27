#include "config/yaml11.h"

#include <gtest/gtest.h>

#include <cmath>

namespace caudal::config_internal {
namespace {

using Kind = Yaml11Scalar::Kind;

TEST(Yaml11, PlainScalarsResolveAsYaml11) {
  EXPECT_EQ(ResolvePlain("~").kind, Kind::kNull);
  EXPECT_EQ(ResolvePlain("").kind, Kind::kNull);
  for (const char* t : {"y", "yes", "Yes", "ON", "true", "True"}) {
    EXPECT_EQ(ResolvePlain(t).kind, Kind::kBool) << t;
    EXPECT_TRUE(ResolvePlain(t).boolean) << t;
  }
  for (const char* f : {"n", "NO", "off", "Off", "false", "FALSE"}) {
    EXPECT_EQ(ResolvePlain(f).kind, Kind::kBool) << f;
    EXPECT_FALSE(ResolvePlain(f).boolean) << f;
  }
  EXPECT_EQ(ResolvePlain("yES").kind, Kind::kString);
  EXPECT_EQ(ResolvePlain("42").integer, 42);
  EXPECT_EQ(ResolvePlain("-42").integer, -42);
  EXPECT_EQ(ResolvePlain("+7").integer, 7);
  EXPECT_EQ(ResolvePlain("0x1F").integer, 31);
  EXPECT_EQ(ResolvePlain("0o17").integer, 15);
  EXPECT_EQ(ResolvePlain("017").integer, 15);
  EXPECT_EQ(ResolvePlain("0b101").integer, 5);
  EXPECT_EQ(ResolvePlain("1_000").integer, 1000);
  EXPECT_EQ(ResolvePlain("0").integer, 0);
  EXPECT_EQ(ResolvePlain("9223372036854775807").kind, Kind::kInt);
  EXPECT_EQ(ResolvePlain("9223372036854775808").kind, Kind::kFloat);  // past int64
  EXPECT_EQ(ResolvePlain("1.5").kind, Kind::kFloat);
  EXPECT_EQ(ResolvePlain("1.5").number, 1.5);
  EXPECT_EQ(ResolvePlain(".5").number, 0.5);
  EXPECT_EQ(ResolvePlain("1e3").number, 1000.0);
  EXPECT_EQ(ResolvePlain("09").kind, Kind::kFloat);  // not octal: a float, as Go reads it
  EXPECT_TRUE(std::isinf(ResolvePlain("-.inf").number));
  EXPECT_TRUE(std::isnan(ResolvePlain(".nan").number));
  for (const char* s : {"10.0.0.1", "1.2.3", "0x", "abc", "-", "1e", "2024-01-01", "1:30"}) {
    EXPECT_EQ(ResolvePlain(s).kind, Kind::kString) << s;
  }
}

TEST(Yaml11, QuotedAndBlockScalarsAreStrings) {
  const YAML::Node n = YAML::Load("a: 'yes'\nb: \"5\"\nc: !!str 5\nd: |\n  5\ne: 5\nf: ~\n");
  EXPECT_EQ(Resolve(n["a"]).kind, Kind::kString);
  EXPECT_EQ(Resolve(n["b"]).kind, Kind::kString);
  EXPECT_EQ(Resolve(n["c"]).kind, Kind::kString);
  EXPECT_EQ(Resolve(n["d"]).kind, Kind::kString);
  EXPECT_EQ(Resolve(n["e"]).kind, Kind::kInt);
  EXPECT_EQ(Resolve(n["f"]).kind, Kind::kNull);
}

TEST(Yaml11, PrintsKeysAsGoDoes) {
  EXPECT_EQ(GoText(ResolvePlain("yes"), "yes"), "true");
  EXPECT_EQ(GoText(ResolvePlain("0x10"), "0x10"), "16");
  EXPECT_EQ(GoText(ResolvePlain("1.5"), "1.5"), "1.5");
  EXPECT_EQ(GoText(ResolvePlain("1e20"), "1e20"), "1e+20");
  EXPECT_EQ(GoText(ResolvePlain("name"), "name"), "name");
}

}  // namespace
}  // namespace caudal::config_internal
