// An always_charge Envoy rule through the engine, on a manual clock: Envoy's apply_on_stream_done
// pattern, a peek (hits_addend 0) on the request path and the actual cost reported at the
// stream's end, whose answer Envoy ignores. Every hit of the rule is counted whatever the
// verdict and whatever the request's other descriptors decide, in either descriptor mode, a
// bucket into debt; the next peek is refused until the debt is paid, exactly.
#include <gtest/gtest.h>

#include "caudal/engine/engine.h"
#include "support/fake_store.h"
#include "support/manual_clock.h"

namespace caudal {
namespace {

using envoy::DescriptorNode;
using envoy::RateLimitRule;
using envoy::Unit;
using std::chrono::seconds;
using testing::FakeStore;

RateLimitRule Rule(uint32_t per_minute, Algorithm algorithm, bool always_charge) {
  RateLimitRule r;
  r.unit = Unit::kMinute;
  r.requests_per_unit = per_minute;
  if (per_minute > 0) r.limit = *envoy::MakeLimit(algorithm, per_minute, Unit::kMinute);
  r.always_charge = always_charge;
  return r;
}

// Domain "edge": user, a token bucket of 10 a minute (one unit every 6 s), burst 10,
// always_charge; plain_user the same without it; window_user a fixed window of 10 a minute,
// always_charge; path, a fixed window of 2 a minute; blocked, requests_per_unit 0.
std::shared_ptr<const envoy::RateLimitConfig> Domains() {
  auto root = std::make_shared<DescriptorNode>();
  const auto add = [&](std::string key, RateLimitRule rule) {
    auto node = std::make_unique<DescriptorNode>();
    node->key = std::move(key);
    node->rule = std::move(rule);
    EXPECT_TRUE(root->AddChild(std::move(node)).ok());
  };
  add("user", Rule(10, Algorithm::kTokenBucket, true));
  add("plain_user", Rule(10, Algorithm::kTokenBucket, false));
  add("window_user", Rule(10, Algorithm::kFixedWindow, true));
  add("path", Rule(2, Algorithm::kFixedWindow, false));
  add("blocked", Rule(0, Algorithm::kFixedWindow, false));
  auto config = std::make_shared<envoy::RateLimitConfig>();
  EXPECT_TRUE(config->AddDomain("edge", root).ok());
  return config;
}

struct Hit {
  std::string_view key;
  std::string_view value;
  uint64_t hits;
};

class AlwaysChargeTest : public ::testing::TestWithParam<DescriptorMode> {
 protected:
  AlwaysChargeTest()
      : clock_(seconds(1'700'000'040)),  // a minute's start: fixed windows begin empty
        store_(clock_),
        local_(clock_),
        engine_(store_, clock_, {.local_store = &local_, .over_limit_cache_keys = 64}) {
    EXPECT_TRUE(engine_
                    .SetDomains(Domains(), {.mode = GetParam(),
                                            .on_failure = FailureMode::kLocal,
                                            .lease = {.enabled = true}})
                    .ok());
  }

  CheckResult Ask(std::vector<Hit> hits) {
    DomainRequest r{.domain = "edge", .descriptors = {}, .hits_addend = 0};
    for (const Hit& h : hits) {
      r.descriptors.push_back(
          {.entries = {{h.key, h.value}}, .hits = h.hits, .limit = std::nullopt});
    }
    auto result = engine_.Check(r);
    EXPECT_TRUE(result.ok()) << result.status().ToString();
    return result.ok() ? *result : CheckResult{};
  }
  // What a peek of `key`=`value` says is left (its rule's remaining).
  int64_t Left(std::string_view key, std::string_view value) {
    const CheckResult r = Ask({{key, value, 0}});
    return r.results.empty() || r.results[0].decisions.empty()
               ? -1
               : r.results[0].decisions[0].remaining;
  }

  ManualClock clock_;
  FakeStore store_;
  FakeStore local_;
  Engine engine_;
};

INSTANTIATE_TEST_SUITE_P(Modes, AlwaysChargeTest,
                         ::testing::Values(DescriptorMode::kAllOrNothing,
                                           DescriptorMode::kConsumeEach),
                         [](const ::testing::TestParamInfo<DescriptorMode>& m) {
                           return std::string(m.param == DescriptorMode::kConsumeEach
                                                  ? "consume_each"
                                                  : "all_or_nothing");
                         });

// The stream-done report refused by another descriptor (over its limit, or blocked) still
// charges the always_charge rule; a rule without it, in all_or_nothing, is not charged then.
TEST_P(AlwaysChargeTest, AReportRefusedByAnotherDescriptorStillCharges) {
  ASSERT_EQ(Ask({{"path", "/a", 2}}).outcome, Outcome::kAllowed);  // path used up
  CheckResult r = Ask({{"user", "u", 4}, {"path", "/a", 1}, {"plain_user", "p", 4}});
  EXPECT_EQ(r.outcome, Outcome::kDenied) << "path refuses";
  EXPECT_TRUE(r.results[0].allowed) << "the 4 fitted the bucket";
  EXPECT_EQ(Left("user", "u"), 6) << "charged whatever the request decided";
  EXPECT_EQ(Left("plain_user", "p"), GetParam() == DescriptorMode::kAllOrNothing ? 10 : 6)
      << "all_or_nothing consumes nothing of a refused request; consume_each consumes each";
  r = Ask({{"user", "u", 3}, {"blocked", "x", 1}});
  EXPECT_EQ(r.outcome, Outcome::kDenied);
  EXPECT_EQ(Left("user", "u"), 3) << "charged beside a blocked descriptor too";
  r = Ask({{"window_user", "w", 4}, {"path", "/a", 1}});
  EXPECT_EQ(r.outcome, Outcome::kDenied);
  EXPECT_EQ(Left("window_user", "w"), 6);
}

// 4 fit, then a report of 8 does not (6 left): OVER_LIMIT, and counted, 2 into debt. The next
// peek (hits_addend 0) is refused until the debt is paid, 12 s later at one unit per 6 s, and
// says so; 1 µs before, it is still refused.
TEST_P(AlwaysChargeTest, ABucketInDebtRefusesThePeekUntilItIsPaidExactly) {
  EXPECT_EQ(Ask({{"user", "u", 4}}).outcome, Outcome::kAllowed);
  CheckResult r = Ask({{"user", "u", 8}});
  EXPECT_EQ(r.outcome, Outcome::kDenied) << "the verdict says the hits did not fit";
  EXPECT_EQ(r.results[0].decisions[0].remaining, 0);
  EXPECT_EQ(r.results[0].decisions[0].reset_after, seconds(72)) << "12 units to refill";
  r = Ask({{"user", "u", 0}});
  EXPECT_EQ(r.outcome, Outcome::kDenied) << "in debt";
  EXPECT_EQ(r.retry_after, seconds(12));
  clock_.Advance(seconds(12) - Micros(1));
  r = Ask({{"user", "u", 0}});
  EXPECT_EQ(r.outcome, Outcome::kDenied);
  EXPECT_EQ(r.retry_after, Micros(1));
  clock_.Advance(Micros(1));
  r = Ask({{"user", "u", 0}});
  EXPECT_EQ(r.outcome, Outcome::kAllowed) << "the debt is paid";
  EXPECT_EQ(r.results[0].decisions[0].remaining, 0);
  // A report far above the burst never fits, and is counted all the same: 100 units of debt.
  r = Ask({{"user", "u", 100}});
  EXPECT_EQ(r.outcome, Outcome::kDenied);
  EXPECT_EQ(r.results[0].decisions[0].verdict, Verdict::kNeverFits);
  EXPECT_EQ(Ask({{"user", "u", 0}}).retry_after, seconds(600));
  // A bucket without always_charge consumes: a refused hit counts nothing (the default).
  EXPECT_EQ(Ask({{"plain_user", "p", 100}}).outcome, Outcome::kDenied);
  EXPECT_EQ(Left("plain_user", "p"), 10);
}

// A fixed window always_charge counts past its limit until the window ends (the reference's
// INCRBY), in all_or_nothing too.
TEST_P(AlwaysChargeTest, AFixedWindowIsOverdrawnUntilItsWindowEnds) {
  EXPECT_EQ(Ask({{"window_user", "w", 7}}).outcome, Outcome::kAllowed);
  const CheckResult r = Ask({{"window_user", "w", 5}});
  EXPECT_EQ(r.outcome, Outcome::kDenied);
  EXPECT_EQ(r.results[0].decisions[0].overdrawn, 2);
  EXPECT_EQ(Ask({{"window_user", "w", 0}}).retry_after, seconds(60));
  clock_.Advance(seconds(60) - Micros(1));
  EXPECT_EQ(Ask({{"window_user", "w", 0}}).outcome, Outcome::kDenied);
  clock_.Advance(Micros(1));
  EXPECT_EQ(Left("window_user", "w"), 10) << "the next window starts empty";
}

// A refusal remembered by the over-limit cache does not spare the charge: the store sees it.
TEST_P(AlwaysChargeTest, TheOverLimitCacheNeverSkipsACharge) {
  ASSERT_EQ(Ask({{"path", "/a", 2}}).outcome, Outcome::kAllowed);
  ASSERT_EQ(Ask({{"path", "/a", 1}}).outcome, Outcome::kDenied);  // now remembered
  const uint64_t calls = store_.calls();
  const CheckResult r = Ask({{"path", "/a", 1}, {"user", "u", 5}});
  EXPECT_EQ(r.outcome, Outcome::kDenied);
  EXPECT_GT(store_.calls(), calls);
  EXPECT_EQ(Left("user", "u"), 5);
}

// Failing over to the local store, the charge is made there (never a lease from the shared
// store: the rule never leases); the local peek refuses in debt.
TEST_P(AlwaysChargeTest, FailingOverTheChargeIsMadeLocally) {
  store_.FailWith(Status::Unavailable("down"));
  CheckResult r = Ask({{"user", "u", 12}});
  EXPECT_EQ(r.outcome, Outcome::kDenied);
  EXPECT_EQ(r.results[0].decided_by, DecidedBy::kLocal);
  r = Ask({{"user", "u", 0}});
  EXPECT_EQ(r.outcome, Outcome::kDenied);
  EXPECT_EQ(r.results[0].decided_by, DecidedBy::kLocal);
  EXPECT_EQ(r.retry_after, seconds(12)) << "2 of debt, locally";
}

}  // namespace
}  // namespace caudal
