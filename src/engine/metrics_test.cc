#include "caudal/metrics.h"

#include <gtest/gtest.h>

#include <string>
#include <thread>
#include <vector>

namespace caudal {
namespace {

TEST(Metrics, RendersPrometheusText) {
  Metrics m;
  m.ForPolicy(Api::kHttp, "per-key").allowed += 3;
  m.ForPolicy(Api::kHttp, "per-key").denied += 1;
  m.ForPolicy(Api::kHttp, "per-key").fail_open += 2;
  m.ForPolicy(Api::kRls, "mongo_cps.database_users").denied += 4;
  m.ObserveDecision(Api::kHttp, Micros(80));
  m.ObserveDecision(Api::kHttp, Micros(2'000'000));
  m.ObserveDecision(Api::kRls, Micros(300));
  m.CountStoreError(StatusCode::kUnavailable);
  m.CountReload(true);
  m.CountReload(false);
  m.CountHttpResponse(429);
  m.CountHttpResponse(99);
  const std::string text = m.RenderPrometheus();
  for (const char* line : {
           "caudal_decisions_total{api=\"http\",policy=\"per-key\",outcome=\"allowed\"} 3\n",
           "caudal_decisions_total{api=\"http\",policy=\"per-key\",outcome=\"denied\"} 1\n",
           "caudal_decisions_total{api=\"rls\",policy=\"mongo_cps.database_users\",outcome="
           "\"denied\"} 4\n",
           "caudal_failure_mode_decisions_total{api=\"http\",policy=\"per-key\",mode=\"allow\"} "
           "2\n",
           "caudal_decision_duration_seconds_bucket{api=\"http\",le=\"0.000050\"} 0\n",
           "caudal_decision_duration_seconds_bucket{api=\"http\",le=\"0.000100\"} 1\n",
           "caudal_decision_duration_seconds_bucket{api=\"http\",le=\"1.000000\"} 1\n",
           "caudal_decision_duration_seconds_bucket{api=\"http\",le=\"+Inf\"} 2\n",
           "caudal_decision_duration_seconds_sum{api=\"http\"} 2.000080\n",
           "caudal_decision_duration_seconds_count{api=\"http\"} 2\n",
           "caudal_decision_duration_seconds_count{api=\"rls\"} 1\n",
           "caudal_decision_duration_seconds_count{api=\"cli\"} 0\n",
           "caudal_store_errors_total{code=\"UNAVAILABLE\"} 1\n",
           "caudal_config_reloads_total{result=\"success\"} 1\n",
           "caudal_config_reloads_total{result=\"failure\"} 1\n",
           "caudal_http_responses_total{code=\"429\"} 1\n",
           "# TYPE caudal_store_duration_seconds histogram\n",
       }) {
    EXPECT_NE(text.find(line), std::string::npos) << line << "\n" << text;
  }
  EXPECT_EQ(&m.ForPolicy(Api::kHttp, "per-key"), &m.ForPolicy(Api::kHttp, "per-key"));
  EXPECT_NE(&m.ForPolicy(Api::kHttp, "per-key"), &m.ForPolicy(Api::kRls, "per-key"));
}

TEST(Metrics, CountsFailedTlsHandshakesByReasonEveryReasonFromZero) {
  Metrics m;
  m.CountTlsHandshakeFailure(TlsFailure::kNoClientCertificate);
  m.CountTlsHandshakeFailure(TlsFailure::kTimeout);
  m.CountTlsHandshakeFailure(TlsFailure::kTimeout);
  const std::string text = m.RenderPrometheus();
  for (
      const char* line : {
          "# TYPE caudal_tls_handshake_failures_total counter\n",
          "caudal_tls_handshake_failures_total{listener=\"http\",reason=\"no_client_certificate\"} "
          "1\n",
          "caudal_tls_handshake_failures_total{listener=\"http\",reason=\"bad_client_"
          "certificate\"} 0\n",
          "caudal_tls_handshake_failures_total{listener=\"http\",reason=\"refused_by_client\"} 0\n",
          "caudal_tls_handshake_failures_total{listener=\"http\",reason=\"protocol\"} 0\n",
          "caudal_tls_handshake_failures_total{listener=\"http\",reason=\"closed\"} 0\n",
          "caudal_tls_handshake_failures_total{listener=\"http\",reason=\"timeout\"} 2\n",
      }) {
    EXPECT_NE(text.find(line), std::string::npos) << line << "\n" << text;
  }
}

TEST(Metrics, EscapesLabelValuesFromEnvoyConfigs) {
  Metrics m;
  m.ForPolicy(Api::kRls, "d.path_/a\"b\\c\nd").allowed += 1;
  EXPECT_NE(m.RenderPrometheus().find("policy=\"d.path_/a\\\"b\\\\c\\nd\""), std::string::npos)
      << m.RenderPrometheus();
}

TEST(Metrics, DetailedSeriesAreBoundedAndTheRestCountedTogether) {
  Metrics m;
  for (size_t i = 0; i < kMaxDetailedSeries; ++i) {
    m.ForDetailed(Api::kRls, "d.key_" + std::to_string(i)).allowed += 1;
  }
  // Known series keep their counters; new ones past the bound share the overflow row.
  EXPECT_EQ(m.ForDetailed(Api::kRls, "d.key_7").allowed.load(), 1u);
  PolicyCounters& a = m.ForDetailed(Api::kRls, "d.key_new1");
  PolicyCounters& b = m.ForDetailed(Api::kRls, "d.key_new2");
  EXPECT_EQ(&a, &b);
  a.allowed += 1;
  b.allowed += 1;
  const std::string text = m.RenderPrometheus();
  EXPECT_NE(
      text.find("caudal_decisions_total{api=\"rls\",policy=\"_overflow\",outcome=\"allowed\"} 2\n"),
      std::string::npos);
  EXPECT_NE(text.find("caudal_detailed_metric_overflow_total 2\n"), std::string::npos);
  EXPECT_EQ(text.find("d.key_new1"), std::string::npos);
}

TEST(Metrics, RendersTheReferencesHitStatisticsForEnvoyRulesOnly) {
  Metrics m;
  HitCounters& h = m.ForPolicy(Api::kRls, "rl.foo.baz_shady").hits;
  h.total_hits += 6;
  h.within_limit += 3;
  h.near_limit += 1;
  h.over_limit += 3;
  h.shadow_mode += 3;
  m.ForPolicy(Api::kHttp, "per-key").hits.total_hits += 1;  // never counted; never shown
  const std::string text = m.RenderPrometheus();
  for (
      const char* line : {
          "# TYPE caudal_rule_hits_total counter\n",
          "caudal_rule_hits_total{api=\"rls\",policy=\"rl.foo.baz_shady\",stat=\"total_hits\"} 6\n",
          "caudal_rule_hits_total{api=\"rls\",policy=\"rl.foo.baz_shady\",stat=\"within_limit\"} "
          "3\n",
          "caudal_rule_hits_total{api=\"rls\",policy=\"rl.foo.baz_shady\",stat=\"near_limit\"} 1\n",
          "caudal_rule_hits_total{api=\"rls\",policy=\"rl.foo.baz_shady\",stat=\"over_limit\"} 3\n",
          "caudal_rule_hits_total{api=\"rls\",policy=\"rl.foo.baz_shady\",stat=\"over_limit_with_"
          "local_cache\"} 0\n",
          "caudal_rule_hits_total{api=\"rls\",policy=\"rl.foo.baz_shady\",stat=\"shadow_mode\"} "
          "3\n",
      }) {
    EXPECT_NE(text.find(line), std::string::npos) << line << "\n" << text;
  }
  EXPECT_EQ(text.find("caudal_rule_hits_total{api=\"http\""), std::string::npos) << text;
}

// A stat key that carries request values may equal a rule's own (the reference's counters are
// found by name): both count in one series, which does not use up the detailed bound.
TEST(Metrics, ADetailedNameThatIsAPolicysSharesItsCounters) {
  Metrics m;
  PolicyCounters& rule = m.ForPolicy(Api::kRls, "d.key_value");
  EXPECT_EQ(&m.ForDetailed(Api::kRls, "d.key_value"), &rule);
  EXPECT_NE(&m.ForDetailed(Api::kHttp, "d.key_value"), &rule) << "another front end's";
  for (size_t i = 0; i + 1 < kMaxDetailedSeries; ++i) {
    m.ForDetailed(Api::kRls, "d.key_" + std::to_string(i));
  }
  // The HTTP one and these 999 make the bound: the rule's own name did not count.
  PolicyCounters& overflow = m.ForDetailed(Api::kRls, "d.key_last");
  EXPECT_EQ(&m.ForDetailed(Api::kRls, "d.key_next"), &overflow) << "past the bound";
  EXPECT_NE(&m.ForDetailed(Api::kRls, "d.key_998"), &overflow);
  EXPECT_EQ(&m.ForDetailed(Api::kRls, "d.key_value"), &rule);
  EXPECT_EQ(&m.ForPolicy(Api::kRls, "d.key_0"), &m.ForDetailed(Api::kRls, "d.key_0"));
}

// Past the bound, known names keep their series from every thread while new ones land in
// "_overflow", whose lookups are counted.
TEST(Metrics, DetailedLookupsFromManyThreadsAgree) {
  Metrics m;
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&m, t] {
      for (size_t i = 0; i < 2 * kMaxDetailedSeries; ++i) {
        m.ForDetailed(Api::kRls, "d.key_" + std::to_string((i * 7 + static_cast<size_t>(t)) %
                                                           (2 * kMaxDetailedSeries)))
            .allowed += 1;
      }
    });
  }
  for (std::thread& t : threads) t.join();
  uint64_t total = 0;
  size_t series = 0;
  for (size_t i = 0; i < 2 * kMaxDetailedSeries; ++i) {
    PolicyCounters& c = m.ForDetailed(Api::kRls, "d.key_" + std::to_string(i));
    if (&c == &m.ForDetailed(Api::kRls, "_overflow_probe")) continue;
    ++series;
    total += c.allowed.load();
  }
  EXPECT_EQ(series, kMaxDetailedSeries);
  const std::string text = m.RenderPrometheus();
  const std::string prefix =
      "caudal_decisions_total{api=\"rls\",policy=\"_overflow\",outcome=\"allowed\"} ";
  const size_t at = text.find(prefix);
  ASSERT_NE(at, std::string::npos) << text;
  const uint64_t overflowed = std::stoull(text.substr(at + prefix.size()));
  EXPECT_EQ(total + overflowed, 4 * 2 * kMaxDetailedSeries) << "every count landed somewhere";
}

TEST(Metrics, CountsMalformedRlsRequests) {
  Metrics m;
  EXPECT_NE(m.RenderPrometheus().find("\ncaudal_rls_malformed_requests_total 0\n"),
            std::string::npos);
  m.CountMalformedRlsRequest();
  m.CountMalformedRlsRequest();
  const std::string text = m.RenderPrometheus();
  EXPECT_NE(text.find("# TYPE caudal_rls_malformed_requests_total counter\n"
                      "caudal_rls_malformed_requests_total 2\n"),
            std::string::npos)
      << text;
}

}  // namespace
}  // namespace caudal
