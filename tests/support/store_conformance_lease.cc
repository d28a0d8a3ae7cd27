// The conformance suite's lease tests (store_conformance.h): a lease taken in the deciding step,
// renewals, give-backs of what still counts, their validation, and random traces of all of them
// against the reference model.
#include <random>
#include <vector>

#include "algorithms/algorithm.h"
#include "store/batch.h"
#include "store/store_reference_model.h"
#include "support/store_conformance.h"

namespace caudal {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

Limit LeaseTenPerSecond(Algorithm a) {
  const LimitSpec spec = IsWindowAlgorithm(a)
                             ? LimitSpec::Window(a, 10, seconds(1))
                             : LimitSpec::Bucket(a, 10, {.count = 10, .period = seconds(1)});
  return *Limit::Create(spec);
}

TEST_P(StoreConformanceTest, ALeaseTakesUpToItsAskAfterTheCostAsManyAsFit) {
  for (Algorithm a : kLeasing) {
    SCOPED_TRACE(AlgorithmName(a));
    const Limit limit = LeaseTenPerSecond(a);
    const std::string key = Key("lease:" + std::string(AlgorithmName(a)));
    const ConsumeEntry first{.key = key, .limit = &limit, .cost = 2, .lease = 5};
    const DecideResponse r1 = MustDecide({.consumes = {&first, 1}});
    ASSERT_TRUE(r1.allowed);
    EXPECT_EQ(r1.decisions[0].leased, 5);
    EXPECT_EQ(r1.decisions[0].remaining, 3) << "remaining is after the cost and the lease";
    EXPECT_EQ(r1.decisions[0].leased_at.count(), clock_.Now().count() / 1000);
    // Only three fit now: the lease takes those, and the cost still passes.
    const ConsumeEntry second{.key = key, .limit = &limit, .cost = 1, .lease = 5};
    const DecideResponse r2 = MustDecide({.consumes = {&second, 1}});
    ASSERT_TRUE(r2.allowed);
    EXPECT_EQ(r2.decisions[0].leased, 2);
    EXPECT_EQ(r2.decisions[0].remaining, 0);
    EXPECT_FALSE(MustDecideOne(key, limit, 1).allowed()) << "the leased units are consumed";
  }
}

TEST_P(StoreConformanceTest, ARenewalIsAPeekThatTakesWhatFits) {
  for (Algorithm a : kLeasing) {
    SCOPED_TRACE(AlgorithmName(a));
    const Limit limit = LeaseTenPerSecond(a);
    const std::string key = Key("renew:" + std::string(AlgorithmName(a)));
    ASSERT_TRUE(MustDecideOne(key, limit, 7).allowed());
    const ConsumeEntry renew{.key = key, .limit = &limit, .cost = 0, .lease = 8};
    const DecideResponse r = MustDecide({.consumes = {&renew, 1}});
    ASSERT_TRUE(r.allowed);
    EXPECT_EQ(r.decisions[0].leased, 3);
    EXPECT_EQ(r.decisions[0].remaining, 0);
  }
}

TEST_P(StoreConformanceTest, ARefusedRequestTakesNoLease) {
  const Limit bucket = LeaseTenPerSecond(Algorithm::kTokenBucket);
  const Limit window = LeaseTenPerSecond(Algorithm::kFixedWindow);
  const std::string leased = Key("refused:leased");
  const std::string full = Key("refused:full");
  ASSERT_TRUE(MustDecideOne(full, window, 10).allowed());
  const ConsumeEntry both[] = {{.key = leased, .limit = &bucket, .cost = 1, .lease = 4},
                               {.key = full, .limit = &window, .cost = 1}};
  const DecideResponse r = MustDecide({.consumes = both});
  EXPECT_FALSE(r.allowed);
  EXPECT_EQ(r.decisions[0].leased, 0);
  EXPECT_EQ(r.decisions[0].remaining, 10) << "nothing consumed, nothing leased";
}

TEST_P(StoreConformanceTest, AGiveBackAtOnceLeavesTheStateAsIfNothingWasLeased) {
  for (Algorithm a : kLeasing) {
    SCOPED_TRACE(AlgorithmName(a));
    const Limit limit = LeaseTenPerSecond(a);
    const std::string key = Key("giveback:" + std::string(AlgorithmName(a)));
    const ConsumeEntry take{.key = key, .limit = &limit, .cost = 1, .lease = 6};
    const Decision d = MustDecide({.consumes = {&take, 1}}).decisions[0];
    ASSERT_EQ(d.leased, 6);
    const LeaseGrant grant{.at = d.leased_at, .reset_after = d.reset_after};
    const GiveBackEntry back{.key = key, .limit = &limit, .units = 6, .grant = grant};
    EXPECT_EQ(MustGiveBack({&back, 1})[0].remaining, 9)
        << "the cost stays consumed, the lease is back";
    // The state decides as if only the cost had been consumed.
    EXPECT_FALSE(MustDecideOne(key, limit, 10).allowed());
    EXPECT_TRUE(MustDecideOne(key, limit, 9).allowed());
  }
}

TEST_P(StoreConformanceTest, AGiveBackReturnsOnlyWhatStillCounts) {
  // A bucket that has refilled since the grant absorbed the units: nothing to give back.
  for (Algorithm a : {Algorithm::kTokenBucket, Algorithm::kGcra}) {
    SCOPED_TRACE(AlgorithmName(a));
    const Limit limit = LeaseTenPerSecond(a);
    const std::string key = Key("absorbed:" + std::string(AlgorithmName(a)));
    const ConsumeEntry take{.key = key, .limit = &limit, .cost = 0, .lease = 4};
    const Decision d = MustDecide({.consumes = {&take, 1}}).decisions[0];
    ASSERT_EQ(d.leased, 4);
    const LeaseGrant grant{.at = d.leased_at, .reset_after = d.reset_after};
    clock_.Advance(milliseconds(300));                    // three of the four refilled
    ASSERT_TRUE(MustDecideOne(key, limit, 5).allowed());  // 9 left, 4 after this
    const GiveBackEntry back{.key = key, .limit = &limit, .units = 4, .grant = grant};
    // Of the four, one still counts (the grant's bucket would have been full 100 ms from now).
    EXPECT_EQ(MustGiveBack({&back, 1})[0].remaining, 5);
  }
  // A window that has passed keeps what it counted.
  const Limit window = LeaseTenPerSecond(Algorithm::kFixedWindow);
  const std::string key = Key("absorbed:window");
  const ConsumeEntry take{.key = key, .limit = &window, .cost = 0, .lease = 4};
  const Decision d = MustDecide({.consumes = {&take, 1}}).decisions[0];
  ASSERT_EQ(d.leased, 4);
  const LeaseGrant grant{.at = d.leased_at, .reset_after = d.reset_after};
  clock_.Advance(d.reset_after);  // the next window
  ASSERT_TRUE(MustDecideOne(key, window, 3).allowed());
  const GiveBackEntry back{.key = key, .limit = &window, .units = 4, .grant = grant};
  EXPECT_EQ(MustGiveBack({&back, 1})[0].remaining, 7);
}

TEST_P(StoreConformanceTest, RefusesMalformedLeasesAndGiveBacks) {
  const Limit bucket = LeaseTenPerSecond(Algorithm::kTokenBucket);
  const Limit log = LeaseTenPerSecond(Algorithm::kSlidingWindowLog);
  const Limit counter = LeaseTenPerSecond(Algorithm::kSlidingWindowCounter);
  const std::string key = Key("malformed");
  const std::string other = Key("malformed:other");
  const LeaseGrant grant{};
  const ConsumeEntry bad[] = {
      {.key = key, .limit = &bucket, .cost = 1, .lease = -1},
      {.key = key, .limit = &bucket, .cost = 1, .lease = kMaxCost + 1},
      {.key = key, .limit = &log, .cost = 1, .lease = 2},
      {.key = key, .limit = &counter, .cost = 1, .lease = 2},
  };
  for (size_t i = 0; i < std::size(bad); ++i) {
    const Result<DecideResponse> r = store_->Decide({.consumes = {&bad[i], 1}});
    ASSERT_FALSE(r.ok()) << "request " << i;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << "request " << i;
  }
  const GiveBackEntry back{.key = key, .limit = &log, .units = 1, .grant = grant};
  EXPECT_EQ(store_->GiveBack({&back, 1}).status().code(), StatusCode::kInvalidArgument);
  // What the verbs cannot express, the batch encoding (store/batch.h) still refuses.
  const std::vector<std::vector<EntryRef>> batches = {
      {{.key = key, .limit = &bucket, .cost = 1, .op = EntryOp::kRefund, .lease = 2}},
      {{.key = key, .limit = &bucket, .cost = 1, .op = EntryOp::kGiveBack}},
      {{.key = key, .limit = &bucket, .cost = 1, .op = EntryOp::kGiveBack, .grant = &grant},
       {.key = other, .limit = &bucket, .cost = 1}},
      {{.key = other, .limit = &bucket, .cost = 1},
       {.key = key, .limit = &bucket, .cost = 1, .op = EntryOp::kGiveBack, .grant = &grant}},
  };
  for (size_t i = 0; i < batches.size(); ++i) {
    const Result<DecideResponse> r = DecideBatch(*store_, batches[i]);
    ASSERT_FALSE(r.ok()) << "batch " << i;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << "batch " << i;
  }
  EXPECT_EQ(MustDecideOne(other, bucket, 0).remaining, 10) << "nothing was consumed";
}

struct HeldGrant {
  size_t key = 0;
  int64_t units = 0;
  LeaseGrant grant;
};

// Random requests asking for leases over keys of every algorithm, and give-backs of random parts
// of earlier grants at random later times (a part given back twice included), against the model.
TEST_P(StoreConformanceTest, RandomLeasesAndGiveBacksMatchTheReferenceModel) {
  std::mt19937_64 rng(28);
  std::vector<Limit> limits;
  std::vector<std::string> keys;
  for (Algorithm a : kAllAlgorithms) {
    for (int i = 0; i < 2; ++i) {
      const LimitSpec spec = IsWindowAlgorithm(a)
                                 ? LimitSpec::Window(a, 12 + i, milliseconds(200))
                                 : LimitSpec::Bucket(a, 12 + i, {3, milliseconds(100)});
      limits.push_back(*Limit::Create(spec));
      keys.push_back(Key(std::string(AlgorithmName(a)) + std::to_string(i)));
    }
  }
  ReferenceModel model;
  std::vector<HeldGrant> held;
  int64_t leased = 0, given_back = 0;
  for (int step = 0; step < 800; ++step) {
    clock_.Advance(Micros(static_cast<int64_t>(rng() % 40'000)));
    std::vector<ConsumeEntry> entries;
    std::vector<GiveBackEntry> give_backs;
    std::vector<size_t> key_of;  // per entry: its index in keys
    std::vector<HeldGrant> backs;
    if (!held.empty() && rng() % 4 == 0) {
      // Give back up to three grants of distinct keys, each in part or whole.
      backs.reserve(3);
      for (int j = 0; j < 3 && !held.empty(); ++j) {
        const size_t g = rng() % held.size();
        bool repeated = false;
        for (const HeldGrant& b : backs) repeated = repeated || b.key == held[g].key;
        if (repeated) continue;
        HeldGrant b = held[g];
        b.units = 1 + static_cast<int64_t>(rng() % static_cast<uint64_t>(b.units));
        backs.push_back(b);
        if (rng() % 3 != 0) held.erase(held.begin() + static_cast<ptrdiff_t>(g));
      }
      for (const HeldGrant& b : backs) {
        key_of.push_back(b.key);
        give_backs.push_back(
            {.key = keys[b.key], .limit = &limits[b.key], .units = b.units, .grant = b.grant});
      }
    } else {
      std::vector<bool> used(keys.size(), false);
      for (size_t j = 0, n = 1 + rng() % 3; j < n; ++j) {
        const size_t k = rng() % keys.size();
        if (used[k]) continue;
        used[k] = true;
        const bool leasing = SupportsLease(limits[k].algorithm());
        key_of.push_back(k);
        entries.push_back(
            {.key = keys[k],
             .limit = &limits[k],
             .cost = static_cast<int64_t>(rng() % 4),
             .lease = leasing && rng() % 3 != 0 ? static_cast<int64_t>(rng() % 7) : 0});
      }
    }
    const Micros now(clock_.Now().count() / 1000);
    std::vector<Decision> got;
    if (!give_backs.empty()) {
      const EncodedBatch batch(give_backs);
      got = MustGiveBack(give_backs);
      ASSERT_EQ(got, model.Decide(batch.entries(), now).decisions) << "step " << step;
    } else {
      const DecideResponse decided = MustDecide({.consumes = entries});
      const DecideResponse want = model.Decide({.consumes = entries}, now);
      ASSERT_EQ(decided.allowed, want.allowed) << "step " << step;
      ASSERT_EQ(decided.decisions, want.decisions) << "step " << step;
      got = decided.decisions;
    }
    for (size_t j = 0; j < entries.size(); ++j) {
      const Decision& d = got[j];
      if (d.leased == 0) continue;
      leased += d.leased;
      held.push_back({.key = key_of[j],
                      .units = d.leased,
                      .grant = {.at = d.leased_at, .reset_after = d.reset_after}});
    }
    for (const HeldGrant& b : backs) given_back += b.units;
  }
  // The trace must grant and give back, not only agree on requests that do neither.
  EXPECT_GE(leased, 200);
  EXPECT_GE(given_back, 100);
}

}  // namespace
}  // namespace caudal
