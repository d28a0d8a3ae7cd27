#include "algorithms/share.h"

#include <algorithm>
#include <cassert>
#include <numeric>
#include <string>

#include "algorithms/exact_math.h"
#include "common/cat.h"

namespace caudal {
namespace {

constexpr int64_t kExact = int64_t{1} << 53;

// ceil(x / d) for x >= 0, d > 0, without forming x + d (x may be 2^62).
int64_t CeilDiv(int64_t x, int64_t d) { return x / d + (x % d != 0 ? 1 : 0); }

// The claims in `unsatisfied` share `left` units by weight: floor(left·w/wsum) each, then what
// the fractions add up to (fewer units than the claims rounded down) one each to those rounded
// down, lowest index first. MulDiv: left <= 2^22, w <= 2^34, wsum <= 2^44.
void ShareOut(int64_t left, int64_t wsum, std::span<const size_t> unsatisfied,
              std::span<const int64_t> weight, std::vector<int64_t>& out) {
  assert(wsum > 0 && wsum < kExact);
  std::vector<bool> rounded_down(out.size(), false);
  int64_t rest = left;
  for (size_t i : unsatisfied) {
    const auto [q, r] = exact::MulDiv(left, weight[i], wsum);
    out[i] = q;
    rest -= q;
    rounded_down[i] = r > 0;
  }
  for (size_t i = 0; i < out.size() && rest > 0; ++i) {
    if (!rounded_down[i]) continue;
    ++out[i];
    --rest;
  }
}

// Weighted water-filling of `capacity` units over claims (demand D, weight w), indexed in
// tie-break order: min(D, L·w) each. The caller keeps D <= 2^22, Σw <= 2^22, so the products
// D·w', D·Σw and capacity·w stay below 2^45.
std::vector<int64_t> Fill(int64_t capacity, std::span<const int64_t> demand,
                          std::span<const int64_t> weight) {
  std::vector<int64_t> out(demand.size(), 0);
  std::vector<size_t> order;
  int64_t wsum = 0;
  for (size_t i = 0; i < demand.size(); ++i) {
    if (demand[i] == 0) continue;
    order.push_back(i);
    wsum += weight[i];
  }
  // Ascending demand/weight, by cross-multiplication; equal ratios by index.
  std::sort(order.begin(), order.end(), [&](size_t x, size_t y) {
    const int64_t lx = demand[x] * weight[y];
    const int64_t ly = demand[y] * weight[x];
    return lx != ly ? lx < ly : x < y;
  });
  int64_t left = capacity;
  size_t pos = 0;
  for (; pos < order.size(); ++pos) {
    const size_t i = order[pos];
    assert(demand[i] * wsum < kExact && left * weight[i] < kExact);
    if (demand[i] * wsum > left * weight[i]) break;  // D/w > left/wsum: this and all after
    out[i] = demand[i];
    left -= demand[i];
    wsum -= weight[i];
  }
  if (pos < order.size()) ShareOut(left, wsum, std::span(order).subspan(pos), weight, out);
  return out;
}

Status Check(int64_t capacity, Fairness fairness, std::span<const ShareConsumer> consumers) {
  if (capacity < 0 || capacity > kMaxShareAmount) {
    return Status::InvalidArgument("share capacity must be between 0 and 2^62 (got " +
                                   std::to_string(capacity) + ")");
  }
  if (consumers.size() > kMaxShareConsumers) {
    return Status::InvalidArgument("a share has at most " + std::to_string(kMaxShareConsumers) +
                                   " consumers (got " + std::to_string(consumers.size()) + ")");
  }
  for (const ShareConsumer& c : consumers) {
    if (c.demand < 0 || c.demand > kMaxShareAmount) {
      return Status::InvalidArgument("share demand must be between 0 and 2^62 (got " +
                                     std::to_string(c.demand) + ")");
    }
    if (c.weight < 1 || c.weight > kMaxShareWeight) {
      return Status::InvalidArgument("share weight must be between 1 and " +
                                     std::to_string(kMaxShareWeight) + " (got " +
                                     std::to_string(c.weight) + ")");
    }
  }
  if (fairness == Fairness::kMaxMin) {
    std::vector<std::pair<uint32_t, int64_t>> gw;
    for (const ShareConsumer& c : consumers) gw.emplace_back(c.group, c.weight);
    std::sort(gw.begin(), gw.end());
    for (size_t i = 1; i < gw.size(); ++i) {
      if (gw[i].first == gw[i - 1].first && gw[i].second != gw[i - 1].second) {
        return Status::InvalidArgument("share group " + std::to_string(gw[i].first) +
                                       " has members of different weights");
      }
    }
  }
  return Status::Ok();
}

// Each consumer's group as 0, 1, ... in order of first appearance.
std::vector<size_t> GroupIndexes(std::span<const ShareConsumer> consumers, size_t& groups) {
  std::vector<size_t> by_group(consumers.size());
  std::iota(by_group.begin(), by_group.end(), size_t{0});
  std::stable_sort(by_group.begin(), by_group.end(),
                   [&](size_t x, size_t y) { return consumers[x].group < consumers[y].group; });
  std::vector<size_t> first(consumers.size());  // per consumer: its group's first member
  for (size_t j = 0; j < by_group.size(); ++j) {
    const bool starts = j == 0 || consumers[by_group[j]].group != consumers[by_group[j - 1]].group;
    first[by_group[j]] = starts ? by_group[j] : first[by_group[j - 1]];
  }
  std::vector<size_t> index(consumers.size());
  std::vector<size_t> of_first(consumers.size(), SIZE_MAX);
  groups = 0;
  for (size_t i = 0; i < consumers.size(); ++i) {
    if (of_first[first[i]] == SIZE_MAX) of_first[first[i]] = groups++;
    index[i] = of_first[first[i]];
  }
  return index;
}

// kMaxMin in allocation units: groups by weight, then members equally. A group's demand is
// capped at C <= 2^22 and the weights add up to at most 2^10·2^12 (Fill's bounds).
std::vector<int64_t> MaxMinFill(int64_t units, std::span<const ShareConsumer> consumers,
                                std::span<const int64_t> demand) {
  size_t groups = 0;
  const std::vector<size_t> group = GroupIndexes(consumers, groups);
  std::vector<int64_t> group_demand(groups, 0);
  std::vector<int64_t> group_weight(groups, 0);
  std::vector<std::vector<size_t>> members(groups);
  for (size_t i = 0; i < consumers.size(); ++i) {
    group_demand[group[i]] = std::min(units, group_demand[group[i]] + demand[i]);
    group_weight[group[i]] = consumers[i].weight;
    members[group[i]].push_back(i);
  }
  const std::vector<int64_t> per_group = Fill(units, group_demand, group_weight);
  std::vector<int64_t> out(consumers.size(), 0);
  for (size_t g = 0; g < groups; ++g) {
    std::vector<int64_t> d;
    for (size_t i : members[g]) d.push_back(demand[i]);
    const std::vector<int64_t> got = Fill(per_group[g], d, std::vector<int64_t>(d.size(), 1));
    for (size_t j = 0; j < members[g].size(); ++j) out[members[g][j]] = got[j];
  }
  return out;
}

// kProportional: `units` of capacity, demands e_i in coarser units of t each. Weight w·e;
// satisfied (taking e·t) iff t·Σ w·e <= R·w, tested as Σ w·e <= floor(R·w / t) to stay exact.
// Bounds: e <= 2^22, w·e <= 2^34, Σ w·e <= 2^44, R·w <= 2^34; a satisfied e·t <= R.
std::vector<int64_t> ProportionalFill(int64_t units, int64_t t,
                                      std::span<const ShareConsumer> consumers,
                                      std::span<const int64_t> demand) {
  std::vector<int64_t> out(consumers.size(), 0);
  std::vector<int64_t> weight(consumers.size(), 0);
  std::vector<size_t> order;
  int64_t wsum = 0;
  for (size_t i = 0; i < consumers.size(); ++i) {
    if (demand[i] == 0) continue;
    weight[i] = consumers[i].weight * demand[i];
    wsum += weight[i];
    order.push_back(i);
  }
  // Satisfied first: the heaviest weight (demand/(w·demand) = 1/w), equal weights by index.
  std::sort(order.begin(), order.end(), [&](size_t x, size_t y) {
    const int64_t wx = consumers[x].weight;
    const int64_t wy = consumers[y].weight;
    return wx != wy ? wx > wy : x < y;
  });
  int64_t left = units;
  size_t pos = 0;
  for (; pos < order.size(); ++pos) {
    const size_t i = order[pos];
    assert(wsum < (int64_t{1} << 45) && left * consumers[i].weight < kExact);
    if (wsum > left * consumers[i].weight / t) break;
    out[i] = demand[i] * t;
    left -= out[i];
    wsum -= weight[i];
  }
  if (pos < order.size()) ShareOut(left, wsum, std::span(order).subspan(pos), weight, out);
  return out;
}

}  // namespace

std::string_view FairnessName(Fairness f) {
  return f == Fairness::kMaxMin ? "max_min" : "proportional";
}

Result<Fairness> ParseFairness(std::string_view text) {
  for (Fairness f : {Fairness::kMaxMin, Fairness::kProportional}) {
    if (FairnessName(f) == text) return f;
  }
  return Status::InvalidArgument(Cat("expected max_min or proportional (got ", Quoted(text), ')'));
}

Result<std::vector<int64_t>> FairShares(int64_t capacity, Fairness fairness,
                                        std::span<const ShareConsumer> consumers) {
  if (Status s = Check(capacity, fairness, consumers); !s.ok()) return s;
  const int64_t unit = std::max<int64_t>(1, CeilDiv(capacity, kShareUnits));
  const int64_t units = capacity / unit;  // <= kShareUnits
  // kMaxMin: no one gets more than the capacity, so a demand counts up to it, and fits in
  // kShareUnits capacity units. kProportional: demands in units of t capacity units, t as small
  // as keeps them within kShareUnits.
  std::vector<int64_t> demand;
  int64_t most = 0;
  for (const ShareConsumer& c : consumers) {
    demand.push_back(fairness == Fairness::kMaxMin ? std::min(c.demand, capacity) : c.demand);
    most = std::max(most, demand.back());
  }
  const int64_t t = std::max<int64_t>(1, CeilDiv(most, unit * kShareUnits));
  std::vector<int64_t> scaled;
  for (int64_t d : demand) scaled.push_back(CeilDiv(d, unit * t));  // <= kShareUnits
  const std::vector<int64_t> out = fairness == Fairness::kMaxMin
                                       ? MaxMinFill(units, consumers, scaled)
                                       : ProportionalFill(units, t, consumers, scaled);
  std::vector<int64_t> shares;
  for (size_t i = 0; i < out.size(); ++i) shares.push_back(std::min(out[i] * unit, demand[i]));
  return shares;
}

void SpreadSpare(int64_t capacity, std::vector<int64_t>& shares) {
  if (shares.empty()) return;
  const int64_t k = static_cast<int64_t>(shares.size());
  const int64_t spare = capacity - std::accumulate(shares.begin(), shares.end(), int64_t{0});
  assert(spare >= 0);
  const int64_t each = spare / k;
  const int64_t extra = spare % k;
  for (int64_t i = 0; i < k; ++i) shares[i] += each + (i < extra ? 1 : 0);
}

Result<std::vector<int64_t>> AllocateShares(int64_t capacity, Fairness fairness,
                                            std::span<const ShareConsumer> consumers) {
  Result<std::vector<int64_t>> shares = FairShares(capacity, fairness, consumers);
  if (shares.ok()) SpreadSpare(capacity, *shares);
  return shares;
}

Accrual AccrueShare(int64_t allocation, Micros period, Micros ttl, Micros last, Micros now,
                    int64_t rem) {
  const int64_t p = period.count();
  assert(allocation >= 0 && p > 0 && ttl.count() >= 0 && rem >= 0 && rem < p);
  const int64_t dt = std::clamp<int64_t>(now.count() - last.count(), 0, ttl.count());
  auto [q, r] = exact::MulDiv(allocation, dt, p);
  r += rem;  // < 2p
  if (r >= p) {
    r -= p;
    ++q;
  }
  return {.units = q, .rem = r};
}

}  // namespace caudal
