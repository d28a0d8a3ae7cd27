#include "envoy/rls_handler.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <limits>
#include <map>

#include "config/ratelimit_config_yaml.h"
#include "observe/metrics.h"
#include "support/fake_store.h"
#include "support/manual_clock.h"

namespace caudal::envoy {
namespace {

using caudal::testing::FakeStore;
using ::testing::HasSubstr;
using Entries = std::vector<std::pair<std::string, std::string>>;
constexpr auto kOk = RateLimitResponse::OK;
constexpr auto kOver = RateLimitResponse::OVER_LIMIT;

constexpr std::string_view kConfig = R"(
domain: test
descriptors:
  - key: remote_address
    rate_limit: {unit: second, requests_per_unit: 10}
  - key: remote_address
    value: 50.0.0.5
    rate_limit: {unit: second, requests_per_unit: 0}
  - key: one
    rate_limit: {unit: minute, requests_per_unit: 1, name: one}
  - key: five
    rate_limit: {unit: minute, requests_per_unit: 5, name: five}
  - key: bucket
    rate_limit: {unit: second, requests_per_unit: 1, algorithm: token_bucket, capacity: 5}
  - key: shadow
    rate_limit: {unit: minute, requests_per_unit: 1}
    shadow_mode: true
  - key: ldap
    rate_limit: {unlimited: true}
  - key: specific
    rate_limit: {unit: minute, requests_per_unit: 2, name: specific, replaces: [{name: general}]}
  - key: general
    rate_limit: {unit: minute, requests_per_unit: 100, name: general}
  - key: monthly
    rate_limit: {unit: month, requests_per_unit: 2, calendar: {time_zone: Europe/Madrid}}
)";

// How a test's engine decides Envoy's domains, and how the handler answers.
struct TestSetup {
  RlsOptions rls{};
  DomainOptions domains{};
};

// Out of line: inlined, GCC 12 reports a spurious -Wfree-nonheap-object in Result's destructor.
[[gnu::noinline]] std::shared_ptr<const RateLimitConfig> TestConfig() {
  Result<RateLimitConfig> parsed = ParseRateLimitConfigText(kConfig, "test.yaml");
  if (!parsed.ok()) {
    ADD_FAILURE() << parsed.status().ToString();
    return std::make_shared<const RateLimitConfig>();
  }
  return std::make_shared<const RateLimitConfig>(std::move(parsed).value());
}

class RlsHandlerTest : public ::testing::Test {
 public:
  static RateLimitRequest Request(std::vector<Entries> descriptors, std::string domain = "test") {
    RateLimitRequest r;
    r.set_domain(std::move(domain));
    for (const auto& entries : descriptors) {
      auto* d = r.add_descriptors();
      for (const auto& [k, v] : entries) {
        auto* e = d->add_entries();
        e->set_key(k);
        e->set_value(v);
      }
    }
    return r;
  }

 protected:
  explicit RlsHandlerTest(TestSetup setup = {}) : setup_(setup) {}

  RlsHandler& Handler() {
    if (!handler_) {
      engine_ = std::make_unique<Engine>(store_, clock_, EngineOptions{.metrics = &metrics_});
      EXPECT_TRUE(engine_->SetDomains(TestConfig(), setup_.domains).ok());
      handler_ = std::make_unique<RlsHandler>(*engine_, setup_.rls);
    }
    return *handler_;
  }

  RateLimitResponse Ask(const RateLimitRequest& r) {
    auto resp = Handler().ShouldRateLimit(r);
    EXPECT_TRUE(resp.ok()) << resp.status().ToString();
    return resp.ok() ? *resp : RateLimitResponse{};
  }

  Status AskError(const RateLimitRequest& r) { return Handler().ShouldRateLimit(r).status(); }

  static std::map<std::string, std::string> Headers(const RateLimitResponse& r) {
    std::map<std::string, std::string> h;
    for (const auto& kv : r.response_headers_to_add()) h[kv.key()] = kv.value();
    return h;
  }

  ManualClock clock_{std::chrono::seconds(1'699'999'980)};  // on a minute boundary
  FakeStore store_{clock_};
  Metrics metrics_;
  TestSetup setup_;
  std::unique_ptr<Engine> engine_;
  std::unique_ptr<RlsHandler> handler_;
};

TEST_F(RlsHandlerTest, FixedWindowByDefaultLikeTheReference) {
  const auto req = Request({{{"remote_address", "10.0.0.1"}}});
  for (int i = 0; i < 10; ++i) {
    const auto r = Ask(req);
    ASSERT_EQ(r.overall_code(), kOk) << i;
    ASSERT_EQ(r.statuses_size(), 1);
    EXPECT_EQ(r.statuses(0).limit_remaining(), static_cast<uint32_t>(9 - i));
    EXPECT_EQ(r.statuses(0).current_limit().requests_per_unit(), 10u);
    EXPECT_EQ(r.statuses(0).current_limit().unit(), RateLimitResponse::RateLimit::SECOND);
  }
  const auto over = Ask(req);
  EXPECT_EQ(over.overall_code(), kOver);
  EXPECT_EQ(over.statuses(0).code(), kOver);
  EXPECT_EQ(over.statuses(0).limit_remaining(), 0u);
  EXPECT_EQ(over.statuses(0).duration_until_reset().seconds(), 1);  // the window ends in 1 s
  EXPECT_EQ(over.statuses(0).duration_until_reset().nanos(), 0);
  // Another value of the same key has its own counter.
  EXPECT_EQ(Ask(Request({{{"remote_address", "10.0.0.2"}}})).overall_code(), kOk);
  clock_.Advance(std::chrono::seconds(1));
  EXPECT_EQ(Ask(req).overall_code(), kOk);
}

TEST_F(RlsHandlerTest, DurationUntilResetIsWholeSecondsRoundedUpLikeTheReference) {
  const auto req = Request({{{"one", "r"}}});  // 1 per minute, a window aligned to the minute
  clock_.Advance(std::chrono::milliseconds(20'300));  // 20.3 s into the minute
  auto r = Ask(req);
  EXPECT_EQ(r.statuses(0).duration_until_reset().seconds(), 40);  // 60 − 20, not 39.7
  EXPECT_EQ(r.statuses(0).duration_until_reset().nanos(), 0);
  clock_.Advance(std::chrono::milliseconds(700));  // exactly 21 s in
  r = Ask(req);
  EXPECT_EQ(r.statuses(0).duration_until_reset().seconds(), 39);
}

// A calendar month (caudal's `calendar`): the window and duration_until_reset end at local
// midnight on the first, not 30 days from the epoch.
TEST_F(RlsHandlerTest, ACalendarMonthResetsAtLocalMidnightOnTheFirst) {
  const auto req = Request({{{"monthly", "tenant"}}});
  // Now is 2023-11-14 22:13 UTC; December starts in Madrid at 2023-11-30 23:00 UTC.
  constexpr int64_t kToDecember = 1'385'220;
  auto r = Ask(req);
  ASSERT_EQ(r.overall_code(), kOk);
  EXPECT_EQ(r.statuses(0).duration_until_reset().seconds(), kToDecember);
  EXPECT_EQ(Ask(req).overall_code(), kOk);
  r = Ask(req);
  EXPECT_EQ(r.overall_code(), kOver);
  EXPECT_EQ(r.statuses(0).duration_until_reset().seconds(), kToDecember);
  clock_.Advance(std::chrono::seconds(kToDecember - 1));
  EXPECT_EQ(Ask(req).overall_code(), kOver) << "still November in Madrid";
  clock_.Advance(std::chrono::seconds(1));
  r = Ask(req);
  EXPECT_EQ(r.overall_code(), kOk) << "December";
  EXPECT_EQ(r.statuses(0).duration_until_reset().seconds(), 31 * 86'400);
}

TEST_F(RlsHandlerTest, TokenBucketAdmitsExactlyItsBound) {
  const auto req = Request({{{"bucket", "client"}}});
  for (int i = 0; i < 5; ++i) ASSERT_EQ(Ask(req).overall_code(), kOk) << i;  // the burst
  EXPECT_EQ(Ask(req).overall_code(), kOver);
  clock_.Advance(std::chrono::milliseconds(999));
  EXPECT_EQ(Ask(req).overall_code(), kOver);
  clock_.Advance(std::chrono::milliseconds(1));  // one token after exactly 1 s
  EXPECT_EQ(Ask(req).overall_code(), kOk);
  EXPECT_EQ(Ask(req).overall_code(), kOver);
  clock_.Advance(std::chrono::seconds(3600));  // refills to the capacity, not beyond
  int admitted = 0;
  for (int i = 0; i < 20; ++i) admitted += Ask(req).overall_code() == kOk ? 1 : 0;
  EXPECT_EQ(admitted, 5);
}

TEST_F(RlsHandlerTest, AllOrNothingConsumesNothingWhenOneDescriptorRefuses) {
  const auto both = Request({{{"one", "x"}}, {{"five", "x"}}});
  auto r = Ask(both);
  ASSERT_EQ(r.overall_code(), kOk);
  EXPECT_EQ(r.statuses(1).limit_remaining(), 4u);
  for (int i = 0; i < 3; ++i) {
    r = Ask(both);
    EXPECT_EQ(r.overall_code(), kOver);
    EXPECT_EQ(r.statuses(0).code(), kOver);
    EXPECT_EQ(r.statuses(1).code(), kOk);            // "five" would have passed...
    EXPECT_EQ(r.statuses(1).limit_remaining(), 4u);  // ...and was not consumed
  }
  EXPECT_EQ(Ask(Request({{{"five", "x"}}})).statuses(0).limit_remaining(), 3u);
}

class RlsConsumeEachTest : public RlsHandlerTest {
 protected:
  RlsConsumeEachTest() : RlsHandlerTest({.domains = {.mode = DescriptorMode::kConsumeEach}}) {}
};

TEST_F(RlsConsumeEachTest, TheCompatibilitySwitchCountsEveryDescriptorLikeTheReference) {
  const auto both = Request({{{"one", "x"}}, {{"five", "x"}}});
  EXPECT_EQ(Ask(both).overall_code(), kOk);
  auto r = Ask(both);
  EXPECT_EQ(r.overall_code(), kOver);
  EXPECT_EQ(r.statuses(1).code(), kOk);
  EXPECT_EQ(r.statuses(1).limit_remaining(), 3u);  // consumed although the request was refused
  EXPECT_EQ(Ask(both).statuses(1).limit_remaining(), 2u);
}

TEST_F(RlsHandlerTest, ShadowModeNeverRefusesAndCountsOnlyPassingRequests) {
  const auto shadow = Request({{{"shadow", "x"}}});
  EXPECT_EQ(Ask(shadow).statuses(0).limit_remaining(), 0u);
  auto r = Ask(shadow);  // over its limit, but in shadow mode
  EXPECT_EQ(r.overall_code(), kOk);
  EXPECT_EQ(r.statuses(0).code(), kOk);
  EXPECT_EQ(r.statuses(0).current_limit().requests_per_unit(), 1u);

  // Beside an enforced descriptor that refuses, the shadow one is only looked at.
  const auto other = Request({{{"shadow", "y"}}, {{"one", "y"}}});
  EXPECT_EQ(Ask(other).overall_code(), kOk);
  clock_.Advance(std::chrono::minutes(1));
  EXPECT_EQ(Ask(Request({{{"one", "y"}}})).overall_code(), kOk);
  r = Ask(other);  // "one" refuses: the shadow limit must not be consumed
  EXPECT_EQ(r.overall_code(), kOver);
  EXPECT_EQ(r.statuses(0).code(), kOk);
  EXPECT_EQ(Ask(Request({{{"shadow", "y"}}})).statuses(0).limit_remaining(), 0u);
}

TEST_F(RlsHandlerTest, UnlimitedAndUnmatchedDescriptorsNeverReachTheStore) {
  auto r = Ask(Request({{{"ldap", "x"}}, {{"nothing", "configured"}}}));
  EXPECT_EQ(r.overall_code(), kOk);
  EXPECT_EQ(r.statuses(0).limit_remaining(), std::numeric_limits<uint32_t>::max());
  EXPECT_FALSE(r.statuses(0).has_current_limit());
  EXPECT_EQ(r.statuses(1).code(), kOk);
  EXPECT_FALSE(r.statuses(1).has_current_limit());
  EXPECT_EQ(store_.calls(), 0u);
}

TEST_F(RlsHandlerTest, ZeroRequestsPerUnitBlocksAndConsumesNothingElse) {
  auto r = Ask(Request({{{"remote_address", "50.0.0.5"}}, {{"five", "z"}}}));
  EXPECT_EQ(r.overall_code(), kOver);
  EXPECT_EQ(r.statuses(0).code(), kOver);
  EXPECT_EQ(r.statuses(0).current_limit().requests_per_unit(), 0u);
  EXPECT_EQ(r.statuses(1).code(), kOk);
  EXPECT_EQ(Ask(Request({{{"five", "z"}}})).statuses(0).limit_remaining(), 4u);
}

TEST_F(RlsHandlerTest, ReplacesDropsTheReplacedLimit) {
  const auto req = Request({{{"specific", "a"}}, {{"general", "a"}}});
  Ask(req);
  auto r = Ask(req);
  EXPECT_EQ(r.statuses(0).current_limit().name(), "specific");
  EXPECT_EQ(r.statuses(0).limit_remaining(), 0u);
  EXPECT_FALSE(r.statuses(1).has_current_limit());  // replaced: no limit applies
  EXPECT_EQ(Ask(Request({{{"general", "a"}}})).statuses(0).limit_remaining(), 99u);
}

TEST_F(RlsHandlerTest, HitsAddendAtRequestAndDescriptorLevel) {
  auto req = Request({{{"five", "h"}}});
  req.set_hits_addend(3);
  EXPECT_EQ(Ask(req).statuses(0).limit_remaining(), 2u);
  EXPECT_EQ(Ask(req).overall_code(), kOver);                        // 3 more do not fit in 2
  req.mutable_descriptors(0)->mutable_hits_addend()->set_value(0);  // check only
  auto r = Ask(req);
  EXPECT_EQ(r.overall_code(), kOk);
  EXPECT_EQ(r.statuses(0).limit_remaining(), 2u);
  req.mutable_descriptors(0)->mutable_hits_addend()->set_value(2);  // overrides the request's 3
  EXPECT_EQ(Ask(req).statuses(0).limit_remaining(), 0u);
}

// Each reports the remaining after its own hits, as the reference's counter reads after each
// INCRBY.
TEST_F(RlsHandlerTest, DuplicateDescriptorsCountTwice) {
  auto r = Ask(Request({{{"five", "d"}}, {{"five", "d"}}}));
  EXPECT_EQ(r.overall_code(), kOk);
  EXPECT_EQ(r.statuses(0).limit_remaining(), 4u);
  EXPECT_EQ(r.statuses(1).limit_remaining(), 3u);
}

TEST_F(RlsHandlerTest, LimitOverrideReplacesTheConfiguredLimit) {
  auto req = Request({{{"remote_address", "10.9.9.9"}}});
  auto* o = req.mutable_descriptors(0)->mutable_limit();
  o->set_requests_per_unit(2);
  o->set_unit(::envoy::type::v3::HOUR);
  auto r = Ask(req);
  EXPECT_EQ(r.statuses(0).current_limit().requests_per_unit(), 2u);
  EXPECT_EQ(r.statuses(0).current_limit().unit(), RateLimitResponse::RateLimit::HOUR);
  EXPECT_EQ(Ask(req).overall_code(), kOk);
  EXPECT_EQ(Ask(req).overall_code(), kOver);
  // Even without a configured rule (in a known domain).
  auto unmatched = Request({{{"unconfigured", "v"}}});
  *unmatched.mutable_descriptors(0)->mutable_limit() = *o;
  EXPECT_EQ(Ask(unmatched).statuses(0).limit_remaining(), 1u);
  o->set_unit(::envoy::type::v3::UNKNOWN);
  EXPECT_THAT(AskError(req).message(), HasSubstr("descriptor 0: limit override has no valid unit"));
}

TEST_F(RlsHandlerTest, UnknownDomainsAndEmptyDescriptorsHaveNoLimitLikeTheReference) {
  auto r = Ask(Request({{{"one", "x"}}}, "nope"));
  EXPECT_EQ(r.overall_code(), kOk);
  ASSERT_EQ(r.statuses_size(), 1);
  EXPECT_FALSE(r.statuses(0).has_current_limit());
  r = Ask(Request({{}, {{"one", "x"}}}));
  ASSERT_EQ(r.statuses_size(), 2);
  EXPECT_FALSE(r.statuses(0).has_current_limit());
  EXPECT_TRUE(r.statuses(1).has_current_limit());
  // An empty value is a value like any other: the key's default rule applies.
  r = Ask(Request({{{"five", ""}}}));
  EXPECT_EQ(r.statuses(0).limit_remaining(), 4u);
  EXPECT_EQ(store_.calls(), 2u);
}

TEST_F(RlsHandlerTest, BadRequestsAreInvalidArgumentWithAMessage) {
  const auto expect = [this](const RateLimitRequest& r, std::string_view message) {
    const Status s = AskError(r);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
    EXPECT_THAT(s.message(), HasSubstr(std::string(message)));
  };
  expect(Request({{{"one", "x"}}}, ""), "domain must not be empty");
  expect(Request({}), "at least one descriptor");
  expect(Request({{{"one", std::string("a\xff", 2)}}}),
         "descriptor 0 entry 0 value: not valid UTF-8");
  expect(Request({{{std::string("k\0", 2), "x"}}}), "descriptor 0 entry 0 key: control characters");
  expect(Request({{{"one", std::string(70'000, 'v')}}}), "bytes exceeds 65536");
  expect(Request({{{"one", std::string(600, 'v')}}}), "exceed 512 bytes");
  expect(Request(std::vector<Entries>(65, Entries{{"one", "x"}})), "at most 64 descriptors");
  auto huge = Request({{{"five", "r"}}});
  huge.mutable_descriptors(0)->mutable_hits_addend()->set_value(uint64_t{1} << 41);
  expect(huge, "exceeds 2^40");
  EXPECT_EQ(store_.calls(), 0u);
}

RateLimitRequest WithHits(RateLimitRequest r, int descriptor, uint64_t hits, bool refund) {
  auto* d = r.mutable_descriptors(descriptor);
  d->mutable_hits_addend()->set_value(hits);
  d->set_is_negative_hits(refund);
  return r;
}

TEST_F(RlsHandlerTest, NegativeHitsGiveUnitsBackWhateverTheOtherDescriptorsDecide) {
  const auto five = Request({{{"five", "r"}}});
  ASSERT_EQ(Ask(WithHits(five, 0, 4, false)).statuses(0).limit_remaining(), 1u);
  const auto back = Ask(WithHits(five, 0, 3, true));
  EXPECT_EQ(back.overall_code(), kOk);
  EXPECT_EQ(back.statuses(0).code(), kOk);
  EXPECT_EQ(back.statuses(0).limit_remaining(), 4u);
  EXPECT_EQ(Ask(WithHits(five, 0, 4, false)).overall_code(), kOk);
  EXPECT_EQ(Ask(five).overall_code(), kOver);

  // A refund beside a descriptor over its limit: the request is refused, the refund applies.
  ASSERT_EQ(Ask(Request({{{"one", "r"}}})).overall_code(), kOk);
  const auto mixed = Ask(WithHits(Request({{{"one", "r"}}, {{"five", "r"}}}), 1, 2, true));
  EXPECT_EQ(mixed.overall_code(), kOver);
  EXPECT_EQ(mixed.statuses(0).code(), kOver);
  EXPECT_EQ(mixed.statuses(1).code(), kOk);
  EXPECT_EQ(mixed.statuses(1).limit_remaining(), 2u);

  // Hits and a refund on the same descriptor net out: +1 −3 is a refund of 2.
  auto both = WithHits(Request({{{"five", "r"}}, {{"five", "r"}}}), 1, 3, true);
  const auto net = Ask(both);
  EXPECT_EQ(net.overall_code(), kOk);
  EXPECT_EQ(net.statuses(1).limit_remaining(), 4u);

  // Never past the limit; is_negative_hits with 0 hits only looks.
  EXPECT_EQ(Ask(WithHits(five, 0, 1'000, true)).statuses(0).limit_remaining(), 5u);
  EXPECT_EQ(Ask(WithHits(five, 0, 0, true)).statuses(0).limit_remaining(), 5u);
  EXPECT_EQ(Ask(WithHits(five, 0, 5, false)).statuses(0).limit_remaining(), 0u);
}

TEST_F(RlsHandlerTest, IetfHeadersDescribeEveryLimit) {
  auto r = Ask(Request({{{"one", "h"}}, {{"five", "h"}}, {{"ldap", "h"}}}));
  auto h = Headers(r);
  EXPECT_EQ(h["RateLimit-Policy"], "\"one\";q=1;w=60, \"five\";q=5;w=60");
  EXPECT_EQ(h["RateLimit"], "\"one\";r=0;t=60, \"five\";r=4;t=60");
  EXPECT_EQ(h.count("x-ratelimit-limit"), 0u);
  r = Ask(Request({{{"bucket", "h"}}}));
  EXPECT_EQ(Headers(r)["RateLimit-Policy"], "\"descriptor-0\";q=5;w=5");
  EXPECT_EQ(Headers(r)["RateLimit"], "\"descriptor-0\";r=4;t=1");
}

class RlsXHeadersTest : public RlsHandlerTest {
 protected:
  RlsXHeadersTest() : RlsHandlerTest({.rls = {.headers = HeaderMode::kIetfAndXRateLimit}}) {}
};

TEST_F(RlsXHeadersTest, XRateLimitHeadersFollowTheLimitClosestToRefusing) {
  auto h = Headers(Ask(Request({{{"five", "x"}}, {{"remote_address", "1.2.3.4"}}})));
  EXPECT_EQ(h["x-ratelimit-limit"], "5, 5;w=60");
  EXPECT_EQ(h["x-ratelimit-remaining"], "4");
  EXPECT_EQ(h["x-ratelimit-reset"], "60");
}

class RlsFailureTest : public ::testing::Test {
 protected:
  RlsFailureTest() { store_.FailWith(Status::Unavailable("connection refused")); }
  Result<RateLimitResponse> AskFailing(FailureMode mode, DenyAs deny_as = DenyAs::kOverLimit) {
    Engine engine(store_, clock_, {});
    EXPECT_TRUE(engine.SetDomains(TestConfig(), {.on_failure = mode}).ok());
    RlsHandler handler(engine, {.deny_as = deny_as});
    auto req = RlsHandlerTest::Request({{{"one", "f"}}, {{"ldap", "f"}}});
    return handler.ShouldRateLimit(req);
  }
  ManualClock clock_;
  FakeStore store_{clock_};
};

TEST_F(RlsFailureTest, AllowAnswersOkAndSaysItIsDegraded) {
  auto r = AskFailing(FailureMode::kAllow);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->overall_code(), kOk);
  EXPECT_EQ(r->statuses(0).code(), kOk);
  ASSERT_EQ(r->response_headers_to_add_size(), 1);
  EXPECT_EQ(r->response_headers_to_add(0).key(), "Caudal-Degraded");
  EXPECT_EQ(r->response_headers_to_add(0).value(), "store_unavailable");
}

TEST_F(RlsFailureTest, DenyAnswersOverLimit) {
  auto r = AskFailing(FailureMode::kDeny);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->overall_code(), kOver);
  EXPECT_EQ(r->statuses(0).code(), kOver);
  EXPECT_EQ(r->statuses(1).code(), kOk);  // unlimited stays unlimited
  EXPECT_EQ(r->response_headers_to_add(0).key(), "Caudal-Degraded");
}

TEST_F(RlsFailureTest, DenyAsUnavailableFailsTheCall) {
  auto r = AskFailing(FailureMode::kDeny, DenyAs::kUnavailable);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kUnavailable);
}

TEST_F(RlsFailureTest, LocalDecidesInTheLocalStoreWithTheLimitsDivided) {
  FakeStore local(clock_);
  Engine engine(store_, clock_, {.local_store = &local});
  ASSERT_TRUE(
      engine.SetDomains(TestConfig(), {.on_failure = FailureMode::kLocal, .instances = 2}).ok());
  RlsHandler handler(engine, {});
  const auto req = RlsHandlerTest::Request({{{"five", "l"}}});
  for (int i = 0; i < 2; ++i) {  // 5 per minute shared by 2 instances: 2 here
    auto r = handler.ShouldRateLimit(req);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(r->overall_code(), kOk) << i;
    EXPECT_EQ(r->statuses(0).limit_remaining(), static_cast<uint32_t>(1 - i));
    EXPECT_EQ(r->statuses(0).current_limit().requests_per_unit(), 5u);  // the configured limit
    EXPECT_EQ(r->response_headers_to_add(r->response_headers_to_add_size() - 1).key(),
              "Caudal-Degraded");
  }
  EXPECT_EQ(handler.ShouldRateLimit(req)->overall_code(), kOver);
  EXPECT_EQ(local.calls(), 3u);
}

TEST_F(RlsHandlerTest, DecisionsShowInTheMetricsByRuleLikeTheReferenceStats) {
  Ask(Request({{{"one", "m"}}}));
  Ask(Request({{{"one", "m"}}}));
  EXPECT_EQ(metrics_.ForPolicy(Api::kRls, "test.one").allowed.load(), 1u);
  EXPECT_EQ(metrics_.ForPolicy(Api::kRls, "test.one").denied.load(), 1u);
  const std::string text = metrics_.RenderPrometheus();
  EXPECT_NE(text.find("caudal_decision_duration_seconds_count{api=\"rls\"} 2\n"), std::string::npos)
      << text;
}

// The reference's statistics by the way a descriptor was decided (the split itself is in
// engine/hit_stats_test.cc and the conformance cases).
TEST_F(RlsHandlerTest, HitStatisticsNameBlockedValuesAsTheReferenceDoes) {
  Ask(Request({{{"remote_address", "50.0.0.5"}}}));  // requests_per_unit 0: every hit is over
  const HitCounters& h = metrics_.ForPolicy(Api::kRls, "test.remote_address_50_0_0_5").hits;
  EXPECT_EQ(h.total_hits.load(), 1u);
  EXPECT_EQ(h.over_limit.load(), 1u);
  EXPECT_EQ(h.within_limit.load(), 0u);
  EXPECT_EQ(metrics_.RenderPrometheus().find("remote_address_50.0.0.5"), std::string::npos)
      << "the IPv4 dots are made '_', as the reference's SanitizeStatName does";
}

TEST(RlsHitStatistics, AStoreFailureCountsTotalHitsOnly) {
  ManualClock clock;
  FakeStore store(clock);
  store.FailWith(Status::Unavailable("connection refused"));
  Metrics metrics;
  Engine engine(store, clock, {.metrics = &metrics});
  ASSERT_TRUE(engine.SetDomains(TestConfig(), {.on_failure = FailureMode::kAllow}).ok());
  RlsHandler handler(engine, {});
  auto req = RlsHandlerTest::Request({{{"five", "f"}}});
  req.set_hits_addend(3);
  ASSERT_TRUE(handler.ShouldRateLimit(req).ok());
  const HitCounters& h = metrics.ForPolicy(Api::kRls, "test.five").hits;
  EXPECT_EQ(h.total_hits.load(), 3u);
  EXPECT_EQ(h.within_limit.load() + h.near_limit.load() + h.over_limit.load(), 0u);
}

TEST(RlsHitStatistics, ARefusalFromTheOverLimitCacheIsOverWithLocalCache) {
  ManualClock clock{std::chrono::seconds(1'699'999'980)};
  FakeStore store{clock};
  Metrics metrics;
  Engine engine(store, clock, {.metrics = &metrics, .over_limit_cache_keys = 64});
  ASSERT_TRUE(engine.SetDomains(TestConfig(), {}).ok());
  RlsHandler handler(engine, {});
  const auto req = RlsHandlerTest::Request({{{"one", "c"}}});
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(handler.ShouldRateLimit(req).ok());
  EXPECT_EQ(store.calls(), 2u) << "the third was refused from the cache";
  const HitCounters& h = metrics.ForPolicy(Api::kRls, "test.one").hits;
  EXPECT_EQ(h.total_hits.load(), 3u);
  EXPECT_EQ(h.within_limit.load(), 1u);
  EXPECT_EQ(h.over_limit.load(), 2u);
  EXPECT_EQ(h.over_limit_with_local_cache.load(), 1u);
}

TEST(RlsOptionsParse, SpellingsRoundTripAndBadOnesAreRefused) {
  // Every name parses back to its value; anything else is refused.
  for (DescriptorMode m : {DescriptorMode::kAllOrNothing, DescriptorMode::kConsumeEach}) {
    const auto parsed = ParseDescriptorMode(DescriptorModeName(m));
    EXPECT_TRUE(parsed.ok() && *parsed == m);
  }
  for (DenyAs d : {DenyAs::kOverLimit, DenyAs::kUnavailable}) {
    const auto parsed = ParseDenyAs(DenyAsName(d));
    EXPECT_TRUE(parsed.ok() && *parsed == d);
  }
  for (HeaderMode h : {HeaderMode::kNone, HeaderMode::kIetf, HeaderMode::kIetfAndXRateLimit}) {
    const auto parsed = ParseHeaderMode(HeaderModeName(h));
    EXPECT_TRUE(parsed.ok() && *parsed == h);
  }
  EXPECT_FALSE(ParseDescriptorMode("sometimes").ok());
  EXPECT_FALSE(ParseDenyAs("maybe").ok());
  EXPECT_FALSE(ParseHeaderMode("all").ok());
}

}  // namespace
}  // namespace caudal::envoy
