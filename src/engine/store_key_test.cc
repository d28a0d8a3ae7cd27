#include "engine/store_key.h"

#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <vector>

#include "caudal/store/store.h"

namespace caudal {
namespace {

Limit Bucket100PerMinute() {
  return *Limit::Create(
      LimitSpec::Bucket(Algorithm::kTokenBucket, 100, {100, std::chrono::minutes(1)}));
}

// `key`, of policy "api" and identity "4:user2:u1" under `prefix`, read back.
void ExpectReadsBack(const std::string& key, const std::string& prefix) {
  const auto parts = store_key::ReadPolicy(key);
  ASSERT_TRUE(parts.has_value()) << key;
  EXPECT_EQ(parts->policy, "api");
  EXPECT_EQ(parts->prefix, prefix);
  EXPECT_EQ(parts->identity, "4:user2:u1");
  EXPECT_EQ(store_key::HashTag(key), "{4:user2:u1}");
}

TEST(StoreKey, APolicyKeyNamesItsLimitAndReadsBack) {
  const Limit l = Bucket100PerMinute();
  const std::string prefix = store_key::PolicyPrefix("api", 2, l);
  EXPECT_EQ(prefix, "caudal:api:2:tb100,1/600000:");
  const std::string key = store_key::Policy(prefix, "4:user2:u1");
  EXPECT_EQ(key, "caudal:api:2:tb100,1/600000:{4:user2:u1}");
  ExpectReadsBack(key, prefix);
  // Another limit of the same policy is another prefix, so another key.
  const Limit window =
      *Limit::Create(LimitSpec::Window(Algorithm::kFixedWindow, 100, std::chrono::minutes(1)));
  EXPECT_NE(store_key::PolicyPrefix("api", 2, window), prefix);
  EXPECT_EQ(store_key::PolicyPrefix("api", 0, window), "caudal:api:0:fw100,1/600000:");
}

// A grouped key: its member names the limit, its group the policy and identity, one Redis Cluster
// slot for all the identity's members; it reads back as a policy key, its prefix its own.
TEST(StoreKey, AGroupedKeyNamesItsLimitAsAMemberOfThePolicysGroupAndReadsBack) {
  const Limit l = Bucket100PerMinute();
  const std::string prefix = store_key::PolicyPrefix("api", 2, l, /*grouped=*/true);
  EXPECT_EQ(prefix, "#2:tb100,1/600000#caudal:api:");
  const std::string key = store_key::Policy(prefix, "4:user2:u1");
  EXPECT_EQ(key, "#2:tb100,1/600000#caudal:api:{4:user2:u1}");
  const std::optional<GroupedKey> grouped = ReadGroupedKey(key);
  ASSERT_TRUE(grouped.has_value());
  EXPECT_EQ(grouped->member, "2:tb100,1/600000");
  EXPECT_EQ(grouped->group, "caudal:api:{4:user2:u1}");
  ExpectReadsBack(key, prefix);
  EXPECT_NE(prefix, store_key::PolicyPrefix("api", 2, l)) << "and apart from the key of its own";
  // No grouped key is a policy key's spelling, nor any of these.
  for (std::string_view bad : {"#", "##caudal:api:{k}", "#m#caudal:api:k", "#m#caudal:api:{}",
                               "#2:tb#other:api:{k}", "#2:tb"}) {
    EXPECT_FALSE(ReadGroupedKey(bad).has_value() && store_key::ReadPolicy(bad).has_value()) << bad;
  }
  EXPECT_FALSE(ReadGroupedKey("#m#caudal:api:k").has_value()) << "a group has a hash tag";
  EXPECT_FALSE(ReadGroupedKey("##caudal:api:{k}").has_value()) << "a member has a name";
  EXPECT_FALSE(ReadGroupedKey("caudal:api:2:tb:{k}").has_value());
}

TEST(StoreKey, ACalendarWindowsKeyNamesItsUnitAndTimeZone) {
  const Limit madrid = *Limit::Create(
      LimitSpec::CalendarWindow(100, *Calendar::Create(CalendarUnit::kMonth, "Europe/Madrid")));
  const std::string prefix = store_key::PolicyPrefix("api", 0, madrid);
  EXPECT_EQ(prefix, "caudal:api:0:fw100,month@Europe/Madrid:");
  const std::string key = store_key::Policy(prefix, "k");
  const auto parts = store_key::ReadPolicy(key);
  ASSERT_TRUE(parts.has_value());
  EXPECT_EQ(parts->prefix, prefix);
  // Another zone, or the same nominal length from the epoch, is another key.
  EXPECT_NE(store_key::PolicyPrefix("api", 0,
                                    *Limit::Create(LimitSpec::CalendarWindow(
                                        100, Calendar::Utc(CalendarUnit::kMonth)))),
            prefix);
  EXPECT_NE(store_key::PolicyPrefix("api", 0,
                                    *Limit::Create(LimitSpec::Window(Algorithm::kFixedWindow, 100,
                                                                     std::chrono::hours(24 * 30)))),
            prefix);
}

TEST(StoreKey, OnlyPolicyKeysReadBack) {
  for (const std::string_view key :
       {"", "caudal:", "caudal:api", "caudal:api:0:tb1,1/1:", "caudal:api:0:tb1,1/1:{x",
        "other:api:0:tb1,1/1:{x}", "rls|token_bucket capacity=1 refill=1/1s|{1:d1:k1:v}",
        "local|fixed_window limit=1 window=1s|caudal:api:0:fw1,1/1000:{1:x}", "caudal{x}:a:"}) {
    EXPECT_FALSE(store_key::ReadPolicy(key).has_value()) << key;
  }
}

TEST(StoreKey, AnEnvoyKeyTagsTheDomainAndFirstEntryAndPrefixesEveryValue) {
  const Limit l = Bucket100PerMinute();
  const std::vector<std::string_view> one = {"key", "v"};
  EXPECT_EQ(store_key::Domain(l, "dom", one),
            "rls|token_bucket capacity=100 refill=100/1m|{3:dom3:key1:v}");
  const std::vector<std::string_view> two = {"a", "1", "b:", "{2}"};
  const std::string key = store_key::Domain(l, "d", two);
  EXPECT_EQ(key, "rls|token_bucket capacity=100 refill=100/1m|{1:d1:a1:1}2:b:3:{2}");
  EXPECT_EQ(store_key::HashTag(key), "{1:d1:a1:1}");
  // Length prefixes keep values that would spell alike apart.
  const std::vector<std::string_view> joined = {"a", "11:b"};
  const std::vector<std::string_view> split = {"a1", "1:b"};
  EXPECT_NE(store_key::Domain(l, "d", joined), store_key::Domain(l, "d", split));
}

TEST(StoreKey, ALocalKeyNamesTheLocalLimitBeforeTheSharedKey) {
  const Limit local =
      *Limit::Create(LimitSpec::Window(Algorithm::kFixedWindow, 10, std::chrono::seconds(1)));
  EXPECT_EQ(store_key::Local(local, "caudal:api:0:fw100,1/1000:{1:x}"),
            "local|fixed_window limit=10 window=1s|caudal:api:0:fw100,1/1000:{1:x}");
  EXPECT_FALSE(store_key::ReadPolicy(store_key::Local(local, "caudal:api:0:fw1,1/1:{1:x}")));
}

TEST(StoreKey, ReadFieldsReadsBackWhatTheKeyWasBuiltFrom) {
  const Limit l = Bucket100PerMinute();
  const std::vector<std::string_view> entries = {"a", "1", "b}:", "{2}"};
  const std::vector<std::string_view> want = {"d", "a", "1", "b}:", "{2}"};
  EXPECT_EQ(store_key::ReadFields(store_key::Domain(l, "d", entries)), want);
  std::string identity;
  store_key::AppendField(identity, "u:1");
  store_key::AppendField(identity, "");
  store_key::AppendField(identity, "10.0.0.0/8");
  const std::vector<std::string_view> values = {"u:1", "", "10.0.0.0/8"};
  EXPECT_EQ(store_key::ReadFields(store_key::Policy(store_key::PolicyPrefix("p", 0, l), identity)),
            values);
  // Malformed or truncated fields end the reading, never past the key.
  EXPECT_TRUE(store_key::ReadFields("no tag").empty());
  EXPECT_EQ(store_key::ReadFields("x{1:a99:b}"), std::vector<std::string_view>{"a"});
  EXPECT_EQ(store_key::ReadFields("x{1:a:b}"), std::vector<std::string_view>{"a"});
  EXPECT_TRUE(store_key::ReadFields("x{99999999999999999999999:a}").empty());
}

TEST(StoreKey, HashTagIsTheFirstBracedRun) {
  EXPECT_EQ(store_key::HashTag("a{b}c{d}"), "{b}");
  EXPECT_EQ(store_key::HashTag("no tag"), "");
  EXPECT_EQ(store_key::HashTag("open{only"), "");
}

}  // namespace
}  // namespace caudal
