// The conformance suite's concurrency tests (store_conformance.h): slots taken under hold ids,
// refused at the limit until the earliest hold expires, released once, all-or-nothing with rate
// limits, validated, exact under concurrent takers, and random traces against the model.
#include <atomic>
#include <random>
#include <thread>
#include <vector>

#include "algorithms/algorithm.h"
#include "store/batch.h"
#include "store/store_reference_model.h"
#include "support/store_conformance.h"

namespace caudal {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

Limit Slots(int64_t limit, Micros hold) {
  return *Limit::Create(LimitSpec::Concurrency(limit, hold));
}

TEST_P(StoreConformanceTest, ConcurrencyTakesSlotsUntilTheLimitThenWaitsForTheEarliestHold) {
  const Limit limit = Slots(2, seconds(1));
  const std::string key = Key("slots");
  const HoldId h1{1, 1}, h2{1, 2}, h3{1, 3};
  const HoldEntry take1{.key = key, .limit = &limit, .hold = h1};
  const Decision d1 = MustDecide({.holds = {&take1, 1}}).decisions[0];
  ASSERT_TRUE(d1.allowed());
  EXPECT_EQ(d1.remaining, 1);
  EXPECT_EQ(d1.reset_after, seconds(1));
  clock_.Advance(milliseconds(100));
  const HoldEntry take2{.key = key, .limit = &limit, .hold = h2};
  ASSERT_TRUE(MustDecide({.holds = {&take2, 1}}).allowed);
  const HoldEntry take3{.key = key, .limit = &limit, .hold = h3};
  const DecideResponse full = MustDecide({.holds = {&take3, 1}});
  ASSERT_FALSE(full.allowed);
  EXPECT_EQ(full.decisions[0].verdict, Verdict::kDenied);
  EXPECT_EQ(full.decisions[0].retry_after, milliseconds(900));
  EXPECT_EQ(full.decisions[0].reset_after, seconds(1));
  clock_.Advance(milliseconds(900) - Micros(1));
  EXPECT_FALSE(MustDecide({.holds = {&take3, 1}}).allowed);
  clock_.Advance(Micros(1));
  const DecideResponse freed = MustDecide({.holds = {&take3, 1}});
  ASSERT_TRUE(freed.allowed) << "the first hold freed itself at its expiry";
  EXPECT_EQ(freed.decisions[0].remaining, 0);
  const ConsumeEntry peek{.key = key, .limit = &limit, .cost = 0};
  EXPECT_EQ(MustDecide({.consumes = {&peek, 1}}).decisions[0].remaining, 0)
      << "a peek takes nothing";
}

TEST_P(StoreConformanceTest, ConcurrencyReleaseFreesALiveHoldOnce) {
  const Limit limit = Slots(1, seconds(10));
  const std::string key = Key("release");
  const HoldId h1{5, 1}, h2{5, 2};
  const HoldEntry take1{.key = key, .limit = &limit, .hold = h1};
  const HoldEntry take2{.key = key, .limit = &limit, .hold = h2};
  ASSERT_TRUE(MustDecide({.holds = {&take1, 1}}).allowed);
  ASSERT_FALSE(MustDecide({.holds = {&take2, 1}}).allowed);
  const ReleaseEntry wrong{.key = key, .limit = &limit, .hold = h2};
  const std::vector<Decision> not_held = MustRelease({&wrong, 1});
  EXPECT_FALSE(not_held[0].released);
  EXPECT_EQ(not_held[0].remaining, 0);
  const ReleaseEntry release{.key = key, .limit = &limit, .hold = h1};
  const std::vector<Decision> released = MustRelease({&release, 1});
  EXPECT_TRUE(released[0].released);
  EXPECT_EQ(released[0].remaining, 1);
  EXPECT_FALSE(MustRelease({&release, 1})[0].released) << "already freed";
  ASSERT_TRUE(MustDecide({.holds = {&take2, 1}}).allowed) << "the slot came back at once";
  clock_.Advance(seconds(10));
  const ReleaseEntry expired{.key = key, .limit = &limit, .hold = h2};
  EXPECT_FALSE(MustRelease({&expired, 1})[0].released) << "it had freed itself";
  const std::string fresh = Key("never-held");
  const ReleaseEntry unknown{.key = fresh, .limit = &limit, .hold = h1};
  EXPECT_FALSE(MustRelease({&unknown, 1})[0].released);
}

TEST_P(StoreConformanceTest, ConcurrencyCombinesWithRateLimitsAllOrNothing) {
  const Limit slots = Slots(5, seconds(10));
  const Limit bucket =
      *Limit::Create(LimitSpec::Bucket(Algorithm::kTokenBucket, 1, {1, seconds(60)}));
  const std::string skey = Key("aon:slots"), bkey = Key("aon:bucket");
  const HoldId h1{9, 1}, h2{9, 2};
  const ConsumeEntry bucket_one{.key = bkey, .limit = &bucket, .cost = 1};
  const HoldEntry first{.key = skey, .limit = &slots, .hold = h1};
  ASSERT_TRUE(MustDecide({.consumes = {&bucket_one, 1}, .holds = {&first, 1}}).allowed);
  const HoldEntry second{.key = skey, .limit = &slots, .hold = h2};
  const DecideResponse refused = MustDecide({.consumes = {&bucket_one, 1}, .holds = {&second, 1}});
  ASSERT_FALSE(refused.allowed);
  EXPECT_FALSE(refused.decisions[0].allowed());
  EXPECT_TRUE(refused.decisions[1].allowed());
  EXPECT_EQ(refused.decisions[1].remaining, 4) << "the refused request took no slot";
  // And the other way round: full slots keep the bucket from consuming.
  const Limit one = Slots(1, seconds(10));
  const Limit roomy = *Limit::Create(LimitSpec::Bucket(Algorithm::kGcra, 10, {10, seconds(1)}));
  const std::string okey = Key("aon:one"), rkey = Key("aon:roomy");
  const ConsumeEntry three{.key = rkey, .limit = &roomy, .cost = 3};
  const HoldEntry a{.key = okey, .limit = &one, .hold = h1};
  ASSERT_TRUE(MustDecide({.consumes = {&three, 1}, .holds = {&a, 1}}).allowed);
  const HoldEntry b{.key = okey, .limit = &one, .hold = h2};
  const DecideResponse no_slot = MustDecide({.consumes = {&three, 1}, .holds = {&b, 1}});
  ASSERT_FALSE(no_slot.allowed);
  EXPECT_EQ(no_slot.decisions[0].remaining, 7) << "the bucket consumed nothing";
}

TEST_P(StoreConformanceTest, ConcurrencyRefusesMalformedEntriesHoldingNothing) {
  const Limit slots = Slots(3, seconds(1));
  const Limit bucket =
      *Limit::Create(LimitSpec::Bucket(Algorithm::kTokenBucket, 5, {5, seconds(1)}));
  const std::string key = Key("bad"), other = Key("bad:bucket");
  const HoldId h{3, 3}, too_big{kHoldIdWordLimit, 0}, negative{0, -1};
  const ConsumeEntry consumes[] = {
      {.key = key, .limit = &slots, .cost = 1},  // a slot taken by a consume, not a hold
      {.key = key, .limit = &slots, .cost = 0, .lease = 2},
  };
  const HoldEntry holds[] = {
      {.key = key, .limit = &slots, .hold = too_big},
      {.key = key, .limit = &slots, .hold = negative},
      {.key = other, .limit = &bucket, .hold = h},  // a hold on a rate limit
  };
  const ReserveEntry reserve{.key = key, .limit = &slots, .cost = 1, .id = {4, 4}, .terms = {}};
  const RefundEntry refund{.key = key, .limit = &slots, .cost = 1};
  const ChargeEntry charge{.key = key, .limit = &slots, .cost = 1};
  std::vector<Result<DecideResponse>> decided;
  for (const ConsumeEntry& c : consumes) decided.push_back(store_->Decide({.consumes = {&c, 1}}));
  for (const HoldEntry& e : holds) decided.push_back(store_->Decide({.holds = {&e, 1}}));
  decided.push_back(store_->Decide({.reserves = {&reserve, 1}}));
  decided.push_back(store_->Decide({.refunds = {&refund, 1}}));
  decided.push_back(store_->Decide({.charges = {&charge, 1}}));
  for (size_t i = 0; i < decided.size(); ++i) {
    SCOPED_TRACE(i);
    ASSERT_FALSE(decided[i].ok());
    EXPECT_EQ(decided[i].status().code(), StatusCode::kInvalidArgument)
        << decided[i].status().ToString();
  }
  const ReleaseEntry not_slots{.key = other, .limit = &bucket, .hold = h};
  EXPECT_EQ(store_->Release({&not_slots, 1}).status().code(), StatusCode::kInvalidArgument);
  // What the verbs cannot express, the batch encoding (store/batch.h) still refuses.
  const std::vector<std::vector<EntryRef>> bad = {
      {{.key = key, .limit = &slots, .cost = 0, .op = EntryOp::kRelease}},  // no hold
      {{.key = key, .limit = &slots, .cost = 0, .op = EntryOp::kRelease, .hold = &h},
       {.key = other, .limit = &bucket, .cost = 1}},
      {{.key = other, .limit = &bucket, .cost = 1},
       {.key = key, .limit = &slots, .cost = 0, .op = EntryOp::kRelease, .hold = &h}},
  };
  for (size_t i = 0; i < bad.size(); ++i) {
    SCOPED_TRACE(i);
    const Result<DecideResponse> r = DecideBatch(*store_, bad[i]);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << r.status().ToString();
  }
  EXPECT_EQ(MustDecideOne(key, slots, 0).remaining, 3) << "nothing held";
  EXPECT_EQ(MustDecideOne(other, bucket, 0).remaining, 5) << "nothing consumed";
}

// Threads racing for the slots of one key: exactly `limit` are taken, then, released, exactly
// `limit` again.
TEST_P(StoreConformanceTest, ConcurrencyIsExactUnderConcurrentTakers) {
  const Limit limit = Slots(7, seconds(60));
  const std::string key = Key("race");
  constexpr int kThreads = 4, kTries = 25;
  for (int round = 0; round < 2; ++round) {
    SCOPED_TRACE(round);
    std::atomic<int> admitted{0};
    std::vector<std::vector<HoldId>> taken(kThreads);
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&, t] {
        for (int i = 0; i < kTries; ++i) {
          const HoldId id{round + 1, t * 1000 + i};
          const HoldEntry e{.key = key, .limit = &limit, .hold = id};
          const Result<DecideResponse> r = store_->Decide({.holds = {&e, 1}});
          if (r.ok() && r->allowed) {
            admitted.fetch_add(1);
            taken[static_cast<size_t>(t)].push_back(id);
          }
        }
      });
    }
    for (std::thread& t : threads) t.join();
    EXPECT_EQ(admitted.load(), limit.capacity());
    for (const auto& ids : taken) {
      for (const HoldId& id : ids) {
        const ReleaseEntry e{.key = key, .limit = &limit, .hold = id};
        EXPECT_TRUE(MustRelease({&e, 1})[0].released);
      }
    }
  }
}

// Random requests over concurrency and rate keys, takes and releases, against the model.
TEST_P(StoreConformanceTest, ConcurrencyRandomRequestsMatchTheReferenceModel) {
  std::mt19937_64 rng(11);
  const std::vector<Limit> limits = {
      Slots(2, milliseconds(120)), Slots(3, milliseconds(300)),
      *Limit::Create(LimitSpec::Bucket(Algorithm::kTokenBucket, 6, {3, milliseconds(100)})),
      *Limit::Create(LimitSpec::Window(Algorithm::kSlidingWindowLog, 5, milliseconds(200)))};
  std::vector<std::string> keys;
  for (size_t i = 0; i < limits.size(); ++i) keys.push_back(Key("model" + std::to_string(i)));
  ReferenceModel model;
  std::vector<HoldId> ids;  // every id taken so far (released or not)
  int64_t next = 1;
  for (int step = 0; step < 500; ++step) {
    clock_.Advance(Micros(static_cast<int64_t>(rng() % 40'000)));
    std::vector<ConsumeEntry> entries;
    std::vector<HoldEntry> holds;
    std::vector<ReleaseEntry> releases;
    HoldId fresh{static_cast<int64_t>(rng() % 4), next++};
    HoldId old = ids.empty() ? fresh : ids[rng() % ids.size()];
    const Micros now(clock_.Now().count() / 1000);
    if (rng() % 4 == 0) {  // a release of one or both concurrency keys
      for (size_t k = 0; k < 2; ++k) {
        if (k == 0 || rng() % 2 == 0) {
          releases.push_back({.key = keys[k], .limit = &limits[k], .hold = old});
        }
      }
      const EncodedBatch batch(releases);
      ASSERT_EQ(MustRelease(releases), model.Decide(batch.entries(), now).decisions)
          << "step " << step;
      continue;
    } else {
      for (size_t k = 0; k < keys.size(); ++k) {
        if (rng() % 2 != 0) continue;
        const auto cost = static_cast<int64_t>(rng() % 3);
        if (k < 2 && cost > 0) {  // a concurrency key's slot; cost 0 peeks
          holds.push_back({.key = keys[k], .limit = &limits[k], .hold = fresh});
        } else {
          entries.push_back({.key = keys[k], .limit = &limits[k], .cost = cost});
        }
      }
      if (entries.empty() && holds.empty()) continue;
      ids.push_back(fresh);
    }
    const DecideRequest request{.consumes = entries, .holds = holds};
    const DecideResponse got = MustDecide(request);
    const DecideResponse want = model.Decide(request, now);
    ASSERT_EQ(got.allowed, want.allowed) << "step " << step;
    ASSERT_EQ(got.decisions, want.decisions) << "step " << step;
  }
}

}  // namespace
}  // namespace caudal
