// RLQS's pure parts: the report's two wire forms (rlqs_wire.h), the bucket mapping
// (rlqs_buckets.h) and the prepaid ledger (rlqs_ledger.h), whose bound is checked against a model
// of Envoy's filter that spends every token its assignments allow.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <string>

#include "envoy/rlqs_buckets.h"
#include "envoy/rlqs_ledger.h"
#include "envoy/rlqs_wire.h"
#include "envoy/service/rate_limit_quota/v3/rlqs.pb.h"

namespace caudal::envoy {
namespace {

namespace pb = ::envoy::service::rate_limit_quota::v3;
using std::chrono::milliseconds;
using std::chrono::seconds;
constexpr Micros kSecond = seconds(1);

pb::RateLimitQuotaUsageReports ListReport(std::string domain,
                                          std::vector<std::pair<RlqsBucketId, uint64_t>> usages) {
  pb::RateLimitQuotaUsageReports r;
  r.set_domain(std::move(domain));
  for (const auto& [bucket, allowed] : usages) {
    auto* u = r.add_bucket_quota_usages();
    for (const auto& [k, v] : bucket) (*u->mutable_bucket_id()->mutable_bucket())[k] = v;
    u->set_num_requests_allowed(allowed);
    u->set_num_requests_denied(allowed / 2);
    u->mutable_time_elapsed()->set_seconds(5);
  }
  return r;
}

// The map form, spelled out from its field numbers and wire types: each element of field 2 is a
// map entry, key (1, varint) then value (2, a BucketQuotaUsage).
std::string MapReport(const pb::RateLimitQuotaUsageReports& list, bool last_report) {
  std::string out;
  auto varint = [](std::string& s, uint64_t v) {
    while (v >= 0x80) {
      s.push_back(static_cast<char>((v & 0x7f) | 0x80));
      v >>= 7;
    }
    s.push_back(static_cast<char>(v));
  };
  auto delimited = [&](std::string& s, int field, const std::string& bytes) {
    varint(s, static_cast<uint64_t>(field << 3 | 2));
    varint(s, bytes.size());
    s += bytes;
  };
  delimited(out, 1, list.domain());
  uint64_t key = 0x9e3779b97f4a7c15ull;
  for (const auto& u : list.bucket_quota_usages()) {
    std::string value = u.SerializeAsString();
    if (last_report) delimited(value, 5, std::string("\x08\x01", 2));  // a Timestamp
    std::string entry;
    varint(entry, 1 << 3 | 0);
    varint(entry, key++);
    delimited(entry, 2, value);
    delimited(out, 2, entry);
  }
  return out;
}

const RlqsBucketId kAcme = {{"name", "per-tenant"}, {"tenant", "acme"}};
const RlqsBucketId kInitech = {{"name", "per-tenant"}, {"tenant", "initech"}};

TEST(RlqsWire, ReadsTheListFormEveryReleasedEnvoySends) {
  const auto r =
      ParseRlqsReport(ListReport("envoy", {{kAcme, 8}, {kInitech, 3}}).SerializeAsString(), 100);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->domain, "envoy");
  EXPECT_EQ(r->schema, RlqsSchema::kList);
  ASSERT_EQ(r->usages.size(), 2u);
  EXPECT_EQ(r->usages[0].bucket, kAcme);
  EXPECT_EQ(r->usages[0].allowed, 8u);
  EXPECT_EQ(r->usages[0].denied, 4u);
  EXPECT_EQ(r->usages[0].time_elapsed, seconds(5));
  EXPECT_EQ(r->usages[1].bucket, kInitech);
}

TEST(RlqsWire, ReadsTheMapFormToo) {
  const auto list = ListReport("envoy", {{kAcme, 8}, {kInitech, 3}});
  for (bool last_report : {false, true}) {
    const auto r = ParseRlqsReport(MapReport(list, last_report), 100);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(r->schema, RlqsSchema::kMap);
    EXPECT_EQ(r->domain, "envoy");
    ASSERT_EQ(r->usages.size(), 2u);
    EXPECT_EQ(r->usages[0].bucket, kAcme);
    EXPECT_EQ(r->usages[0].allowed, 8u);
    EXPECT_EQ(r->usages[1].bucket, kInitech);
    EXPECT_EQ(r->usages[1].denied, 1u);
  }
}

TEST(RlqsWire, AReportWithNoUsageIsEmptyInEitherForm) {
  const auto r = ParseRlqsReport(ListReport("envoy", {}).SerializeAsString(), 100);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->schema, RlqsSchema::kNone);
  EXPECT_TRUE(r->usages.empty());
}

TEST(RlqsWire, RefusesWhatIsMalformedNamingIt) {
  auto refused = [](const std::string& bytes, StatusCode code, std::string_view says) {
    SCOPED_TRACE(says);
    const auto r = ParseRlqsReport(bytes, 3);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), code);
    EXPECT_NE(r.status().message().find(says), std::string::npos) << r.status().message();
  };
  refused(
      "\x0a\x05"
      "ab",
      StatusCode::kInvalidArgument, "not a RateLimitQuotaUsageReports");
  auto empty_id = ListReport("envoy", {{kAcme, 1}});
  empty_id.mutable_bucket_quota_usages(0)->mutable_bucket_id()->clear_bucket();
  refused(empty_id.SerializeAsString(), StatusCode::kInvalidArgument, "no BucketId");
  auto no_id = ListReport("envoy", {{kAcme, 1}});
  no_id.mutable_bucket_quota_usages(0)->clear_bucket_id();
  refused(no_id.SerializeAsString(), StatusCode::kInvalidArgument, "no BucketId");
  refused(ListReport("envoy", {{{{"name", ""}}, 1}}).SerializeAsString(),
          StatusCode::kInvalidArgument, "1 to 256 bytes");
  refused(ListReport("envoy", {{kAcme, 1}, {kAcme, 2}}).SerializeAsString(),
          StatusCode::kInvalidArgument, "reported twice");
  refused(ListReport("envoy", {{kAcme, 1}, {kInitech, 1}, {{{"a", "1"}}, 1}, {{{"a", "2"}}, 1}})
              .SerializeAsString(),
          StatusCode::kResourceExhausted, "more than 3 buckets");
  auto bad_time = ListReport("envoy", {{kAcme, 1}});
  bad_time.mutable_bucket_quota_usages(0)->mutable_time_elapsed()->set_seconds(-1);
  refused(bad_time.SerializeAsString(), StatusCode::kInvalidArgument, "time_elapsed");
  // Text that is not UTF-8, in the domain or a BucketId: refused here, never logged by protobuf.
  // Spelled out as bytes: protobuf's own writer would log them.
  refused(std::string("\x0a\x04"
                      "env\xff",
                      6),
          StatusCode::kInvalidArgument, "domain: not valid UTF-8");
  const std::string entry = std::string(
      "\x0a\x06"
      "tenant"
      "\x12\x02"
      "\xc3(",
      12);
  const std::string id = std::string("\x0a") + static_cast<char>(entry.size()) + entry;
  const std::string usage = std::string("\x0a") + static_cast<char>(id.size()) + id;
  refused(std::string("\x0a\x05"
                      "envoy\x12",
                      8) +
              static_cast<char>(usage.size()) + usage,
          StatusCode::kInvalidArgument, "not valid UTF-8");
  // The two forms in one message.
  const auto list = ListReport("envoy", {{kAcme, 1}}).SerializeAsString();
  const auto map = MapReport(ListReport("", {{kInitech, 1}}), false);
  refused(list + map.substr(2), StatusCode::kInvalidArgument, "mixes the map and the list");
}

TEST(RlqsWire, OrdersABucketIdsEntriesSoThatOrderDoesNotMatter) {
  auto r = ListReport("envoy", {{kAcme, 1}});
  const auto a = ParseRlqsReport(r.SerializeAsString(), 10);
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->usages[0].bucket, kAcme);  // sorted by key, whatever the wire order
  EXPECT_EQ(RlqsBucketText(kAcme), "{name=per-tenant, tenant=acme}");
}

RlqsConfig Config() {
  RlqsConfig c;
  c.domains.push_back(
      {.domain = "envoy",
       .buckets = {{.match = {{"name", "vip"}},
                    .policy = "vip",
                    .identity = {{"tenant", "tenant"}}},
                   {.match = {{"name", "per-tenant"}},
                    .policy = "per-tenant",
                    .identity = {{"tenant", "tenant"}}},
                   {.match = {}, .policy = "per-path", .identity = {{"path", "path"}}}},
       .no_match = RlqsNoMatch::kDenyAll});
  return c;
}

TEST(RlqsBuckets, TheFirstRuleThatMatchesAndFindsItsIdentityMaps) {
  const RlqsBuckets buckets(Config());
  const RlqsDomainConfig* d = buckets.Domain("envoy");
  ASSERT_NE(d, nullptr);
  EXPECT_EQ(buckets.Domain("other"), nullptr);
  const RlqsTarget t = buckets.Map(*d, kAcme);
  ASSERT_NE(t.rule, nullptr);
  EXPECT_EQ(t.rule->policy, "per-tenant");
  ASSERT_EQ(t.descriptors.size(), 1u);
  EXPECT_EQ(t.descriptors[0].name, "tenant");
  EXPECT_EQ(t.descriptors[0].value, "acme");
  // `{}` matches any BucketId holding the keys its identity takes.
  const RlqsTarget any = buckets.Map(*d, {{"name", "x"}, {"path", "/a"}});
  ASSERT_NE(any.rule, nullptr);
  EXPECT_EQ(any.rule->policy, "per-path");
  // A matching rule whose identity key is missing, or whose value no identity can take, passes
  // on to the next; none left is no match.
  EXPECT_EQ(buckets.Map(*d, {{"name", "per-tenant"}}).rule, nullptr);
  EXPECT_EQ(buckets.Map(*d, {{"name", "per-tenant"}, {"tenant", "a\x01"}}).rule, nullptr);
  const RlqsTarget falls = buckets.Map(*d, {{"name", "vip"}, {"path", "/b"}});
  ASSERT_NE(falls.rule, nullptr);
  EXPECT_EQ(falls.rule->policy, "per-path");
}

// The BucketIds Envoy's own filter tests build: a static `name: prod` and two values from the
// request (`environment`, `group`); a value that is empty is left out of the BucketId.
TEST(RlqsBuckets, MapsTheBucketIdsEnvoysFilterTestsBuild) {
  RlqsConfig c;
  c.domains.push_back({.domain = "cloud_12345_67890_rlqs",
                       .buckets = {{.match = {{"name", "prod"}},
                                    .policy = "per-group",
                                    .identity = {{"env", "environment"}, {"group", "group"}}}},
                       .no_match = RlqsNoMatch::kDenyAll});
  const RlqsBuckets buckets(std::move(c));
  const RlqsDomainConfig& d = *buckets.Domain("cloud_12345_67890_rlqs");
  // Parsed reports sort their entries; the mapping reads them by key, whatever their order.
  RlqsBucketId id = {{"environment", "staging"}, {"group", "envoy"}, {"name", "prod"}};
  const RlqsTarget t = buckets.Map(d, id);
  ASSERT_NE(t.rule, nullptr);
  ASSERT_EQ(t.descriptors.size(), 2u);
  EXPECT_EQ(t.descriptors[0].name, "env");
  EXPECT_EQ(t.descriptors[0].value, "staging");
  EXPECT_EQ(t.descriptors[1].name, "group");
  EXPECT_EQ(t.descriptors[1].value, "envoy");
  // `group` empty in the request: Envoy leaves it out, and no identity can be made.
  EXPECT_EQ(buckets.Map(d, {{"environment", "staging"}, {"name", "prod"}}).rule, nullptr);
  // Another static name is another bucket.
  EXPECT_EQ(buckets.Map(d, {{"environment", "staging"}, {"group", "envoy"}, {"name", "dev"}}).rule,
            nullptr);
}

// Envoy's filter, as rlqs_ledger.h describes it, spending every token it may.
struct EnvoyModel {
  std::optional<RlqsStrategy> active;
  Micros expiry{0};
  double tokens = 0;
  Micros last{0};
  int64_t admitted = 0;

  void Receive(const RlqsAssignment& a, Micros now) {
    Spend(now);
    const bool same = active && now < expiry && active->kind == a.strategy.kind &&
                      active->bucket.max_tokens == a.strategy.bucket.max_tokens &&
                      active->bucket.tokens_per_fill == a.strategy.bucket.tokens_per_fill;
    if (!same) {
      active = a.strategy;
      tokens = static_cast<double>(a.strategy.bucket.max_tokens);  // starts full
    }
    expiry = now + Micros(a.ttl.count() / 1'000'000 * 1'000'000);  // whole seconds
    last = now;
  }
  // Admits every request its bucket allows up to `now`, each as soon as a token is there: the
  // bucket never fills past M again, so nothing refilled is lost to the cap.
  void Spend(Micros now) {
    if (!active || active->kind != RlqsStrategy::Kind::kTokenBucket) {
      last = now;
      return;
    }
    const Micros until = std::min(now, expiry);
    if (until > last) {
      const auto& b = active->bucket;
      tokens += static_cast<double>(b.tokens_per_fill) *
                static_cast<double>((until - last).count()) /
                static_cast<double>(b.fill_interval.count());
    }
    const auto whole = static_cast<int64_t>(tokens + 1e-9);
    admitted += whole;
    tokens -= static_cast<double>(whole);
    last = std::max(last, until);
    if (now > last) last = now;
  }
};

TEST(RlqsLedger, ATokenBucketIsWholeSecondsAndNeverFasterThanItsRate) {
  auto b = TokenBucketFor({.count = 100, .period = seconds(60)}, milliseconds(250));
  ASSERT_TRUE(b);
  EXPECT_EQ(b->fill_interval, seconds(60));
  EXPECT_EQ(b->tokens_per_fill, 100);
  EXPECT_EQ(b->max_tokens, 1);
  b = TokenBucketFor({.count = 1000, .period = milliseconds(100)}, milliseconds(250));
  ASSERT_TRUE(b);
  EXPECT_EQ(b->fill_interval, kSecond);
  EXPECT_EQ(b->tokens_per_fill, 10'000);
  EXPECT_EQ(b->max_tokens, 2'500);
  b = TokenBucketFor({.count = 7, .period = milliseconds(1500)}, Micros(0));
  ASSERT_TRUE(b);  // 7 per 1.5 s: 9 per 2 s, rounded down (9.33)
  EXPECT_EQ(b->fill_interval, seconds(2));
  EXPECT_EQ(b->tokens_per_fill, 9);
  EXPECT_FALSE(TokenBucketFor({.count = 0, .period = kSecond}, kSecond));
  b = TokenBucketFor({.count = int64_t{1} << 40, .period = kSecond}, kSecond);
  ASSERT_TRUE(b);
  EXPECT_EQ(b->tokens_per_fill, 4'294'967'295);
}

TEST(RlqsLedger, RunsAtMostOneCreditAheadOfWhatIsPaid) {
  RlqsLedger ledger(1);
  const Micros t0 = seconds(100);
  const RlqsRate ten{.count = 10, .period = kSecond};
  // No rate: deny.
  auto a = ledger.Assign(t0, std::nullopt, seconds(10), seconds(3), Micros(0));
  EXPECT_EQ(a.strategy.kind, RlqsStrategy::Kind::kDenyAll);
  EXPECT_EQ(a.ttl, seconds(3));
  // Nothing paid yet: the credit alone (10/s over 10 s) covers one token and 9.9 s, so 9 s.
  a = ledger.Assign(t0, ten, seconds(10), seconds(3), Micros(0));
  ASSERT_EQ(a.strategy.kind, RlqsStrategy::Kind::kTokenBucket);
  EXPECT_FALSE(a.extends);
  EXPECT_EQ(a.strategy.bucket.max_tokens, 1);
  EXPECT_EQ(a.strategy.bucket.tokens_per_fill, 10);
  EXPECT_EQ(a.strategy.bucket.fill_interval, kSecond);
  EXPECT_EQ(a.ttl, seconds(9));
  EXPECT_EQ(ledger.committed(), 91);
  // A second later, that second paid: extended, 9 s from now (what is paid and the credit
  // cover 10.9 s from t0).
  ledger.Pay(0, 10);
  a = ledger.Assign(t0 + kSecond, ten, seconds(10), seconds(3), Micros(0));
  EXPECT_TRUE(a.extends);
  EXPECT_EQ(a.ttl, seconds(9));
  EXPECT_EQ(ledger.committed(), 101);
  EXPECT_LE(ledger.committed(), ledger.paid(0) + 100);
  // Nothing more paid for long: the credit runs out and the end stops moving.
  a = ledger.Assign(t0 + seconds(5), ten, seconds(10), seconds(3), Micros(0));
  EXPECT_TRUE(a.extends);
  EXPECT_EQ(a.ttl, seconds(5));  // still t0 + 10 s
  // A rate a twentieth above keeps the bucket; a lower one replaces it.
  a = ledger.Assign(t0 + seconds(5), RlqsRate{.count = 104, .period = seconds(10)}, seconds(10),
                    seconds(3), Micros(0));
  EXPECT_TRUE(a.extends);
  a = ledger.Assign(t0 + seconds(5), RlqsRate{.count = 99, .period = seconds(10)}, seconds(10),
                    seconds(3), Micros(0));
  EXPECT_FALSE(a.extends);
  EXPECT_LE(ledger.committed(), ledger.paid(0) + 99);
}

TEST(RlqsLedger, ASlowerBucketThatEnvoyWouldTakeForTheActiveOneIsToldApart) {
  RlqsLedger ledger(1);
  ledger.Pay(0, 1000);
  // 60 per minute: F = 60 per 60 s.
  auto a = ledger.Assign(Micros(0), RlqsRate{.count = 60, .period = seconds(60)}, seconds(5),
                         seconds(5), Micros(0));
  ASSERT_EQ(a.strategy.kind, RlqsStrategy::Kind::kTokenBucket);
  const int64_t m = a.strategy.bucket.max_tokens;
  // 60 per 61 s is F = 60 per 61 s: Envoy compares M and F only, so the slower bucket differs
  // in its burst, and replaces the active one.
  a = ledger.Assign(kSecond, RlqsRate{.count = 60, .period = seconds(61)}, seconds(5), seconds(5),
                    Micros(0));
  EXPECT_FALSE(a.extends);
  EXPECT_EQ(a.strategy.bucket.fill_interval, seconds(61));
  EXPECT_NE(a.strategy.bucket.max_tokens, m);
}

TEST(RlqsLedger, BlanketsExpiryAndKeepingTheLast) {
  RlqsLedger ledger(2);
  ledger.Pay(0, 100);
  ledger.Pay(1, 50);
  auto a = ledger.Assign(Micros(0), RlqsRate{.count = 10, .period = kSecond}, seconds(4),
                         seconds(4), Micros(0));
  ASSERT_EQ(a.strategy.kind, RlqsStrategy::Kind::kTokenBucket);
  EXPECT_EQ(a.ttl, seconds(4));  // the least paid (50) covers 4.9 s; at most 4
  const auto kept = ledger.KeepActive(seconds(1), seconds(7));
  ASSERT_TRUE(kept);
  EXPECT_TRUE(kept->extends);
  EXPECT_EQ(kept->ttl, seconds(7));
  const auto expired = ledger.ExpireNow(seconds(2));
  EXPECT_EQ(expired.ttl, Micros(0));
  EXPECT_EQ(expired.strategy.kind, RlqsStrategy::Kind::kTokenBucket);
  EXPECT_FALSE(ledger.KeepActive(seconds(3), seconds(7)));  // nothing active
  a = ledger.Blanket(seconds(3), RlqsStrategy::Kind::kAllowAll, milliseconds(2500));
  EXPECT_EQ(a.ttl, seconds(2));
  EXPECT_FALSE(a.extends);
  a = ledger.Blanket(seconds(4), RlqsStrategy::Kind::kAllowAll, seconds(2));
  EXPECT_TRUE(a.extends);
}

// Whatever the grants, rates and times, an Envoy spending all its assignments allow never
// admits more than the least that was paid plus one credit: the largest rate it was given over
// the time to live.
TEST(RlqsLedger, AnEnvoySpendingAllItMayNeverAdmitsMoreThanPaidAndOneCredit) {
  std::mt19937_64 rng(7);
  for (int run = 0; run < 200; ++run) {
    const size_t limits = 1 + rng() % 3;
    RlqsLedger ledger(limits);
    EnvoyModel envoy;
    int64_t credit = 0;
    Micros now = seconds(1000);
    auto least = [&] {
      int64_t l = ledger.paid(0);
      for (size_t k = 1; k < limits; ++k) l = std::min(l, ledger.paid(k));
      return l;
    };
    for (int step = 0; step < 200; ++step) {
      now += milliseconds(static_cast<int64_t>(rng() % 3000));
      envoy.Spend(now);
      for (size_t k = 0; k < limits; ++k) ledger.Pay(k, static_cast<int64_t>(rng() % 40));
      const int64_t count = static_cast<int64_t>(rng() % 30);
      const Micros period = milliseconds(500 + static_cast<int64_t>(rng() % 5000));
      const Micros ttl = seconds(1 + static_cast<int64_t>(rng() % 8));
      const RlqsAssignment a =
          ledger.Assign(now, count == 0 ? std::nullopt : std::optional(RlqsRate{count, period}),
                        ttl, seconds(2), milliseconds(static_cast<int64_t>(rng() % 2000)));
      if (a.strategy.kind == RlqsStrategy::Kind::kTokenBucket) {
        const auto& b = a.strategy.bucket;
        credit = std::max(credit, b.tokens_per_fill * ttl.count() / b.fill_interval.count());
      }
      envoy.Receive(a, now);
      envoy.Spend(now);
      ASSERT_LE(envoy.admitted, least() + credit) << "run " << run << " step " << step;
      ASSERT_LE(ledger.committed(), least() + credit) << "run " << run << " step " << step;
    }
    envoy.Spend(now + seconds(100));  // to the end of its last assignment
    ASSERT_LE(envoy.admitted, least() + credit) << "run " << run;
  }
}

// And it admits most of it: paid steadily at the rate it is assigned, an Envoy spends nearly all.
TEST(RlqsLedger, PaidSteadilyAnEnvoySpendsNearlyAllOfIt) {
  RlqsLedger ledger(1);
  EnvoyModel envoy;
  Micros now = seconds(10);
  ledger.Pay(0, 50);  // a first grant: half a 10 s ttl at 10/s
  for (int report = 0; report < 60; ++report) {
    envoy.Receive(ledger.Assign(now, RlqsRate{.count = 10, .period = kSecond}, seconds(10),
                                seconds(10), milliseconds(500)),
                  now);
    now += seconds(1);
    envoy.Spend(now);
    ledger.Pay(0, 10);  // the next grant: a second of 10/s
  }
  envoy.Spend(now + seconds(100));
  EXPECT_LE(envoy.admitted, ledger.paid(0) + 100);  // one credit: 10/s over 10 s
  EXPECT_GE(envoy.admitted, ledger.paid(0) * 9 / 10) << envoy.admitted << " of " << ledger.paid(0);
}

}  // namespace
}  // namespace caudal::envoy
