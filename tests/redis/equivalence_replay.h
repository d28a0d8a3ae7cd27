// The replay behind the Lua ≡ C++ equivalence tests: seeded random traces of requests over a few
// keys bound to random limits (every algorithm's edge cases: capacities near the bounds, periods
// from 1 ms to a year, costs that never fit, refunds, charges, time going backwards, window
// boundaries), decided by something under test and by the conformance suite's ReferenceModel, which
// must agree decision for decision.
//
// `call` decides a batch of independent requests, in order, all at `now` (µs): one script call
// for the raw script, one Decide() each for a store on a ManualClock.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <iostream>
#include <map>
#include <numeric>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "algorithms/algorithm.h"
#include "algorithms/exact_math.h"
#include "caudal/store/store.h"
#include "store/store_reference_model.h"

namespace caudal::equivalence {

constexpr int64_t kDay = int64_t{86'400'000'000};
constexpr int64_t kYear = 365 * kDay;

class Tracer {
 public:
  explicit Tracer(uint64_t seed) : rng_(seed) {}

  // Draw most fixed windows on a calendar (calendar.h): a random unit in one of kZones.
  void DrawCalendars() { calendars_ = true; }
  static constexpr std::string_view kZones[] = {
      "UTC",          "Europe/Madrid",  "America/New_York",
      "Asia/Kolkata", "Asia/Kathmandu", "Australia/Adelaide"};

  int64_t Uniform(int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(rng_);
  }
  bool Chance(int percent) { return Uniform(1, 100) <= percent; }

  int64_t Capacity(Algorithm a) {
    const int64_t max = HasLogState(a) ? kMaxLogLimit : kMaxCapacity;
    switch (Uniform(0, 4)) {
      case 0:
        return 1;
      case 1:
        return Uniform(2, 10);
      case 2:
        return Uniform(11, 1000);
      case 3:
        return max - Uniform(0, 5);
      default:
        return Uniform(1, max);
    }
  }

  int64_t Period() {  // µs
    switch (Uniform(0, 6)) {
      case 0:
        return 1000;
      case 1:
        return Uniform(1000, 1'000'000);
      case 2:
        return 60'000'000;
      case 3:
        return Uniform(1, 24) * 3'600'000'000;
      case 4:
        return kYear - Uniform(0, 3) * 1000;
      case 5:
        return kYear;
      default:
        return Uniform(1000, kYear);
    }
  }

  Limit RandomLimit(Algorithm a) {
    if (calendars_ && a == Algorithm::kFixedWindow && Chance(80)) {
      const auto unit = static_cast<CalendarUnit>(Uniform(0, 3));
      const auto zone = kZones[static_cast<size_t>(Uniform(0, std::ssize(kZones) - 1))];
      return *Limit::Create(LimitSpec::CalendarWindow(Capacity(a), *Calendar::Create(unit, zone)));
    }
    for (;;) {
      LimitSpec spec;
      if (IsWindowAlgorithm(a)) {
        spec = LimitSpec::Window(a, Capacity(a), Micros(Period() / 1000 * 1000));
      } else {
        const int64_t n =
            Chance(30) ? Uniform(1, 10) : (Chance(50) ? Uniform(1, kMaxRateCount) : kMaxRateCount);
        spec = LimitSpec::Bucket(a, Capacity(a), {.count = n, .period = Micros(Period())});
      }
      Result<Limit> l = Limit::Create(spec);
      if (l.ok()) return *l;
    }
  }

  int64_t Cost(const Limit& l) {
    const int64_t cap = l.capacity();
    switch (Uniform(0, 19)) {
      case 0:
      case 1:
        return 0;
      case 2:
      case 3:
      case 4:
      case 5:
      case 6:
        return 1;
      case 7:
      case 8:
      case 9:
        return Uniform(1, std::min<int64_t>(cap, 10));
      case 10:
      case 11:
      case 12:
      case 13:
        return Uniform(1, cap);
      case 14:
        return cap;
      case 15:
        return std::min(kMaxCost, cap + Uniform(1, kMaxCost));
      case 16:
        return cap + 1 <= kMaxCost ? cap + 1 : cap;
      default:
        return Uniform(cap / 2, cap);
    }
  }

  // The time a limit "lives" on: its window, or the time its bucket takes to fill.
  static int64_t Scale(const Limit& l) {
    if (IsWindowAlgorithm(l.algorithm())) return l.window().count();
    const exact::Int128 fill =
        static_cast<exact::Int128>(l.capacity()) * l.refill_period_us() / l.refill_count();
    return static_cast<int64_t>(std::clamp<exact::Int128>(fill, 1, kYear));
  }

  int64_t Gap(int64_t scale, int64_t now) {
    switch (Uniform(0, 19)) {
      case 0:
      case 1:
      case 2:
      case 3:
      case 4:
        return 0;
      case 5:
      case 6:
      case 7:
        return Uniform(1, 1000);
      case 8:
      case 9:
      case 10:
      case 11:
        return Uniform(1, scale);
      case 12:
      case 13:
        return Uniform(1, scale / 100 + 1);
      case 14:
      case 15:
        return Uniform(scale, 3 * scale);
      case 16:
        return -Uniform(1, scale / 10 + 1);  // time going backwards
      case 17:
        return Uniform(kDay, kYear);
      default: {  // right at (or one µs around) a window boundary
        const int64_t next = (now / scale + 1) * scale;
        return next - now + Uniform(-1, 1);
      }
    }
  }

  // A gap to (or one µs around) the next boundary of `l`'s calendar, when it has one and a draw
  // says so; nullopt otherwise (draws nothing for a limit without a calendar).
  std::optional<int64_t> CalendarGap(const Limit& l, int64_t now) {
    if (!l.calendar() || !Chance(15)) return std::nullopt;
    return l.calendar()->WindowAt(Micros(now)).end.count() - now + Uniform(-1, 1);
  }

 private:
  std::mt19937_64 rng_;
  bool calendars_ = false;
};

using BatchCall = std::function<std::vector<StoreResponse>(
    const std::vector<std::vector<EntryRef>>& requests, int64_t now)>;

inline constexpr int64_t kDecisionsPerAlgorithm = 10'000;

// A lease granted during a replay, some of whose units a later request gives back.
struct HeldLease {
  int key = 0;
  int64_t units = 0;
  LeaseGrant grant;
};

// Replays traces of keys bound to limits drawn by `pick` until `min_decisions` entry decisions
// have been compared. Each call carries 1..6 requests of 1..3 distinct keys, and sometimes one
// more that gives leases back; keys start with `key_prefix`. Consumes of the algorithms that
// lease often ask for one, and parts of the grants are given back at random later times (a part
// twice, sometimes). The lease draws come from a generator of their own, so the rest of each
// trace is drawn as without them. With `forward_only`, time never moves back. With `calendars`,
// most fixed windows count calendar windows (Tracer::DrawCalendars), and some steps land on the
// first key's next calendar boundary.
inline void Replay(uint64_t seed, const std::function<Algorithm(Tracer&)>& pick,
                   int64_t min_decisions, const BatchCall& call, const std::string& key_prefix = "",
                   bool forward_only = false, bool calendars = false) {
  Tracer t(seed);
  if (calendars) t.DrawCalendars();
  Tracer lt(seed ^ 0x1ea5e);  // the lease draws
  ReferenceModel reference;   // the conformance suite's model of the Store contract
  int64_t leases_asked = 0, grants = 0, give_backs = 0;
  int64_t compared = 0;
  std::map<Verdict, int64_t> verdicts;
  int64_t refused_with_passing_entry = 0;
  int64_t refunds = 0;
  int64_t refunds_in_refused_requests = 0;
  // charges: token_bucket, gcra, fixed_window; peeks_refused: charged peeks in debt
  int64_t chargeable = 0, charges = 0, charges_over = 0, peeks_refused = 0;
  for (int trace = 0; compared < min_decisions; ++trace) {
    constexpr int kKeys = 8;
    std::vector<Limit> limits;
    std::vector<std::string> keys;
    for (int k = 0; k < kKeys; ++k) {
      limits.push_back(t.RandomLimit(pick(t)));
      std::ostringstream key;
      key << key_prefix << "t" << trace << ":k" << k;
      keys.push_back(key.str());
    }
    const int64_t scale = Tracer::Scale(limits[0]);
    int64_t now = int64_t{1'700'000'000'000'000} + t.Uniform(0, kYear);
    std::vector<HeldLease> held;
    for (int step = 0; step < 60; ++step) {
      const int64_t drawn = t.CalendarGap(limits[0], now).value_or(t.Gap(scale, now));
      const int64_t gap = forward_only ? std::max<int64_t>(0, drawn) : drawn;
      if (now + gap > 0 && now + gap < int64_t{8'000'000'000'000'000}) now += gap;
      std::vector<std::vector<EntryRef>> requests(t.Uniform(1, 6));
      for (auto& r : requests) {
        std::vector<int> order(kKeys);
        std::iota(order.begin(), order.end(), 0);
        std::shuffle(order.begin(), order.end(), std::mt19937(t.Uniform(0, 1 << 30)));
        for (int j = 0, n = static_cast<int>(t.Uniform(1, 3)); j < n; ++j) {
          const int k = order[j];
          EntryOp op = t.Chance(12) ? EntryOp::kRefund : EntryOp::kConsume;
          // A charge (counted whatever the verdict) where the algorithm defines one.
          if (op == EntryOp::kConsume && SupportsCharge(limits[k].algorithm()) && t.Chance(30)) {
            op = EntryOp::kCharge;
          }
          r.push_back({.key = keys[k], .limit = &limits[k], .cost = t.Cost(limits[k]), .op = op});
          if (op == EntryOp::kConsume && SupportsLease(limits[k].algorithm()) && lt.Chance(30)) {
            r.back().lease = lt.Chance(20) ? lt.Uniform(1, kMaxCost) : lt.Cost(limits[k]);
            leases_asked += r.back().lease > 0;
          }
        }
      }
      std::vector<HeldLease> backs;  // outlives the call: the give-backs point into it
      if (!held.empty() && lt.Chance(25)) {
        for (int j = 0, n = static_cast<int>(lt.Uniform(1, 2)); j < n && !held.empty(); ++j) {
          const auto g = static_cast<size_t>(lt.Uniform(0, std::ssize(held) - 1));
          bool repeated = false;
          for (const HeldLease& b : backs) repeated = repeated || b.key == held[g].key;
          if (repeated) continue;
          backs.push_back(held[g]);
          backs.back().units = lt.Uniform(1, held[g].units);
          if (!lt.Chance(20)) held.erase(held.begin() + static_cast<ptrdiff_t>(g));
        }
        requests.emplace_back();
        for (const HeldLease& b : backs) {
          requests.back().push_back({.key = keys[static_cast<size_t>(b.key)],
                                     .limit = &limits[static_cast<size_t>(b.key)],
                                     .cost = b.units,
                                     .op = EntryOp::kGiveBack,
                                     .grant = &b.grant});
          ++give_backs;
        }
      }
      const std::vector<StoreResponse> got = call(requests, now);
      ASSERT_EQ(got.size(), requests.size());
      for (size_t i = 0; i < requests.size(); ++i) {
        const StoreResponse want = reference.Decide(requests[i], Micros(now));
        ASSERT_EQ(got[i].allowed, want.allowed) << "trace " << trace << " step " << step;
        for (size_t j = 0; j < requests[i].size(); ++j) {
          const EntryRef& e = requests[i][j];
          const Decision& g = got[i].decisions[j];
          const Decision& w = want.decisions[j];
          ASSERT_EQ(g, w) << e.limit->ToString() << " key " << e.key << " cost " << e.cost
                          << (e.op == EntryOp::kRefund   ? " (refund)"
                              : e.op == EntryOp::kCharge ? " (charge)"
                                                         : "")
                          << " now " << now << " (trace " << trace << " step " << step
                          << ")\n  lua: " << VerdictName(g.verdict) << " rem " << g.remaining
                          << " reset " << g.reset_after.count() << " retry "
                          << g.retry_after.count() << "\n  c++: " << VerdictName(w.verdict)
                          << " rem " << w.remaining << " reset " << w.reset_after.count()
                          << " retry " << w.retry_after.count();
          ++compared;
          if (g.leased > 0) {
            ++grants;
            const auto k = std::find(keys.begin(), keys.end(), std::string(e.key)) - keys.begin();
            held.push_back({.key = static_cast<int>(k),
                            .units = g.leased,
                            .grant = {.at = g.leased_at, .reset_after = g.reset_after}});
            if (held.size() > 16) held.erase(held.begin());
          }
          if (e.op == EntryOp::kRefund || e.op == EntryOp::kGiveBack) {
            ++refunds;
            if (!got[i].allowed) ++refunds_in_refused_requests;
            continue;
          }
          ++verdicts[g.verdict];
          if (SupportsCharge(e.limit->algorithm())) ++chargeable;
          if (e.op == EntryOp::kCharge) {
            ++charges;
            if (!g.allowed() && e.cost > 0) ++charges_over;
            if (!g.allowed() && e.cost == 0) ++peeks_refused;
          }
          if (!got[i].allowed && g.allowed() && e.cost > 0) ++refused_with_passing_entry;
        }
      }
    }
  }
  EXPECT_GE(compared, min_decisions);
  // The traces must exercise every outcome, not just agree on the easy ones.
  EXPECT_GE(verdicts[Verdict::kAllowed], compared / 20);
  EXPECT_GE(verdicts[Verdict::kDenied], compared / 20);
  EXPECT_GE(verdicts[Verdict::kNeverFits], compared / 100);
  EXPECT_GE(refused_with_passing_entry, compared / 100);
  EXPECT_GE(refunds, compared / 20);
  EXPECT_GE(refunds_in_refused_requests, compared / 200);
  if (leases_asked >= 1000) {  // leases must be granted and given back, not only asked for
    EXPECT_GE(grants, leases_asked / 10);
    EXPECT_GE(give_backs, grants / 10);
  }
  if (chargeable >= 1000) {  // the charges must overdraw, not just agree on what fits
    EXPECT_GE(charges, chargeable / 10);
    EXPECT_GE(charges_over, charges / 20);
    EXPECT_GE(peeks_refused, 1) << "a charged peek on a state in debt or overdrawn";
  }
  std::cout << "compared " << compared << ": allowed " << verdicts[Verdict::kAllowed] << ", denied "
            << verdicts[Verdict::kDenied] << ", never_fits " << verdicts[Verdict::kNeverFits]
            << "; entries passing in refused requests " << refused_with_passing_entry
            << "; refunds " << refunds << " (" << refunds_in_refused_requests
            << " in refused requests); charges " << charges << " (" << charges_over
            << " over the limit, " << peeks_refused << " peeks refused); leases asked "
            << leases_asked << ", granted " << grants << ", give-backs " << give_backs << "\n";
}

}  // namespace caudal::equivalence
