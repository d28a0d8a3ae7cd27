#include "decorators/lease_table.h"

#include <algorithm>
#include <cstdio>
#include <functional>
#include <iterator>
#include <utility>

#include "algorithms/algorithm.h"
#include "algorithms/exact_math.h"

namespace caudal::engine_internal {
namespace {

constexpr size_t kShards = 64;

struct Lot {
  int64_t left = 0;     // unspent units
  int64_t granted = 0;  // units the store granted
  Nanos sent{0};        // monotonic: when the request that took it was sent
  Nanos expires{0};     // monotonic: never spent at or after this
  LeaseGrant grant;
};

struct KeyLeases {
  explicit KeyLeases(const Limit& l) : limit(l) {}

  Limit limit;   // the lots' limit: a key used with another one ends them
  Nanos ttl{0};  // its terms, as its last request gave them
  int64_t share_ppm = 0;
  std::array<Lot, kMaxLotsPerKey> lots;  // [0, n), by expiry, earliest first
  size_t n = 0;
  int64_t asked = 0;  // units of the ask for this key in flight (one at a time), or 0
  // Until when requests its lots cannot cover are refused here: the store's last answer gave
  // less than was asked (see Granted).
  Nanos dry_until{Nanos::min()};
  bool listed = false;  // in the shard's holders
  // Demand at this instance: units and requests in the current period of `ttl` and the one before.
  Nanos period_start{0};
  int64_t units_now = 0, units_before = 0;
  int64_t requests_now = 0, requests_before = 0;
  Nanos last_seen{0};
  // Share mode (lease_table.h): in it; whether the store answered its last share renewal; when
  // the last renewal was sent (none yet: Nanos::min()).
  bool sharing = false;
  bool share_answered = false;
  Nanos share_sent{Nanos::min()};
  // An identity's share of a capacity (BeginShared; always sharing): the capacity's key in the
  // store, its group, weight and fairness, its allocation as last answered (-1: none yet), and the
  // requests waiting for its renewal in flight.
  bool of_identity = false;
  std::string policy;
  std::string store_key;
  std::string group;
  int64_t weight = 1;
  Fairness fairness = Fairness::kMaxMin;
  int64_t allocation = -1;
  std::vector<std::function<void()>> waiters;

  int64_t Left() const {
    int64_t s = 0;
    for (size_t i = 0; i < n; ++i) s += lots[i].left;
    return s;
  }
  int64_t Spent() const {
    int64_t s = 0;
    for (size_t i = 0; i < n; ++i) s += lots[i].granted - lots[i].left;
    return s;
  }
};

struct Hash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};

}  // namespace

struct LeaseTable::Shard {
  mutable std::mutex mu;
  std::unordered_map<std::string, KeyLeases, Hash, std::equal_to<>> keys;  // guarded by mu
  std::vector<std::string> holders;  // guarded by mu: keys with lots, or an ask in flight
  std::vector<EndedLot> ended;       // guarded by mu: to give back
  int64_t held = 0;                  // guarded by mu: units in lots
  int64_t asked = 0;                 // guarded by mu: units of the asks in flight
  int64_t ending = 0;                // guarded by mu: units in `ended`
  size_t sharing = 0;                // guarded by mu: keys in share mode
  Nanos pruned{Nanos::min()};        // guarded by mu
  size_t capacity = 0;
};

namespace {

using Shard = LeaseTable::Shard;

void End(Shard& shard, EndedLot lot) {
  shard.ending += lot.units;
  shard.ended.push_back(std::move(lot));
}

// The store's key of the table's `key`: an identity's entry's is its capacity's.
const std::string& StoreKeyOf(const std::string& key, const KeyLeases& k) {
  return k.of_identity ? k.store_key : key;
}

void EndLot(Shard& shard, const std::string& key, const KeyLeases& k, const Lot& lot) {
  shard.held -= lot.left;
  if (lot.left > 0) End(shard, {StoreKeyOf(key, k), k.limit, lot.left, lot.grant});
}

void Ask(Shard& shard, KeyLeases& k, int64_t units) {
  k.asked = units;
  shard.asked += units;
}

// Ends the lots of `k` that expired by `now` (all of them when `all`).
void Expire(Shard& shard, const std::string& key, KeyLeases& k, Nanos now, bool all) {
  size_t live = 0;
  for (size_t i = 0; i < k.n; ++i) {
    if (all || k.lots[i].expires <= now) {
      EndLot(shard, key, k, k.lots[i]);
    } else {
      k.lots[live++] = k.lots[i];
    }
  }
  k.n = live;
}

void Observe(KeyLeases& k, int64_t units, Nanos now, Nanos period) {
  if (now - k.period_start >= period) {
    const bool next = now - k.period_start < 2 * period;
    k.units_before = next ? k.units_now : 0;
    k.requests_before = next ? k.requests_now : 0;
    k.units_now = 0;
    k.requests_now = 0;
    k.period_start = now;
  }
  k.units_now += units;
  ++k.requests_now;
  k.last_seen = now;
}

void List(Shard& shard, const std::string& key, KeyLeases& k) {
  if (k.listed) return;
  k.listed = true;
  shard.holders.push_back(key);
}

void SetSharing(Shard& shard, KeyLeases& k, bool sharing) {
  if (k.sharing == sharing) return;
  k.sharing = sharing;
  if (sharing) {
    ++shard.sharing;
    k.share_answered = false;
    k.share_sent = Nanos::min();
  } else {
    --shard.sharing;
  }
}

// The most one share renewal of `limit` over `ttl` can grant: the whole refill over a ttl
// (AccrueShare), rounded down; 0 when a share cannot be taken (Store::Share's bounds).
int64_t MostShared(const Limit& limit, Nanos ttl) {
  const Rate rate = limit.rate();
  const Micros t = std::chrono::duration_cast<Micros>(ttl);
  if (t < kMinShareTtl || t > kMaxShareTtl || rate.period <= Micros(0)) return 0;
  const exact::Int128 most = exact::Int128{rate.count} * t.count() / rate.period.count();
  if (most >= (exact::Int128{1} << 52)) return 0;
  return static_cast<int64_t>(std::min<exact::Int128>(most, kMaxCost));
}

// This instance's demand for `k`, units per rate period of its limit: the units requests asked
// for in the last period of ttl (or the current one, if more), offered whether admitted or not.
int64_t ShareDemand(const KeyLeases& k) {
  const int64_t per_ttl = std::max(k.units_now, k.units_before);
  const exact::Int128 per_period =
      exact::Int128{per_ttl} * std::chrono::duration_cast<Nanos>(k.limit.rate().period).count() /
      std::max<int64_t>(1, k.ttl.count());
  return static_cast<int64_t>(std::min<exact::Int128>(per_period, kMaxCost));
}

// An identity's demand at this instance, units per rate period: its current period's units at
// their rate so far (over a 64th of a ttl at least, so that a newcomer's first renewal asks for
// what its first requests need), or the last period's, whichever is more.
int64_t IdentityDemand(const KeyLeases& k, Nanos now) {
  const Nanos seen = std::max(now - k.period_start, k.ttl / 64);
  const exact::Int128 rate_now =
      exact::Int128{k.units_now} * k.ttl.count() / std::max<int64_t>(1, seen.count());
  const int64_t per_ttl = static_cast<int64_t>(
      std::min<exact::Int128>(std::max<exact::Int128>(rate_now, k.units_before), kMaxCost));
  const exact::Int128 per_period =
      exact::Int128{per_ttl} * std::chrono::duration_cast<Nanos>(k.limit.rate().period).count() /
      std::max<int64_t>(1, k.ttl.count());
  return static_cast<int64_t>(std::min<exact::Int128>(per_period, kMaxCost));
}

// Whether a share renewal of `k` is due at `now`: none sent `gap` before.
bool ShareDue(const KeyLeases& k, Nanos now, Nanos gap) {
  return k.asked == 0 && k.n < kMaxLotsPerKey &&
         (k.share_sent == Nanos::min() || now - k.share_sent >= gap);
}

// The renewal period of a key its grants do not cover: half a ttl, or an eighth while the store
// does not answer, so that a key is back to its share soon after the store is.
Nanos UncoveredGap(const KeyLeases& k) { return k.share_answered ? k.ttl / 2 : k.ttl / 8; }

// Sends a share renewal for `k` (ShareDue).
void AskShare(Shard& shard, const std::string& key, KeyLeases& k, Nanos now, size_t entry,
              std::vector<LeaseAsk>& renewals) {
  const int64_t most = std::max<int64_t>(1, MostShared(k.limit, k.ttl));
  Ask(shard, k, most);
  k.share_sent = now;
  List(shard, key, k);
  LeaseAsk ask{.entry = entry,
               .key = key,
               .limit = k.limit,
               .units = most,
               .share = true,
               .demand = ShareDemand(k),
               .ttl = k.ttl};
  if (k.of_identity) {
    // A tenth more than measured, and a unit: an identity under its fair share keeps a margin for
    // the jitter of its arrivals (max-min gives no one more than it asks while others want more).
    const int64_t demand = IdentityDemand(k, now);
    ask.demand = std::min<int64_t>(kMaxCost, demand + demand / 10 + 1);
    ask.store_key = k.store_key;
    ask.group = k.group;
    ask.weight = k.weight;
    ask.fairness = k.fairness;
  }
  renewals.push_back(std::move(ask));
}

// Puts `units` back into `k`'s lots, newest first (they live longest), a lot never holding more
// than it was granted; what none can take is lost.
void PutBack(Shard& shard, KeyLeases& k, int64_t units) {
  for (size_t j = k.n; j-- > 0 && units > 0;) {
    const int64_t back = std::min(units, k.lots[j].granted - k.lots[j].left);
    k.lots[j].left += back;
    units -= back;
    shard.held += back;
  }
}

// Spends `units` from `k`'s lots, earliest expiry first (they cover them: Left() >= units), and
// returns the latest lot as it was.
Lot Spend(Shard& shard, KeyLeases& k, int64_t units) {
  for (size_t j = 0; j < k.n && units > 0; ++j) {
    const int64_t take = std::min(units, k.lots[j].left);
    k.lots[j].left -= take;
    units -= take;
    shard.held -= take;
  }
  const Lot last = k.lots[k.n - 1];
  // A spent lot has nothing left to give back: its place is free for the next grant.
  k.n = static_cast<size_t>(std::remove_if(k.lots.begin(), k.lots.begin() + k.n,
                                           [](const Lot& l) { return l.left == 0; }) -
                            k.lots.begin());
  return last;
}

// The decision of an entry its lots covered, `last` being its latest lot.
Decision Covered(const KeyLeases& k, const Lot& last, Nanos now) {
  Decision d;
  d.limit = k.limit.capacity();
  d.remaining = k.Left();
  d.reset_after = std::max(
      Micros(0), last.grant.reset_after - std::chrono::duration_cast<Micros>(now - last.sent));
  if (k.of_identity) d.share = std::max<int64_t>(0, k.allocation);
  return d;
}

// A sharing key whose request its lots covered renews every half ttl; from a quarter on once what
// is left covers less than two round trips of its demand (its units per ttl), so that the
// renewal is back before it runs out.
void RenewCovered(Shard& shard, const std::string& key, KeyLeases& k, Nanos now, Nanos rtt,
                  size_t entry, std::vector<LeaseAsk>& renewals) {
  const int64_t demand = std::max(k.units_now, k.units_before);
  const bool low =
      exact::Int128{k.Left()} * k.ttl.count() < exact::Int128{demand} * 2 * rtt.count();
  if (ShareDue(k, now, k.ttl / 2) || (low && ShareDue(k, now, k.ttl / 4))) {
    AskShare(shard, key, k, now, entry, renewals);
  }
}

// Whether `shard` has room for a new key at `now`. Full, it first forgets the keys idle for two
// periods and holding nothing, at most once per `every`. (A key a request found before has just
// been seen: never forgotten under it.)
bool Room(Shard& shard, Nanos now, Nanos every) {
  // (Never pruned: Nanos::min(), which no time may be subtracted from.)
  if (shard.keys.size() >= shard.capacity &&
      (shard.pruned == Nanos::min() || now - shard.pruned >= every)) {
    shard.pruned = now;
    std::erase_if(shard.keys, [&](const auto& kv) {
      const KeyLeases& k = kv.second;
      const bool idle = k.n == 0 && k.asked == 0 && !k.listed && now - k.last_seen >= 2 * k.ttl;
      if (idle && k.sharing) --shard.sharing;
      return idle;
    });
  }
  return shard.keys.size() < shard.capacity;
}

// Locks the distinct shards of a request in ascending order (no two requests wait in a cycle).
class ShardLocks {
 public:
  ShardLocks(Shard* shards, std::span<const size_t> ids) : shards_(shards) {
    for (size_t id : ids) ids_[n_++] = id;
    std::sort(ids_.begin(), ids_.begin() + static_cast<ptrdiff_t>(n_));
    n_ = static_cast<size_t>(std::unique(ids_.begin(), ids_.begin() + static_cast<ptrdiff_t>(n_)) -
                             ids_.begin());
    for (size_t i = 0; i < n_; ++i) shards_[ids_[i]].mu.lock();
  }
  ~ShardLocks() {
    for (size_t i = n_; i > 0; --i) shards_[ids_[i - 1]].mu.unlock();
  }
  ShardLocks(const ShardLocks&) = delete;
  ShardLocks& operator=(const ShardLocks&) = delete;

 private:
  Shard* shards_;
  std::array<size_t, kMaxEntriesPerRequest> ids_{};
  size_t n_ = 0;
};

}  // namespace

LeaseTable::LeaseTable(LeaseTableOptions options)
    : options_(options), shards_(std::make_unique<Shard[]>(kShards)) {
  const size_t per_shard = std::max<size_t>(1, (options.max_keys + kShards - 1) / kShards);
  for (size_t i = 0; i < kShards; ++i) shards_[i].capacity = per_shard;
}

LeaseTable::~LeaseTable() = default;

Shard& LeaseTable::ShardOf(std::string_view key) const { return shards_[Hash{}(key) % kShards]; }

int64_t LeaseTable::MaxHeld(const Limit& limit, int64_t share_ppm) const {
  const int64_t instances = std::max<int64_t>(1, options_.instances);
  return exact::MulDiv(limit.capacity(), share_ppm, 1'000'000 * instances).quot;
}

namespace {

// What one entry of a request found, under its shard's lock.
struct Found {
  Shard* shard = nullptr;
  const std::string* key = nullptr;  // the table's copy
  KeyLeases* k = nullptr;
};

// The lease `k` should hold at `now`: its demand over the last period of ttl, within `max`. With
// a store `rtt` away, also what its current rate needs over three round trips (the ask in flight's,
// the next one's and a margin), the rate measured over at least an eighth of a round trip: a key
// turning hot is leased enough to reach the next ask's answer from its first ask on, rather than
// growing one round trip at a time from what the period before saw.
int64_t Target(const KeyLeases& k, int64_t max, Nanos now, Nanos rtt) {
  int64_t demand = std::max(k.units_now, k.units_before);
  if (rtt > Nanos(0) && demand < max) {
    const Nanos seen = std::max({now - k.period_start, rtt / 8, Nanos(1)});
    const exact::Int128 needed = exact::Int128{k.units_now} * 3 * rtt.count() / seen.count();
    demand =
        static_cast<int64_t>(std::min<exact::Int128>(std::max<exact::Int128>(demand, needed), max));
  }
  return std::min(demand, max);
}

// Whether a key holding `left` of its `target` renews: once half is spent, or once what is left
// covers less than two round trips of its demand (target per ttl), whichever comes first: a
// renewal then arrives before the lease runs out, however long the round trip is next to ttl.
bool Renews(int64_t left, int64_t target, Nanos ttl, Nanos rtt) {
  if (2 * left <= target) return true;
  return exact::Int128{left} * ttl.count() < exact::Int128{target} * 2 * rtt.count();
}

bool Hot(const KeyLeases& k) { return k.requests_now + k.requests_before >= 2; }

// A sharing key refuses here while the store answers its renewals: its last one was answered
// less than a ttl ago (a key back from idleness asks the store again: its bucket may have filled),
// and the one in flight, if any, was sent less than three round trips (and at least an eighth of
// a ttl: a store answering at once is not late for a moment's queueing) ago. Past that its requests
// go to the store, and so to the failure mode while it is down. (A refusal sends the next renewal
// once due, half a ttl after the last: so refusals end at most ttl/2 and three round trips, or
// ttl/8, after the last renewal the store answered was sent.)
bool ShareRefuses(const KeyLeases& k, Nanos now, Nanos rtt) {
  if (!k.sharing || !k.share_answered || now - k.share_sent >= k.ttl) return false;
  return k.asked == 0 || now - k.share_sent < std::max(3 * rtt, k.ttl / 8);
}

// A request of keys that are all tracked, all consumed, one of them dry and not covered by its
// lots, is refused here: the store just said it has less than this instance asked for, and the
// renewal sent now (or in flight) takes what it gets back. Nothing is spent; a refusal admits
// nothing, so the leases' bound stands. Returns whether it refused.
bool RefuseDry(const LeaseTable& table, std::span<const EntryRef> entries,
               std::span<const Found> found, Nanos now, Nanos rtt, LeasePlan& plan) {
  size_t dry = entries.size();
  for (size_t i = 0; i < entries.size(); ++i) {
    const KeyLeases* k = found[i].k;
    if (k == nullptr || entries[i].op != EntryOp::kConsume) return false;
    const bool refuses = k->dry_until > now || ShareRefuses(*k, now, rtt);
    if (refuses && k->Left() < entries[i].cost) dry = i;
  }
  if (dry == entries.size()) return false;
  plan.local = true;
  plan.allowed = false;
  plan.decisions.resize(entries.size());
  for (size_t i = 0; i < entries.size(); ++i) {
    KeyLeases& k = *found[i].k;
    Decision& d = plan.decisions[i];
    d.limit = k.limit.capacity();
    d.remaining = k.Left();
    if (i == dry) {
      d.verdict = Verdict::kDenied;
      // Worth asking again once the renewal has had the time to come back (a share's: the next
      // one, half a ttl after the last).
      Nanos wait = rtt;
      if (k.sharing && k.share_sent != Nanos::min()) {
        wait = std::max(wait, k.share_sent + k.ttl / 2 + rtt - now);
      }
      d.retry_after = std::max(Micros(1), std::chrono::ceil<Micros>(wait));
      d.reset_after = d.retry_after;
    }
    if (k.sharing) {
      if (ShareDue(k, now, UncoveredGap(k))) {
        AskShare(*found[i].shard, *found[i].key, k, now, i, plan.renewals);
      }
      continue;
    }
    const int64_t units = Target(k, table.MaxHeld(k.limit, k.share_ppm), now, rtt) - k.Left();
    if (k.asked == 0 && k.n < kMaxLotsPerKey && units >= 1) {
      Ask(*found[i].shard, k, units);
      List(*found[i].shard, *found[i].key, k);
      plan.renewals.push_back({.entry = i, .key = *found[i].key, .limit = k.limit, .units = units});
    }
  }
  return true;
}

}  // namespace

void LeaseTable::ObserveRoundTrip(Nanos took) {
  if (took < Nanos(0)) return;
  // A moving average, as TCP's smoothed round trip (an eighth of each new sample).
  const int64_t was = round_trip_ns_.load(std::memory_order_relaxed);
  const int64_t now = was == 0 ? took.count() : was + (took.count() - was) / 8;
  round_trip_ns_.store(now, std::memory_order_relaxed);
}

LeasePlan LeaseTable::Begin(std::span<const EntryRef> entries, Nanos now) {
  const Nanos rtt = RoundTrip();
  std::array<size_t, kMaxEntriesPerRequest> ids{};
  for (size_t i = 0; i < entries.size(); ++i) {
    ids[i] = static_cast<size_t>(&ShardOf(entries[i].key) - shards_.get());
  }
  ShardLocks locks(shards_.get(), {ids.data(), entries.size()});
  std::array<Found, kMaxEntriesPerRequest> found{};
  bool covered = true;
  for (size_t i = 0; i < entries.size(); ++i) {
    const EntryRef& e = entries[i];
    const LeaseTerms& terms = e.terms != nullptr ? *e.terms : options_.defaults;
    if (!terms.enabled || !SupportsLease(e.limit->algorithm()) || e.op == EntryOp::kGiveBack) {
      covered = false;
      continue;
    }
    Shard& shard = shards_[ids[i]];
    auto it = shard.keys.find(e.key);
    const bool spends = e.op == EntryOp::kConsume || e.op == EntryOp::kCharge;
    if (it == shard.keys.end()) {
      if (!spends) {
        covered = false;
        continue;
      }
      if (!Room(shard, now, options_.defaults.ttl)) {  // full of live keys: this one is not tracked
        covered = false;
        continue;
      }
      it = shard.keys.emplace(std::string(e.key), KeyLeases(*e.limit)).first;
      it->second.period_start = now;
    }
    KeyLeases& k = it->second;
    if (!(k.limit == *e.limit)) {  // the key's limit changed: its lots end
      Expire(shard, it->first, k, now, /*all=*/true);
      k.limit = *e.limit;
    }
    Expire(shard, it->first, k, now, /*all=*/false);
    k.ttl = terms.ttl;
    k.share_ppm = terms.max_share_ppm;
    if (spends) Observe(k, e.cost, now, k.ttl);
    found[i] = {.shard = &shard, .key = &it->first, .k = &k};
    if (spends) {
      covered = covered && k.n > 0 && k.Left() >= e.cost;
    } else {  // a refund: back into the lots it was spent from
      covered = covered && k.n > 0 && k.Spent() >= e.cost;
    }
  }
  LeasePlan plan;
  if (!covered && RefuseDry(*this, entries, {found.data(), entries.size()}, now, rtt, plan))
    return plan;
  if (!covered) {
    for (size_t i = 0; i < entries.size(); ++i) {
      const EntryRef& e = entries[i];
      KeyLeases* k = found[i].k;
      if (k == nullptr || k->asked > 0 || !Hot(*k) || k->n >= kMaxLotsPerKey) continue;
      if (e.op != EntryOp::kConsume && e.op != EntryOp::kCharge) continue;
      if (k->sharing) {  // its grants come from share renewals only
        if (ShareDue(*k, now, UncoveredGap(*k)))
          AskShare(*found[i].shard, *found[i].key, *k, now, i, plan.renewals);
        continue;
      }
      const int64_t units = Target(*k, MaxHeld(k->limit, k->share_ppm), now, rtt) - k->Left();
      // A consume takes its lease in its own store call; a charge cannot, so it renews.
      const bool rides = e.op == EntryOp::kConsume;
      if (units < (rides ? 1 : kMinRenewal)) continue;
      Ask(*found[i].shard, *k, units);
      List(*found[i].shard, *found[i].key, *k);
      (rides ? plan.asks : plan.renewals)
          .push_back({.entry = i, .key = *found[i].key, .limit = k->limit, .units = units});
    }
    return plan;
  }
  plan.local = true;
  plan.decisions.resize(entries.size());
  for (size_t i = 0; i < entries.size(); ++i) {
    const EntryRef& e = entries[i];
    KeyLeases& k = *found[i].k;
    Shard& shard = *found[i].shard;
    Decision& d = plan.decisions[i];
    if (e.op == EntryOp::kRefund) {
      PutBack(shard, k, e.cost);
      d = Covered(k, k.lots[k.n - 1], now);
    } else {
      d = Covered(k, Spend(shard, k, e.cost), now);
    }
    if (k.sharing) {
      RenewCovered(shard, *found[i].key, k, now, rtt, i, plan.renewals);
      continue;
    }
    const int64_t target = Target(k, MaxHeld(k.limit, k.share_ppm), now, rtt);
    const int64_t more = target - d.remaining;
    if (k.asked == 0 && k.n < kMaxLotsPerKey && Renews(d.remaining, target, k.ttl, rtt) &&
        more >= kMinRenewal) {
      Ask(*found[i].shard, k, more);
      plan.renewals.push_back({.entry = i, .key = *found[i].key, .limit = k.limit, .units = more});
    }
  }
  return plan;
}

std::string ShareGroupName(std::string_view identity) {
  if (identity.size() + 17 <= kMaxShareNameLength) return std::string(identity);
  uint64_t a = 14695981039346656037ull, b = 1099511628211ull * 31;
  for (const char c : identity) {
    a = (a ^ static_cast<uint8_t>(c)) * 1099511628211ull;
    b = (b ^ static_cast<uint8_t>(c)) * 0x100000001b3ull + 0x9e3779b97f4a7c15ull;
  }
  char buf[34];
  std::snprintf(buf, sizeof buf, "#%016llx%016llx", static_cast<unsigned long long>(a),
                static_cast<unsigned long long>(b));
  return buf;
}

namespace {

// Until a request of `cost` could pass on an identity's entry that its lots do not cover: its
// next renewal's answer (half a ttl after the last was sent), and at least what the shortfall
// takes to accrue at its allocation.
Micros ShareRetryAfter(const KeyLeases& k, int64_t cost, Nanos now, Nanos rtt) {
  Nanos wait = rtt;
  if (k.share_sent != Nanos::min()) wait = std::max(wait, k.share_sent + k.ttl / 2 + rtt - now);
  if (k.allocation > 0) {
    const exact::Int128 accrue =
        exact::Int128{cost - k.Left()} *
            std::chrono::duration_cast<Nanos>(k.limit.rate().period).count() / k.allocation +
        1;
    wait = std::max(
        wait,
        Nanos(static_cast<int64_t>(std::min<exact::Int128>(accrue, Nanos(kMaxShareTtl).count()))));
  }
  return std::max(Micros(1), std::chrono::ceil<Micros>(wait));
}

}  // namespace

std::string LeaseTable::SharedKey(const EntryRef& e) {
  std::string key;
  key.reserve(e.key.size() + 1 + e.share_of->identity.size());
  key.append(e.key).append(1, '\x1f').append(e.share_of->identity);
  return key;
}

SharePlan LeaseTable::BeginShared(std::span<const EntryRef> entries, Nanos now, bool waited) {
  const Nanos rtt = RoundTrip();
  const size_t n = entries.size();
  std::array<std::string, kMaxEntriesPerRequest> keys;
  std::array<size_t, kMaxEntriesPerRequest> ids{};
  for (size_t i = 0; i < n; ++i) {
    keys[i] = SharedKey(entries[i]);
    ids[i] = static_cast<size_t>(&ShardOf(keys[i]) - shards_.get());
  }
  ShardLocks locks(shards_.get(), {ids.data(), n});
  std::array<Found, kMaxEntriesPerRequest> found{};
  for (size_t i = 0; i < n; ++i) {
    const EntryRef& e = entries[i];
    Shard& shard = shards_[ids[i]];
    auto it = shard.keys.find(keys[i]);
    if (it == shard.keys.end()) {
      if (!Room(shard, now, options_.defaults.ttl)) continue;  // full of live keys: refused below
      it = shard.keys.emplace(std::move(keys[i]), KeyLeases(*e.limit)).first;
      KeyLeases& k = it->second;
      k.period_start = now;
      k.of_identity = true;
      k.store_key = std::string(e.key);
      k.policy = std::string(e.share_of->policy);
      k.group = ShareGroupName(e.share_of->identity);
      SetSharing(shard, k, true);
    }
    KeyLeases& k = it->second;
    if (!(k.limit == *e.limit)) {  // cannot be (the key names its limit); ends the lots if so
      Expire(shard, it->first, k, now, /*all=*/true);
      k.limit = *e.limit;
    }
    Expire(shard, it->first, k, now, /*all=*/false);
    k.ttl = e.share_of->window;
    k.weight = e.share_of->weight;
    k.fairness = e.share_of->fairness;
    if (waited) {
      k.last_seen = now;
    } else {
      Observe(k, e.cost, now, k.ttl);
    }
    found[i] = {.shard = &shard, .key = &it->first, .k = &k};
  }
  // Each entry its lots do not cover refuses (its share is known and does not cover it, or the
  // table has no room for it), waits for a renewal, or fails.
  size_t denied = n;
  bool unavailable = false, waits = false;
  std::array<bool, kMaxEntriesPerRequest> waiting{};
  for (size_t i = 0; i < n; ++i) {
    const KeyLeases* k = found[i].k;
    if (k == nullptr) {
      if (denied == n) denied = i;
      continue;
    }
    if (k->Left() >= entries[i].cost) continue;
    const bool full = k->asked > 0 && k->waiters.size() >= kMaxShareWaiters;
    // An identity asking no faster than its share was allotted has its grant's worth accrued in
    // the store since its last renewal: it renews now and waits, rather than being refused for
    // the timing of its grants (a newcomer, whose first grant counted its first moments alone).
    const bool accrued = !waited && k->share_answered && k->allocation > 0 &&
                         IdentityDemand(*k, now) <= k->allocation &&
                         (k->asked > 0 || k->n < kMaxLotsPerKey);
    if (ShareRefuses(*k, now, rtt) && accrued && !full) {
      waiting[i] = waits = true;
    } else if (ShareRefuses(*k, now, rtt) || full) {
      if (denied == n) denied = i;
    } else if (waited) {
      unavailable = true;
    } else if (k->asked > 0 || (k->n < kMaxLotsPerKey && ShareDue(*k, now, UncoveredGap(*k)))) {
      waiting[i] = waits = true;
    } else {
      unavailable = true;  // its last renewal failed a moment ago
    }
  }
  SharePlan plan;
  if (denied == n && !unavailable && waits) {
    plan.kind = SharePlan::Kind::kWait;
    for (size_t i = 0; i < n; ++i) {
      if (!waiting[i]) continue;
      KeyLeases& k = *found[i].k;
      if (k.asked == 0) AskShare(*found[i].shard, *found[i].key, k, now, i, plan.renewals);
      plan.waits.push_back(i);
    }
    return plan;
  }
  if (denied == n && !unavailable) {
    plan.kind = SharePlan::Kind::kAllowed;
    plan.decisions.resize(n);
    for (size_t i = 0; i < n; ++i) {
      KeyLeases& k = *found[i].k;
      plan.decisions[i] = Covered(k, Spend(*found[i].shard, k, entries[i].cost), now);
      RenewCovered(*found[i].shard, *found[i].key, k, now, rtt, i, plan.renewals);
    }
    return plan;
  }
  plan.kind = denied < n ? SharePlan::Kind::kDenied : SharePlan::Kind::kUnavailable;
  plan.decisions.resize(n);
  for (size_t i = 0; i < n; ++i) {
    Decision& d = plan.decisions[i];
    d.limit = entries[i].limit->capacity();
    KeyLeases* k = found[i].k;
    if (k == nullptr) {
      d.verdict = Verdict::kDenied;
      d.retry_after = std::chrono::ceil<Micros>(entries[i].share_of->window);
      d.reset_after = d.retry_after;
      continue;
    }
    d.remaining = k->Left();
    d.share = std::max<int64_t>(0, k->allocation);
    if (i == denied) {
      d.verdict = Verdict::kDenied;
      d.retry_after = ShareRetryAfter(*k, entries[i].cost, now, rtt);
      d.reset_after = d.retry_after;
    }
    if (k->Left() < entries[i].cost && ShareDue(*k, now, UncoveredGap(*k))) {
      AskShare(*found[i].shard, *found[i].key, *k, now, i, plan.renewals);
    }
  }
  return plan;
}

void LeaseTable::Await(std::span<const EntryRef> entries, std::span<const size_t> waits,
                       std::function<void()> wake) {
  auto left = std::make_shared<std::atomic<size_t>>(waits.size());
  auto one = [left, wake = std::move(wake)] {
    if (left->fetch_sub(1) == 1) wake();
  };
  size_t answered = 0;
  for (const size_t i : waits) {
    const std::string key = SharedKey(entries[i]);
    Shard& shard = ShardOf(key);
    std::lock_guard lock(shard.mu);
    const auto it = shard.keys.find(key);
    if (it != shard.keys.end() && it->second.asked > 0) {
      it->second.waiters.push_back(one);
    } else {
      ++answered;  // while this request was being planned
    }
  }
  for (size_t i = 0; i < answered; ++i) one();
}

void LeaseTable::Unspend(std::span<const EntryRef> entries) {
  for (const EntryRef& e : entries) {
    const std::string key = SharedKey(e);
    Shard& shard = ShardOf(key);
    std::lock_guard lock(shard.mu);
    const auto it = shard.keys.find(key);
    if (it != shard.keys.end()) PutBack(shard, it->second, e.cost);
  }
}

int64_t LeaseTable::Granted(std::string_view key, const Limit& limit, Nanos sent, bool allowed,
                            const Decision* decision) {
  Shard& shard = ShardOf(key);
  std::lock_guard lock(shard.mu);
  const auto it = shard.keys.find(key);
  const int64_t units = decision != nullptr && allowed ? decision->leased : 0;
  if (it != shard.keys.end()) {
    KeyLeases& k = it->second;
    // Less than asked (nothing, if the request was refused): the store is dry for now. The
    // mark lasts about until a renewal sent on its answer could be back; an ask filled since
    // does not lift it, as a key at its limit is filled now and then by what came back.
    const bool dry = decision != nullptr && k.asked > 0 && units < k.asked;
    if (dry) k.dry_until = std::max(k.dry_until, sent + 3 * RoundTrip());
    // A bucket found dry, or under a quarter full, with the store a round trip away: shares from
    // now on. Every instance asking sees the bucket run low within a renewal or so, so they turn
    // to shares together, while it still holds what the first shares accrue.
    const bool low =
        decision != nullptr && k.asked > 0 && 4 * decision->remaining < limit.capacity();
    if ((dry || low) && options_.shares && RoundTrip() > Nanos(0) && k.limit == limit &&
        !IsWindowAlgorithm(limit.algorithm()) && MostShared(limit, k.ttl) > 0) {
      SetSharing(shard, k, true);
    }
    shard.asked -= k.asked;
    k.asked = 0;
  }
  return Keep(shard, key, limit, sent, units, decision);
}

int64_t LeaseTable::GrantedShare(std::string_view key, const Limit& limit, Nanos sent,
                                 const Decision* decision, const ShareState* share,
                                 std::vector<std::function<void()>>* woken) {
  Shard& shard = ShardOf(key);
  std::lock_guard lock(shard.mu);
  const auto it = shard.keys.find(key);
  const int64_t units = decision != nullptr ? decision->leased : 0;
  if (it != shard.keys.end()) {
    KeyLeases& k = it->second;
    shard.asked -= k.asked;
    k.asked = 0;
    k.share_answered = decision != nullptr && share != nullptr;
    if (k.share_answered) k.allocation = share->allocation;
    // Back to leasing units once a grant finds the bucket half full: the demand no longer
    // drains it, and shares, which grant a rate, would leave its burst unspent. (An identity's
    // entry has no units to lease: it always shares.)
    if (k.share_answered && !k.of_identity && k.limit == limit &&
        2 * decision->remaining >= limit.capacity()) {
      SetSharing(shard, k, false);
    }
    if (woken != nullptr) {
      std::move(k.waiters.begin(), k.waiters.end(), std::back_inserter(*woken));
    }
    k.waiters.clear();
  }
  return Keep(shard, key, limit, sent, units, decision);
}

int64_t LeaseTable::Keep(Shard& shard, std::string_view key, const Limit& limit, Nanos sent,
                         int64_t units, const Decision* decision) {
  const auto it = shard.keys.find(key);
  if (it == shard.keys.end() || !(it->second.limit == limit)) {
    // Nowhere to keep it (its key now has another limit): given back at once. (An identity's
    // entry is never forgotten with an answer due, nor given another limit: its key names it.)
    if (units > 0) {
      End(shard, {it == shard.keys.end() ? std::string(key) : StoreKeyOf(it->first, it->second),
                  limit,
                  units,
                  {.at = decision->leased_at, .reset_after = decision->reset_after}});
    }
    return 0;
  }
  KeyLeases& k = it->second;
  if (units <= 0) return 0;
  const LeaseGrant grant{.at = decision->leased_at, .reset_after = decision->reset_after};
  // Spent before sent + life in this instance's time is spent before the store's time of the
  // grant + life, the request having been sent before the store decided. A fixed window's lease
  // lives no longer than its window. The margin (a 1024th) covers the two clocks' rates.
  Nanos life = k.ttl;
  if (IsWindowAlgorithm(limit.algorithm())) life = std::min<Nanos>(life, decision->reset_after);
  life -= life / 1024;
  if (k.n >= kMaxLotsPerKey || life <= Nanos(0)) {
    End(shard, {std::string(key), limit, units, grant});
    return 0;
  }
  const Lot lot{
      .left = units, .granted = units, .sent = sent, .expires = sent + life, .grant = grant};
  size_t at = k.n++;
  for (; at > 0 && k.lots[at - 1].expires > lot.expires; --at) k.lots[at] = k.lots[at - 1];
  k.lots[at] = lot;
  shard.held += units;
  List(shard, it->first, k);
  return units;
}

std::vector<EndedLot> LeaseTable::TakeEnded(Nanos now) {
  std::vector<EndedLot> out;
  for (size_t s = 0; s < kShards; ++s) {
    Shard& shard = shards_[s];
    std::lock_guard lock(shard.mu);
    std::erase_if(shard.holders, [&](const std::string& key) {
      const auto it = shard.keys.find(key);
      if (it == shard.keys.end()) return true;
      KeyLeases& k = it->second;
      Expire(shard, it->first, k, now, /*all=*/false);
      k.listed = k.n > 0 || k.asked > 0;
      return !k.listed;
    });
    std::move(shard.ended.begin(), shard.ended.end(), std::back_inserter(out));
    shard.ended.clear();
    shard.ending = 0;
  }
  return out;
}

std::vector<EndedLot> LeaseTable::TakeAll() {
  std::vector<EndedLot> out;
  for (size_t s = 0; s < kShards; ++s) {
    Shard& shard = shards_[s];
    std::lock_guard lock(shard.mu);
    for (const std::string& key : shard.holders) {
      const auto it = shard.keys.find(key);
      if (it != shard.keys.end()) Expire(shard, it->first, it->second, Nanos(0), /*all=*/true);
    }
    // Their shares were spent with the lots: a sharing key asks the store again, at once, before
    // it refuses here (its next request waits for, or goes to, the store).
    for (auto& [key, k] : shard.keys) {
      k.share_answered = false;
      if (k.asked == 0) k.share_sent = Nanos::min();
    }
    std::move(shard.ended.begin(), shard.ended.end(), std::back_inserter(out));
    shard.ended.clear();
    shard.ending = 0;
  }
  return out;
}

std::optional<LeaseTable::Held> LeaseTable::HeldShare(std::string_view key) const {
  Shard& shard = ShardOf(key);
  std::lock_guard lock(shard.mu);
  const auto it = shard.keys.find(key);
  if (it == shard.keys.end() || it->second.allocation < 0) return std::nullopt;
  return Held{.allocation = it->second.allocation, .units = it->second.Left()};
}

std::map<std::string, LeaseTable::PolicyShares> LeaseTable::SharesByPolicy() const {
  std::map<std::string, PolicyShares> out;
  for (size_t s = 0; s < kShards; ++s) {
    std::lock_guard lock(shards_[s].mu);
    for (const auto& [key, k] : shards_[s].keys) {
      if (!k.of_identity || k.allocation < 0) continue;
      PolicyShares& p = out[k.policy];
      p.allotted += k.allocation;
      ++p.identities;
    }
  }
  return out;
}

LeaseTableCounts LeaseTable::Counts() const {
  LeaseTableCounts c;
  for (size_t s = 0; s < kShards; ++s) {
    std::lock_guard lock(shards_[s].mu);
    c.held += shards_[s].held;
    c.asked += shards_[s].asked;
    c.ending += shards_[s].ending;
    c.keys += shards_[s].keys.size();
    c.sharing += shards_[s].sharing;
  }
  return c;
}

}  // namespace caudal::engine_internal
