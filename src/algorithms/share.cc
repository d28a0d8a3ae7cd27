#include "algorithms/share.h"

#include <algorithm>
#include <cassert>
#include <numeric>
#include <string>

#include "algorithms/exact_math.h"

namespace caudal {
namespace {

// One claimant in a water-filling: satisfied at the level R/Wsum (R units left for claimants of
// total weight Wsum) iff num·Wsum <= R·den, i.e. its demand over its weight is at most the level;
// unsatisfied, it gets R·weight/Wsum.
struct Claim {
  int64_t demand = 0;  // allocation units
  int64_t num = 0;
  int64_t den = 1;
  int64_t weight = 0;
};

// Water-fills `capacity` over the claims, which are in tie-break order; returns what each gets.
// Σ = min(capacity, Σ demands). Bounds (see the callers): num·Wsum, R·den, num·den' < 2^53;
// R·weight goes through MulDiv (a product up to 2^56, Wsum < 2^45, the quotient <= R).
std::vector<int64_t> Fill(int64_t capacity, std::span<const Claim> claims) {
  std::vector<int64_t> out(claims.size(), 0);
  std::vector<size_t> order;
  int64_t wsum = 0;
  for (size_t i = 0; i < claims.size(); ++i) {
    if (claims[i].demand == 0) continue;
    order.push_back(i);
    wsum += claims[i].weight;
  }
  // Ascending demand/weight, by cross-multiplication; equal ratios by index.
  std::sort(order.begin(), order.end(), [&](size_t x, size_t y) {
    const int64_t lx = claims[x].num * claims[y].den;
    const int64_t ly = claims[y].num * claims[x].den;
    return lx != ly ? lx < ly : x < y;
  });
  int64_t left = capacity;
  size_t pos = 0;
  for (; pos < order.size(); ++pos) {
    const Claim& c = claims[order[pos]];
    if (c.num * wsum > left * c.den) break;  // this one and all after it stay unsatisfied
    out[order[pos]] = c.demand;
    left -= c.demand;
    wsum -= c.weight;
  }
  if (pos == order.size()) return out;
  std::vector<bool> rounded_down(claims.size(), false);
  int64_t given = 0;
  for (size_t j = pos; j < order.size(); ++j) {
    const size_t i = order[j];
    const auto [q, r] = exact::MulDiv(left, claims[i].weight, wsum);  // q < demand: unsatisfied
    out[i] = q;
    given += q;
    rounded_down[i] = r > 0;
  }
  // What the fractions add up to, fewer than the claims that lost one: a unit each to those,
  // lowest index first.
  int64_t rest = left - given;
  for (size_t i = 0; i < claims.size() && rest > 0; ++i) {
    if (!rounded_down[i]) continue;
    ++out[i];
    --rest;
  }
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

// kMaxMin in allocation units: groups by weight, then members equally. Bounds: a group's demand
// is capped at C <= 2^22, the weights add up to at most 2^10·2^12, so num·Wsum <= 2^44.
std::vector<int64_t> MaxMinFill(int64_t units, std::span<const ShareConsumer> consumers,
                                std::span<const int64_t> demand) {
  size_t groups = 0;
  const std::vector<size_t> group = GroupIndexes(consumers, groups);
  std::vector<Claim> claims(groups);
  for (size_t i = 0; i < consumers.size(); ++i) {
    Claim& g = claims[group[i]];
    g.demand = std::min(units, g.demand + demand[i]);
    g.weight = consumers[i].weight;
  }
  for (Claim& g : claims) {
    g.num = g.demand;
    g.den = g.weight;
  }
  const std::vector<int64_t> per_group = Fill(units, claims);
  std::vector<std::vector<size_t>> members(groups);
  for (size_t i = 0; i < consumers.size(); ++i) members[group[i]].push_back(i);
  std::vector<int64_t> out(consumers.size(), 0);
  for (size_t g = 0; g < groups; ++g) {
    std::vector<Claim> inner;
    for (size_t i : members[g]) {
      inner.push_back({.demand = demand[i], .num = demand[i], .den = 1, .weight = 1});
    }
    const std::vector<int64_t> got = Fill(per_group[g], inner);
    for (size_t j = 0; j < members[g].size(); ++j) out[members[g][j]] = got[j];
  }
  return out;
}

// kProportional in allocation units: weight w·d', satisfied iff Wsum <= R·w (num = 1, den = w).
// Bounds: Wsum <= 2^10·2^12·2^22 = 2^44, R·w <= 2^34.
std::vector<int64_t> ProportionalFill(int64_t units, std::span<const ShareConsumer> consumers,
                                      std::span<const int64_t> demand) {
  std::vector<Claim> claims;
  for (size_t i = 0; i < consumers.size(); ++i) {
    claims.push_back({.demand = demand[i],
                      .num = 1,
                      .den = consumers[i].weight,
                      .weight = consumers[i].weight * demand[i]});
  }
  return Fill(units, claims);
}

}  // namespace

Result<std::vector<int64_t>> FairShares(int64_t capacity, Fairness fairness,
                                        std::span<const ShareConsumer> consumers) {
  if (Status s = Check(capacity, fairness, consumers); !s.ok()) return s;
  // kMaxMin: no one gets more than the capacity, so a demand counts up to it.
  std::vector<int64_t> demand;
  int64_t most = capacity;
  for (const ShareConsumer& c : consumers) {
    demand.push_back(fairness == Fairness::kMaxMin ? std::min(c.demand, capacity) : c.demand);
    most = std::max(most, demand.back());
  }
  const int64_t scale = std::max<int64_t>(1, exact::CeilDiv(most, kShareUnits));
  const int64_t units = capacity / scale;  // <= kShareUnits
  std::vector<int64_t> scaled;
  for (int64_t d : demand) scaled.push_back(exact::CeilDiv(d, scale));  // <= kShareUnits
  const std::vector<int64_t> out = fairness == Fairness::kMaxMin
                                       ? MaxMinFill(units, consumers, scaled)
                                       : ProportionalFill(units, consumers, scaled);
  std::vector<int64_t> shares;
  for (size_t i = 0; i < out.size(); ++i) shares.push_back(std::min(out[i] * scale, demand[i]));
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
