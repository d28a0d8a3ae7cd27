// What counting costs the request path, caudal's Metrics against prometheus-cpp (Debian's
// prometheus-cpp-dev) doing the same in the same run, and what rendering /metrics costs both.
//
// Per decision the engine counts one policy counter (found once per config and kept by
// pointer) and observes two latency histograms (the store's round trip, the decision's time):
// "decision" does all three; "counter" and "histogram" do one of each. One thread and two, both
// on the same series (one hot policy). prometheus-cpp's counter and histogram are found once too
// (Family::Add) and kept by reference, as its documentation advises.
//
// "render" builds the text of /metrics with kMaxDetailedSeries Envoy stat keys (each with its
// decisions, failure modes and hit statistics: 12 series) and the histograms; "serialize" is
// prometheus-cpp's text writer alone, from families it collected beforehand.
//
// At the end the program prints the time per operation of each, wall clock and CPU (the CPU
// figure holds when other work shares the cores), and the ratios prometheus-cpp / caudal, from
// the medians when run with --benchmark_repetitions.
#include <benchmark/benchmark.h>
#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>

#include <cstdio>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "observe/metrics.h"

namespace caudal::bench {
namespace {

// Latencies spread over the buckets (µs), the same sequence for both sides.
int64_t LatencyUs(uint64_t i) { return static_cast<int64_t>((i * 7919) % 3'000); }

struct Caudal {
  Metrics metrics;
  PolicyCounters* counters = &metrics.ForPolicy(Api::kHttp, "per-key");
};

std::vector<double> BoundsSeconds() {
  std::vector<double> out;
  for (int64_t us : LatencyHistogram::kBoundsUs) out.push_back(static_cast<double>(us) / 1e6);
  return out;
}

struct Prometheus {
  prometheus::Registry registry;
  prometheus::Family<prometheus::Counter>& decisions =
      prometheus::BuildCounter().Name("caudal_decisions_total").Help("h").Register(registry);
  prometheus::Family<prometheus::Counter>& shadow =
      prometheus::BuildCounter().Name("caudal_shadow_denials_total").Help("h").Register(registry);
  prometheus::Family<prometheus::Counter>& failure_mode =
      prometheus::BuildCounter()
          .Name("caudal_failure_mode_decisions_total")
          .Help("h")
          .Register(registry);
  prometheus::Family<prometheus::Counter>& hits =
      prometheus::BuildCounter().Name("caudal_rule_hits_total").Help("h").Register(registry);
  prometheus::Family<prometheus::Histogram>& decision_latency =
      prometheus::BuildHistogram()
          .Name("caudal_decision_duration_seconds")
          .Help("h")
          .Register(registry);
  prometheus::Family<prometheus::Histogram>& store_latency =
      prometheus::BuildHistogram()
          .Name("caudal_store_duration_seconds")
          .Help("h")
          .Register(registry);
  prometheus::Counter* allowed =
      &decisions.Add({{"api", "http"}, {"policy", "per-key"}, {"outcome", "allowed"}});
  prometheus::Histogram* decision = &decision_latency.Add({{"api", "http"}}, BoundsSeconds());
  prometheus::Histogram* store = &store_latency.Add({}, BoundsSeconds());
};

// Shared by the threads of a run: made before the first, kept for the program's life.
Caudal& TheCaudal() {
  static Caudal* c = new Caudal;
  return *c;
}
Prometheus& ThePrometheus() {
  static Prometheus* p = new Prometheus;
  return *p;
}

void BM_CaudalCounter(benchmark::State& state) {
  std::atomic<uint64_t>& allowed = TheCaudal().counters->allowed;
  for (auto _ : state) allowed.fetch_add(1, std::memory_order_relaxed);
}
void BM_PrometheusCounter(benchmark::State& state) {
  prometheus::Counter& allowed = *ThePrometheus().allowed;
  for (auto _ : state) allowed.Increment();
}

void BM_CaudalHistogram(benchmark::State& state) {
  Metrics& m = TheCaudal().metrics;
  uint64_t i = static_cast<uint64_t>(state.thread_index());
  for (auto _ : state) m.ObserveStore(Micros(LatencyUs(++i)));
}
void BM_PrometheusHistogram(benchmark::State& state) {
  prometheus::Histogram& store = *ThePrometheus().store;
  uint64_t i = static_cast<uint64_t>(state.thread_index());
  for (auto _ : state) store.Observe(static_cast<double>(LatencyUs(++i)) / 1e6);
}

void BM_CaudalDecision(benchmark::State& state) {
  Caudal& c = TheCaudal();
  uint64_t i = static_cast<uint64_t>(state.thread_index());
  for (auto _ : state) {
    c.counters->allowed.fetch_add(1, std::memory_order_relaxed);
    c.metrics.ObserveStore(Micros(LatencyUs(++i)));
    c.metrics.ObserveDecision(Api::kHttp, Micros(LatencyUs(++i)));
  }
}
void BM_PrometheusDecision(benchmark::State& state) {
  Prometheus& p = ThePrometheus();
  uint64_t i = static_cast<uint64_t>(state.thread_index());
  for (auto _ : state) {
    p.allowed->Increment();
    p.store->Observe(static_cast<double>(LatencyUs(++i)) / 1e6);
    p.decision->Observe(static_cast<double>(LatencyUs(++i)) / 1e6);
  }
}

std::string StatKey(size_t i) { return "rl.path_/api/v1/items/" + std::to_string(i); }

void BM_CaudalRender(benchmark::State& state) {
  Metrics m;
  for (size_t i = 0; i < kMaxDetailedSeries; ++i) {
    PolicyCounters& c = m.ForDetailed(Api::kRls, StatKey(i));
    c.allowed += i;
    c.hits.total_hits += i;
  }
  m.ObserveDecision(Api::kRls, Micros(300));
  size_t bytes = 0;
  for (auto _ : state) {
    std::string text = m.RenderPrometheus();
    bytes = text.size();
    benchmark::DoNotOptimize(text);
  }
  state.counters["bytes"] = static_cast<double>(bytes);
}

// The 12 series of each of kMaxDetailedSeries stat keys, and the decision histograms.
void Fill(Prometheus& p) {
  for (size_t i = 0; i < kMaxDetailedSeries; ++i) {
    const std::string key = StatKey(i);
    for (const char* outcome : {"allowed", "denied"}) {
      p.decisions.Add({{"api", "rls"}, {"policy", key}, {"outcome", outcome}})
          .Increment(static_cast<double>(i));
    }
    p.shadow.Add({{"api", "rls"}, {"policy", key}});
    for (const char* mode : {"allow", "deny", "local"}) {
      p.failure_mode.Add({{"api", "rls"}, {"policy", key}, {"mode", mode}});
    }
    for (const char* stat : {"total_hits", "within_limit", "near_limit", "over_limit",
                             "over_limit_with_local_cache", "shadow_mode"}) {
      p.hits.Add({{"api", "rls"}, {"policy", key}, {"stat", stat}});
    }
  }
  for (const char* api : {"rls", "cli"}) p.decision_latency.Add({{"api", api}}, BoundsSeconds());
  p.decision->Observe(0.0003);
}

void BM_PrometheusRender(benchmark::State& state) {
  Prometheus p;
  Fill(p);
  const prometheus::TextSerializer serializer;
  size_t bytes = 0;
  for (auto _ : state) {
    std::string text = serializer.Serialize(p.registry.Collect());
    bytes = text.size();
    benchmark::DoNotOptimize(text);
  }
  state.counters["bytes"] = static_cast<double>(bytes);
}

// The text alone, from families collected once: what prometheus-cpp would cost as the writer
// over caudal's own atomics (a Collectable of them).
void BM_PrometheusSerialize(benchmark::State& state) {
  Prometheus p;
  Fill(p);
  const std::vector<prometheus::MetricFamily> families = p.registry.Collect();
  const prometheus::TextSerializer serializer;
  for (auto _ : state) {
    std::string text = serializer.Serialize(families);
    benchmark::DoNotOptimize(text);
  }
}

// Prints as usual and keeps each run's time per operation for the ratio table.
class RatioReporter : public benchmark::ConsoleReporter {
 public:
  void ReportRuns(const std::vector<Run>& runs) override {
    ConsoleReporter::ReportRuns(runs);
    for (const Run& r : runs) {
      if (r.error_occurred) continue;
      const bool median = r.run_type == Run::RT_Aggregate && r.aggregate_name == "median";
      if (r.run_type == Run::RT_Aggregate && !median) continue;
      const auto key = std::make_pair(r.run_name.function_name, r.threads);
      if (!median && medians_.count(key) > 0) continue;
      if (median) medians_.insert(key);
      const double unit = r.time_unit == benchmark::kMicrosecond ? 1e3 : 1.0;
      ns_[key] = {r.GetAdjustedRealTime() * unit, r.GetAdjustedCPUTime() * unit};
    }
  }

  void PrintRatios() const {
    std::printf("\ncaudal Metrics vs prometheus-cpp, ns per operation, same run%s\n",
                medians_.empty() ? "" : ", medians");
    std::printf("%-10s %-7s %12s %15s %7s %12s %15s %7s\n", "what", "threads", "caudal",
                "prometheus-cpp", "ratio", "caudal CPU", "prometheus CPU", "ratio");
    for (const char* what : {"counter", "histogram", "decision", "render", "serialize"}) {
      for (int64_t threads : {1, 2}) {
        // prometheus-cpp's text alone, against caudal's whole rendering.
        const std::string ours = std::string(what) == "serialize" ? "render" : what;
        const auto c = ns_.find({"caudal/" + ours, threads});
        const auto p = ns_.find({std::string("prometheus-cpp/") + what, threads});
        if (c == ns_.end() || p == ns_.end()) continue;
        const Times& a = c->second;
        const Times& b = p->second;
        std::printf("%-10s %-7lld %12.1f %15.1f %6.2fx %12.1f %15.1f %6.2fx\n", what,
                    static_cast<long long>(threads), a.real, b.real, b.real / a.real, a.cpu, b.cpu,
                    b.cpu / a.cpu);
      }
    }
  }

 private:
  struct Times {
    double real = 0;
    double cpu = 0;
  };
  std::map<std::pair<std::string, int64_t>, Times> ns_;
  std::set<std::pair<std::string, int64_t>> medians_;
};

void RegisterAll() {
  struct Pair {
    const char* what;
    void (*caudal)(benchmark::State&);
    void (*prometheus)(benchmark::State&);
  };
  for (const Pair& p : {Pair{"counter", BM_CaudalCounter, BM_PrometheusCounter},
                        Pair{"histogram", BM_CaudalHistogram, BM_PrometheusHistogram},
                        Pair{"decision", BM_CaudalDecision, BM_PrometheusDecision}}) {
    benchmark::RegisterBenchmark((std::string("caudal/") + p.what).c_str(), p.caudal)
        ->Threads(1)
        ->Threads(2)
        ->UseRealTime();
    benchmark::RegisterBenchmark((std::string("prometheus-cpp/") + p.what).c_str(), p.prometheus)
        ->Threads(1)
        ->Threads(2)
        ->UseRealTime();
  }
  benchmark::RegisterBenchmark("caudal/render", BM_CaudalRender)->Unit(benchmark::kMicrosecond);
  benchmark::RegisterBenchmark("prometheus-cpp/render", BM_PrometheusRender)
      ->Unit(benchmark::kMicrosecond);
  benchmark::RegisterBenchmark("prometheus-cpp/serialize", BM_PrometheusSerialize)
      ->Unit(benchmark::kMicrosecond);
}

}  // namespace
}  // namespace caudal::bench

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  caudal::bench::RegisterAll();
  caudal::bench::RatioReporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  reporter.PrintRatios();
  benchmark::Shutdown();
  return 0;
}
