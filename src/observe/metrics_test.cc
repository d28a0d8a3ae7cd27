#include "observe/metrics.h"

#include <gtest/gtest.h>

#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "common/cat.h"

namespace caudal {
namespace {

// Every family of `text`, by name, in order of their # TYPE lines.
std::vector<std::string> Families(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("# TYPE ", 0) == 0) out.push_back(line.substr(7, line.find(' ', 7) - 7));
  }
  return out;
}

// The label names of a series line (`name{a="x",b="y"} 1`), in order; values may hold escapes.
std::vector<std::string> LabelNames(const std::string& line) {
  std::vector<std::string> names;
  const size_t open = line.find('{');
  if (open == std::string::npos || open > line.find(' ')) return names;
  for (size_t at = open + 1; line[at - 1] != '}';) {
    const size_t eq = line.find('=', at);
    names.push_back(line.substr(at, eq - at));
    at = eq + 2;  // past ="
    while (line[at] != '"') at += line[at] == '\\' ? 2 : 1;
    at += 2;  // past the quote and the comma or the brace
  }
  return names;
}

// A Metrics with every family counted at least once.
void CountEverything(Metrics& m) {
  PolicyCounters& c = m.ForPolicy(Api::kRls, "d.key\"odd\\\nvalue");
  c.allowed += 1;
  c.hits.total_hits += 1;
  m.ForPolicy(Api::kHttp, "per-key").denied += 1;
  m.ObserveDecision(Api::kHttp, Micros(80));
  m.ObserveStore(Micros(80));
  m.CountStoreError(StatusCode::kUnavailable);
  m.SetStoreBreaker(1);
  m.SetNodeBreaker("127.0.0.1:7000", BreakerState::kHalfOpen, 2);
  m.CountOverLimitCacheHit();
  m.Add(MetricId::kDetailedMetricOverflow);
  m.CountReload(true);
  m.CountHttpResponse(200);
  m.CountTlsHandshakeFailure(TlsFailure::kClosed);
  m.Series(MetricId::kAdminChanges, {"set_override"}) += 1;
  m.Series(MetricId::kLeaseRequests, {"lease"}).fetch_add(1);
  m.Series(MetricId::kShareAllotted, {"p"}).store(1);
  m.Series(MetricId::kShareIdentities, {"p"}).store(1);
  m.Series(MetricId::kHoldReleases, {"released"}).fetch_add(1);
  m.Series(MetricId::kIdempotencyKeys, {"replayed"}).fetch_add(1);
  m.Series(MetricId::kReservationSettles, {"settled"}).fetch_add(1);
  m.Series(MetricId::kUnitsAdmitted, {"p", "input_tokens"}).fetch_add(812);
  m.Set(MetricId::kRlqsStreams, 2);
  m.Set(MetricId::kRlqsBuckets, 3);
  m.Series(MetricId::kRlqsMessages, {"received"}).fetch_add(4);
  m.Series(MetricId::kRlqsActions, {"token_bucket"}).fetch_add(1);
  m.Series(MetricId::kRlqsRefused, {"malformed"}).fetch_add(1);
}

TEST(Metrics, WritesEveryRowOfTheTableInItsOrderWithItsHelpAndType) {
  Metrics m;
  const std::string text = m.RenderPrometheus();
  std::vector<std::string> names;
  for (const MetricDef& def : kMetricTable) {
    names.emplace_back(def.name);
    EXPECT_NE(text.find(std::string("# HELP ").append(def.name).append(" ").append(def.help)),
              std::string::npos)
        << def.name;
    EXPECT_NE(text.find(std::string("# TYPE ")
                            .append(def.name)
                            .append(" ")
                            .append(MetricTypeName(def.type))
                            .append("\n")),
              std::string::npos)
        << def.name;
  }
  EXPECT_EQ(Families(text), names);
  EXPECT_EQ(std::set<std::string>(names.begin(), names.end()).size(), names.size()) << "unique";
}

// Each series line names its family's row and carries the row's labels in order (a histogram's
// buckets add le), so a row's labels are the ones operators see.
TEST(Metrics, EverySeriesCarriesItsRowsNameAndLabels) {
  Metrics m;
  CountEverything(m);
  const std::string text = m.RenderPrometheus();
  std::istringstream in(text);
  const MetricDef* def = nullptr;
  std::set<std::string> seen;
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("# TYPE ", 0) == 0) {
      const std::string name = line.substr(7, line.find(' ', 7) - 7);
      def = nullptr;
      for (const MetricDef& d : kMetricTable) {
        if (d.name == name) def = &d;
      }
      ASSERT_NE(def, nullptr) << line;
      continue;
    }
    if (line.rfind("#", 0) == 0) continue;
    ASSERT_NE(def, nullptr) << line;
    std::string name = line.substr(0, line.find_first_of("{ "));
    std::vector<std::string> want(def->labels.begin(), def->labels.begin() + def->LabelCount());
    if (def->type == MetricType::kHistogram) {
      for (const char* suffix : {"_bucket", "_sum", "_count"}) {
        if (name == std::string(def->name) + suffix) name = def->name;
      }
      if (line.find("_bucket") != std::string::npos) want.push_back("le");
    }
    EXPECT_EQ(name, def->name) << line;
    EXPECT_EQ(LabelNames(line), want) << line;
    seen.insert(name);
  }
  EXPECT_EQ(seen.size(), kMetricTable.size()) << "every row has a series once counted\n" << text;
}

TEST(Metrics, RowsWithoutLabelsAreCountedAndSetByTheirId) {
  Metrics m;
  m.Add(MetricId::kOverLimitCacheHits);
  m.CountOverLimitCacheHit();
  m.Add(MetricId::kDetailedMetricOverflow, 5);
  m.SetStoreBreaker(2);
  EXPECT_EQ(m.Value(MetricId::kOverLimitCacheHits), 2u);
  EXPECT_EQ(m.StoreBreaker(), 2);
  m.Set(MetricId::kStoreBreakerState, 0);
  EXPECT_EQ(m.StoreBreaker(), 0);
  const std::string text = m.RenderPrometheus();
  EXPECT_NE(text.find("\ncaudal_over_limit_cache_hits_total 2\n"), std::string::npos) << text;
  EXPECT_NE(text.find("\ncaudal_detailed_metric_overflow_total 5\n"), std::string::npos) << text;
  EXPECT_NE(text.find("\ncaudal_store_breaker_state 0\n"), std::string::npos) << text;
}

// A labelled row's series are found once and kept; each exists from its first lookup, and past
// the bound the rest share the "_overflow" series.
TEST(Metrics, ALabelledRowsSeriesAreFoundOnceAndBounded) {
  Metrics m;
  std::atomic<uint64_t>& success = m.Series(MetricId::kConfigReloads, {"success"});
  m.CountReload(true);
  success += 2;
  EXPECT_EQ(&m.Series(MetricId::kConfigReloads, {"success"}), &success);
  std::atomic<uint64_t>& grpc = m.Series(MetricId::kTlsHandshakeFailures, {"grpc", "timeout"});
  EXPECT_NE(&grpc, &m.Series(MetricId::kTlsHandshakeFailures, {"http", "timeout"}));
  grpc += 1;
  std::string text = m.RenderPrometheus();
  EXPECT_NE(text.find("caudal_config_reloads_total{result=\"success\"} 3\n"), std::string::npos);
  EXPECT_NE(text.find("caudal_config_reloads_total{result=\"failure\"} 0\n"), std::string::npos);
  EXPECT_NE(text.find("caudal_tls_handshake_failures_total{listener=\"grpc\",reason=\"timeout\"} "
                      "1\n"),
            std::string::npos)
      << text;

  // Two already: success and failure.
  for (size_t i = 2; i + 1 < Metrics::kMaxSeriesPerMetric; ++i) {
    m.Series(MetricId::kConfigReloads, {Cat("r", i)}) += 1;
  }
  std::atomic<uint64_t>& overflow = m.Series(MetricId::kConfigReloads, {"one_too_many"});
  EXPECT_EQ(&m.Series(MetricId::kConfigReloads, {"another"}), &overflow);
  EXPECT_NE(&m.Series(MetricId::kConfigReloads, {"r7"}), &overflow) << "known values keep theirs";
  overflow += 2;
  text = m.RenderPrometheus();
  EXPECT_NE(text.find("caudal_config_reloads_total{result=\"_overflow\"} 2\n"), std::string::npos);
  EXPECT_EQ(text.find("one_too_many"), std::string::npos);
  size_t series = 0;
  for (size_t at = 0; (at = text.find("\ncaudal_config_reloads_total{", at)) != std::string::npos;
       ++at) {
    ++series;
  }
  EXPECT_EQ(series, Metrics::kMaxSeriesPerMetric);
}

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

TEST(Metrics, CollectorsAddTheirRowsUntilTheirRegistrationEnds) {
  Metrics m;
  m.Add(MetricId::kRedisMoved, 2);  // counted here, and kept by two components
  std::atomic<uint64_t> a{5}, b{7};
  Metrics::Registration first = m.AddCollector([&a](Metrics::CollectedValues& rows) {
    rows[static_cast<size_t>(MetricId::kRedisMoved)] += a.load();
  });
  {
    Metrics::Registration second = m.AddCollector([&b](Metrics::CollectedValues& rows) {
      rows[static_cast<size_t>(MetricId::kRedisMoved)] += b.load();
    });
    EXPECT_EQ(m.Total(MetricId::kRedisMoved), 14u);
    EXPECT_NE(m.RenderPrometheus().find("\ncaudal_redis_moved_total 14\n"), std::string::npos);
    a = 6;
    EXPECT_NE(m.RenderPrometheus().find("\ncaudal_redis_moved_total 15\n"), std::string::npos)
        << "read at each rendering";
  }
  EXPECT_EQ(m.Total(MetricId::kRedisMoved), 8u) << "an ended registration is no longer read";
  Metrics::Registration moved = std::move(first);
  EXPECT_EQ(m.Total(MetricId::kRedisMoved), 8u) << "a moved registration stays registered once";
  moved.Reset();
  EXPECT_EQ(m.Total(MetricId::kRedisMoved), 2u);
  EXPECT_EQ(m.Value(MetricId::kRedisMoved), 2u);
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
