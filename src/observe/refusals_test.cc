#include "observe/refusals.h"

#include <gtest/gtest.h>

#include <map>
#include <random>
#include <string>
#include <vector>

#include "common/cat.h"
#include "support/manual_clock.h"

namespace caudal {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

TEST(Refusals, HeavyHittersAreFoundWithinTheirErrorBounds) {
  ManualClock clock;
  Refusals refusals(clock, nullptr, {.identities = IdentityDisplay::kValue, .log = false});
  std::mt19937 rng(7);
  std::map<std::string, uint64_t> truth;
  // Three heavy identities among 5,000 light ones.
  for (int i = 0; i < 60'000; ++i) {
    const uint32_t r = rng() % 100;
    const std::string id = r < 20   ? "heavy-a"
                           : r < 30 ? "heavy-b"
                           : r < 35 ? "heavy-c"
                                    : Cat("light-", rng() % 5'000);
    ++truth[id];
    refusals.Record(Api::kHttp, "per-key", id, "fixed_window", Micros(0));
  }
  const auto top = refusals.Top(5);
  ASSERT_EQ(top.size(), 1u);
  EXPECT_EQ(top[0].check, "per-key");
  EXPECT_EQ(top[0].total, 60'000u);
  ASSERT_GE(top[0].top.size(), 3u);
  const std::vector<std::string> expected = {"heavy-a", "heavy-b", "heavy-c"};
  for (size_t i = 0; i < 3; ++i) {
    const HeavyHitter& h = top[0].top[i];
    EXPECT_EQ(h.identity, expected[i]);
    EXPECT_LE(h.count - h.error, truth[h.identity]);  // the sketch's guarantee
    EXPECT_GE(h.count, truth[h.identity]);
  }
}

TEST(Refusals, IdentitiesAreHashedUnlessAskedOtherwise) {
  ManualClock clock;
  std::vector<std::string> lines;
  Logger log([&](LogLevel, std::string_view line) { lines.emplace_back(line); });
  Refusals refusals(clock, &log, {});
  refusals.Record(Api::kHttp, "per-key", "api_key=s3cret", "gcra", Micros(1'500'000));
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0].find("s3cret"), std::string::npos) << lines[0];
  EXPECT_NE(lines[0].find("identity=h:"), std::string::npos) << lines[0];
  EXPECT_NE(lines[0].find("retry_after_ms=1500"), std::string::npos) << lines[0];
  EXPECT_EQ(refusals.Top(1)[0].top[0].identity.rfind("h:", 0), 0u);
  refusals.SetOptions({.identities = IdentityDisplay::kValue});
  EXPECT_EQ(refusals.Display("api_key=s3cret"), "api_key=s3cret");
}

TEST(Refusals, AFloodOfRefusalsCannotFloodTheLog) {
  ManualClock clock;
  std::vector<std::string> lines;
  Logger log([&](LogLevel, std::string_view line) { lines.emplace_back(line); });
  Refusals refusals(clock, &log, {.log_interval = seconds(60), .log_per_second = 10});
  // One identity refused 10,000 times in a second: one line.
  for (int i = 0; i < 10'000; ++i) refusals.Record(Api::kHttp, "p", "api_key=one", "x", Micros(0));
  EXPECT_EQ(lines.size(), 1u);
  // 10,000 identities refused within a second: at most 10 lines that second.
  for (int i = 0; i < 10'000; ++i) {
    refusals.Record(Api::kHttp, "p", Cat("api_key=", i), "x", Micros(0));
  }
  EXPECT_LE(lines.size(), 11u);
  // The next second's first line says how many were held back.
  clock.Advance(seconds(1));
  refusals.Record(Api::kHttp, "p", "api_key=late", "x", Micros(0));
  EXPECT_NE(lines.back().find("held_back_others="), std::string::npos);
  EXPECT_EQ(lines.back().find("held_back_others=0"), std::string::npos) << lines.back();
}

TEST(Refusals, TrackedChecksAreBounded) {
  ManualClock clock;
  Refusals refusals(clock, nullptr, {.log = false});
  for (size_t i = 0; i < kMaxChecks + 50; ++i) {
    refusals.Record(Api::kRls, Cat("domain.rule_", i), "k=v", "x", Micros(0));
  }
  const auto top = refusals.Top(1);
  EXPECT_EQ(top.size(), kMaxChecks + 1);  // the rest share "_other"
  EXPECT_EQ(top[0].check, "_other");
  EXPECT_EQ(top[0].total, 50u);
}

}  // namespace
}  // namespace caudal
