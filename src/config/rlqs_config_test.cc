// `rlqs:` as configs write it (docs/configuration.md, docs/envoy.md) and its errors, each naming
// the field and the line.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>

#include "caudal/config/config.h"
#include "common/cat.h"

namespace caudal {
namespace {

constexpr std::string_view kPolicies = R"(
policies:
  - name: per-tenant
    identity: [tenant]
    limits: [{algorithm: token_bucket, capacity: 100, refill: 100/1s}]
  - name: slots
    identity: [tenant]
    limits: [{algorithm: concurrency, limit: 10, hold: 30s}]
  - name: tokens
    identity: [tenant]
    limits: [{algorithm: token_bucket, capacity: 100, refill: 100/1s, dimension: input_tokens}]
  - name: trial
    identity: [tenant]
    shadow: true
    limits: [{algorithm: token_bucket, capacity: 100, refill: 100/1s}]
  - name: pair
    identity: [tenant, route]
    limits: [{algorithm: fixed_window, limit: 1000, window: 1m}]
)";

Result<Config> Rlqs(std::string_view rlqs) {
  return ParseConfig(Cat(kPolicies, "rlqs:\n", rlqs), "t.yaml");
}

TEST(RlqsConfig, ReadsTheIssuesShapeWithItsDefaults) {
  auto c = Rlqs(R"(  domains:
    - domain: envoy
      buckets:
        - match: {name: per-tenant}
          policy: per-tenant
          identity: {tenant: tenant}
        - match: {}
          policy: pair
          identity: {tenant: t, route: r}
      no_match: allow_all
)");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  ASSERT_EQ(c->rlqs.domains.size(), 1u);
  const RlqsDomainConfig& d = c->rlqs.domains[0];
  EXPECT_EQ(d.domain, "envoy");
  EXPECT_EQ(d.no_match, RlqsNoMatch::kAllowAll);
  ASSERT_EQ(d.buckets.size(), 2u);
  EXPECT_EQ(d.buckets[0].match,
            (std::vector<std::pair<std::string, std::string>>{{"name", "per-tenant"}}));
  EXPECT_EQ(d.buckets[0].policy, "per-tenant");
  EXPECT_TRUE(d.buckets[1].match.empty());
  EXPECT_EQ(d.buckets[1].identity.size(), 2u);
  EXPECT_EQ(c->rlqs.assignment_ttl, std::chrono::seconds(20));
  EXPECT_EQ(c->rlqs.abandon_after, std::chrono::seconds(60));
  EXPECT_EQ(c->rlqs.max_streams, 1000);
  // Without `rlqs`, nothing is served.
  auto none = ParseConfig(kPolicies, "t.yaml");
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->rlqs.domains.empty());
}

TEST(RlqsConfig, RefusesWhatCannotBeServedNamingTheField) {
  const std::pair<std::string_view, std::string_view> cases[] = {
      {"  domains: [{domain: envoy, buckets: [{match: {}, policy: nope, identity: {tenant: "
       "t}}]}]\n",
       "rlqs.domains[0].buckets[0].policy: \"nope\" is no policy of this config"},
      {"  domains: [{domain: envoy, buckets: [{match: {}, policy: slots, identity: {tenant: "
       "t}}]}]\n",
       "is a concurrency limit, which cannot be divided among Envoys"},
      {"  domains: [{domain: envoy, buckets: [{match: {}, policy: tokens, identity: {tenant: "
       "t}}]}]\n",
       "counts input_tokens, and Envoy's quota counts requests"},
      {"  domains: [{domain: envoy, buckets: [{match: {}, policy: trial, identity: {tenant: "
       "t}}]}]\n",
       "is in shadow mode"},
      {"  domains: [{domain: envoy, buckets: [{match: {}, policy: pair, identity: {tenant: "
       "t}}]}]\n",
       "identity descriptor \"route\" is not mapped from a BucketId key"},
      {"  domains: [{domain: envoy, buckets: [{match: {}, policy: per-tenant, identity: {user: "
       "u}}]}]\n",
       "\"user\" is not an identity descriptor of policy \"per-tenant\" (tenant)"},
      {"  domains: [{domain: envoy, buckets: [{match: {}, policy: per-tenant, identity: {}}]}]\n",
       "rlqs.domains[0].buckets[0].identity: expected a map such as {tenant: tenant}"},
      {"  domains: [{domain: e, buckets: []}, {domain: e, buckets: []}]\n",
       "rlqs.domains[1].domain: \"e\" is already domains[0]'s"},
      {"  domains: [{domain: e, buckets: [], no_match: maybe}]\n",
       "expected deny_all, allow_all or none (got \"maybe\")"},
      {"  domains: [{domain: e}]\n", "missing buckets"},
      {"  domains: []\n  assignment_ttl: 1s\n", "rlqs.assignment_ttl: expected between 2s and 1h"},
      {"  domains: []\n  max_streams: 0\n", "rlqs.max_streams"},
      {"  domains: []\n  colour: blue\n", "colour"},
  };
  for (const auto& [rlqs, says] : cases) {
    SCOPED_TRACE(rlqs);
    const auto c = Rlqs(rlqs);
    ASSERT_FALSE(c.ok());
    EXPECT_NE(c.status().message().find(says), std::string::npos) << c.status().message();
    EXPECT_NE(c.status().message().find("t.yaml:"), std::string::npos) << c.status().message();
  }
}

// docs/envoy.md's caudal side is a configuration caudal takes as written.
TEST(RlqsConfig, TheDocsExampleIsAValidConfiguration) {
  std::ifstream in(std::string(CAUDAL_SOURCE_DIR) + "/docs/envoy.md");
  std::stringstream text;
  text << in.rdbuf();
  const std::string doc = text.str();
  const size_t section = doc.find("### caudal's side");
  ASSERT_NE(section, std::string::npos);
  const size_t begin = doc.find("```yaml\n", section);
  ASSERT_NE(begin, std::string::npos);
  const size_t end = doc.find("```", begin + 8);
  const std::string yaml = doc.substr(begin + 8, end - begin - 8);
  ASSERT_NE(yaml.find("rlqs:"), std::string::npos);
  const auto c = ParseConfig(yaml, "envoy.md");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  ASSERT_EQ(c->rlqs.domains.size(), 1u);
  EXPECT_EQ(c->rlqs.domains[0].buckets[0].policy, "per-tenant");
  EXPECT_EQ(c->rlqs.assignment_ttl, std::chrono::seconds(20));
}

}  // namespace
}  // namespace caudal
