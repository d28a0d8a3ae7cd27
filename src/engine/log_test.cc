#include "caudal/log.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "support/manual_clock.h"

namespace caudal {
namespace {

TEST(Logger, TextLinesCarryFieldsQuotedWhenNeeded) {
  std::vector<std::string> lines;
  Logger log([&](LogLevel, std::string_view line) { lines.emplace_back(line); });
  log.Warning("refused", {{"policy", "per-ip"}, {"identity", "a b\"c"}});
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0], "warning refused policy=per-ip identity=\"a b\\\"c\"");
}

TEST(Logger, JsonLinesAreOneObjectEach) {
  std::vector<std::string> lines;
  Logger log([&](LogLevel, std::string_view line) { lines.emplace_back(line); },
             {.format = LogFormat::kJson});
  log.Info("two\nlines \"quoted\"", {{"retry_after_ms", "1200"}});
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0],
            "{\"level\":\"info\",\"msg\":\"two\\u000alines "
            "\\\"quoted\\\"\",\"retry_after_ms\":\"1200\"}");
}

TEST(Logger, LinesBelowTheLevelAreDropped) {
  std::vector<std::string> lines;
  Logger log([&](LogLevel, std::string_view line) { lines.emplace_back(line); },
             {.level = LogLevel::kWarning});
  log.Info("dropped");
  log.Debug("dropped");
  log.Error("kept");
  EXPECT_EQ(lines, std::vector<std::string>{"error kept"});
  log.SetOptions({.level = LogLevel::kDebug});
  log.Debug("now kept");
  EXPECT_EQ(lines.back(), "debug now kept");
}

TEST(Logger, ParsesItsSpellings) {
  EXPECT_TRUE(ParseLogLevel("debug").ok());
  EXPECT_FALSE(ParseLogLevel("verbose").ok());
  EXPECT_TRUE(ParseLogFormat("json").ok());
  EXPECT_FALSE(ParseLogFormat("xml").ok());
}

}  // namespace
}  // namespace caudal
