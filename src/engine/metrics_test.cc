#include "caudal/metrics.h"

#include <gtest/gtest.h>

namespace caudal {
namespace {

TEST(Metrics, RendersPrometheusText) {
  Metrics m;
  m.ForPolicy("per-key").allowed += 3;
  m.ForPolicy("per-key").denied += 1;
  m.ForPolicy("per-key").fail_open += 2;
  m.ObserveDecision(Micros(80));
  m.ObserveDecision(Micros(2'000'000));
  m.CountStoreError(StatusCode::kUnavailable);
  m.CountReload(true);
  m.CountReload(false);
  m.CountHttpResponse(429);
  m.CountHttpResponse(99);
  const std::string text = m.RenderPrometheus();
  for (const char* line : {
           "caudal_decisions_total{policy=\"per-key\",outcome=\"allowed\"} 3\n",
           "caudal_decisions_total{policy=\"per-key\",outcome=\"denied\"} 1\n",
           "caudal_failure_mode_decisions_total{policy=\"per-key\",mode=\"allow\"} 2\n",
           "caudal_decision_duration_seconds_bucket{le=\"0.000050\"} 0\n",
           "caudal_decision_duration_seconds_bucket{le=\"0.000100\"} 1\n",
           "caudal_decision_duration_seconds_bucket{le=\"1.000000\"} 1\n",
           "caudal_decision_duration_seconds_bucket{le=\"+Inf\"} 2\n",
           "caudal_decision_duration_seconds_sum 2.000080\n",
           "caudal_decision_duration_seconds_count 2\n",
           "caudal_store_errors_total{code=\"UNAVAILABLE\"} 1\n",
           "caudal_config_reloads_total{result=\"success\"} 1\n",
           "caudal_config_reloads_total{result=\"failure\"} 1\n",
           "caudal_http_responses_total{code=\"429\"} 1\n",
           "# TYPE caudal_store_duration_seconds histogram\n",
       }) {
    EXPECT_NE(text.find(line), std::string::npos) << line << "\n" << text;
  }
  EXPECT_EQ(&m.ForPolicy("per-key"), &m.ForPolicy("per-key"));
}

}  // namespace
}  // namespace caudal
