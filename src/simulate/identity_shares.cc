#include "simulate/identity_shares.h"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <memory>
#include <queue>
#include <set>

#include "algorithms/algorithm.h"
#include "algorithms/exact_math.h"
#include "algorithms/share.h"
#include "caudal/engine/engine.h"
#include "caudal/store/memory_store.h"
#include "common/cat.h"
#include "decorators/lease_store.h"
#include "simulate/sim_clock.h"
#include "simulate/svg_chart.h"
#include "store/batch.h"

namespace caudal::simulate {
namespace {

constexpr size_t kMaxTenants = 64;
constexpr int64_t kMaxInstances = 64;

// The memory store, counting the calls made to it.
class CountingStore final : public Store {
 public:
  explicit CountingStore(Store& inner) : inner_(inner) {}
  Status Ping() override { return inner_.Ping(); }
  std::string_view Name() const override { return inner_.Name(); }
  int64_t calls() const { return calls_; }

 protected:
  void DecideBatchAsync(std::span<const EntryRef> entries, DecideCallback done) override {
    ++calls_;
    caudal::DecideBatchAsync(inner_, entries, std::move(done));
  }

 private:
  Store& inner_;
  int64_t calls_ = 0;
};

Status ValidateShares(const std::vector<ShareTenant>& tenants, const IdentitySharesOptions& o) {
  if (tenants.empty()) return Status::InvalidArgument("--tenant: at least one");
  if (tenants.size() > kMaxTenants) {
    return Status::InvalidArgument(Cat("--tenant: at most ", kMaxTenants));
  }
  std::set<std::string> names;
  for (const ShareTenant& t : tenants) {
    if (t.name.empty() || !names.insert(t.name).second) {
      return Status::InvalidArgument(Cat("--tenant: a name must be given, once (", t.name, ')'));
    }
    if (t.rate.count <= 0 || t.rate.period <= Micros(0)) {
      return Status::InvalidArgument(Cat("--tenant ", t.name, ": a rate above 0"));
    }
    if (t.weight < 1 || t.weight > kMaxShareWeight) {
      return Status::InvalidArgument(
          Cat("--tenant ", t.name, ": a weight of 1 to ", kMaxShareWeight));
    }
    if (t.from < Micros(0) || t.from >= o.duration) {
      return Status::InvalidArgument(Cat("--tenant ", t.name, ": starts within the run"));
    }
  }
  if (o.instances < 1 || o.instances > kMaxInstances) {
    return Status::InvalidArgument(Cat("--instances: 1 to ", kMaxInstances));
  }
  return Status::Ok();
}

}  // namespace

Result<ShareTenant> ParseShareTenant(std::string_view text) {
  const size_t eq = text.find('=');
  if (eq == std::string_view::npos || eq == 0) {
    return Status::InvalidArgument(Cat("expected NAME=RATE[@START][*WEIGHT] (got \"", text, "\")"));
  }
  ShareTenant t{.name = std::string(text.substr(0, eq)), .rate = {}};
  std::string_view rest = text.substr(eq + 1);
  if (const size_t star = rest.find('*'); star != std::string_view::npos) {
    const std::string w(rest.substr(star + 1));
    char* end = nullptr;
    const long long weight = std::strtoll(w.c_str(), &end, 10);
    if (w.empty() || *end != '\0') {
      return Status::InvalidArgument(Cat(t.name, ": a weight is a whole number (got \"", w, "\")"));
    }
    t.weight = weight;
    rest = rest.substr(0, star);
  }
  if (const size_t at = rest.find('@'); at != std::string_view::npos) {
    const Result<Micros> from = ParseDuration(rest.substr(at + 1));
    if (!from.ok()) return Status::InvalidArgument(Cat(t.name, ": ", from.status().message()));
    t.from = *from;
    rest = rest.substr(0, at);
  }
  const Result<Rate> rate = ParseRate(rest);
  if (!rate.ok()) return Status::InvalidArgument(Cat(t.name, ": ", rate.status().message()));
  t.rate = *rate;
  return t;
}

Result<SharesRun> RunIdentityShares(const std::vector<ShareTenant>& tenants,
                                    const IdentitySharesOptions& o) {
  if (Status s = ValidateShares(tenants, o); !s.ok()) return s;
  PolicySpec spec;
  spec.name = "shared";
  spec.identity = {"tenant"};
  spec.limits = {o.limit};
  spec.share = ShareTerms{.fairness = o.fairness, .window = o.window};
  for (const ShareTenant& t : tenants) {
    if (t.weight == 1) continue;
    spec.overrides.push_back(
        {.match = {{.descriptor = "tenant", .value = t.name}}, .limits = {}, .weight = t.weight});
  }
  auto set = PolicySet::Create({spec}, {.on_failure = FailureMode::kDeny});
  if (!set.ok()) return set.status();

  SimClock clock;
  MemoryStore memory(clock);
  CountingStore store(memory);
  std::vector<std::unique_ptr<LeaseStore>> leases;
  std::vector<std::unique_ptr<Engine>> engines;
  for (int64_t i = 0; i < o.instances; ++i) {
    leases.push_back(
        std::make_unique<LeaseStore>(store, clock,
                                     LeaseStoreOptions{.lease_by_default = false,
                                                       .leases = false,
                                                       .instances = o.instances,
                                                       .consumer = Cat("instance-", i)}));
    engines.push_back(std::make_unique<Engine>(*leases.back(), clock, EngineOptions{}));
    if (Status s = engines.back()->SetPolicies(*set); !s.ok()) return s;
  }

  // The next request of each tenant, earliest first; ties in tenant order.
  struct Next {
    Micros at;
    size_t tenant;
    bool operator>(const Next& n) const { return at != n.at ? at > n.at : tenant > n.tenant; }
  };
  std::priority_queue<Next, std::vector<Next>, std::greater<>> queue;
  std::vector<int64_t> sent(tenants.size(), 0);
  // Each tenant's share at each instance, as its last decision there reported it.
  std::vector<std::vector<int64_t>> last_share(
      tenants.size(), std::vector<int64_t>(static_cast<size_t>(o.instances), 0));
  SharesRun run;
  for (size_t i = 0; i < tenants.size(); ++i) {
    queue.push({tenants[i].from, i});
    run.tenants.push_back({.name = tenants[i].name, .weight = tenants[i].weight});
  }
  const Micros start = std::chrono::hours(24 * 365);  // any fixed epoch: the run is repeatable
  Micros next_give_back = kGiveBackEvery;
  size_t turn = 0;
  run.step = std::max<Micros>(std::chrono::seconds(1), o.duration / 600);
  run.rate = o.limit.rate();
  const size_t points = static_cast<size_t>((o.duration + run.step - Micros(1)) / run.step);
  for (TenantRun& t : run.tenants) {
    t.series.assign(points, 0);
    t.offered_series.assign(points, 0);
  }
  while (!queue.empty() && queue.top().at < o.duration) {
    const Next n = queue.top();
    queue.pop();
    while (next_give_back <= n.at) {
      clock.Set(start + next_give_back);
      for (auto& l : leases) l->ReturnEnded();
      next_give_back += kGiveBackEvery;
    }
    clock.Set(start + n.at);
    const ShareTenant& t = tenants[n.tenant];
    TenantRun& tally = run.tenants[n.tenant];
    const size_t instance = turn++ % engines.size();
    const Result<CheckResult> r =
        engines[instance]->Check({.descriptors = {{"tenant", t.name}}, .cost = 1});
    if (!r.ok())
      return Status::InvalidArgument(Cat("--tenant ", t.name, ": ", r.status().message()));
    ++tally.offered;
    ++tally.offered_series[static_cast<size_t>(n.at / run.step)];
    if (!r->results.empty() && !r->results[0].decisions.empty()) {
      last_share[n.tenant][instance] = r->results[0].decisions[0].share;
    }
    if (r->allowed()) {
      ++tally.admitted;
      ++tally.series[static_cast<size_t>(n.at / run.step)];
      if (2 * n.at >= o.duration) ++tally.admitted_late;
    } else {
      ++tally.refused;
    }
    // Request k at from + k·period/count, exactly.
    const int64_t k = ++sent[n.tenant];
    const Micros at =
        t.from +
        Micros(static_cast<int64_t>(exact::Int128{k} * t.rate.period.count() / t.rate.count));
    queue.push({at, n.tenant});
  }
  for (size_t i = 0; i < tenants.size(); ++i) {
    for (const int64_t share : last_share[i]) run.tenants[i].share += std::max<int64_t>(0, share);
  }
  for (const TenantRun& t : run.tenants) run.admitted += t.admitted;
  // What each should get: the fill by offered rates (in units per the refill's period), weights.
  std::vector<ShareConsumer> consumers;
  const Rate rate = o.limit.rate();
  for (size_t i = 0; i < tenants.size(); ++i) {
    const Rate& offered = tenants[i].rate;
    const int64_t demand = static_cast<int64_t>(std::min<exact::Int128>(
        exact::Int128{offered.count} * rate.period.count() / offered.period.count(),
        kMaxShareAmount));
    consumers.push_back(
        {.group = static_cast<uint32_t>(i), .demand = demand, .weight = tenants[i].weight});
  }
  const Result<std::vector<int64_t>> fair = FairShares(rate.count, o.fairness, consumers);
  if (fair.ok()) {
    for (size_t i = 0; i < tenants.size(); ++i) run.tenants[i].expected = (*fair)[i];
  }
  run.bound = static_cast<int64_t>(exact::Int128{o.limit.capacity()} +
                                   exact::Int128{rate.count} * (o.duration + o.window).count() /
                                       rate.period.count());
  run.store_calls = store.calls();
  return run;
}

}  // namespace caudal::simulate

namespace caudal::simulate {

std::string RenderSharesSvg(const SharesRun& run, std::string_view title) {
  constexpr double kWidth = 900, kHeight = 480, kLeft = 70, kRight = 170, kTop = 40, kBottom = 50;
  static constexpr const char* kColors[] = {"#1f77b4", "#d62728", "#2ca02c", "#9467bd",
                                            "#ff7f0e", "#8c564b", "#e377c2", "#17becf"};
  const double step_s = static_cast<double>(run.step.count()) / 1e6;
  const double per_s = static_cast<double>(run.rate.count) * 1e6 /
                       static_cast<double>(std::max<int64_t>(1, run.rate.period.count()));
  size_t points = 0;
  double top = per_s;
  for (const TenantRun& t : run.tenants) {
    points = std::max(points, t.series.size());
    for (const int64_t v : t.series) top = std::max(top, static_cast<double>(v) / step_s);
  }
  top *= 1.1;
  const double span = std::max(1.0, static_cast<double>(points) * step_s);
  auto x = [&](double s) { return kLeft + s / span * (kWidth - kLeft - kRight); };
  auto y = [&](double v) { return kHeight - kBottom - v / top * (kHeight - kTop - kBottom); };
  auto num = [](double v) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.1f", v);
    return std::string(buf);
  };
  std::string out = SvgOpening(kWidth, kHeight);
  out +=
      "<text x=\"" + num(kLeft) + "\" y=\"22\" font-size=\"14\">" + XmlEscape(title) + "</text>\n";
  // Axes, ticks: five on each.
  out += "<line x1=\"" + num(kLeft) + "\" y1=\"" + num(y(0)) + "\" x2=\"" + num(x(span)) +
         "\" y2=\"" + num(y(0)) + "\" stroke=\"black\"/>\n";
  out += "<line x1=\"" + num(kLeft) + "\" y1=\"" + num(y(0)) + "\" x2=\"" + num(kLeft) +
         "\" y2=\"" + num(kTop) + "\" stroke=\"black\"/>\n";
  for (int i = 0; i <= 5; ++i) {
    const double s = span * i / 5, v = top * i / 5;
    out += "<text x=\"" + num(x(s)) + "\" y=\"" + num(y(0) + 18) + "\" text-anchor=\"middle\">" +
           num(s) + " s</text>\n";
    out += "<text x=\"" + num(kLeft - 6) + "\" y=\"" + num(y(v) + 4) + "\" text-anchor=\"end\">" +
           num(v) + "</text>\n";
  }
  out += "<text x=\"" + num(kLeft) + "\" y=\"" + num(kHeight - 10) +
         "\">admitted per second (lines), max-min part (dashed)</text>\n";
  // The capacity's refill.
  out += "<line x1=\"" + num(x(0)) + "\" y1=\"" + num(y(per_s)) + "\" x2=\"" + num(x(span)) +
         "\" y2=\"" + num(y(per_s)) + "\" stroke=\"gray\" stroke-dasharray=\"2 3\"/>\n";
  for (size_t i = 0; i < run.tenants.size(); ++i) {
    const TenantRun& t = run.tenants[i];
    const std::string color = kColors[i % (sizeof kColors / sizeof kColors[0])];
    std::string pts;
    for (size_t j = 0; j < t.series.size(); ++j) {
      const double v = static_cast<double>(t.series[j]) / step_s;
      pts += num(x(static_cast<double>(j) * step_s)) + "," + num(y(v)) + " " +
             num(x(static_cast<double>(j + 1) * step_s)) + "," + num(y(v)) + " ";
    }
    out += "<polyline fill=\"none\" stroke=\"" + color + "\" stroke-width=\"1.5\" points=\"" + pts +
           "\"/>\n";
    const double expected = static_cast<double>(t.expected) * per_s /
                            static_cast<double>(std::max<int64_t>(1, run.rate.count));
    out += "<line x1=\"" + num(x(0)) + "\" y1=\"" + num(y(expected)) + "\" x2=\"" + num(x(span)) +
           "\" y2=\"" + num(y(expected)) + "\" stroke=\"" + color +
           "\" stroke-dasharray=\"6 4\"/>\n";
    const double ly = kTop + 18.0 * static_cast<double>(i);
    out += "<line x1=\"" + num(kWidth - kRight + 15) + "\" y1=\"" + num(ly) + "\" x2=\"" +
           num(kWidth - kRight + 35) + "\" y2=\"" + num(ly) + "\" stroke=\"" + color +
           "\" stroke-width=\"2\"/>\n<text x=\"" + num(kWidth - kRight + 40) + "\" y=\"" +
           num(ly + 4) + "\">" + XmlEscape(t.name) + "</text>\n";
  }
  out += "</svg>\n";
  return out;
}

}  // namespace caudal::simulate
