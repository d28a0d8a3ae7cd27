// Concurrency limits through the engine: a check takes a slot of each applicable concurrency
// limit and answers a hold id; Release gives them back from any engine sharing the store; a
// slot not released frees itself at its hold's end; all-or-nothing with rate limits; bad input
// consumes nothing.
#include <gtest/gtest.h>

#include "caudal/engine/engine.h"
#include "caudal/engine/runtime_overrides.h"
#include "engine/hold.h"
#include "observe/metrics.h"
#include "support/fake_store.h"
#include "support/manual_clock.h"
#include "support/test_limits.h"

namespace caudal {
namespace {

using std::chrono::milliseconds;
using std::chrono::minutes;
using std::chrono::seconds;
using testing::FakeStore;

Limit Slots(int64_t limit, Micros hold) {
  return *Limit::Create(LimitSpec::Concurrency(limit, hold));
}
using testing::Bucket;

PolicySpec ConcurrencySpec(std::string name, std::vector<Limit> limits) {
  PolicySpec s;
  s.name = std::move(name);
  s.identity = {"user"};
  s.limits = std::move(limits);
  return s;
}

class ConcurrencyTest : public ::testing::Test {
 protected:
  ConcurrencyTest()
      : store_(clock_),
        local_(clock_),
        engine_(store_, clock_,
                {.local_store = &local_, .metrics = &metrics_, .over_limit_cache_keys = 100}),
        other_(store_, clock_, {.local_store = &local_}) {}

  void Install(std::vector<PolicySpec> specs, PolicySetOptions options = {}) {
    auto set = PolicySet::Create(std::move(specs), options);
    ASSERT_TRUE(set.ok()) << set.status().ToString();
    ASSERT_TRUE(engine_.SetPolicies(*set).ok());
    ASSERT_TRUE(other_.SetPolicies(*set).ok());
  }

  CheckResult MustCheck(std::string user, std::optional<int64_t> cost = std::nullopt,
                        Engine* engine = nullptr) {
    auto r = (engine ? *engine : engine_).Check({.descriptors = {{"user", user}}, .cost = cost});
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? *r : CheckResult{};
  }

  ReleaseResult MustRelease(const std::string& hold, Engine* engine = nullptr) {
    auto r = (engine ? *engine : engine_).Release(hold);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? *r : ReleaseResult{};
  }

  ManualClock clock_;
  FakeStore store_;
  FakeStore local_;
  Metrics metrics_;
  Engine engine_;
  Engine other_;  // another instance on the same store
};

TEST_F(ConcurrencyTest, AdmitsUpToTheLimitAndAnswersAHoldThatAnyInstanceReleases) {
  Install({ConcurrencySpec("inflight", {Slots(2, seconds(30))})});
  const CheckResult a = MustCheck("u1", 500);  // one slot whatever the cost
  const CheckResult b = MustCheck("u1", std::nullopt, &other_);
  ASSERT_TRUE(a.allowed());
  ASSERT_TRUE(b.allowed());
  ASSERT_FALSE(a.hold.empty());
  EXPECT_NE(a.hold, b.hold);
  EXPECT_EQ(a.results[0].decisions[0].remaining, 1);
  const CheckResult full = MustCheck("u1");
  EXPECT_EQ(full.outcome, Outcome::kDenied);
  EXPECT_TRUE(full.hold.empty()) << "a refused request holds nothing";
  EXPECT_EQ(full.retry_after, seconds(30)) << "until the earliest hold's expiry";
  EXPECT_TRUE(MustCheck("u2").allowed()) << "another identity has its own slots";

  const ReleaseResult released = MustRelease(a.hold, &other_);
  EXPECT_TRUE(released.released);
  EXPECT_EQ(released.slots, 1);
  EXPECT_FALSE(MustRelease(a.hold).released) << "already freed";
  EXPECT_TRUE(MustCheck("u1").allowed()) << "the over-limit cache kept no refusal of a slot";
  EXPECT_EQ(metrics_.Value(MetricId::kHoldsTaken), 3u);
}

TEST_F(ConcurrencyTest, ASlotNotReleasedFreesItselfAtItsHoldsEnd) {
  Install({ConcurrencySpec("inflight", {Slots(1, seconds(5))})});
  const CheckResult a = MustCheck("u");
  ASSERT_TRUE(a.allowed());
  clock_.Advance(seconds(5) - milliseconds(1));
  const CheckResult early = MustCheck("u");
  EXPECT_FALSE(early.allowed());
  EXPECT_EQ(early.retry_after, milliseconds(1));
  clock_.Advance(milliseconds(1));
  EXPECT_TRUE(MustCheck("u").allowed());
  EXPECT_FALSE(MustRelease(a.hold).released) << "expired: nothing left to release";
}

TEST_F(ConcurrencyTest, CombinesWithRateLimitsAllOrNothing) {
  Install({ConcurrencySpec("tokens", {Bucket(10, {10, minutes(1)})}),
           ConcurrencySpec("inflight", {Slots(3, seconds(30))})});
  ASSERT_TRUE(MustCheck("u", 8).allowed());
  const CheckResult refused = MustCheck("u", 5);  // the bucket refuses
  ASSERT_FALSE(refused.allowed());
  EXPECT_TRUE(refused.hold.empty());
  EXPECT_EQ(refused.results[1].decisions[0].remaining, 2) << "no slot taken for it";
  ASSERT_TRUE(MustCheck("u", 1).allowed());
  ASSERT_TRUE(MustCheck("u", 1).allowed());
  const CheckResult no_slot = MustCheck("u", 0 + 1);
  ASSERT_FALSE(no_slot.allowed()) << "three slots held";
  EXPECT_EQ(no_slot.results[0].decisions[0].remaining, 0);
  // A refund gives tokens back and never touches the slots.
  auto refund = engine_.Check({.descriptors = {{"user", "u"}}, .cost = 4, .refund = true});
  ASSERT_TRUE(refund.ok()) << refund.status().ToString();
  EXPECT_TRUE(refund->hold.empty());
  EXPECT_FALSE(MustCheck("u", 1).allowed()) << "the slots are still held";
}

TEST_F(ConcurrencyTest, AHoldNamesEverySlotItTookAndReleasesThemTogether) {
  auto both = ConcurrencySpec("both", {Slots(1, seconds(30)), Slots(4, seconds(60))});
  Install({both, ConcurrencySpec("tenant", {Slots(1, seconds(30))})});
  const CheckResult a = MustCheck("u");
  ASSERT_TRUE(a.allowed());
  auto decoded = engine_internal::DecodeHold(a.hold);
  ASSERT_TRUE(decoded.ok()) << decoded.status().ToString();
  EXPECT_EQ(decoded->keys.size(), 3u);
  EXPECT_FALSE(MustCheck("u").allowed());
  const ReleaseResult r = MustRelease(a.hold);
  EXPECT_EQ(r.slots, 3);
  EXPECT_TRUE(MustCheck("u").allowed());
}

TEST_F(ConcurrencyTest, BadHoldsAreRefusedAndReleaseNothing) {
  Install({ConcurrencySpec("inflight", {Slots(1, seconds(30))})});
  const CheckResult a = MustCheck("u");
  ASSERT_TRUE(a.allowed());
  for (const std::string& bad :
       {std::string(), std::string("nope"), a.hold + "!",
        a.hold.substr(0, 26) + "." + a.hold.substr(27, 3) + "x", std::string(5000, 'a')}) {
    SCOPED_TRACE(bad);
    auto r = engine_.Release(bad);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  }
  // Well formed, but of another hold: nothing is freed.
  std::string other = a.hold;
  other[0] = other[0] == '0' ? '1' : '0';
  EXPECT_FALSE(MustRelease(other).released);
  // A key of no concurrency limit in force (a forged one, or a policy since removed).
  const std::string forged =
      engine_internal::EncodeHold({.hi = 1, .lo = 2}, {"caudal:nosuch:0:cc1,1/30000000:{1:u}"});
  EXPECT_FALSE(MustRelease(forged).released);
  EXPECT_FALSE(MustCheck("u").allowed()) << "the real hold is still held";
  EXPECT_TRUE(MustRelease(a.hold).released);
}

TEST_F(ConcurrencyTest, BadChecksAreRefusedAndHoldNothing) {
  Install({ConcurrencySpec("inflight", {Slots(1, seconds(30))})});
  for (const int64_t cost : {int64_t{0}, int64_t{-1}, kMaxCost + 1}) {
    SCOPED_TRACE(cost);
    auto r = engine_.Check({.descriptors = {{"user", "u"}}, .cost = cost});
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  }
  auto bad = engine_.Check({.descriptors = {{"user", std::string("a\0b", 3)}}, .cost = 1});
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(MustCheck("u").allowed()) << "the one slot was never taken";
}

TEST_F(ConcurrencyTest, PolicySetsRefuseWhatWouldHoldSlotsForARefusedRequest) {
  PolicySpec counted = ConcurrencySpec("counted", {Slots(1, seconds(1))});
  counted.count_rejected = RejectedCounting::kCounted;
  auto a = PolicySet::Create({counted}, {});
  ASSERT_FALSE(a.ok());
  EXPECT_NE(a.status().message().find("count_rejected"), std::string::npos) << a.status().message();
  auto b = PolicySet::Create({ConcurrencySpec("each", {Slots(1, seconds(1))})},
                             {.mode = DescriptorMode::kConsumeEach});
  ASSERT_FALSE(b.ok());
  EXPECT_NE(b.status().message().find("all_or_nothing"), std::string::npos) << b.status().message();
  PolicySpec costly = ConcurrencySpec("costly", {Slots(1, seconds(1))});
  costly.cost = 50;  // a slot whatever the cost: no capacity to exceed
  EXPECT_TRUE(PolicySet::Create({costly}, {}).ok());
}

TEST_F(ConcurrencyTest, FailingOverToLocalTakesLocalSlotsThatReleaseFrees) {
  PolicySpec p = ConcurrencySpec("inflight", {Slots(2, seconds(30))});
  p.on_failure = FailureMode::kLocal;
  Install({p}, {.instances = 2});
  store_.FailWith(Status::Unavailable("down"));
  const CheckResult a = MustCheck("u");
  ASSERT_TRUE(a.allowed());
  EXPECT_EQ(a.results[0].decided_by, DecidedBy::kLocal);
  ASSERT_FALSE(a.hold.empty());
  EXPECT_FALSE(MustCheck("u").allowed()) << "one slot of two per instance";
  const ReleaseResult r = MustRelease(a.hold);
  EXPECT_TRUE(r.released) << "freed in the local store while the shared one is down";
  EXPECT_TRUE(MustCheck("u").allowed());
}

TEST_F(ConcurrencyTest, AStoreThatCannotAnswerIsAnErrorAndFreesNothing) {
  Install({ConcurrencySpec("inflight", {Slots(1, seconds(30))})});
  const CheckResult a = MustCheck("u");
  ASSERT_TRUE(a.allowed());
  store_.FailWith(Status::Unavailable("down"));
  auto r = engine_.Release(a.hold);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kUnavailable);
  store_.Recover();
  EXPECT_TRUE(MustRelease(a.hold).released);
}

}  // namespace
}  // namespace caudal
