#include "store/share_book.h"

#include <algorithm>
#include <cassert>
#include <unordered_map>

#include "algorithms/share.h"

namespace caudal {

bool ExpireShares(ShareBook& book, Micros now) {
  std::erase_if(book.records, [&](const ShareRecord& r) { return r.expiry_us < now.count(); });
  return book.records.empty();
}

Result<ShareTaken> TakeShare(const ShareEntry& e, ShareBook& book, const CompactState* state,
                             Micros now) {
  ExpireShares(book, now);  // unobservable: an expired consumer counts for nothing
  auto self = std::find_if(book.records.begin(), book.records.end(),
                           [&](const ShareRecord& r) { return r.consumer == e.consumer; });
  const bool fresh_consumer = self == book.records.end();
  if (fresh_consumer) {
    if (book.records.size() >= kMaxShareConsumers) {
      return Status::ResourceExhausted("a share's key holds " + std::to_string(kMaxShareConsumers) +
                                       " live consumers already");
    }
    ShareRecord fresh;
    fresh.consumer = std::string(e.consumer);
    fresh.seq = book.next_seq++;
    fresh.last_us = now.count() - e.ttl.count() / 2;
    book.records.push_back(std::move(fresh));
    self = book.records.end() - 1;
  }
  self->group = std::string(e.group);
  self->demand = e.demand;
  self->weight = e.weight;
  self->expiry_us = now.count() + 2 * e.ttl.count();
  if (!e.group.empty()) {
    for (ShareRecord& r : book.records) {
      if (r.group == e.group) r.weight = e.weight;
    }
  }
  // Groups by name; "" is a group of its own.
  std::vector<ShareConsumer> consumers;
  std::unordered_map<std::string_view, uint32_t> groups;
  int64_t demand_total = 0;
  for (size_t i = 0; i < book.records.size(); ++i) {
    const ShareRecord& r = book.records[i];
    uint32_t g = static_cast<uint32_t>(kMaxShareConsumers + i);
    if (!r.group.empty()) g = groups.try_emplace(r.group, static_cast<uint32_t>(i)).first->second;
    // Another consumer silent for more than 3/4 of a ttl has stopped renewing: it wants nothing
    // until it calls again.
    const bool silent = &r != &*self && 4 * (now.count() - r.last_us) > 3 * e.ttl.count();
    const int64_t demand = silent ? 0 : r.demand;
    consumers.push_back({.group = g, .demand = demand, .weight = r.weight});
    demand_total += demand;
  }
  const Fairness fairness =
      e.fairness == Fairness::kMaxMin ? Fairness::kMaxMin : Fairness::kProportional;
  const Rate rate = e.limit->rate();
  Result<std::vector<int64_t>> shares = AllocateShares(rate.count, fairness, consumers);
  assert(shares.ok());  // ValidateEntries' bounds, and a group's weight is one
  if (!shares.ok()) return shares.status();
  const int64_t allocation = (*shares)[static_cast<size_t>(self - book.records.begin())];
  // A new consumer's first grant, half a ttl of its rate, takes no more than it asked for: a
  // newcomer alone is allotted the whole refill (the spare), and newcomers one after another
  // would otherwise empty the key for those that follow.
  const int64_t accruing = fresh_consumer ? std::min(allocation, e.demand) : allocation;
  const Accrual accrual =
      AccrueShare(accruing, rate.period, e.ttl, Micros(self->last_us), now, self->frac);
  ShareTaken taken{.step = DecideCompactWithLease(*e.limit, state, now, 0, accrual.units),
                   .share = {.allocation = allocation,
                             .consumers = static_cast<int64_t>(book.records.size()),
                             .demand_total = demand_total}};
  self->last_us = now.count();
  self->frac = accrual.rem;
  return taken;
}

}  // namespace caudal
