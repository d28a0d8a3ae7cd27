#include "algorithms/share.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <numeric>
#include <random>

#include "algorithms/exact_math.h"

namespace caudal {
namespace {

using exact::Int128;
using std::chrono::microseconds;

int64_t Sum(const std::vector<int64_t>& v) {
  return std::accumulate(v.begin(), v.end(), int64_t{0});
}

std::vector<int64_t> Fair(int64_t n, Fairness f, const std::vector<ShareConsumer>& cs) {
  Result<std::vector<int64_t>> r = FairShares(n, f, cs);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? *r : std::vector<int64_t>(cs.size(), -1);
}

std::vector<int64_t> Alloc(int64_t n, Fairness f, const std::vector<ShareConsumer>& cs) {
  Result<std::vector<int64_t>> r = AllocateShares(n, f, cs);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? *r : std::vector<int64_t>(cs.size(), -1);
}

// Progressive filling one unit at a time: the next unit goes to the unsatisfied claimant with
// the least (out + 1) / weight, ties to the lowest index.
std::vector<int64_t> ProgressiveFill(int64_t capacity, const std::vector<int64_t>& demand,
                                     const std::vector<int64_t>& weight) {
  std::vector<int64_t> out(demand.size(), 0);
  for (int64_t unit = 0; unit < capacity; ++unit) {
    size_t best = demand.size();
    for (size_t i = 0; i < demand.size(); ++i) {
      if (out[i] >= demand[i]) continue;
      if (best == demand.size() || (out[i] + 1) * weight[best] < (out[best] + 1) * weight[i]) {
        best = i;
      }
    }
    if (best == demand.size()) break;
    ++out[best];
  }
  return out;
}

// Groups by first appearance: their members, summed demand and weight.
struct Groups {
  explicit Groups(const std::vector<ShareConsumer>& cs) {
    for (size_t i = 0; i < cs.size(); ++i) {
      auto [it, added] = index.emplace(cs[i].group, members.size());
      if (added) {
        members.emplace_back();
        demand.push_back(0);
        weight.push_back(cs[i].weight);
      }
      members[it->second].push_back(i);
      demand[it->second] += cs[i].demand;
    }
  }
  std::map<uint32_t, size_t> index;
  std::vector<std::vector<size_t>> members;
  std::vector<int64_t> demand;
  std::vector<int64_t> weight;
};

// FairShares filled unit by unit, where no scaling happens (n, demands <= kShareUnits).
std::vector<int64_t> UnitByUnit(int64_t n, Fairness f, const std::vector<ShareConsumer>& cs) {
  if (f == Fairness::kProportional) {
    std::vector<int64_t> demand;
    std::vector<int64_t> weight;
    for (const ShareConsumer& c : cs) {
      demand.push_back(c.demand);
      weight.push_back(c.weight * c.demand);
    }
    return ProgressiveFill(n, demand, weight);
  }
  const Groups g(cs);
  const std::vector<int64_t> per_group = ProgressiveFill(n, g.demand, g.weight);
  std::vector<int64_t> out(cs.size(), 0);
  for (size_t j = 0; j < g.members.size(); ++j) {
    std::vector<int64_t> d;
    for (size_t i : g.members[j]) d.push_back(cs[i].demand);
    const std::vector<int64_t> got =
        ProgressiveFill(per_group[j], d, std::vector<int64_t>(d.size(), 1));
    for (size_t m = 0; m < got.size(); ++m) out[g.members[j][m]] = got[m];
  }
  return out;
}

std::vector<ShareConsumer> SmallCase(std::mt19937_64& rng) {
  const uint32_t ids[] = {7, 3, 1'000'000, 42};
  int64_t weight_of[4];
  for (int64_t& w : weight_of) w = 1 + static_cast<int64_t>(rng() % 5);
  const size_t groups = 1 + rng() % 4;
  std::vector<ShareConsumer> cs(1 + rng() % 8);
  for (ShareConsumer& c : cs) {
    const size_t g = rng() % groups;
    c = {.group = ids[g], .demand = static_cast<int64_t>(rng() % 31), .weight = weight_of[g]};
    if (rng() % 5 == 0) c.demand = 0;
  }
  return cs;
}

// A value up to 2^62, spread over every magnitude.
int64_t Big(std::mt19937_64& rng) {
  return std::min<int64_t>(kMaxShareAmount, static_cast<int64_t>(rng() >> (1 + rng() % 63)));
}

std::vector<ShareConsumer> BigCase(std::mt19937_64& rng, size_t k) {
  const size_t groups = 1 + rng() % k;
  std::vector<int64_t> weight_of(groups);
  for (int64_t& w : weight_of) w = 1 + static_cast<int64_t>(rng() % kMaxShareWeight);
  std::vector<ShareConsumer> cs(k);
  for (ShareConsumer& c : cs) {
    const size_t g = rng() % groups;
    c = {.group = static_cast<uint32_t>(g * 2'654'435'761u),
         .demand = Big(rng),
         .weight = weight_of[g]};
    if (rng() % 8 == 0) c.demand = 0;
  }
  return cs;
}

// The demand unit FairShares works in (share.h, step 1): what a consumer can lose to rounding.
int64_t Scale(int64_t n, Fairness f, const std::vector<ShareConsumer>& cs) {
  const int64_t unit = std::max<int64_t>(1, (n + kShareUnits - 1) / kShareUnits);
  int64_t most = 0;
  for (const ShareConsumer& c : cs) {
    most = std::max(most, f == Fairness::kMaxMin ? std::min(c.demand, n) : c.demand);
  }
  return unit * std::max<int64_t>(1, static_cast<int64_t>((Int128{most} + unit * kShareUnits - 1) /
                                                          (unit * kShareUnits)));
}

// The exact (rational) water-filling: min(D_j, L·W_j), L such that they add up to
// min(capacity, Σ D). Found by trying every candidate set of satisfied claims
// {i : D_i/W_i <= D_j/W_j} until one is consistent with its own level.
struct Ratio {
  Int128 num = 0;
  Int128 den = 1;
};
std::vector<Ratio> Fluid(int64_t capacity, const std::vector<int64_t>& demand,
                         const std::vector<int64_t>& weight) {
  const size_t k = demand.size();
  std::vector<Ratio> out(k);
  Int128 total = 0;
  for (size_t i = 0; i < k; ++i) total += demand[i];
  for (size_t i = 0; i < k; ++i) out[i].num = demand[i];
  if (total <= capacity) return out;
  for (size_t j = 0; j <= k; ++j) {  // j == k: no claim satisfied but the idle ones
    const auto satisfied = [&](size_t i) {
      return demand[i] == 0 ||
             (j < k && Int128{demand[i]} * weight[j] <= Int128{demand[j]} * weight[i]);
    };
    Int128 rest = capacity;
    Int128 wsum = 0;
    for (size_t i = 0; i < k; ++i) satisfied(i) ? rest -= demand[i] : wsum += weight[i];
    if (wsum == 0 || rest < 0) continue;
    bool consistent = true;
    for (size_t i = 0; i < k; ++i) {
      const bool below = Int128{demand[i]} * wsum <= rest * weight[i];  // D_i/W_i <= L
      consistent = consistent && below == satisfied(i);
    }
    if (!consistent) continue;
    for (size_t i = 0; i < k; ++i) {
      if (!satisfied(i)) out[i] = {.num = rest * weight[i], .den = wsum};
    }
    return out;
  }
  ADD_FAILURE() << "no consistent level";
  return out;
}

// Whether every got[i] is want[i] rounded down or up.
::testing::AssertionResult RoundsFluid(const std::vector<int64_t>& got,
                                       const std::vector<Ratio>& want) {
  for (size_t i = 0; i < got.size(); ++i) {
    const Int128 low = want[i].num / want[i].den;
    const Int128 high = (want[i].num + want[i].den - 1) / want[i].den;
    if (got[i] < low || got[i] > high) {
      return ::testing::AssertionFailure()
             << "claim " << i << " got " << got[i] << ", want between " << static_cast<int64_t>(low)
             << " and " << static_cast<int64_t>(high);
    }
  }
  return ::testing::AssertionSuccess();
}

TEST(Share, IsTheExactWaterFillingRoundedEitherWay) {
  // At these sizes nothing is scaled (s = 1). Proven here, on each level: every share is the
  // exact water-filling's rounded down or up, and the total is min(n, Σ demands) — the same as
  // filling unit by unit.
  std::mt19937_64 rng(36);
  for (int t = 0; t < 20'000; ++t) {
    const std::vector<ShareConsumer> cs = SmallCase(rng);
    const int64_t n = static_cast<int64_t>(rng() % 80);
    int64_t demand = 0;
    for (const ShareConsumer& c : cs) demand += c.demand;
    for (Fairness f : {Fairness::kMaxMin, Fairness::kProportional}) {
      const std::vector<int64_t> got = Fair(n, f, cs);
      ASSERT_EQ(Sum(got), std::min(n, demand)) << "case " << t;
      ASSERT_EQ(Sum(got), Sum(UnitByUnit(n, f, cs))) << "case " << t;
      if (f == Fairness::kProportional) {
        std::vector<int64_t> d;
        std::vector<int64_t> w;
        for (const ShareConsumer& c : cs) {
          d.push_back(c.demand);
          w.push_back(c.weight * c.demand);
        }
        ASSERT_TRUE(RoundsFluid(got, Fluid(n, d, w))) << "case " << t;
        continue;
      }
      const Groups g(cs);
      std::vector<int64_t> per_group(g.members.size(), 0);
      for (size_t i = 0; i < cs.size(); ++i) per_group[g.index.at(cs[i].group)] += got[i];
      ASSERT_TRUE(RoundsFluid(per_group, Fluid(n, g.demand, g.weight))) << "case " << t;
      for (size_t j = 0; j < g.members.size(); ++j) {
        std::vector<int64_t> d;
        std::vector<int64_t> mine;
        for (size_t i : g.members[j]) {
          d.push_back(cs[i].demand);
          mine.push_back(got[i]);
        }
        ASSERT_TRUE(RoundsFluid(mine, Fluid(per_group[j], d, std::vector<int64_t>(d.size(), 1))))
            << "case " << t << " group " << j;
      }
    }
  }
}

TEST(Share, IsWithinOneUnitOfUnitByUnitFillingWhenWeightsAreEqual) {
  // With unequal weights, filling unit by unit (the next unit to the least (out + 1)/w) favours
  // the heavy: it can give 10 where the exact share is 8.53 (n = 27, weights w·d of 78 among
  // 247). Shares stay within one of the exact ones instead (above); with equal weights both
  // agree within one unit.
  std::mt19937_64 rng(37);
  for (int t = 0; t < 20'000; ++t) {
    std::vector<ShareConsumer> cs = SmallCase(rng);
    for (ShareConsumer& c : cs) c.weight = 2;
    const int64_t n = static_cast<int64_t>(rng() % 80);
    const std::vector<int64_t> got = Fair(n, Fairness::kMaxMin, cs);
    const std::vector<int64_t> want = UnitByUnit(n, Fairness::kMaxMin, cs);
    for (size_t i = 0; i < cs.size(); ++i) {
      ASSERT_LE(std::abs(got[i] - want[i]), 1) << "case " << t << " consumer " << i;
    }
  }
}

TEST(Share, DoormansFairShareExample) {
  // youtube/doorman, doc/algorithms.md, FAIR_SHARE: capacity 120, wants 1000, 50 and 10 get
  // 60, 50 and 10. (Its PROPORTIONAL_SHARE example gives no numbers, and tops up in proportion to
  // the wants after an equal share, which kProportional does not.)
  const std::vector<ShareConsumer> cs = {{.group = 0, .demand = 1000, .weight = 1},
                                         {.group = 1, .demand = 50, .weight = 1},
                                         {.group = 2, .demand = 10, .weight = 1}};
  EXPECT_EQ(Fair(120, Fairness::kMaxMin, cs), (std::vector<int64_t>{60, 50, 10}));
  EXPECT_EQ(Alloc(120, Fairness::kMaxMin, cs), (std::vector<int64_t>{60, 50, 10}));
}

TEST(Share, TwoLevelsGroupsByWeightThenMembersEqually) {
  // Group 5 (weight 3) has two members, group 9 (weight 1) one: 100 splits 75/25 between the
  // groups, then 75 between group 5's members, the one wanting 10 getting it all.
  const std::vector<ShareConsumer> cs = {{.group = 5, .demand = 1000, .weight = 3},
                                         {.group = 9, .demand = 1000, .weight = 1},
                                         {.group = 5, .demand = 10, .weight = 3}};
  EXPECT_EQ(Fair(100, Fairness::kMaxMin, cs), (std::vector<int64_t>{65, 25, 10}));
  // Proportional to weight times demand, 3000 : 1000 : 30 of 100: 74, 24 and 0 rounded down,
  // the 2 left over to the first two.
  EXPECT_EQ(Fair(100, Fairness::kProportional, cs), (std::vector<int64_t>{75, 25, 0}));
}

TEST(Share, ProportionalSatisfiesTheHeaviestWeightFirst) {
  // Demands in units of 2 (the largest is twice the capacity): the weight-4096 consumer wants
  // 1000, well within L·4096·1000, so it gets all of it and the other one the rest.
  const std::vector<ShareConsumer> cs = {{.group = 0, .demand = int64_t{1} << 23, .weight = 1},
                                         {.group = 1, .demand = 1000, .weight = 4096}};
  EXPECT_EQ(Fair(int64_t{1} << 22, Fairness::kProportional, cs),
            (std::vector<int64_t>{(int64_t{1} << 22) - 1000, 1000}));
}

TEST(Share, SpareGoesToEveryoneAlikeTheRemainderToTheFirst) {
  const std::vector<ShareConsumer> cs = {{.group = 0, .demand = 10, .weight = 1},
                                         {.group = 1, .demand = 0, .weight = 1},
                                         {.group = 2, .demand = 600, .weight = 4}};
  // Fill 10, 0, 600; spare 391 = 3·130 + 1.
  EXPECT_EQ(Alloc(1001, Fairness::kMaxMin, cs), (std::vector<int64_t>{141, 130, 730}));
  EXPECT_EQ(Alloc(1001, Fairness::kProportional, cs), (std::vector<int64_t>{141, 130, 730}));
  std::vector<int64_t> none;
  SpreadSpare(5, none);
  EXPECT_TRUE(none.empty());
}

TEST(Share, BadInputIsRefused) {
  const auto bad = [](int64_t n, Fairness f, std::vector<ShareConsumer> cs) {
    const Result<std::vector<int64_t>> r = AllocateShares(n, f, cs);
    return !r.ok() && r.status().code() == StatusCode::kInvalidArgument;
  };
  const ShareConsumer ok{.group = 1, .demand = 5, .weight = 2};
  EXPECT_TRUE(bad(-1, Fairness::kMaxMin, {ok}));
  EXPECT_TRUE(bad(kMaxShareAmount + 1, Fairness::kMaxMin, {ok}));
  EXPECT_TRUE(bad(10, Fairness::kMaxMin, {{.group = 1, .demand = -1, .weight = 1}}));
  EXPECT_TRUE(bad(10, Fairness::kMaxMin, {{.group = 1, .demand = kMaxShareAmount + 1}}));
  EXPECT_TRUE(bad(10, Fairness::kProportional, {{.group = 1, .demand = 1, .weight = 0}}));
  EXPECT_TRUE(bad(10, Fairness::kMaxMin, {{.group = 1, .demand = 1, .weight = 4097}}));
  EXPECT_TRUE(bad(10, Fairness::kMaxMin, std::vector<ShareConsumer>(kMaxShareConsumers + 1, ok)));
  EXPECT_TRUE(bad(10, Fairness::kMaxMin, {ok, {.group = 1, .demand = 5, .weight = 3}}));
  // The same in proportional fairness, where a weight is each consumer's own, is fine.
  EXPECT_FALSE(bad(10, Fairness::kProportional, {ok, {.group = 1, .demand = 5, .weight = 3}}));
  EXPECT_FALSE(
      bad(kMaxShareAmount, Fairness::kMaxMin, std::vector<ShareConsumer>(kMaxShareConsumers, ok)));
  EXPECT_FALSE(bad(0, Fairness::kMaxMin, {}));
}

TEST(Share, BoundsHoldOnBigValues) {
  std::mt19937_64 rng(62);
  for (int t = 0; t < 400; ++t) {
    const size_t k = 1 + rng() % (t % 4 == 0 ? kMaxShareConsumers : 16);
    const std::vector<ShareConsumer> cs = BigCase(rng, k);
    const int64_t n = Big(rng);
    for (Fairness f : {Fairness::kMaxMin, Fairness::kProportional}) {
      const std::vector<int64_t> fill = Fair(n, f, cs);
      const std::vector<int64_t> all = Alloc(n, f, cs);
      const int64_t spare = n - Sum(fill);
      ASSERT_GE(spare, 0) << "case " << t;
      ASSERT_EQ(Sum(all), n) << "case " << t;
      // Rounding loses less than an allocation unit per consumer, plus one.
      Int128 demand = 0;
      for (const ShareConsumer& c : cs) demand += c.demand;
      const int64_t s = Scale(n, f, cs);
      ASSERT_LE(std::min<Int128>(n, demand) - Sum(fill), Int128{s} * (k + 1)) << "case " << t;
      for (size_t i = 0; i < k; ++i) {
        ASSERT_GE(fill[i], 0);
        ASSERT_LE(fill[i], cs[i].demand);
        ASSERT_EQ(all[i] - fill[i], spare / static_cast<int64_t>(k) +
                                        (static_cast<int64_t>(i) < spare % static_cast<int64_t>(k)))
            << "case " << t;
      }
    }
  }
}

TEST(Share, TheLargestInputsSplitEvenly) {
  // Every bound at its largest (share.cc's assertions check the products stay below 2^53).
  for (Fairness f : {Fairness::kMaxMin, Fairness::kProportional}) {
    for (uint32_t groups : {1u, 1024u}) {
      std::vector<ShareConsumer> cs;
      for (uint32_t i = 0; i < kMaxShareConsumers; ++i) {
        cs.push_back({.group = i % groups, .demand = kMaxShareAmount, .weight = kMaxShareWeight});
      }
      const std::vector<int64_t> all = Alloc(kMaxShareAmount, f, cs);
      EXPECT_EQ(all, std::vector<int64_t>(cs.size(), kMaxShareAmount / 1024));
    }
  }
}

TEST(Share, OrderMattersOnlyForRounding) {
  // Each share is the exact water-filling's rounded either way; only which way depends on the
  // order: by one capacity unit per level (kMaxMin has two).
  std::mt19937_64 rng(17);
  for (int t = 0; t < 2000; ++t) {
    const bool small = t % 2 == 0;
    const std::vector<ShareConsumer> cs = small ? SmallCase(rng) : BigCase(rng, 1 + rng() % 64);
    const int64_t n = small ? static_cast<int64_t>(rng() % 80) : Big(rng);
    std::vector<size_t> perm(cs.size());
    std::iota(perm.begin(), perm.end(), size_t{0});
    std::shuffle(perm.begin(), perm.end(), rng);
    std::vector<ShareConsumer> shuffled;
    for (size_t i : perm) shuffled.push_back(cs[i]);
    const int64_t unit = std::max<int64_t>(1, (n + kShareUnits - 1) / kShareUnits);
    for (Fairness f : {Fairness::kMaxMin, Fairness::kProportional}) {
      const std::vector<int64_t> a = Fair(n, f, cs);
      const std::vector<int64_t> b = Fair(n, f, shuffled);
      const int64_t levels = f == Fairness::kMaxMin ? 2 : 1;
      // In real units the totals differ only by what capping at demands drops (share.h, step 1).
      const int64_t drop = static_cast<int64_t>(cs.size()) * (Scale(n, f, cs) - 1);
      ASSERT_LE(std::abs(Sum(a) - Sum(b)), drop) << "case " << t;
      for (size_t j = 0; j < perm.size(); ++j) {
        ASSERT_LE(std::abs(a[perm[j]] - b[j]), levels * unit) << "case " << t;
      }
    }
  }
}

TEST(Share, RaisingADemandNeverLowersItsShare) {
  std::mt19937_64 rng(7);
  for (int t = 0; t < 600; ++t) {
    const bool small = t % 2 == 0;
    std::vector<ShareConsumer> cs = small ? SmallCase(rng) : BigCase(rng, 1 + rng() % 64);
    const int64_t n = small ? static_cast<int64_t>(rng() % 80) : Big(rng);
    const size_t i = rng() % cs.size();
    for (Fairness f : {Fairness::kMaxMin, Fairness::kProportional}) {
      std::vector<ShareConsumer> more = cs;
      more[i].demand += (small ? static_cast<int64_t>(rng() % 20) : Big(rng)) / 2;
      more[i].demand = std::min(more[i].demand, kMaxShareAmount);
      // kProportional's demand unit grows with the largest demand, which moves the rounding of
      // every demand: a share can then drop by less than a unit, the spare part too.
      const int64_t unit = Scale(n, f, more) == Scale(n, f, cs) ? 0 : Scale(n, f, more);
      ASSERT_GE(Fair(n, f, more)[i], Fair(n, f, cs)[i] - unit) << "case " << t;
      const int64_t slack = 2 * unit + (unit > 0);
      ASSERT_GE(Alloc(n, f, more)[i], Alloc(n, f, cs)[i] - slack) << "case " << t;
    }
  }
}

TEST(Share, AGroupWithinItsWeightedShareGetsAllItsDemand) {
  std::mt19937_64 rng(11);
  int checked = 0;
  for (int t = 0; t < 2000; ++t) {
    const std::vector<ShareConsumer> cs = BigCase(rng, 1 + rng() % 32);
    const int64_t n = Big(rng);
    const int64_t s = Scale(n, Fairness::kMaxMin, cs);
    std::map<uint32_t, std::pair<Int128, int64_t>> groups;  // demand, members
    std::map<uint32_t, int64_t> weight;
    for (const ShareConsumer& c : cs) {
      groups[c.group].first += c.demand;
      ++groups[c.group].second;
      weight[c.group] = c.weight;
    }
    Int128 total_weight = 0;
    for (const auto& [g, w] : weight) total_weight += w;
    const std::vector<int64_t> fill = Fair(n, Fairness::kMaxMin, cs);
    for (size_t i = 0; i < cs.size(); ++i) {
      const auto& [demand, members] = groups[cs[i].group];
      // Within its weighted share even after rounding every member's demand up one unit.
      if ((demand + Int128{s} * (members + 1)) * total_weight <= Int128{n} * weight[cs[i].group]) {
        ASSERT_EQ(fill[i], cs[i].demand) << "case " << t;
        ++checked;
      }
    }
  }
  EXPECT_GT(checked, 500);
}

TEST(Share, IdleConsumersLeaveTheirPartToTheOthers) {
  std::mt19937_64 rng(3);
  for (int t = 0; t < 2000; ++t) {
    const bool small = t % 2 == 0;
    std::vector<ShareConsumer> cs = small ? SmallCase(rng) : BigCase(rng, 1 + rng() % 64);
    const int64_t n = small ? static_cast<int64_t>(rng() % 80) : Big(rng);
    std::vector<ShareConsumer> with_idle = cs;
    for (int j = 0; j < 3; ++j) {
      with_idle.push_back({.group = 99'999 + static_cast<uint32_t>(j), .demand = 0, .weight = 9});
      const ShareConsumer& member = cs[rng() % cs.size()];
      with_idle.push_back({.group = member.group, .demand = 0, .weight = member.weight});
    }
    for (Fairness f : {Fairness::kMaxMin, Fairness::kProportional}) {
      const std::vector<int64_t> without = Fair(n, f, cs);
      std::vector<int64_t> with = Fair(n, f, with_idle);
      for (size_t j = cs.size(); j < with.size(); ++j) ASSERT_EQ(with[j], 0) << "case " << t;
      with.resize(cs.size());
      ASSERT_EQ(with, without) << "case " << t;
    }
  }
}

TEST(Share, WeightsSplitTheCapacityBetweenUnsatisfiedGroups) {
  std::mt19937_64 rng(5);
  for (int t = 0; t < 2000; ++t) {
    const int64_t n = Big(rng);
    const int64_t w1 = 1 + static_cast<int64_t>(rng() % kMaxShareWeight);
    const int64_t w2 = 1 + static_cast<int64_t>(rng() % kMaxShareWeight);
    // Both groups want all of it: each gets n·w/(w1 + w2), within rounding.
    const std::vector<ShareConsumer> cs = {{.group = 1, .demand = n, .weight = w1},
                                           {.group = 2, .demand = n, .weight = w2},
                                           {.group = 1, .demand = n, .weight = w1}};
    const std::vector<int64_t> fill = Fair(n, Fairness::kMaxMin, cs);
    const int64_t s = Scale(n, Fairness::kMaxMin, cs);
    const Int128 first = Int128{fill[0]} + fill[2];
    const Int128 gap = first * (w1 + w2) - Int128{n} * w1;
    ASSERT_LE(gap < 0 ? -gap : gap, Int128{3} * s * (w1 + w2)) << "case " << t;
    ASSERT_LE(std::abs(fill[0] - fill[2]), s) << "case " << t;
  }
}

TEST(Share, ProportionalSharesFollowDemand) {
  std::mt19937_64 rng(9);
  int checked = 0;
  for (int t = 0; t < 400; ++t) {
    const size_t k = 1 + rng() % 64;
    std::vector<ShareConsumer> cs = BigCase(rng, k);
    const int64_t w = cs[0].weight;
    for (ShareConsumer& c : cs) c.weight = w;  // equal weights: everyone is short alike
    Int128 demand = 0;
    for (const ShareConsumer& c : cs) demand += c.demand;
    const int64_t n = Big(rng);
    if (demand <= n) continue;
    ++checked;
    const std::vector<int64_t> fill = Fair(n, Fairness::kProportional, cs);
    const int64_t s = Scale(n, Fairness::kProportional, cs);
    for (size_t i = 0; i < k; ++i) {
      // a_i ≈ n·d_i/Σd: off by the rounding of d_i and Σd to units, and of the result.
      const long double want = static_cast<long double>(n) * cs[i].demand / demand;
      const long double off = std::abs(fill[i] - want);
      ASSERT_LE(off, (4.0L + static_cast<long double>(k) * cs[i].demand / demand) * s + 1)
          << "case " << t << " consumer " << i;
    }
  }
  EXPECT_GT(checked, 100);
}

TEST(Share, AccrualInManySmallStepsEqualsOneBigStep) {
  std::mt19937_64 rng(1);
  for (int t = 0; t < 2000; ++t) {
    // Up to 2^24 units per period, over 2^27 µs in all: the quotient stays below 2^53.
    const int64_t a = static_cast<int64_t>(rng() >> (40 + rng() % 24));
    const Micros p(1 + static_cast<int64_t>(rng() % 86'400'000'000));
    const Micros ttl(int64_t{1} << 44);
    Micros at(static_cast<int64_t>(rng() % 1'000'000'000));
    const Micros start = at;
    int64_t units = 0;
    int64_t rem = 0;
    for (int step = 0; step < 50; ++step) {
      const Micros next = at + Micros(static_cast<int64_t>(rng() % 3'000'000));
      const Accrual got = AccrueShare(a, p, ttl, at, next, rem);
      ASSERT_GE(got.rem, 0);
      ASSERT_LT(got.rem, p.count());
      units += got.units;
      rem = got.rem;
      at = next;
    }
    const Accrual once = AccrueShare(a, p, ttl, start, at, 0);
    ASSERT_EQ(units, once.units) << "case " << t;
    ASSERT_EQ(rem, once.rem) << "case " << t;
    const Int128 exact = Int128{a} * (at - start).count();
    ASSERT_EQ(Int128{once.units} * p.count() + once.rem, exact) << "case " << t;
  }
}

TEST(Share, AccrualStopsAtTheTtlAndIgnoresTimeGoingBack) {
  const Micros p = std::chrono::seconds(1);
  const Micros ttl = std::chrono::seconds(10);
  const Micros last = std::chrono::seconds(100);
  // 7 per second for 10 s at most, plus the carried 999'999 µs·units.
  Accrual got = AccrueShare(7, p, ttl, last, last + std::chrono::seconds(60), 999'999);
  EXPECT_EQ(got.units, 70);
  EXPECT_EQ(got.rem, 999'999);
  got = AccrueShare(7, p, ttl, last, last + std::chrono::seconds(10), 0);
  EXPECT_EQ(got.units, 70);
  got = AccrueShare(7, p, ttl, last, last + Micros(9'999'999), 0);
  EXPECT_EQ(got.units, 69);
  EXPECT_EQ(got.rem, 999'993);
  got = AccrueShare(7, p, ttl, last, last + Micros(142'858), 1);
  EXPECT_EQ(got.units, 1);  // 7·142'858 + 1 = 1'000'007
  EXPECT_EQ(got.rem, 7);
  got = AccrueShare(1, Micros(10), ttl, last, last + Micros(5), 5);
  EXPECT_EQ(got.units, 1);  // the fraction carried completes a unit exactly
  EXPECT_EQ(got.rem, 0);
  got = AccrueShare(7, p, ttl, last, last - std::chrono::seconds(5), 12);
  EXPECT_EQ(got.units, 0);
  EXPECT_EQ(got.rem, 12);
}

}  // namespace
}  // namespace caudal
