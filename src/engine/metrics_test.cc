#include "caudal/metrics.h"

#include <gtest/gtest.h>

#include <string>

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

}  // namespace
}  // namespace caudal
