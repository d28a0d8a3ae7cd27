// The conformance suite's share tests (store_conformance.h): grants that follow the max-min (or
// proportional) allocation of the limit's refill, consumers that come, change and expire, the
// bound on a key's consumers, validation, and a grant given back.
#include <string>
#include <vector>

#include "algorithms/algorithm.h"
#include "store/batch.h"
#include "support/store_conformance.h"

namespace caudal {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

// 100 units a second, and room for everything the tests grant at once.
Limit HundredPerSecond(Algorithm a, int64_t capacity = 1000) {
  const LimitSpec spec = IsWindowAlgorithm(a)
                             ? LimitSpec::Window(a, 100, seconds(1))
                             : LimitSpec::Bucket(a, capacity, {.count = 100, .period = seconds(1)});
  return *Limit::Create(spec);
}

struct Taken {
  Decision decision;
  ShareState share;
};

class ShareSteps {
 public:
  ShareSteps(Store& store, const std::string& key, const Limit& limit)
      : store_(store), key_(key), limit_(limit) {}

  // One consumer's call; fails the test on an error.
  Taken Take(std::string_view consumer, int64_t demand, int64_t weight = 1,
             std::string_view group = "", Fairness fairness = Fairness::kMaxMin,
             Micros ttl = seconds(1)) {
    const ShareEntry e{.key = key_,
                       .limit = &limit_,
                       .consumer = consumer,
                       .group = group,
                       .demand = demand,
                       .weight = weight,
                       .ttl = ttl,
                       .fairness = fairness};
    Result<ShareResponse> r = store_.Share({&e, 1});
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    if (!r.ok() || r->decisions.size() != 1 || r->shares.size() != 1) return {};
    EXPECT_TRUE(r->decisions[0].allowed());
    return {r->decisions[0], r->shares[0]};
  }

 private:
  Store& store_;
  const std::string& key_;
  const Limit& limit_;
};

TEST_P(StoreConformanceTest, ShareGrantsFollowTheMaxMinAllocation) {
  for (Algorithm a : {Algorithm::kTokenBucket, Algorithm::kGcra}) {
    SCOPED_TRACE(AlgorithmName(a));
    const Limit limit = HundredPerSecond(a);
    const std::string key = Key("share:" + std::string(AlgorithmName(a)));
    ShareSteps s(*store_, key, limit);
    // Alone, a consumer is allotted the whole refill; its first call grants half a ttl of it, but
    // no more than it asked for: 30 a second for half a second.
    const Taken a1 = s.Take("a", 30);
    EXPECT_EQ(a1.share, (ShareState{.allocation = 100, .consumers = 1, .demand_total = 30}));
    EXPECT_EQ(a1.decision.leased, 15);
    EXPECT_EQ(a1.decision.leased_at.count(), clock_.Now().count() / 1000);
    // A second one, wanting more than the rest: a keeps what it wants, b gets the rest.
    const Taken b1 = s.Take("b", 200);
    EXPECT_EQ(b1.share, (ShareState{.allocation = 70, .consumers = 2, .demand_total = 230}));
    EXPECT_EQ(b1.decision.leased, 35);
    clock_.Advance(milliseconds(200));
    const Taken a2 = s.Take("a", 30);
    EXPECT_EQ(a2.share.allocation, 30);
    EXPECT_EQ(a2.decision.leased, 6) << "30 a second for 200ms";
    const Taken b2 = s.Take("b", 200);
    EXPECT_EQ(b2.share.allocation, 70);
    EXPECT_EQ(b2.decision.leased, 14);
    // Calling again at once grants nothing: the accrual starts at the last call.
    EXPECT_EQ(s.Take("b", 200).decision.leased, 0);
    // Every unit granted was consumed in the key's state.
    EXPECT_EQ(MustDecideOne(key, limit, 0).remaining, 1000 - 15 - 35 + 20 - 6 - 14);
  }
}

TEST_P(StoreConformanceTest, ShareGrantsOnlyWhatFitsAndDropsTheRest) {
  const Limit limit = HundredPerSecond(Algorithm::kTokenBucket, 100);
  const std::string key = Key("share:fits");
  ShareSteps s(*store_, key, limit);
  EXPECT_EQ(s.Take("b", 500).decision.leased, 50);
  ASSERT_TRUE(MustDecideOne(key, limit, 45).allowed());
  const Taken t = s.Take("a", 500);
  EXPECT_EQ(t.share.allocation, 50);
  EXPECT_EQ(t.decision.leased, 5) << "25 accrued, 5 fit";
  EXPECT_EQ(t.decision.remaining, 0);
  clock_.Advance(milliseconds(200));
  // 10 accrued since, and 20 refilled: the 20 that did not fit before are not carried.
  EXPECT_EQ(s.Take("a", 500).decision.leased, 10);
}

TEST_P(StoreConformanceTest, ConsumersOfferedAlikeGetEqualGrants) {
  const Limit limit = HundredPerSecond(Algorithm::kTokenBucket, 10'000);
  const std::string key = Key("share:alike");
  ShareSteps s(*store_, key, limit);
  const std::vector<std::string> names = {"a", "b", "c"};
  for (const std::string& n : names) s.Take(n, 500);
  std::vector<int64_t> total(names.size(), 0);
  for (int round = 0; round < 10; ++round) {
    clock_.Advance(milliseconds(300));
    for (size_t i = 0; i < names.size(); ++i) {
      const Taken t = s.Take(names[i], 500);
      // 100 over three: 34, 33, 33 (the spare unit to the first to come).
      EXPECT_EQ(t.share.allocation, i == 0 ? 34 : 33);
      EXPECT_GE(t.decision.leased, 9);
      EXPECT_LE(t.decision.leased, 11);
      total[i] += t.decision.leased;
    }
  }
  // 3 s at 34 and 33 a second, each within the one unit its carried fraction may hold.
  EXPECT_EQ(total[0], 102);
  EXPECT_GE(total[1], 98);
  EXPECT_LE(total[1], 99);
  EXPECT_GE(total[2], 98);
  EXPECT_LE(total[2], 99);
}

TEST_P(StoreConformanceTest, AConsumerThatLowersItsDemandGetsLessAndTheOthersMore) {
  const Limit limit = HundredPerSecond(Algorithm::kTokenBucket, 10'000);
  const std::string key = Key("share:lower");
  ShareSteps s(*store_, key, limit);
  s.Take("a", 500);
  s.Take("b", 500);
  clock_.Advance(milliseconds(500));
  EXPECT_EQ(s.Take("a", 500).decision.leased, 25);
  EXPECT_EQ(s.Take("b", 500).decision.leased, 25);
  clock_.Advance(milliseconds(500));
  const Taken a = s.Take("a", 10);
  EXPECT_EQ(a.share.allocation, 10);
  EXPECT_EQ(a.decision.leased, 5);
  const Taken b = s.Take("b", 500);
  EXPECT_EQ(b.share.allocation, 90);
  EXPECT_EQ(b.decision.leased, 45);
  EXPECT_EQ(b.share.demand_total, 510);
}

TEST_P(StoreConformanceTest, AConsumerSilentForThreeQuartersOfATtlWantsNothingUntilItCalls) {
  const Limit limit = HundredPerSecond(Algorithm::kTokenBucket, 10'000);
  const std::string key = Key("share:silent");
  ShareSteps s(*store_, key, limit);
  s.Take("a", 500);
  s.Take("b", 500);
  // b renews every half ttl; a stops.
  clock_.Advance(milliseconds(500));
  EXPECT_EQ(s.Take("b", 500).share.allocation, 50);
  clock_.Advance(milliseconds(250));  // a silent for exactly 3/4 of a ttl: still counted
  EXPECT_EQ(s.Take("b", 500).share.allocation, 50);
  clock_.Advance(Micros(1));
  const Taken b = s.Take("b", 500);
  EXPECT_EQ(b.share, (ShareState{.allocation = 100, .consumers = 2, .demand_total = 500}));
  // a calls again: counted at once, and the refill is halved again.
  clock_.Advance(milliseconds(100));
  const Taken a = s.Take("a", 500);
  EXPECT_EQ(a.share, (ShareState{.allocation = 50, .consumers = 2, .demand_total = 1000}));
  EXPECT_EQ(a.decision.leased, 42) << "50 a second over its silence (at most a ttl): 850 ms";
}

TEST_P(StoreConformanceTest, ShareWeightsAndProportionalFairness) {
  const Limit limit = HundredPerSecond(Algorithm::kTokenBucket, 10'000);
  {
    const std::string key = Key("share:weights");
    ShareSteps s(*store_, key, limit);
    s.Take("a", 500, 3, "gold");
    EXPECT_EQ(s.Take("b", 500, 1, "").share.allocation, 25);
    // Two members of one group share its part equally.
    // The group's 75 over its two members, the odd unit to the first to come.
    EXPECT_EQ(s.Take("c", 500, 3, "gold").share.allocation, 37);
    EXPECT_EQ(s.Take("a", 500, 3, "gold").share.allocation, 38);
    // A call with a group sets its weight for all its members.
    EXPECT_EQ(s.Take("c", 500, 1, "gold").share.allocation, 25);
    EXPECT_EQ(s.Take("b", 500, 1, "").share.allocation, 50);
  }
  {
    const std::string key = Key("share:proportional");
    ShareSteps s(*store_, key, limit);
    s.Take("a", 300, 1, "", Fairness::kProportional);
    EXPECT_EQ(s.Take("b", 100, 1, "", Fairness::kProportional).share.allocation, 25);
    EXPECT_EQ(s.Take("a", 300, 1, "", Fairness::kProportional).share.allocation, 75);
  }
}

TEST_P(StoreConformanceTest, AnExpiredConsumerIsDropped) {
  const Limit limit = HundredPerSecond(Algorithm::kTokenBucket, 10'000);
  const std::string key = Key("share:expired");
  ShareSteps s(*store_, key, limit);
  s.Take("a", 500);
  clock_.Advance(seconds(2));  // a's expiry, 2·ttl after its call: still live
  EXPECT_EQ(s.Take("b", 500).share.consumers, 2);
  clock_.Advance(seconds(1) + Micros(1));  // past a's expiry
  const Taken b = s.Take("b", 500);
  EXPECT_EQ(b.share, (ShareState{.allocation = 100, .consumers = 1, .demand_total = 500}));
  // a comes back as a new consumer: half a ttl of its allocation.
  const Taken a = s.Take("a", 500);
  EXPECT_EQ(a.share.consumers, 2);
  EXPECT_EQ(a.decision.leased, 25);
}

TEST_P(StoreConformanceTest, AKeyHoldsAtMostItsConsumersAndRefusesTheNextWithNothingChanged) {
  const Limit limit = HundredPerSecond(Algorithm::kTokenBucket, 1'000'000);
  const std::string key = Key("share:full");
  ShareSteps s(*store_, key, limit);
  for (size_t i = 0; i < kMaxShareConsumers; ++i) {
    std::string name = "c";
    name += std::to_string(i);
    ASSERT_EQ(s.Take(name, 1).share.consumers, static_cast<int64_t>(i + 1));
  }
  const Decision before = MustDecideOne(key, limit, 0);
  const ShareEntry one_more{.key = key, .limit = &limit, .consumer = "late", .demand = 1};
  Result<ShareResponse> r = store_->Share({&one_more, 1});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kResourceExhausted) << r.status().ToString();
  EXPECT_EQ(MustDecideOne(key, limit, 0), before) << "nothing charged";
  const Taken again = s.Take("c0", 1);
  EXPECT_EQ(again.share.consumers, static_cast<int64_t>(kMaxShareConsumers))
      << "the refused consumer was not recorded";
  // Once the others expire, there is room again.
  clock_.Advance(seconds(2) + Micros(1));
  EXPECT_EQ(s.Take("late", 1).share.consumers, 1);
}

TEST_P(StoreConformanceTest, BadSharesAreRefusedWithNothingCharged) {
  const Limit limit = HundredPerSecond(Algorithm::kTokenBucket, 100);
  const Limit log = *Limit::Create(LimitSpec::Window(Algorithm::kSlidingWindowLog, 10, seconds(1)));
  const Limit concurrency = *Limit::Create(LimitSpec::Concurrency(10, seconds(1)));
  const Limit huge = *Limit::Create(LimitSpec::Bucket(
      Algorithm::kTokenBucket, kMaxCapacity, {.count = kMaxCapacity, .period = milliseconds(1)}));
  const std::string key = Key("share:bad");
  const std::string other = Key("share:bad:other");
  const std::string long_name(kMaxShareNameLength + 1, 'x');
  const ShareEntry good{.key = key, .limit = &limit, .consumer = "a", .demand = 10};
  auto with = [&](auto change) {
    ShareEntry e = good;
    change(e);
    return e;
  };
  const std::vector<std::pair<std::string, std::vector<ShareEntry>>> cases = {
      {"no consumer", {with([](ShareEntry& e) { e.consumer = ""; })}},
      {"consumer too long", {with([&](ShareEntry& e) { e.consumer = long_name; })}},
      {"group too long", {with([&](ShareEntry& e) { e.group = long_name; })}},
      {"demand < 0", {with([](ShareEntry& e) { e.demand = -1; })}},
      {"demand > kMaxCost", {with([](ShareEntry& e) { e.demand = kMaxCost + 1; })}},
      {"weight 0", {with([](ShareEntry& e) { e.weight = 0; })}},
      {"weight too large", {with([](ShareEntry& e) { e.weight = kMaxShareWeight + 1; })}},
      {"ttl too short", {with([](ShareEntry& e) { e.ttl = kMinShareTtl - Micros(1); })}},
      {"ttl too long", {with([](ShareEntry& e) { e.ttl = kMaxShareTtl + Micros(1); })}},
      {"fairness", {with([](ShareEntry& e) { e.fairness = static_cast<Fairness>(7); })}},
      {"sliding_window_log", {with([&](ShareEntry& e) { e.limit = &log; })}},
      {"concurrency", {with([&](ShareEntry& e) { e.limit = &concurrency; })}},
      {"refill over the ttl", {with([&](ShareEntry& e) {
         e.limit = &huge;
         e.ttl = kMaxShareTtl;
       })}},
      {"no limit", {with([](ShareEntry& e) { e.limit = nullptr; })}},
      {"empty key", {with([](ShareEntry& e) { e.key = ""; })}},
      {"a key twice", {good, with([](ShareEntry& e) { e.consumer = "b"; })}},
      {"a bad entry after a good one",
       {with([&](ShareEntry& e) { e.key = other; }), with([](ShareEntry& e) { e.weight = 0; })}},
  };
  for (const auto& [name, entries] : cases) {
    SCOPED_TRACE(name);
    Result<ShareResponse> r = store_->Share(entries);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << r.status().ToString();
  }
  const Result<ShareResponse> none = store_->Share({});
  EXPECT_EQ(none.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(MustDecideOne(key, limit, 0).remaining, 100) << "nothing charged";
  EXPECT_EQ(MustDecideOne(other, limit, 0).remaining, 100) << "nothing charged";
  // No consumer was recorded: the first good call finds itself alone.
  ShareSteps s(*store_, key, limit);
  EXPECT_EQ(s.Take("a", 10).share.consumers, 1);
  ShareSteps t(*store_, other, limit);
  EXPECT_EQ(t.Take("a", 10).share.consumers, 1);
}

TEST_P(StoreConformanceTest, AGiveBackReturnsAnUnspentGrant) {
  for (Algorithm a : kLeasing) {
    SCOPED_TRACE(AlgorithmName(a));
    const Limit limit = HundredPerSecond(a);
    const std::string key = Key("share:giveback:" + std::string(AlgorithmName(a)));
    ShareSteps s(*store_, key, limit);
    const Taken t = s.Take("a", 500);
    ASSERT_EQ(t.decision.leased, 50);
    clock_.Advance(milliseconds(1));
    const GiveBackEntry back{
        .key = key,
        .limit = &limit,
        .units = 20,
        .grant = {.at = t.decision.leased_at, .reset_after = t.decision.reset_after}};
    const std::vector<Decision> d = MustGiveBack({&back, 1});
    ASSERT_EQ(d.size(), 1u);
    EXPECT_EQ(d[0].remaining, t.decision.remaining + 20);
  }
}

TEST_P(StoreConformanceTest, ABatchTakesSeveralKeysShares) {
  const Limit limit = HundredPerSecond(Algorithm::kTokenBucket);
  const Limit window = HundredPerSecond(Algorithm::kFixedWindow);
  const std::string k1 = Key("share:batch:1");
  const std::string k2 = Key("share:batch:2");
  const ShareEntry both[] = {
      {.key = k1, .limit = &limit, .consumer = "a", .demand = 40},
      {.key = k2, .limit = &window, .consumer = "a", .demand = 40, .ttl = milliseconds(500)}};
  Result<ShareResponse> r = store_->Share(both);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->decisions.size(), 2u);
  ASSERT_EQ(r->shares.size(), 2u);
  // New consumers: half a ttl of the 40 a second they ask for.
  EXPECT_EQ(r->decisions[0].leased, 20);
  EXPECT_EQ(r->decisions[1].leased, 10);
  EXPECT_EQ(r->shares[1], (ShareState{.allocation = 100, .consumers = 1, .demand_total = 40}));
}

}  // namespace
}  // namespace caudal
