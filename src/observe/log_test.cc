#include "caudal/observe/log.h"

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

// Whatever a value holds (an identity, an Envoy descriptor value), a line stays one line of UTF-8
// with nothing a terminal acts on: CR, LF, ESC, BEL, DEL, C1 controls (CSI) and U+2028/U+2029
// are \u escapes, a byte that is not UTF-8 is \ufffd, in the message and in every field.
TEST(Logger, ControlCharactersAreEscapedInTextAndJson) {
  const std::string value = "a\rb\x1b[2J\x07\x7f\xC2\x9B\xE2\x80\xA8\xE2\x80\xA9\xFF\xC3\xA9";
  const std::string escaped =
      "a\\u000db\\u001b[2J\\u0007\\u007f\\u009b\\u2028\\u2029\\ufffd\xC3\xA9";
  std::vector<std::string> lines;
  Logger text([&](LogLevel, std::string_view line) { lines.emplace_back(line); });
  text.Info("m\x7f\n", {{"identity", value}});
  Logger json([&](LogLevel, std::string_view line) { lines.emplace_back(line); },
              {.format = LogFormat::kJson});
  json.Info("m\x7f\n", {{"identity", value}});
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[0], "info m\\u007f\\u000a identity=\"" + escaped + "\"");
  EXPECT_EQ(lines[1],
            "{\"level\":\"info\",\"msg\":\"m\\u007f\\u000a\",\"identity\":\"" + escaped + "\"}");
}

TEST(Logger, IntegersAreJsonNumbers) {
  std::vector<std::string> lines;
  Logger json([&](LogLevel, std::string_view line) { lines.emplace_back(line); },
              {.format = LogFormat::kJson});
  json.Info("refused", {{"retry_after_ms", int64_t{1200}},
                        {"held_back_same", uint64_t{0}},
                        {"limit", "10/1s"},
                        {"count", "7"}});  // text that looks like a number stays text
  Logger text([&](LogLevel, std::string_view line) { lines.emplace_back(line); });
  text.Info("refused", {{"retry_after_ms", int64_t{-5}}});
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[0],
            "{\"level\":\"info\",\"msg\":\"refused\",\"retry_after_ms\":1200,\"held_back_same\":0,"
            "\"limit\":\"10/1s\",\"count\":\"7\"}");
  EXPECT_EQ(lines[1], "info refused retry_after_ms=-5");
}

// The start-up banner: its text exactly as text (scripts read it), an info line as JSON.
TEST(Logger, BannersAreTheirTextOrAJsonLine) {
  const Logger text([](LogLevel, std::string_view) {});
  EXPECT_EQ(text.Banner("caudal serve: listening on http://127.0.0.1:80 (store memory://, 1 "
                        "policies)",
                        {{"url", "http://127.0.0.1:80"}, {"policies", 1}}),
            "caudal serve: listening on http://127.0.0.1:80 (store memory://, 1 policies)");
  ManualClock clock(std::chrono::seconds(1'764'620'000));
  const Logger json({.format = LogFormat::kJson}, clock);
  EXPECT_EQ(json.Banner("caudal serve: listening", {{"url", "http://[::1]:80"}, {"policies", 1}}),
            "{\"time\":\"2025-12-01T20:13:20Z\",\"level\":\"info\",\"msg\":\"caudal serve: "
            "listening\",\"url\":\"http://[::1]:80\",\"policies\":1}");
  // At any level, even one the logger drops (a start-up failure is written whatever the level).
  const Logger quiet({.level = LogLevel::kError, .format = LogFormat::kJson}, clock);
  EXPECT_EQ(quiet.Plain(LogLevel::kWarning, "caudal serve: no store", {{"exit_code", 1}}),
            "{\"time\":\"2025-12-01T20:13:20Z\",\"level\":\"warning\",\"msg\":\"caudal serve: "
            "no store\",\"exit_code\":1}");
  EXPECT_EQ(text.Plain(LogLevel::kError, "caudal serve: no store"), "caudal serve: no store");
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
