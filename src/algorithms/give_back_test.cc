// GiveBack (compact_state.h), the step that returns a lease's unspent units: on seeded random
// traces, the state after a give-back is never fuller than the state of a twin that consumed
// only the spent part of the lease, whatever came between (other consumption, refills, windows
// passing); and a give-back at the grant's own time with nothing between leaves the two alike.
#include <gtest/gtest.h>

#include <random>

#include "algorithms/algorithm.h"
#include "support/algorithm_params.h"

namespace caudal {
namespace {

using std::chrono::milliseconds;
using testing::AlgorithmParamName;
using testing::AlgorithmsWhere;

using testing::kT0;

class Twins {
 public:
  Twins(const Limit& limit, Micros now) : limit_(limit), now_(now) {}

  // Both consume `cost` at now_ (the same request in both worlds); false if `with` refuses.
  bool Both(int64_t cost) {
    const Step w = DecideCompact(limit_, with_ptr(), now_, cost);
    if (!w.decision.allowed()) return false;
    const Step o = DecideCompact(limit_, without_ptr(), now_, cost);
    // `without` is at least as full, so what `with` admits it admits.
    EXPECT_TRUE(o.decision.allowed()) << limit_.ToString() << " cost " << cost;
    Store(w, with_, has_with_);
    Store(o, without_, has_without_);
    return true;
  }

  void Advance(Micros d) { now_ += d; }
  Micros now() const { return now_; }
  const Limit& limit() const { return limit_; }
  const CompactState* with_ptr() const { return has_with_ ? &with_ : nullptr; }
  const CompactState* without_ptr() const { return has_without_ ? &without_ : nullptr; }
  void SetWith(const Step& s) { Store(s, with_, has_with_); }
  void SetWithout(const Step& s) { Store(s, without_, has_without_); }

  int64_t Remaining(const CompactState* s) const {
    return DecideCompact(limit_, s, now_, 0).decision.remaining;
  }

 private:
  static void Store(const Step& s, CompactState& into, bool& has) {
    if (!s.changed) return;
    into = s.next;
    has = true;
  }

  Limit limit_;
  Micros now_;
  CompactState with_, without_;
  bool has_with_ = false, has_without_ = false;
};

Limit RandomLimit(std::mt19937_64& rng, Algorithm a) {
  auto pick = [&rng](int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
  };
  for (;;) {
    const int64_t cap = pick(1, 40);
    const Micros period = milliseconds(pick(1, 2000));
    Result<Limit> l = Limit::Create(
        IsWindowAlgorithm(a) ? LimitSpec::Window(a, cap, period)
                             : LimitSpec::Bucket(a, cap, {.count = pick(1, 50), .period = period}));
    if (l.ok()) return *l;
  }
}

// Every algorithm that takes leases (SupportsLease).
class GiveBack : public ::testing::TestWithParam<Algorithm> {};

INSTANTIATE_TEST_SUITE_P(SupportsLease, GiveBack,
                         ::testing::ValuesIn(AlgorithmsWhere(SupportsLease)), AlgorithmParamName);

TEST_P(GiveBack, NeverLeavesTheStateFullerThanIfOnlyTheSpentUnitsHadBeenLeased) {
  const Algorithm a = GetParam();
  std::mt19937_64 rng(static_cast<uint64_t>(a) + 28);
  auto pick = [&rng](int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
  };
  int64_t given = 0, kept = 0;  // units the give-backs returned, and held back
  for (int trial = 0; trial < 20'000; ++trial) {
    const Limit limit = RandomLimit(rng, a);
    const int64_t scale = limit.window().count();
    Twins t(limit, kT0 + Micros(pick(0, scale)));
    for (int i = 0, n = static_cast<int>(pick(0, 4)); i < n; ++i) {
      t.Advance(Micros(pick(0, scale / 4)));
      t.Both(pick(1, limit.capacity()));
    }
    // The grant: `with` takes cost + lease, `without` the cost and the part later spent.
    const int64_t cost = pick(0, 2);
    const Step granted =
        DecideCompactWithLease(limit, t.with_ptr(), t.now(), cost, pick(1, limit.capacity()));
    if (!granted.decision.allowed() || granted.decision.leased == 0) continue;
    const int64_t spent = pick(0, granted.decision.leased - 1);
    const Step twin = DecideCompact(limit, t.without_ptr(), t.now(), cost + spent);
    ASSERT_TRUE(twin.decision.allowed());
    t.SetWith(granted);
    t.SetWithout(twin);
    const Micros grant_at = granted.decision.leased_at;
    const Micros grant_reset = granted.decision.reset_after;
    const bool at_once = pick(0, 3) == 0;
    if (!at_once) {
      for (int i = 0, n = static_cast<int>(pick(0, 4)); i < n; ++i) {
        t.Advance(Micros(pick(0, scale / 2)));
        t.Both(pick(1, limit.capacity()));
      }
      t.Advance(Micros(pick(0, scale)));
    }
    const int64_t units = granted.decision.leased - spent;
    const int64_t before = t.Remaining(t.with_ptr());
    const Step back = GiveBackCompact(limit, t.with_ptr(), t.now(), units, grant_at, grant_reset);
    ASSERT_TRUE(back.decision.allowed());
    t.SetWith(back);
    given += t.Remaining(t.with_ptr()) - before;
    kept += units - (t.Remaining(t.with_ptr()) - before);
    for (int i = 0; i < 4; ++i) {
      ASSERT_LE(t.Remaining(t.with_ptr()), t.Remaining(t.without_ptr()))
          << limit.ToString() << " trial " << trial << " at +" << (t.now() - kT0).count();
      if (at_once && i == 0) {
        // At the grant's own time, with nothing between, the twins decide alike.
        for (int64_t c = 0; c <= limit.capacity(); ++c) {
          ASSERT_EQ(DecideCompact(limit, t.with_ptr(), t.now(), c).decision,
                    DecideCompact(limit, t.without_ptr(), t.now(), c).decision)
              << limit.ToString() << " trial " << trial << " cost " << c;
        }
      }
      t.Advance(Micros(pick(0, scale / 2)));
    }
  }
  // The traces must both return units and hold some back (absorbed by refill or a window).
  EXPECT_GT(given, 10'000);
  EXPECT_GT(kept, 1'000);
}

}  // namespace
}  // namespace caudal
