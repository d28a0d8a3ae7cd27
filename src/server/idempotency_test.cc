// Idempotency-Key: the field's syntax, the record's key and fingerprint, and POST /v1/check
// through routes::Dispatch (no sockets) on a memory store: a replay answers the first status and
// body with Idempotent-Replayed, charging nothing; another body is 422, a duplicate in progress
// 409, a malformed key 400, none of them charged; records that cannot be read are answered what a
// request without a key is answered when the store fails, charging it nothing.
#include "server/idempotency.h"

#include <gtest/gtest.h>

#include <boost/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "caudal/store/memory_store.h"
#include "server/routes.h"
#include "store/batch.h"
#include "support/idempotency_contract.h"
#include "support/manual_clock.h"

namespace caudal::idempotency {
namespace {

namespace json = boost::json;
using std::chrono::hours;
using std::chrono::minutes;
using std::chrono::seconds;

// --- The field ----------------------------------------------------------------------------------

TEST(ParseKeyField, AnSfStringOrTheSameCharactersBareNameOneKey) {
  EXPECT_EQ(ParseKeyField("\"8e03978e-40d5-43e8-bc93-6894a57f9324\"", 1).key,
            "8e03978e-40d5-43e8-bc93-6894a57f9324");
  EXPECT_EQ(ParseKeyField("8e03978e-40d5-43e8-bc93-6894a57f9324", 1).key,
            "8e03978e-40d5-43e8-bc93-6894a57f9324");
  EXPECT_EQ(ParseKeyField("\"a b\"", 1).key, "a b");  // a string may hold spaces
  EXPECT_EQ(ParseKeyField(R"("say \"hi\" \\o/")", 1).key, R"(say "hi" \o/)");
  EXPECT_EQ(ParseKeyField(std::string(255, 'k'), 1).key, std::string(255, 'k'));
  EXPECT_EQ(ParseKeyField("\"" + std::string(255, 'k') + "\"", 1).key, std::string(255, 'k'));
}

TEST(ParseKeyField, RefusesWhatIsNotOneKeyWithAClear400) {
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"", "the key is empty"},
      {"\"\"", "the key is empty"},
      {std::string(256, 'k'), "256 characters (at most 255)"},
      {"\"" + std::string(256, 'k') + "\"", "256 characters (at most 255)"},
      {"\"abc", "no closing quote"},
      {"\"abc\";p=1", "nothing may follow"},
      {"\"a\\nb\"", "only \\\" and \\\\ may be escaped"},
      {"\"caf\xc3\xa9\"", "printable ASCII"},
      {"\"a\tb\"", "printable ASCII"},
      {"a b", "visible ASCII"},
      {"a\"b", "visible ASCII"},
      {"a\\b", "visible ASCII"},
      {"caf\xc3\xa9", "visible ASCII"},
  };
  for (const auto& [value, why] : bad) {
    const ParsedKey k = ParseKeyField(value, 1);
    ASSERT_TRUE(k.error.has_value()) << value;
    EXPECT_EQ(k.error->status, 400);
    EXPECT_EQ(k.error->code, "invalid_idempotency_key");
    EXPECT_NE(k.error->message.find(why), std::string::npos) << value << ": " << k.error->message;
    EXPECT_TRUE(k.key.empty());
  }
  const ParsedKey twice = ParseKeyField("abc", 2);
  ASSERT_TRUE(twice.error.has_value());
  EXPECT_EQ(twice.error->message, "header Idempotency-Key: given 2 times (a request has one key)");
}

// --- Scope, record key, fingerprint, kept replies
// ---------------------------------------------------

TEST(CallerScope, CallersOfOneTokenShareAScopeCertificatesEachHaveTheirOwn) {
  EXPECT_EQ(CallerScope({}, {}), "");
  const CallerAuth token{.token = "t", .allowed = {}, .protect_metrics = false};
  EXPECT_EQ(CallerScope(token, {}), "token");
  const CallerAuth certs{.token = "t", .allowed = {"svc-a", "svc-b"}, .protect_metrics = false};
  const std::vector<std::string> a = {"svc-a"};
  const std::vector<std::string> b = {"svc-b", "other-san"};
  EXPECT_NE(CallerScope(certs, a), CallerScope(certs, b));
  EXPECT_NE(CallerScope(certs, a), CallerScope(certs, {}));
  // A certificate that is not allowed passed with the token: the token's scope.
  const std::vector<std::string> stranger = {"nobody"};
  EXPECT_EQ(CallerScope(certs, stranger), "token");
}

TEST(RecordKey, DiffersByEndpointScopeAndKeyWithNoTwoSplitsAlike) {
  const std::string k = RecordKey("/v1/check", "", "abc");
  EXPECT_EQ(k.size(), 64u);
  EXPECT_EQ(k.find_first_not_of("0123456789abcdef"), std::string::npos);
  EXPECT_EQ(k, RecordKey("/v1/check", "", "abc"));
  EXPECT_NE(k, RecordKey("/v1/reserve", "", "abc"));
  EXPECT_NE(k, RecordKey("/v1/check", "token", "abc"));
  EXPECT_NE(k, RecordKey("/v1/check", "", "abd"));
  EXPECT_NE(RecordKey("/v1/check", "ab", "c"), RecordKey("/v1/check", "a", "bc"));
  // Valid for every store (ValidateIdempotencyCall's shape).
  EXPECT_TRUE(ValidateIdempotencyCall(k, k, k, "", seconds(1)).ok());
}

TEST(Fingerprint, TheSameRequestWrittenAnotherWayMatchesAnotherRequestDoesNot) {
  const auto fp = [](std::string_view body) { return Fingerprint(json::parse(body)); };
  const std::string a = fp(R"({"descriptors": {"api_key": "k", "tenant": "t"}, "cost": 2})");
  EXPECT_EQ(a, fp(R"({"cost":2,"descriptors":{"tenant":"t","api_key":"k"}})"));
  EXPECT_EQ(a, fp("{\n  \"cost\" : 2 ,\n \"descriptors\":{\"api_key\":\"k\",\"tenant\":\"t\"}}"));
  EXPECT_EQ(a, fp(R"({"descriptors": {"api_key": "\u006b", "tenant": "t"}, "cost": 2})"));
  EXPECT_NE(a, fp(R"({"descriptors": {"api_key": "k", "tenant": "t"}, "cost": 3})"));
  EXPECT_NE(a, fp(R"({"descriptors": {"api_key": "k", "tenant": "u"}, "cost": 2})"));
  EXPECT_NE(a, fp(R"({"descriptors": {"api_key": "k", "tenant": "t"}})"));
  EXPECT_NE(a,
            fp(R"({"descriptors": {"api_key": "k", "tenant": "t"}, "cost": 2, "refund": true})"));
  EXPECT_EQ(Canonical(json::parse(R"({"b": [2, {"d": 1, "c": "x"}], "a": null})")),
            R"({"a":null,"b":[2,{"c":"x","d":1}]})");
  EXPECT_EQ(a.size(), 64u);
}

TEST(EncodeReply, KeepsStatusTypeAndBodyExactly) {
  http_api::Reply r;
  r.status = 429;
  r.content_type = "application/json";
  r.body = "{\"allowed\":false,\n\"x\":\"\\n\"}";
  r.headers.Add("Retry-After", 3);
  auto back = DecodeReply(EncodeReply(r));
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(back->status, 429);
  EXPECT_EQ(back->content_type, "application/json");
  EXPECT_EQ(back->body, r.body);
  EXPECT_TRUE(back->headers.empty()) << "a replay describes the first answer, not the moment";
  for (std::string_view junk : {"", "200", "200\njson", "abc\nx\ny", "99\nx\ny", "600\nx\n"}) {
    EXPECT_FALSE(DecodeReply(junk).has_value()) << junk;
  }
}

// --- POST /v1/check
// ----------------------------------------------------------------------------------

class Capture final : public routes::Responder {
 public:
  void Reply(http_api::Reply reply) override { reply_ = std::move(reply); }
  std::optional<http_api::Reply> reply_;
};

// A Store that cannot be reached: every decision fails with `why`.
class DownDecisions final : public Store {
 public:
  explicit DownDecisions(Status why) : why_(std::move(why)) {}
  Status Ping() override { return why_; }
  std::string_view Name() const override { return "down"; }
  size_t calls() const { return calls_.load(); }

 protected:
  void DecideBatchAsync(std::span<const EntryRef>, DecideCallback done) override {
    calls_.fetch_add(1);
    done(why_);
  }

 private:
  Status why_;
  std::atomic<size_t> calls_{0};
};

// The records of `inner` whose writes fail: claims and releases pass, completions are lost.
class ClaimsOnly final : public IdempotencyStore {
 public:
  explicit ClaimsOnly(IdempotencyStore& inner) : inner_(inner) {}
  void Claim(std::string_view key, std::string_view fingerprint, std::string_view claim, Micros ttl,
             ClaimCallback done) override {
    inner_.Claim(key, fingerprint, claim, ttl, std::move(done));
  }
  void Complete(std::string_view, std::string_view, std::string_view, std::string_view, Micros,
                ChangeCallback done) override {
    done(Status::Unavailable("redis: no answer within 10ms"));
  }
  void Release(std::string_view key, std::string_view fingerprint, std::string_view claim,
               ChangeCallback done) override {
    inner_.Release(key, fingerprint, claim, std::move(done));
  }

 private:
  IdempotencyStore& inner_;
};

// An IdempotencyStore that cannot be reached (or, given another failure, answers it to claims).
class DownStore final : public IdempotencyStore {
 public:
  explicit DownStore(Status why = Status::Unavailable("redis at 127.0.0.1:1: connection refused"))
      : why_(std::move(why)) {}
  void Claim(std::string_view, std::string_view, std::string_view, Micros,
             ClaimCallback done) override {
    done(why_);
  }
  void Complete(std::string_view, std::string_view, std::string_view, std::string_view, Micros,
                ChangeCallback done) override {
    done(Status::Unavailable("down"));
  }
  void Release(std::string_view, std::string_view, std::string_view, ChangeCallback done) override {
    done(Status::Unavailable("down"));
  }

 private:
  Status why_;
};

constexpr std::string_view kBody = R"({"descriptors": {"api_key": "k"}})";
constexpr std::string_view kOtherBody = R"({"descriptors": {"api_key": "k"}, "cost": 2})";

class IdempotentCheckTest : public ::testing::Test {
 protected:
  IdempotentCheckTest()
      : store_(clock_),
        local_(clock_),
        engine_(store_, clock_, {.local_store = &local_, .metrics = &metrics_}),
        health_(store_, clock_, {}),
        records_(MakeMemoryIdempotencyStore(clock_, {.max_records = 1000})),
        idempotent_(*records_, metrics_, Replayable) {
    EXPECT_TRUE(engine_.SetPolicies(Policies(FailureMode::kDeny)).ok());
    auth_.idempotency = {.window = minutes(10), .in_progress = seconds(5)};
  }

  // One policy: 3 per hour per api_key, failing as `mode` says.
  static std::shared_ptr<const PolicySet> Policies(FailureMode mode) {
    PolicySpec spec;
    spec.name = "per-key";
    spec.identity = {"api_key"};
    spec.limits = {*Limit::Create(LimitSpec::Bucket(Algorithm::kTokenBucket, 3, {3, hours(1)}))};
    auto set = PolicySet::Create({spec}, {.on_failure = mode});
    EXPECT_TRUE(set.ok()) << set.status().ToString();
    return set.ok() ? *set : nullptr;
  }

  // POST /v1/check through `idempotent`'s records (default: the fixture's) and `engine` (default:
  // the fixture's, on store_).
  http_api::Reply Post(std::string_view body,
                       std::vector<std::pair<std::string, std::string>> headers,
                       const Idempotency* idempotent = nullptr, Engine* engine = nullptr) {
    const routes::Context ctx{.engine = engine != nullptr ? *engine : engine_,
                              .metrics = metrics_,
                              .health = health_,
                              .refusals = nullptr,
                              .status = nullptr,
                              .auth = auth_,
                              .idempotency = idempotent != nullptr ? idempotent : &idempotent_};
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
    const routes::Request r{.method = "POST",
                            .target = "/v1/check",
                            .body = body,
                            .peer = *IpAddress::Parse("192.0.2.7"),
                            .header = first,
                            .header_count = count,
                            .forwarded_for = ""};
    Capture capture;
    routes::Dispatch(ctx, r, capture);
    EXPECT_TRUE(capture.reply_.has_value());
    return capture.reply_ ? std::move(*capture.reply_) : http_api::Reply{};
  }
  http_api::Reply Keyed(std::string_view key, std::string_view body = kBody) {
    return Post(body, {{"Idempotency-Key", std::string(key)}});
  }

  // What was left of the bucket: how many keyless checks pass now (spending it).
  int Drain() {
    int n = 0;
    while (n < 10 && Post(kBody, {}).status == 200) ++n;
    return n;
  }

  static std::string ErrorCode(const http_api::Reply& r) {
    const json::value v = json::parse(r.body);
    return std::string(v.at("error").at("code").as_string());
  }
  uint64_t Outcome(std::string_view outcome) {
    return metrics_.Series(MetricId::kIdempotencyKeys, {outcome}).load();
  }

  ManualClock clock_;
  MemoryStore store_;
  MemoryStore local_;  // the engine's local fallback
  Metrics metrics_;
  Engine engine_;
  StoreHealth health_;  // never started
  std::unique_ptr<IdempotencyStore> records_;
  Idempotency idempotent_;
  ForwardAuthOptions auth_;
};

TEST_F(IdempotentCheckTest, ARetryIsAnsweredTheFirstAnswerAndChargedOnce) {
  const http_api::Reply first = Keyed("order-1");
  ASSERT_EQ(first.status, 200) << first.body;
  EXPECT_FALSE(first.headers.Get("Idempotent-Replayed").has_value());
  for (int i = 0; i < 5; ++i) {
    const http_api::Reply again = Keyed("\"order-1\"");  // the same key, quoted
    EXPECT_EQ(again.status, 200);
    EXPECT_EQ(again.body, first.body);
    EXPECT_EQ(again.content_type, first.content_type);
    EXPECT_EQ(again.headers.Get("Idempotent-Replayed"), "true");
  }
  // A new key is a new request.
  EXPECT_EQ(Keyed("order-2").status, 200);
  EXPECT_EQ(Drain(), 1) << "two charged, the replays nothing";
  EXPECT_EQ(Outcome("first"), 2u);
  EXPECT_EQ(Outcome("replayed"), 5u);
}

TEST_F(IdempotentCheckTest, ARefusalIsReplayedTooEvenOnceTheLimitHasRoomAgain) {
  auth_.idempotency.window = hours(2);
  for (int i = 0; i < 3; ++i) ASSERT_EQ(Post(kBody, {}).status, 200);
  const http_api::Reply refused = Keyed("late");
  ASSERT_EQ(refused.status, 429);
  clock_.Advance(hours(1));  // the bucket is full again
  const http_api::Reply again = Keyed("late");
  EXPECT_EQ(again.status, 429);
  EXPECT_EQ(again.body, refused.body);
  EXPECT_EQ(again.headers.Get("Idempotent-Replayed"), "true");
  EXPECT_FALSE(again.headers.Get("Retry-After").has_value())
      << "the first answer's wait is not the replay's";
  EXPECT_EQ(Drain(), 3);
}

TEST_F(IdempotentCheckTest, TheSameKeyWithAnotherBodyIs422AndChargesNothing) {
  ASSERT_EQ(Keyed("order-1").status, 200);
  const http_api::Reply other = Keyed("order-1", kOtherBody);
  EXPECT_EQ(other.status, 422);
  EXPECT_EQ(ErrorCode(other), "idempotency_key_reused");
  // The same request written another way is the same request.
  const http_api::Reply same = Keyed("order-1", R"({ "descriptors" : { "api_key" : "k" } })");
  EXPECT_EQ(same.status, 200);
  EXPECT_EQ(same.headers.Get("Idempotent-Replayed"), "true");
  EXPECT_EQ(Outcome("mismatch"), 1u);
  EXPECT_EQ(Drain(), 2) << "only the first charged";
}

TEST_F(IdempotentCheckTest, ADuplicateWhileTheFirstIsDecidingIs409AndChargesNothing) {
  // The first request's claim, as another instance deciding it would hold it.
  const std::string record =
      RecordKey("/v1/check", IdentityScope("", json::parse(kBody)), "order-1");
  const std::string fingerprint = Fingerprint(json::parse(kBody));
  ASSERT_EQ(testing::OutcomeOf(
                testing::ClaimOf(*records_, record, fingerprint, "other-instance", seconds(5))),
            ClaimOutcome::kClaimed);
  const http_api::Reply dup = Keyed("order-1");
  EXPECT_EQ(dup.status, 409);
  EXPECT_EQ(ErrorCode(dup), "idempotency_key_in_use");
  EXPECT_EQ(dup.headers.Get("Retry-After"), "1");
  EXPECT_EQ(Outcome("conflict"), 1u);
  // Once that instance answers, the duplicate is its answer.
  http_api::Reply decided;
  decided.status = 200;
  decided.content_type = "application/json";
  decided.body = R"({"allowed":true,"from":"other-instance"})";
  ASSERT_EQ(testing::Changed(testing::CompleteOf(*records_, record, fingerprint, "other-instance",
                                                 EncodeReply(decided))),
            true);
  const http_api::Reply replay = Keyed("order-1");
  EXPECT_EQ(replay.status, 200);
  EXPECT_EQ(replay.body, decided.body);
  EXPECT_EQ(Drain(), 3) << "this instance charged nothing";
}

TEST_F(IdempotentCheckTest, AClaimLeftByAnInstanceThatDiedEndsAfterInProgress) {
  const std::string record =
      RecordKey("/v1/check", IdentityScope("", json::parse(kBody)), "order-1");
  ASSERT_EQ(testing::OutcomeOf(testing::ClaimOf(*records_, record, Fingerprint(json::parse(kBody)),
                                                "dead", seconds(5))),
            ClaimOutcome::kClaimed);
  EXPECT_EQ(Keyed("order-1").status, 409);
  clock_.Advance(seconds(5));
  EXPECT_EQ(Keyed("order-1").status, 200);
  EXPECT_EQ(Drain(), 2);
}

TEST_F(IdempotentCheckTest, AMalformedKeyIs400AndChargesNothing) {
  for (std::vector<std::pair<std::string, std::string>> headers :
       std::vector<std::vector<std::pair<std::string, std::string>>>{
           {{"Idempotency-Key", ""}},
           {{"Idempotency-Key", std::string(256, 'k')}},
           {{"Idempotency-Key", "a b"}},
           {{"Idempotency-Key", "\"open"}},
           {{"Idempotency-Key", "a"}, {"Idempotency-Key", "b"}}}) {
    const http_api::Reply r = Post(kBody, headers);
    EXPECT_EQ(r.status, 400) << headers[0].second;
    EXPECT_EQ(ErrorCode(r), "invalid_idempotency_key");
  }
  EXPECT_EQ(Outcome("invalid"), 5u);
  // A bad body with a good key is the body's 400, and leaves no record behind.
  const http_api::Reply bad = Keyed("order-1", R"({"descriptors": 1})");
  EXPECT_EQ(bad.status, 400);
  EXPECT_EQ(Keyed("order-1").status, 200);
  EXPECT_EQ(Drain(), 2) << "only the good request charged";
}

TEST_F(IdempotentCheckTest, ARequestTheEngineRefusesLeavesTheKeyFreeForACorrectedOne) {
  // A cost above the bucket's capacity is the caller's mistake (400): nothing charged, nothing
  // kept, so the same key may carry the corrected request.
  const http_api::Reply too_much =
      Keyed("order-1", R"({"descriptors": {"api_key": "k"}, "cost": 9})");
  ASSERT_EQ(too_much.status, 400) << too_much.body;
  EXPECT_EQ(Keyed("order-1").status, 200);
  EXPECT_EQ(Keyed("order-1").headers.Get("Idempotent-Replayed"), "true");
  EXPECT_EQ(Drain(), 2);
}

TEST_F(IdempotentCheckTest, AfterTheWindowTheKeyIsNewAgain) {
  ASSERT_EQ(Keyed("order-1").status, 200);
  clock_.Advance(minutes(10) - seconds(1));
  EXPECT_EQ(Keyed("order-1", kOtherBody).status, 422);
  clock_.Advance(seconds(1));
  EXPECT_EQ(Keyed("order-1", kOtherBody).status, 200);
  EXPECT_EQ(Drain(), 0);
}

TEST_F(IdempotentCheckTest, WithoutAKeyNothingChanges) {
  for (int i = 0; i < 3; ++i) EXPECT_EQ(Post(kBody, {}).status, 200);
  EXPECT_EQ(Post(kBody, {}).status, 429);
  EXPECT_EQ(Outcome("first"), 0u);
}

TEST_F(IdempotentCheckTest, AKeyIsTheIdentitysOwnAnotherIdentityUnderItIsAnotherRequest) {
  // The same key value from two identities: two records, each decided and charged once.
  const std::string other = R"({"descriptors": {"api_key": "other"}})";
  EXPECT_EQ(Keyed("order-1").status, 200);
  EXPECT_EQ(Keyed("order-1", other).status, 200);
  EXPECT_EQ(Keyed("order-1", other).headers.Get("Idempotent-Replayed"), "true");
  EXPECT_EQ(Outcome("first"), 2u);
  EXPECT_EQ(Outcome("mismatch"), 0u);
  EXPECT_NE(IdentityScope("", json::parse(kBody)), IdentityScope("", json::parse(other)));
  EXPECT_NE(IdentityScope("", json::parse(R"({"reservation": "a"})")),
            IdentityScope("", json::parse(R"({"reservation": "b"})")));
  EXPECT_EQ(IdentityScope("token", json::parse(R"({"descriptors": {"b": "2", "a": "1"}})")),
            IdentityScope("token", json::parse(R"({"descriptors": {"a": "1", "b": "2"}})")));
}

TEST_F(IdempotentCheckTest, CallersOfDifferentCertificatesHaveKeysOfTheirOwn) {
  // RecordKey's scope is what keeps them apart; here two scopes under one key value.
  const std::string fingerprint = Fingerprint(json::parse(kBody));
  const CallerAuth certs{.token = "", .allowed = {"svc-a", "svc-b"}, .protect_metrics = false};
  const std::vector<std::string> a = {"svc-a"}, b = {"svc-b"};
  EXPECT_EQ(testing::OutcomeOf(testing::ClaimOf(
                *records_, RecordKey("/v1/check", CallerScope(certs, a), "k"), fingerprint, "c")),
            ClaimOutcome::kClaimed);
  EXPECT_EQ(testing::OutcomeOf(testing::ClaimOf(
                *records_, RecordKey("/v1/check", CallerScope(certs, b), "k"), fingerprint, "c")),
            ClaimOutcome::kClaimed);
}

// An unreadable record is answered what a request without a key is answered when the store
// fails, policy by policy: the same status, headers and body, at once (it asks no store).
TEST_F(IdempotentCheckTest, AnUnreadableRecordIsAnsweredAsAPlainRequestWhenTheStoreFails) {
  const std::vector<Status> failures = {
      Status::Unavailable("redis at 127.0.0.1:1: connection refused"),
      Status::Unavailable("redis: no answer within 50ms"),
      Status::ResourceExhausted("redis: 1024 calls in flight already (at most 1024)")};
  for (FailureMode mode : {FailureMode::kDeny, FailureMode::kAllow, FailureMode::kLocal}) {
    for (const Status& why : failures) {
      SCOPED_TRACE(::testing::Message() << FailureModeName(mode) << ": " << why.ToString());
      MemoryStore local(clock_);
      Engine engine(store_, clock_, {.local_store = &local, .metrics = &metrics_});
      ASSERT_TRUE(engine.SetPolicies(Policies(mode)).ok());
      DownStore down(why);
      const Idempotency idempotent(down, metrics_, Replayable);
      const http_api::Reply keyed =
          Post(kBody, {{"Idempotency-Key", "order-1"}}, &idempotent, &engine);
      // The same request without a key, on an engine whose store fails with the same error.
      DownDecisions down_store(why);
      MemoryStore other_local(clock_);
      Engine failing(down_store, clock_, {.local_store = &other_local, .metrics = &metrics_});
      ASSERT_TRUE(failing.SetPolicies(Policies(mode)).ok());
      const http_api::Reply plain = Post(kBody, {}, nullptr, &failing);
      EXPECT_EQ(keyed.status, mode == FailureMode::kDeny ? 503 : 200);
      EXPECT_EQ(keyed.status, plain.status);
      EXPECT_EQ(keyed.body, plain.body);
      EXPECT_EQ(keyed.headers.Get("Caudal-Degraded"), "store_unavailable");
      EXPECT_EQ(keyed.headers.Get("Retry-After"), plain.headers.Get("Retry-After"));
      EXPECT_FALSE(keyed.headers.Get("Idempotent-Replayed").has_value());
      EXPECT_EQ(down_store.calls(), 1u) << "the plain request asked its store";
    }
  }
  EXPECT_EQ(Outcome("unavailable"), 9u);
  EXPECT_EQ(Outcome("first"), 0u);
  EXPECT_EQ(Drain(), 3) << "the store was charged nothing: no record could say it was";
}

// A record that holds no reply (another program's value under the key) cannot be replayed: the
// request is decided by the failure modes, as when the records cannot be read.
TEST_F(IdempotentCheckTest, ARecordHoldingNoReplyIsDecidedByTheFailureModes) {
  const std::string record =
      RecordKey("/v1/check", IdentityScope("", json::parse(kBody)), "order-1");
  const std::string fingerprint = Fingerprint(json::parse(kBody));
  ASSERT_EQ(testing::OutcomeOf(testing::ClaimOf(*records_, record, fingerprint, "c")),
            ClaimOutcome::kClaimed);
  ASSERT_EQ(testing::Changed(testing::CompleteOf(*records_, record, fingerprint, "c", "junk")),
            true);
  ASSERT_TRUE(engine_.SetPolicies(Policies(FailureMode::kAllow)).ok());
  const http_api::Reply r = Keyed("order-1");
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.headers.Get("Caudal-Degraded"), "store_unavailable");
  EXPECT_FALSE(r.headers.Get("Idempotent-Replayed").has_value());
  EXPECT_EQ(Outcome("unavailable"), 1u);
  ASSERT_TRUE(engine_.SetPolicies(Policies(FailureMode::kDeny)).ok());
  EXPECT_EQ(Keyed("order-1").status, 503);
  EXPECT_EQ(Drain(), 3) << "nothing charged";
}

// A record that cannot be written after the decision: the decision is answered all the same (it
// was charged), and the claim ends after in_progress, when a retry is decided again.
TEST_F(IdempotentCheckTest, AnAnswerThatCannotBeRecordedIsStillAnswered) {
  ClaimsOnly records(*records_);
  const Idempotency idempotent(records, metrics_, Replayable);
  const http_api::Reply first = Post(kBody, {{"Idempotency-Key", "order-1"}}, &idempotent);
  EXPECT_EQ(first.status, 200);
  EXPECT_FALSE(first.headers.Get("Caudal-Degraded").has_value());
  EXPECT_EQ(Post(kBody, {{"Idempotency-Key", "order-1"}}, &idempotent).status, 409);
  clock_.Advance(seconds(5));
  EXPECT_EQ(Post(kBody, {{"Idempotency-Key", "order-1"}}, &idempotent).status, 200);
  EXPECT_EQ(Drain(), 1) << "charged twice: no record said the first was decided";
}

}  // namespace
}  // namespace caudal::idempotency
