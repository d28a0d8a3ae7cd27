// One behaviour table through both front ends: every combination of descriptor mode, store state
// and failure mode, shadow and refunds is played through HTTP's /v1/check translation and through
// Envoy's ShouldRateLimit translation, over the same engine configuration. Both must tell the
// same story, request by request (except that Envoy's consume_each counts refused hits, as the
// reference does), and the story must be the one the engine promises.
#include <gtest/gtest.h>

#include <boost/json.hpp>
#include <memory>
#include <string>
#include <vector>

#include "caudal/engine/engine.h"
#include "caudal/store/memory_store.h"
#include "config/ratelimit_config_yaml.h"
#include "envoy/rls_handler.h"
#include "server/http_api.h"
#include "support/fake_store.h"
#include "support/manual_clock.h"

namespace caudal {
namespace {

namespace json = boost::json;

enum class StoreState { kUp, kAllow, kDeny, kLocal };

struct Row {
  DescriptorMode mode;
  StoreState store;
  bool shadow_b;  // the second check is a dark launch
};

std::string RowName(const ::testing::TestParamInfo<Row>& info) {
  const Row& r = info.param;
  const char* store[] = {"StoreUp", "DownAllow", "DownDeny", "DownLocal"};
  return std::string(r.mode == DescriptorMode::kAllOrNothing ? "AllOrNothing" : "ConsumeEach") +
         store[static_cast<int>(r.store)] + (r.shadow_b ? "ShadowB" : "");
}

// What a client sees of one answer, in terms both front ends can express.
struct Seen {
  std::string outcome;  // allowed, denied, unavailable
  bool degraded = false;
  std::vector<int64_t> remaining;  // per check, when a store (shared or local) decided it
  friend bool operator==(const Seen&, const Seen&) = default;
};

std::ostream& operator<<(std::ostream& os, const Seen& s) {
  os << s.outcome << (s.degraded ? " degraded" : "") << " remaining [";
  for (int64_t r : s.remaining) os << r << ' ';
  return os << ']';
}

// One step of the story: take `cost` from both checks, or give it back.
struct Step {
  int64_t cost = 1;
  bool refund = false;
};

// A = 2 per minute, B = 5 per minute, fixed windows (the reference's only algorithm).
class Stack {
 public:
  explicit Stack(const Row& row)
      : local_(clock_),
        store_(std::make_unique<MemoryStore>(clock_)),
        engine_(store_, clock_, {.local_store = &local_}),
        rls_(engine_, {.deny_as = envoy::DenyAs::kUnavailable}),
        row_(row) {
    const FailureMode mode = row.store == StoreState::kAllow   ? FailureMode::kAllow
                             : row.store == StoreState::kLocal ? FailureMode::kLocal
                                                               : FailureMode::kDeny;
    PolicySpec a, b;
    a.name = "A";
    a.identity = {"a"};
    a.limits = {Window(2)};
    b.name = "B";
    b.identity = {"b"};
    b.limits = {Window(5)};
    if (row.shadow_b) b.enforcement = Enforcement::kShadow;
    auto set = PolicySet::Create({a, b}, {.on_failure = mode, .instances = 1, .mode = row.mode});
    EXPECT_TRUE(set.ok()) << set.status().ToString();
    EXPECT_TRUE(engine_.SetPolicies(*set).ok());
    auto domains = envoy::ParseRateLimitConfigText(std::string(R"(
domain: d
descriptors:
  - key: a
    rate_limit: {unit: minute, requests_per_unit: 2, name: A}
  - key: b
    rate_limit: {unit: minute, requests_per_unit: 5, name: B}
    shadow_mode: )") + (row.shadow_b ? "true" : "false") +
                                                   "\n");
    EXPECT_TRUE(domains.ok()) << domains.status().ToString();
    EXPECT_TRUE(engine_
                    .SetDomains(std::make_shared<envoy::RateLimitConfig>(std::move(*domains)),
                                {.mode = row.mode, .on_failure = mode})
                    .ok());
    if (row.store != StoreState::kUp) store_.FailWith(Status::Unavailable("connection refused"));
  }

  static Limit Window(int64_t n) {
    return *Limit::Create(LimitSpec::Window(Algorithm::kFixedWindow, n, std::chrono::minutes(1)));
  }

  bool decided() const { return row_.store == StoreState::kUp || row_.store == StoreState::kLocal; }

  // Through /v1/check: the body a client sends, the reply it gets.
  Seen Http(const Step& step, const std::string& ids) {
    json::object body{{"descriptors", {{"a", ids}, {"b", ids}}}, {"cost", step.cost}};
    if (step.refund) body["refund"] = true;
    const http_api::ParsedCheck parsed = http_api::ParseCheckBody(json::serialize(body));
    EXPECT_FALSE(parsed.error.has_value());
    auto result = engine_.Check(parsed.request);
    EXPECT_TRUE(result.ok()) << result.status().ToString();
    const http_api::Reply reply = http_api::DecisionReply(*result, http_api::Endpoint::kCheck);
    const json::object got = json::parse(reply.body).as_object();
    Seen seen;
    seen.outcome = reply.status == 200 ? "allowed" : reply.status == 429 ? "denied" : "unavailable";
    seen.degraded = got.at("degraded").as_bool();
    if (decided()) {
      for (const json::value& p : got.at("policies").as_array()) {
        seen.remaining.push_back(p.as_object().at("remaining").as_int64());
      }
    }
    return seen;
  }

  // Through ShouldRateLimit: the RateLimitRequest Envoy sends, the response it gets.
  Seen Rls(const Step& step, const std::string& ids) {
    envoy::RateLimitRequest request;
    request.set_domain("d");
    for (const char* key : {"a", "b"}) {
      auto* d = request.add_descriptors();
      auto* e = d->add_entries();
      e->set_key(key);
      e->set_value(ids);
      d->mutable_hits_addend()->set_value(static_cast<uint64_t>(step.cost));
      d->set_is_negative_hits(step.refund);
    }
    auto response = rls_.ShouldRateLimit(request);
    Seen seen;
    if (!response.ok()) {
      EXPECT_EQ(response.status().code(), StatusCode::kUnavailable) << response.status().ToString();
      seen.outcome = "unavailable";
      seen.degraded = true;
      return seen;
    }
    seen.outcome = response->overall_code() == envoy::RateLimitResponse::OK ? "allowed" : "denied";
    for (const auto& h : response->response_headers_to_add()) {
      seen.degraded |= h.key() == "Caudal-Degraded";
    }
    if (decided()) {
      for (const auto& s : response->statuses()) seen.remaining.push_back(s.limit_remaining());
    }
    return seen;
  }

  ManualClock& clock() { return clock_; }

 private:
  ManualClock clock_{std::chrono::seconds(1'700'000'040)};  // on a minute boundary
  MemoryStore local_;
  testing::FakeStore store_;
  Engine engine_;
  envoy::RlsHandler rls_;
  Row row_;
};

class BehaviourTable : public ::testing::TestWithParam<Row> {};

// The story: three single hits (A's limit is 2), a refund of one, two more hits. (A cost above a
// capacity is where the front ends differ on purpose: HTTP refuses it as a bad request, 400, since
// it can never pass; Envoy's API has no such answer, so it is OVER_LIMIT there.)
const std::vector<Step> kStory = {{1, false}, {1, false}, {1, false},
                                  {1, true},  {1, false}, {1, false}};

TEST_P(BehaviourTable, BothFrontEndsTellTheSameStory) {
  const Row row = GetParam();
  Stack stack(row);
  std::vector<Seen> http, rls;
  // Each front end on its own identities, so they share the engine but not the counters.
  for (const Step& step : kStory) http.push_back(stack.Http(step, "http-client"));
  for (const Step& step : kStory) rls.push_back(stack.Rls(step, "rls-client"));
  // Except where Envoy's consume_each counts a refused hit, as the reference's INCRBY does
  // (a ChargeEntry, store.h): from the refund on, its A has one more hit counted.
  const bool aon = row.mode == DescriptorMode::kAllOrNothing;
  const bool counts_refused =
      !aon && (row.store == StoreState::kUp || row.store == StoreState::kLocal);
  for (size_t i = 0; i < kStory.size(); ++i) {
    if (counts_refused && i >= 3) continue;
    EXPECT_EQ(http[i], rls[i]) << "step " << i;
  }

  // And the story is the engine's promise.
  switch (row.store) {
    case StoreState::kAllow:
      for (const Seen& s : http) EXPECT_EQ(s, (Seen{"allowed", true, {}}));
      return;
    case StoreState::kDeny:
      // A (enforced in every row) fails closed; a refund never refuses, so it is admitted.
      for (size_t i = 0; i < kStory.size(); ++i) {
        EXPECT_EQ(http[i], (Seen{kStory[i].refund ? "allowed" : "unavailable", true, {}})) << i;
      }
      return;
    case StoreState::kUp:
    case StoreState::kLocal:
      break;
  }
  const bool degraded = row.store == StoreState::kLocal;
  EXPECT_EQ(http[0], (Seen{"allowed", degraded, {1, 4}}));
  EXPECT_EQ(http[1], (Seen{"allowed", degraded, {0, 3}}));
  // A refuses the third hit. All-or-nothing: B is not charged (a shadow B is only looked at).
  // Consume-each: B is decided on its own and charged.
  EXPECT_EQ(http[2], (Seen{"denied", degraded, {0, aon ? 3 : 2}}));
  // The refund gives one back to both, whatever else happens.
  EXPECT_EQ(http[3], (Seen{"allowed", degraded, {1, aon ? 4 : 3}}));
  EXPECT_EQ(http[4], (Seen{"allowed", degraded, {0, aon ? 3 : 2}}));
  EXPECT_EQ(http[5], (Seen{"denied", degraded, {0, aon ? 3 : 1}}));
  if (!counts_refused) return;
  // Envoy, consume_each: A counted its refused third hit (3 of 2), so after the refund it is
  // used up (2 of 2) and the next hits are refused, still counted; B as over HTTP.
  EXPECT_EQ(rls[3], (Seen{"allowed", degraded, {0, 3}}));
  EXPECT_EQ(rls[4], (Seen{"denied", degraded, {0, 2}}));
  EXPECT_EQ(rls[5], (Seen{"denied", degraded, {0, 1}}));
}

std::vector<Row> AllRows() {
  std::vector<Row> rows;
  for (DescriptorMode mode : {DescriptorMode::kAllOrNothing, DescriptorMode::kConsumeEach}) {
    for (StoreState store :
         {StoreState::kUp, StoreState::kAllow, StoreState::kDeny, StoreState::kLocal}) {
      for (bool shadow : {false, true}) rows.push_back({mode, store, shadow});
    }
  }
  return rows;
}

INSTANTIATE_TEST_SUITE_P(AllModes, BehaviourTable, ::testing::ValuesIn(AllRows()), RowName);

}  // namespace
}  // namespace caudal
