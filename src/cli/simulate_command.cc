// `caudal simulate`: every algorithm over the same traffic, side by side (see docs/algorithms.md);
// or, with --config, a config's policies over a trace of costs per dimension (docs/simulate.md).
#include <CLI/CLI.hpp>
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include "caudal/config/config.h"
#include "cli/command.h"
#include "simulate/dimension_report.h"
#include "simulate/dimension_run.h"
#include "simulate/identity_shares.h"
#include "simulate/report.h"
#include "simulate/simulator.h"
#include "simulate/svg_chart.h"
#include "simulate/trace_csv.h"
#include "simulate/traffic.h"

namespace caudal::cli {
namespace {

using simulate::Traffic;

constexpr std::string_view kSimulateCommand = "simulate";
constexpr size_t kChartPoints = 600;

// "1.5 s", "12.0 min": a span for people, not for parsing back.
std::string HumanSpan(Micros d) {
  const double us = static_cast<double>(d.count());
  std::array<char, 32> buf{};
  if (us < 1e6) {
    std::snprintf(buf.data(), buf.size(), "%.0f ms", us / 1e3);
  } else if (us < 120e6) {
    std::snprintf(buf.data(), buf.size(), "%.1f s", us / 1e6);
  } else if (us < 2 * 3600e6) {
    std::snprintf(buf.data(), buf.size(), "%.1f min", us / 60e6);
  } else {
    std::snprintf(buf.data(), buf.size(), "%.1f h", us / 3600e6);
  }
  return buf.data();
}

class SimulateCommand final : public Command {
 public:
  void AddOptions(CLI::App& app) override {
    app.add_option("--limit", limit_,
                   "N/W: the window algorithms' limit per window W, and the "
                   "buckets' refill rate (e.g. 100/1m); required unless --config")
        ->type_name("N/W");
    app.add_option("--burst", burst_, "B, the buckets' capacity (default: the limit's N)")
        ->type_name("B");
    auto* pattern = app.add_option("--pattern", pattern_,
                                   "synthetic traffic: boundary-burst, steady, poisson or on-off")
                        ->type_name("NAME");
    auto* trace = app.add_option("--trace", trace_,
                                 "replay a CSV file of timestamp_ms[,key[,cost]] rows instead; "
                                 "with --config, of timestamp_ms,key,<dimension>... rows")
                      ->type_name("FILE");
    trace->excludes(pattern);
    app.add_option("--rate", rate_, "offered rate for --pattern (default: twice the limit)")
        ->type_name("N/W")
        ->needs(pattern);
    duration_option_ =
        app.add_option("--duration", duration_,
                       "how long --pattern or --tenant runs (default: 10m; --tenant: 10s)")
            ->type_name("DURATION");
    app.add_option("--seed", seed_, "random seed for poisson (default: 1)")
        ->type_name("N")
        ->needs(pattern);
    app.add_option("--svg", svg_, "also write a chart of the run to this SVG file")
        ->type_name("FILE");
    app.add_option("--format", format_, "table or json (default: table)")->type_name("FORMAT");
    app.add_option("--regions", regions_,
                   "decide in N regions, each with its own copy of the state, requests to each "
                   "in turn (default: 1)")
        ->type_name("N");
    app.add_option("--replication-lag", lag_,
                   "how late a region's writes reach the others, last writer winning; 'never' "
                   "for regions that do not replicate (default: 0)")
        ->type_name("DURATION");
    app.add_flag("--leases", leases_,
                 "also decide the same requests with leases from one store, each region "
                 "--replication-lag from it one way, and compare");
    app.add_option("--lease-ttl", lease_ttl_, "the leases' ttl (default: 1s)")
        ->type_name("DURATION");
    app.add_option("--lease-share", lease_share_,
                   "the share of a limit all regions together may hold in leases (default: 0.3)")
        ->type_name("F");
    app.add_flag("--share", share_,
                 "share one token bucket (--limit, --burst) among --tenant's, as a policy with "
                 "share does");
    app.add_option("--tenant", tenants_,
                   "with --share: NAME=RATE[@START][*WEIGHT], repeated; each tenant's requests "
                   "evenly spaced from START, its weight a tier's")
        ->type_name("TENANT");
    app.add_option("--share-window", share_window_, "the share's window (default: 2s)");
    app.add_option("--fairness", fairness_, "max_min or proportional (default: max_min)");
    app.add_option("--instances", instances_,
                   "instances deciding the tenants' requests in turn (default: 1)");
    app.add_option("--config", config_,
                   "replay --trace's costs per dimension through this config's policies")
        ->type_name("FILE");
    app.add_option("--policy", policy_, "with --config: this policy alone (default: every one)")
        ->type_name("NAME");
    app.add_option("--partition", partition_,
                   "cut region 0 off (from the store and the other regions) for DURATION from "
                   "AT after the start, for both models")
        ->type_name("AT+DURATION");
  }

  int Run(Env& env) override {
    if (config_) return RunConfig(env);
    if (policy_) return UsageError(env, kSimulateCommand, "--policy: goes with --config");
    if (limit_.empty()) {
      return UsageError(env, kSimulateCommand,
                        "--limit is required (or --config, to replay a trace through a config's "
                        "policies)");
    }
    Result<Rate> limit = ParseRate(limit_);
    if (!limit.ok())
      return UsageError(env, kSimulateCommand, "--limit: " + limit.status().message());
    if (share_) return RunShares(env, *limit);
    if (!tenants_.empty()) return UsageError(env, kSimulateCommand, "--tenant: goes with --share");
    if (duration_option_->count() > 0 && !pattern_) {
      return UsageError(env, kSimulateCommand, "--duration: goes with --pattern or --tenant");
    }
    if (Status s = simulate::ValidateLimit(*limit); !s.ok()) {
      return UsageError(env, kSimulateCommand, "--limit: " + s.message());
    }
    const int64_t burst = burst_.value_or(limit->count);
    if (Status s = simulate::ValidateBurst(burst, *limit); !s.ok()) {
      return UsageError(env, kSimulateCommand, (burst_ ? "--burst: " : "--limit: ") + s.message());
    }
    if (format_ != "table" && format_ != "json") {
      return UsageError(env, kSimulateCommand,
                        "--format: \"" + format_ + "\" is not table or json");
    }
    std::optional<Micros> lag;
    if (lag_ != "never") {
      const Result<Micros> d = ParseDuration(lag_);
      if (!d.ok())
        return UsageError(env, kSimulateCommand, "--replication-lag: " + d.status().message());
      lag = *d;
    }
    if (Status s = simulate::ValidateRegions(regions_); !s.ok()) {
      return UsageError(env, kSimulateCommand, "--" + s.message());
    }
    std::string described;
    const Result<Traffic> traffic = LoadTraffic(*limit, &described);
    if (!traffic.ok()) return UsageError(env, kSimulateCommand, traffic.status().message());
    const Result<Micros> ttl = ParseDuration(lease_ttl_);
    if (!ttl.ok())
      return UsageError(env, kSimulateCommand, "--lease-ttl: " + ttl.status().message());
    if (!(lease_share_ > 0 && lease_share_ <= 1)) {
      return UsageError(env, kSimulateCommand, "--lease-share: expected more than 0 and at most 1");
    }
    std::vector<simulate::Partition> partitions;
    if (partition_) {
      const Result<simulate::Partition> p = ParsePartition(*partition_, traffic->start);
      if (!p.ok()) return UsageError(env, kSimulateCommand, "--partition: " + p.status().message());
      partitions.push_back(*p);
    }

    const auto sim = simulate::Simulate(
        *traffic, {.limit = *limit,
                   .burst = burst,
                   .chart_points = svg_ ? kChartPoints : 0,
                   .regions = regions_,
                   .replication_lag = lag,
                   .leases = leases_,
                   .lease_ttl = *ttl,
                   .lease_max_share_ppm = static_cast<int64_t>(std::llround(lease_share_ * 1e6)),
                   .partitions = partitions});
    if (!sim.ok()) return UsageError(env, kSimulateCommand, sim.status().message());
    const std::string settings = "limit " + FormatRate(*limit) + ", burst " + std::to_string(burst);
    if (format_ == "json") {
      env.out << simulate::RenderJson(*sim);
    } else {
      env.out << "traffic: " << described << "\n"
              << "limit:   " << FormatRate(*limit) << " (windows); burst " << burst
              << " refilled at " << FormatRate(*limit) << " (token_bucket, gcra)\n";
      if (regions_ > 1) {
        env.out << "regions: " << regions_ << ", requests to each in turn; a region's writes reach "
                << "the others " << (lag ? FormatDuration(*lag) + " later" : "never")
                << " (last writer wins); max in window counts every region\n";
      }
      if (partition_) env.out << "partition: region 0 cut off at " << *partition_ << "\n";
      env.out << "\n" << simulate::RenderTable(*sim);
    }
    if (svg_) {
      const bool unit_costs = std::all_of(traffic->requests.begin(), traffic->requests.end(),
                                          [](const simulate::Request& r) { return r.cost == 1; });
      const simulate::ChartText text{.title = described + "; " + settings,
                                     .y_unit = unit_costs ? "requests" : "units of cost"};
      return WriteSvg(env, *sim, text, format_ == "table");
    }
    return kExitOk;
  }

 private:
  // The traffic and a one-line description of it. Errors carry a message that names the flag
  // or the file and line.
  Result<Traffic> LoadTraffic(const Rate& limit, std::string* described) {
    if (trace_) {
      Result<Traffic> t = simulate::ReadTraceCsv(*trace_);
      if (t.ok()) {
        *described = *trace_ + ", " + std::to_string(t->requests.size()) + " requests over " +
                     HumanSpan(t->end - t->start) + " (" + std::to_string(t->keys.size()) +
                     (t->keys.size() == 1 ? " key)" : " keys)");
      }
      return t;
    }
    if (!pattern_) return Status::InvalidArgument("one of --pattern or --trace is required");
    const Result<simulate::Pattern> pattern = simulate::ParsePattern(*pattern_);
    if (!pattern.ok()) return Flag("--pattern", pattern.status());
    Rate rate{.count = 2 * limit.count, .period = limit.period};
    if (rate_) {
      const Result<Rate> r = ParseRate(*rate_);
      if (!r.ok()) return Flag("--rate", r.status());
      rate = *r;
    }
    const Result<Micros> duration = ParseDuration(duration_);
    if (!duration.ok()) return Flag("--duration", duration.status());
    if (Status s = simulate::ValidateDuration(*pattern, limit, *duration); !s.ok()) {
      return Flag("--duration", s);
    }
    Result<Traffic> t = simulate::Generate(
        {.pattern = *pattern, .limit = limit, .rate = rate, .duration = *duration, .seed = seed_});
    if (t.ok()) {
      *described = *pattern_ + ", " + std::to_string(t->requests.size()) + " requests over " +
                   FormatDuration(*duration) + " at " + FormatRate(rate);
    }
    return t;
  }

  // --share: the tenants of one shared token bucket (simulate/identity_shares.h).
  int RunShares(Env& env, const Rate& limit) {
    if (pattern_ || trace_ || regions_ != 1 || leases_ || partition_) {
      return UsageError(env, kSimulateCommand,
                        "--share: goes with --tenant, --limit, --burst, --duration, "
                        "--share-window, --fairness, --instances, --format and --svg only");
    }
    if (tenants_.empty())
      return UsageError(env, kSimulateCommand, "--share: needs a --tenant or more");
    std::vector<simulate::ShareTenant> tenants;
    for (const std::string& text : tenants_) {
      Result<simulate::ShareTenant> t = simulate::ParseShareTenant(text);
      if (!t.ok()) return UsageError(env, kSimulateCommand, "--tenant: " + t.status().message());
      tenants.push_back(*std::move(t));
    }
    const Result<Micros> duration =
        ParseDuration(duration_option_->count() > 0 ? duration_ : "10s");
    if (!duration.ok())
      return UsageError(env, kSimulateCommand, "--duration: " + duration.status().message());
    const Result<Micros> window = ParseDuration(share_window_);
    if (!window.ok())
      return UsageError(env, kSimulateCommand, "--share-window: " + window.status().message());
    const Result<Fairness> fairness = ParseFairness(fairness_);
    if (!fairness.ok())
      return UsageError(env, kSimulateCommand, "--fairness: " + fairness.status().message());
    if (format_ != "table" && format_ != "json") {
      return UsageError(env, kSimulateCommand,
                        "--format: \"" + format_ + "\" is not table or json");
    }
    const int64_t burst = burst_.value_or(limit.count);
    const Result<Limit> bucket =
        Limit::Create(LimitSpec::Bucket(Algorithm::kTokenBucket, burst, limit));
    if (!bucket.ok())
      return UsageError(env, kSimulateCommand, "--limit: " + bucket.status().message());
    const Result<simulate::SharesRun> run =
        simulate::RunIdentityShares(tenants, {.limit = *bucket,
                                              .fairness = *fairness,
                                              .window = *window,
                                              .instances = instances_,
                                              .duration = *duration});
    if (!run.ok()) return UsageError(env, kSimulateCommand, run.status().message());
    const double half_s = static_cast<double>(duration->count()) / 2e6;
    if (format_ == "json") {
      env.out << "{\"admitted\":" << run->admitted << ",\"bound\":" << run->bound
              << ",\"store_calls\":" << run->store_calls << ",\"tenants\":[";
      for (size_t i = 0; i < run->tenants.size(); ++i) {
        const simulate::TenantRun& t = run->tenants[i];
        env.out << (i ? "," : "") << "{\"name\":\"" << JsonEscaped(t.name)
                << "\",\"weight\":" << t.weight << ",\"offered\":" << t.offered
                << ",\"admitted\":" << t.admitted << ",\"refused\":" << t.refused
                << ",\"admitted_second_half\":" << t.admitted_late << ",\"share\":" << t.share
                << ",\"expected\":" << t.expected << ",\"series\":[";
        for (size_t j = 0; j < t.series.size(); ++j) env.out << (j ? "," : "") << t.series[j];
        env.out << "],\"offered_series\":[";
        for (size_t j = 0; j < t.offered_series.size(); ++j) {
          env.out << (j ? "," : "") << t.offered_series[j];
        }
        env.out << "]}";
      }
      env.out << "],\"step_ms\":" << run->step.count() / 1000 << "}\n";
      return WriteSharesSvg(env, *run, limit, false);
    }
    env.out << "capacity: token_bucket, burst " << burst << " refilled at " << FormatRate(limit)
            << ", shared " << FairnessName(*fairness) << " over a " << FormatDuration(*window)
            << " window; " << instances_ << (instances_ == 1 ? " instance" : " instances") << ", "
            << FormatDuration(*duration) << "\n\n";
    std::array<char, 160> line{};
    std::snprintf(line.data(), line.size(), "%-16s %6s %10s %10s %10s %14s %10s %12s\n", "tenant",
                  "weight", "offered", "admitted", "refused", "admitted/s 2nd", "max-min/s",
                  "share/period");
    env.out << line.data();
    const double per_period_s = static_cast<double>(limit.period.count()) / 1e6;
    for (const simulate::TenantRun& t : run->tenants) {
      std::snprintf(
          line.data(), line.size(), "%-16.16s %6lld %10lld %10lld %10lld %14.1f %10.1f %12lld\n",
          t.name.c_str(), static_cast<long long>(t.weight), static_cast<long long>(t.offered),
          static_cast<long long>(t.admitted), static_cast<long long>(t.refused),
          static_cast<double>(t.admitted_late) / half_s,
          static_cast<double>(t.expected) / per_period_s, static_cast<long long>(t.share));
      env.out << line.data();
    }
    env.out << "\nadmitted " << run->admitted << " in all (bound B + r·(t + window): " << run->bound
            << "); " << run->store_calls << " store calls\n"
            << "admitted/s 2nd: in the run's second half; max-min/s: the tenant's part of the "
               "refill by the offered rates and weights; share/period: its share at the end, "
               "summed over the instances\n";
    return WriteSharesSvg(env, *run, limit, true);
  }

  // --config: a config's policies over a trace of costs per dimension (simulate/dimension_run.h).
  int RunConfig(Env& env) {
    if (!limit_.empty() || burst_ || pattern_ || rate_ || duration_option_->count() > 0 || share_ ||
        !tenants_.empty() || regions_ != 1 || leases_ || partition_) {
      return UsageError(env, kSimulateCommand,
                        "--config: goes with --trace, --policy, --format and --svg only");
    }
    if (!trace_) {
      return UsageError(env, kSimulateCommand,
                        "--config: needs --trace, a CSV of timestamp_ms,key,<dimension>... rows");
    }
    if (format_ != "table" && format_ != "json") {
      return UsageError(env, kSimulateCommand,
                        "--format: \"" + format_ + "\" is not table or json");
    }
    const Result<Config> config = LoadConfigFile(*config_);
    if (!config.ok()) return UsageError(env, kSimulateCommand, config.status().message());
    if (config->policies == nullptr || config->policies->policies().empty()) {
      return UsageError(env, kSimulateCommand, "--config: " + *config_ + " has no policies");
    }
    std::vector<PolicySpec> specs;
    std::string names;
    std::string identities;
    for (const PolicySet::Policy& p : config->policies->policies()) {
      names += (names.empty() ? "" : ", ") + p.spec.name;
      if (policy_ && p.spec.name != *policy_) continue;
      std::string identity;
      for (const std::string& f : p.spec.identity) identity += (identity.empty() ? "" : ", ") + f;
      identities += (identities.empty() ? "" : "; ") + p.spec.name + " (identity " + identity + ")";
      specs.push_back(p.spec);
    }
    if (specs.empty()) {
      return UsageError(env, kSimulateCommand,
                        "--policy: " + *config_ + " has no policy \"" + *policy_ +
                            "\" (its policies: " + names + ")");
    }
    const auto set = PolicySet::Create(std::move(specs), config->policies->options());
    if (!set.ok()) return UsageError(env, kSimulateCommand, set.status().message());
    const Result<simulate::CostTrace> trace = simulate::ReadCostTraceCsv(*trace_);
    if (!trace.ok()) return UsageError(env, kSimulateCommand, trace.status().message());
    const std::span<const std::string> dims = config->policies->dimensions();
    const Result<simulate::DimensionRun> run = simulate::RunDimensions(
        *trace, {.policies = *set,
                 .accepted = std::vector<std::string>(dims.begin(), dims.end()),
                 .points = kChartPoints});
    if (!run.ok()) return UsageError(env, kSimulateCommand, run.status().message());
    if (format_ == "json") {
      env.out << simulate::RenderDimensionJson(*run);
    } else {
      std::string columns;
      for (const std::string& d : trace->dimensions) columns += (columns.empty() ? "" : ", ") + d;
      env.out << "trace:    " << *trace_ << ", " << trace->rows.size() << " requests over "
              << HumanSpan(trace->end - trace->start) << " (" << trace->keys.size()
              << (trace->keys.size() == 1 ? " key" : " keys") << "); costs in " << columns
              << "\npolicies: " << identities << "; each identity field set to the key\n\n"
              << simulate::RenderDimensionTable(*run);
    }
    if (!svg_) return kExitOk;
    return WriteChart(env, simulate::RenderDimensionSvg(*run, *trace_ + " through " + identities),
                      format_ == "table");
  }

  int WriteSharesSvg(Env& env, const simulate::SharesRun& run, const Rate& limit, bool announce) {
    if (!svg_) return kExitOk;
    return WriteChart(
        env,
        simulate::RenderSharesSvg(run, "shares of " + FormatRate(limit) + " among " +
                                           std::to_string(run.tenants.size()) + " tenants"),
        announce);
  }

  // Names are descriptor values: printable, but a quote or a backslash is escaped.
  static std::string JsonEscaped(const std::string& s) {
    std::string out;
    for (const char c : s) {
      if (c == '"' || c == '\\') out += '\\';
      out += c;
    }
    return out;
  }

  // "AT+DURATION", both durations, AT after `start`.
  static Result<simulate::Partition> ParsePartition(const std::string& text, Micros start) {
    const size_t plus = text.find('+');
    if (plus == std::string::npos) return Status::InvalidArgument("expected AT+DURATION");
    const Result<Micros> at = ParseDuration(text.substr(0, plus));
    if (!at.ok()) return at.status();
    const Result<Micros> length = ParseDuration(text.substr(plus + 1));
    if (!length.ok()) return length.status();
    return simulate::Partition{.region = 0, .from = start + *at, .until = start + *at + *length};
  }

  static Status Flag(std::string_view flag, const Status& s) {
    return Status::InvalidArgument(std::string(flag) + ": " + s.message());
  }

  int WriteSvg(Env& env, const simulate::Simulation& sim, const simulate::ChartText& text,
               bool announce) {
    return WriteChart(env, simulate::RenderSvg(sim, text), announce);
  }

  // Writes `svg` to --svg's file; says so when `announce`.
  int WriteChart(Env& env, const std::string& svg, bool announce) {
    std::ofstream file(*svg_, std::ios::binary | std::ios::trunc);
    file << svg;
    file.close();
    if (!file) {
      env.err << "caudal simulate: --svg: cannot write " << *svg_ << "\n";
      return kExitFailure;
    }
    if (announce) env.out << "\nchart: " << *svg_ << "\n";
    return kExitOk;
  }

  std::string limit_;
  std::optional<std::string> config_;
  std::optional<std::string> policy_;
  std::optional<int64_t> burst_;
  std::optional<std::string> pattern_;
  std::optional<std::string> trace_;
  std::optional<std::string> rate_;
  std::string duration_ = "10m";
  uint64_t seed_ = 1;
  std::optional<std::string> svg_;
  std::string format_ = "table";
  int64_t regions_ = 1;
  std::string lag_ = "0s";
  bool leases_ = false;
  std::string lease_ttl_ = "1s";
  double lease_share_ = 0.3;
  std::optional<std::string> partition_;
  CLI::Option* duration_option_ = nullptr;
  bool share_ = false;
  std::vector<std::string> tenants_;
  std::string share_window_ = "2s";
  std::string fairness_ = "max_min";
  int64_t instances_ = 1;
};

}  // namespace

CAUDAL_REGISTER_COMMAND(SimulateCommand, "simulate",
                        "Run every algorithm over the same traffic and compare what they admit")

}  // namespace caudal::cli
