// The status routes through routes::Dispatch, without sockets: the page, its JSON and its charts,
// their methods, types and caching, what they refuse, and that no secret reaches them.
#include "server/status_page.h"

#include <gtest/gtest.h>

#include <boost/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "caudal/store/memory_store.h"
#include "common/cat.h"
#include "server/routes.h"
#include "support/manual_clock.h"

namespace caudal::routes {
namespace {

namespace json = boost::json;
using std::chrono::minutes;

constexpr std::string_view kStorePassword = "s3cr3t-store-pw";
constexpr std::string_view kToken = "t0ken-of-the-caller";
constexpr std::string_view kApiKey = "sk_live_0123456789";

class Capture final : public Responder {
 public:
  void Reply(http_api::Reply reply) override { reply_ = std::move(reply); }
  std::optional<http_api::Reply> reply_;
};

class StatusRoutesTest : public ::testing::Test {
 protected:
  StatusRoutesTest()
      : store_(clock_),
        refusals_(clock_, nullptr, {.identities = IdentityDisplay::kHash, .log = false}),
        engine_(store_, clock_, {.metrics = &metrics_, .refusals = &refusals_}),
        health_(store_, clock_, {}),
        page_({.engine = engine_,
               .metrics = metrics_,
               .health = health_,
               .refusals = &refusals_,
               .store_url = Cat("redis://caudal:", kStorePassword, "@10.0.0.5:6379/0")},
              true) {
    PolicySpec spec;
    spec.name = "per-key";
    spec.identity = {"api_key"};
    spec.limits = {*Limit::Create(LimitSpec::Bucket(Algorithm::kTokenBucket, 1, {1, minutes(1)}))};
    auto set = PolicySet::Create({spec}, {});
    EXPECT_TRUE(set.ok()) << set.status().ToString();
    EXPECT_TRUE(engine_.SetPolicies(*set).ok());
  }

  http_api::Reply Get(std::string_view target, std::string_view method = "GET",
                      std::vector<std::pair<std::string, std::string>> headers = {}) {
    const Context ctx{.engine = engine_,
                      .metrics = metrics_,
                      .health = health_,
                      .refusals = &refusals_,
                      .status = status_,
                      .auth = auth_};
    const auto first = [&headers](std::string_view name) -> std::string_view {
      for (const auto& [n, v] : headers) {
        if (n == name) return v;
      }
      return {};
    };
    const auto count = [&headers](std::string_view name) {
      size_t c = 0;
      for (const auto& [n, v] : headers) c += n == name;
      return c;
    };
    const Request r{.method = method,
                    .target = target,
                    .body = "",
                    .peer = *IpAddress::Parse("192.0.2.7"),
                    .header = first,
                    .header_count = count,
                    .forwarded_for = ""};
    Capture capture;
    Dispatch(ctx, r, capture);
    EXPECT_TRUE(capture.reply_.has_value()) << target;
    return capture.reply_ ? std::move(*capture.reply_) : http_api::Reply{};
  }

  // One allowed and one refused decision for the identity kApiKey.
  void SpendAndRefuse() {
    for (int i = 0; i < 2; ++i) {
      auto r = engine_.Check({.descriptors = {{"api_key", std::string(kApiKey)}}, .cost = {}});
      ASSERT_TRUE(r.ok()) << r.status().ToString();
      EXPECT_EQ(r->allowed(), i == 0);
    }
  }

  static std::string ErrorCode(const http_api::Reply& r) {
    const json::value v = json::parse(r.body);
    return std::string(v.at("error").at("code").as_string());
  }

  ManualClock clock_;
  MemoryStore store_;
  Metrics metrics_;
  Refusals refusals_;
  Engine engine_;
  StoreHealth health_;  // never started: probed by hand where a test needs it
  StatusPage page_;
  StatusPage* status_ = &page_;
  ForwardAuthOptions auth_;
};

TEST_F(StatusRoutesTest, ThePageIsOneSelfContainedDocumentThatIsNeverCached) {
  for (std::string_view method : {"GET", "HEAD"}) {
    const http_api::Reply r = Get("/", method);
    EXPECT_EQ(r.status, 200) << method;
    EXPECT_EQ(r.content_type, "text/html; charset=utf-8");
    EXPECT_TRUE(r.body.starts_with("<!DOCTYPE html>")) << r.body.substr(0, 40);
    EXPECT_EQ(r.headers.Get("Content-Security-Policy"), StatusPageCsp());
    EXPECT_EQ(r.headers.Get("X-Content-Type-Options"), "nosniff");
    EXPECT_EQ(r.headers.Get("X-Frame-Options"), "DENY");
    EXPECT_EQ(r.headers.Get("Referrer-Policy"), "no-referrer");
    EXPECT_EQ(r.headers.Get("Cache-Control"), "no-store");
  }
  // Nothing but itself: no script, style or image from elsewhere, and none allowed.
  const std::string csp = StatusPageCsp();
  EXPECT_TRUE(csp.starts_with("default-src 'none'")) << csp;
  EXPECT_NE(csp.find("frame-ancestors 'none'"), std::string::npos) << csp;
  const std::string page = Get("/").body;
  EXPECT_EQ(page.find("http://"), std::string::npos);
  EXPECT_EQ(page.find("https://"), std::string::npos);
  EXPECT_EQ(page.find(" src="), std::string::npos);
}

TEST_F(StatusRoutesTest, TheJsonCountsDecisionsAndShowsTheStoreByItsSchemeAlone) {
  SpendAndRefuse();
  health_.ProbeOnce();  // the memory store answers inline
  const http_api::Reply r = Get("/v1/status");
  ASSERT_EQ(r.status, 200);
  EXPECT_EQ(r.content_type, "application/json");
  EXPECT_EQ(r.headers.Get("Cache-Control"), "no-store");
  const json::value v = json::parse(r.body);
  const json::object& store = v.at("store").as_object();
  EXPECT_EQ(store.at("kind").as_string(), "redis");
  EXPECT_EQ(store.at("ready").as_bool(), true);
  EXPECT_EQ(store.at("breaker").as_string(), "closed");
  EXPECT_EQ(store.at("on_failure").as_string(), "deny");
  const json::array& policies = v.at("policies").as_array();
  ASSERT_EQ(policies.size(), 1u);
  const json::object& p = policies[0].as_object();
  EXPECT_EQ(p.at("name").as_string(), "per-key");
  EXPECT_EQ(p.at("identity").as_array().at(0).as_string(), "api_key");
  EXPECT_EQ(p.at("limits").as_array().size(), 1u);
  EXPECT_EQ(p.at("allowed").as_int64(), 1);
  EXPECT_EQ(p.at("denied").as_int64(), 1);
  const json::array& refused = v.at("refused").as_array();
  ASSERT_EQ(refused.size(), 1u);
  EXPECT_EQ(refused[0].at("check").as_string(), "per-key");
  EXPECT_EQ(refused[0].at("refused").as_int64(), 1);
  const std::string shown(refused[0].at("top").as_array().at(0).at("identity").as_string());
  EXPECT_TRUE(shown.starts_with("h:")) << shown;  // a hash, not the API key
  // Neither the store's password (nor its address) nor the identity's value is anywhere.
  EXPECT_EQ(r.body.find(kStorePassword), std::string::npos) << r.body;
  EXPECT_EQ(r.body.find("10.0.0.5"), std::string::npos) << r.body;
  EXPECT_EQ(r.body.find(kApiKey), std::string::npos) << r.body;
}

TEST_F(StatusRoutesTest, ANotReadyStoreSaysWhy) {
  const json::value v = json::parse(Get("/v1/status").body);
  EXPECT_EQ(v.at("store").at("ready").as_bool(), false);
  const std::string reason(v.at("store").at("reason").as_string());
  EXPECT_NE(reason.find("not probed yet"), std::string::npos) << reason;
}

TEST_F(StatusRoutesTest, AChartIsAnSvgThatRunsNoScript) {
  for (std::string_view target :
       {"/v1/status/chart?policy=per-key&limit=0", "/v1/status/chart?limit=0&policy=per-key"}) {
    const http_api::Reply r = Get(target);
    ASSERT_EQ(r.status, 200) << target << ": " << r.body;
    EXPECT_EQ(r.content_type, "image/svg+xml");
    EXPECT_NE(r.body.find("<svg"), std::string::npos);
    EXPECT_EQ(r.headers.Get("Content-Security-Policy"), "default-src 'none'");
    EXPECT_EQ(r.headers.Get("X-Content-Type-Options"), "nosniff");
    EXPECT_EQ(r.headers.Get("Cache-Control"), "no-store");
  }
}

TEST_F(StatusRoutesTest, AChartRefusesWhatItCannotDraw) {
  for (std::string_view target :
       {"/v1/status/chart", "/v1/status/chart?policy=per-key", "/v1/status/chart?limit=0",
        "/v1/status/chart?policy=&limit=0", "/v1/status/chart?policy=per-key&limit=x",
        "/v1/status/chart?policy=per-key&limit=-1", "/v1/status/chart?policy=per-key&limit=0x",
        "/v1/status/chart?policy=per-key&limit=99999999999999999999999",
        "/v1/status/chart?policyx=per-key&limitx=0"}) {
    const http_api::Reply r = Get(target);
    EXPECT_EQ(r.status, 400) << target;
    EXPECT_EQ(ErrorCode(r), "invalid_parameter") << target;
  }
  for (std::string_view target :
       {"/v1/status/chart?policy=per-key&limit=1", "/v1/status/chart?policy=other&limit=0"}) {
    const http_api::Reply r = Get(target);
    EXPECT_EQ(r.status, 404) << target;
    EXPECT_EQ(ErrorCode(r), "not_found") << target;
  }
  // An unknown name comes back bounded, however long it was.
  const http_api::Reply long_name =
      Get(Cat("/v1/status/chart?limit=0&policy=", std::string(5000, 'p')));
  EXPECT_EQ(long_name.status, 404);
  EXPECT_LT(long_name.body.size(), 1000u);
}

// The chart's query is read as every query is (server/query_string.h): decoded, as the page's
// encodeURIComponent writes it, and refused when malformed or ambiguous.
TEST_F(StatusRoutesTest, AChartsQueryIsDecodedAndRefusedWhenAmbiguous) {
  EXPECT_EQ(Get("/v1/status/chart?policy=per%2Dkey&limit=%30").status, 200);
  const http_api::Reply twice = Get("/v1/status/chart?policy=per-key&limit=0&policy=other");
  EXPECT_EQ(twice.status, 400);
  EXPECT_EQ(ErrorCode(twice), "duplicate_parameter");
  const http_api::Reply bad = Get("/v1/status/chart?policy=per-key&limit=0%");
  EXPECT_EQ(bad.status, 400);
  EXPECT_EQ(ErrorCode(bad), "invalid_parameter");
}

TEST_F(StatusRoutesTest, TopRefusedReadsTopFromItsQuery) {
  for (std::string_view key : {"k1", "k2"}) {
    for (int i = 0; i < 2; ++i) {
      ASSERT_TRUE(engine_.Check({.descriptors = {{"api_key", std::string(key)}}, .cost = {}}).ok());
    }
  }
  const auto shown = [this](std::string_view target) -> int64_t {
    const http_api::Reply r = Get(target);
    EXPECT_EQ(r.status, 200) << target << ": " << r.body;
    if (r.status != 200) return -1;
    const json::value body = json::parse(r.body);
    const json::array& checks = body.at("checks").as_array();
    EXPECT_EQ(checks.size(), 1u) << r.body;
    return checks.empty() ? -1 : static_cast<int64_t>(checks[0].at("top").as_array().size());
  };
  EXPECT_EQ(shown("/v1/top-refused"), 2);  // 10 by default
  EXPECT_EQ(shown("/v1/top-refused?top=1"), 1);
  EXPECT_EQ(shown("/v1/top-refused?x=y&top=1"), 1) << "wherever it is in the query";
  EXPECT_EQ(shown("/v1/top-refused?top=%31"), 1);
  EXPECT_EQ(shown("/v1/top-refused?top=0"), 1);
  EXPECT_EQ(shown("/v1/top-refused?top=99999999999999999999999"), 2);
  for (std::string_view target : {"/v1/top-refused?top=x", "/v1/top-refused?top=",
                                  "/v1/top-refused?top=-1", "/v1/top-refused?top=1%"}) {
    const http_api::Reply r = Get(target);
    EXPECT_EQ(r.status, 400) << target;
    EXPECT_EQ(ErrorCode(r), "invalid_parameter") << target;
  }
  const http_api::Reply twice = Get("/v1/top-refused?top=1&top=5");
  EXPECT_EQ(twice.status, 400);
  EXPECT_EQ(ErrorCode(twice), "duplicate_parameter");
}

TEST_F(StatusRoutesTest, ALimitTooLargeToSimulateIs422) {
  PolicySpec spec;
  spec.name = "huge";
  spec.identity = {"api_key"};
  spec.limits = {*Limit::Create(
      LimitSpec::Bucket(Algorithm::kTokenBucket, 1'000'000'000, {1'000'000'000, minutes(60)}))};
  ASSERT_TRUE(engine_.SetPolicies(*PolicySet::Create({spec}, {})).ok());
  const http_api::Reply r = Get("/v1/status/chart?policy=huge&limit=0");
  EXPECT_EQ(r.status, 422) << r.body;
  EXPECT_EQ(ErrorCode(r), "too_large_to_chart");
}

TEST_F(StatusRoutesTest, OnlyGetAndHead) {
  for (std::string_view target : {"/", "/v1/status", "/v1/status/chart?policy=per-key&limit=0"}) {
    for (std::string_view method : {"POST", "PUT", "DELETE", "OPTIONS"}) {
      const http_api::Reply r = Get(target, method);
      EXPECT_EQ(r.status, 405) << method << ' ' << target;
      EXPECT_EQ(r.headers.Get("Allow"), "GET, HEAD");
      EXPECT_EQ(ErrorCode(r), "method_not_allowed");
    }
  }
}

TEST_F(StatusRoutesTest, TurnedOffOrAbsentIsNotFound) {
  for (bool absent : {false, true}) {
    page_.SetEnabled(absent);
    status_ = absent ? nullptr : &page_;
    for (std::string_view target : {"/", "/v1/status", "/v1/status/chart?policy=per-key&limit=0"}) {
      const http_api::Reply r = Get(target);
      EXPECT_EQ(r.status, 404) << target;
      EXPECT_EQ(ErrorCode(r), "not_found");
    }
  }
  // A reload turns it back on.
  page_.SetEnabled(true);
  status_ = &page_;
  EXPECT_EQ(Get("/v1/status").status, 200);
}

TEST_F(StatusRoutesTest, ProtectedMetricsProtectTheStatusDataNotThePage) {
  auth_.caller = {.token = std::string(kToken), .allowed = {}, .protect_metrics = true};
  SpendAndRefuse();
  for (std::string_view target : {"/v1/status", "/v1/status/chart?policy=per-key&limit=0"}) {
    const http_api::Reply refused = Get(target);
    EXPECT_EQ(refused.status, 401) << target;
    EXPECT_EQ(refused.body.find("per-key"), std::string::npos) << refused.body;
    const http_api::Reply wrong = Get(target, "GET", {{"Authorization", "Bearer t0ken-of-the"}});
    EXPECT_EQ(wrong.status, 401) << target;
    EXPECT_EQ(wrong.body.find("t0ken"), std::string::npos) << wrong.body;
    EXPECT_EQ(Get(target, "GET", {{"Authorization", Cat("Bearer ", kToken)}}).status, 200);
  }
  // The page holds no data: it stays open, and asks for /v1/status, which says 401.
  const http_api::Reply page = Get("/");
  EXPECT_EQ(page.status, 200);
  EXPECT_EQ(page.body.find(kToken), std::string::npos);

  // Open metrics leave them open, and the token shows on none of them.
  auth_.caller.protect_metrics = false;
  for (std::string_view target : {"/", "/v1/status", "/v1/status/chart?policy=per-key&limit=0"}) {
    const http_api::Reply r = Get(target);
    EXPECT_EQ(r.status, 200) << target;
    EXPECT_EQ(r.body.find(kToken), std::string::npos) << target;
    EXPECT_EQ(r.headers.lines().find(kToken), std::string::npos) << target;
  }
}

TEST_F(StatusRoutesTest, AStoreUrlWithoutASchemeShowsNothingOfIt) {
  StatusPage page({.engine = engine_,
                   .metrics = metrics_,
                   .health = health_,
                   .refusals = nullptr,
                   .store_url = Cat("caudal:", kStorePassword, "@host")},
                  true);
  status_ = &page;
  const http_api::Reply r = Get("/v1/status");
  ASSERT_EQ(r.status, 200);
  const json::value v = json::parse(r.body);
  EXPECT_EQ(v.at("store").at("kind").as_string(), "");
  EXPECT_TRUE(v.at("refused").as_array().empty());
  EXPECT_EQ(r.body.find(kStorePassword), std::string::npos) << r.body;
}

}  // namespace
}  // namespace caudal::routes
