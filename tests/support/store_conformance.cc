#include "support/store_conformance.h"

#include <atomic>
#include <future>
#include <random>
#include <thread>
#include <vector>

#include "algorithms/algorithm.h"
#include "store/batch.h"
#include "store/store_reference_model.h"

namespace caudal {

using std::chrono::milliseconds;
using std::chrono::seconds;

std::string StoreConformanceParamName(const ::testing::TestParamInfo<StoreConformanceParam>& info) {
  return info.param.name;
}

void StoreConformanceTest::SetUp() {
  store_ = GetParam().make(clock_);
  ASSERT_NE(store_, nullptr);
  std::random_device rd;
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  tag_ = "conformance:" + std::string(info->name()) + ":" + std::to_string(rd()) + ":";
}

std::string StoreConformanceTest::Key(std::string_view name) const {
  return tag_ + std::string(name);
}

DecideResponse StoreConformanceTest::MustDecide(const DecideRequest& request) {
  const size_t entries = request.size();
  Result<DecideResponse> r = store_->Decide(request);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  if (!r.ok()) {
    // The test has failed; one blank decision per entry lets it go on reading them safely.
    DecideResponse failed;
    failed.decisions.resize(entries);
    return failed;
  }
  EXPECT_EQ(r->decisions.size(), entries);
  r->decisions.resize(entries);  // so a failed test reads no further than its entries
  return std::move(r).value();
}

namespace {

template <typename Response>
std::vector<Decision> DecisionsOf(Result<Response> r, size_t entries) {
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  if (!r.ok()) return std::vector<Decision>(entries);
  EXPECT_EQ(r->decisions.size(), entries);
  r->decisions.resize(entries);
  return std::move(r->decisions);
}

}  // namespace

std::vector<Decision> StoreConformanceTest::MustGiveBack(std::span<const GiveBackEntry> entries) {
  return DecisionsOf(store_->GiveBack(entries), entries.size());
}

std::vector<Decision> StoreConformanceTest::MustRelease(std::span<const ReleaseEntry> entries) {
  return DecisionsOf(store_->Release(entries), entries.size());
}

std::vector<Decision> StoreConformanceTest::MustSettle(std::span<const SettleEntry> entries) {
  return DecisionsOf(store_->Settle(entries), entries.size());
}

Decision StoreConformanceTest::MustDecideOne(std::string_view key, const Limit& limit,
                                             int64_t cost) {
  const ConsumeEntry e{.key = key, .limit = &limit, .cost = cost};
  DecideResponse r = MustDecide({.consumes = {&e, 1}});
  if (r.decisions.size() != 1) return {};
  EXPECT_EQ(r.allowed, r.decisions[0].allowed());
  return r.decisions[0];
}

namespace {

Limit MakeLimit(const LimitSpec& spec) {
  Result<Limit> l = Limit::Create(spec);
  EXPECT_TRUE(l.ok()) << l.status().ToString();
  return *l;
}
Limit Window(Algorithm a, int64_t limit, Micros w) {
  return MakeLimit(LimitSpec::Window(a, limit, w));
}
Limit Bucket(Algorithm a, int64_t capacity, Rate refill) {
  return MakeLimit(LimitSpec::Bucket(a, capacity, refill));
}

// A limit of every algorithm with the same nominal shape: 10 per second.
Limit TenPerSecond(Algorithm a) {
  return IsWindowAlgorithm(a) ? Window(a, 10, seconds(1)) : Bucket(a, 10, {10, seconds(1)});
}

TEST_P(StoreConformanceTest, NamesItselfAndAnswersPing) {
  EXPECT_FALSE(store_->Name().empty());
  EXPECT_TRUE(store_->Ping().ok());
}

TEST_P(StoreConformanceTest, EveryAlgorithmAdmitsItsLimitThenRefusesWithoutConsuming) {
  for (Algorithm a : kAllAlgorithms) {
    SCOPED_TRACE(AlgorithmName(a));
    const Limit limit = TenPerSecond(a);
    const std::string key = Key(AlgorithmName(a));
    for (int i = 0; i < 10; ++i) {
      const Decision d = MustDecideOne(key, limit, 1);
      ASSERT_TRUE(d.allowed()) << i;
      EXPECT_EQ(d.remaining, 9 - i);
      EXPECT_EQ(d.limit, 10);
    }
    const Decision denied = MustDecideOne(key, limit, 1);
    EXPECT_EQ(denied.verdict, Verdict::kDenied);
    EXPECT_EQ(denied.remaining, 0);
    EXPECT_GT(denied.retry_after, Micros(0));
    EXPECT_LE(denied.retry_after, seconds(2));  // the counter waits for the weight to drop
    // After the longest wait any of them asks for, one more fits.
    clock_.Advance(denied.retry_after);
    EXPECT_TRUE(MustDecideOne(key, limit, 1).allowed());
  }
}

// Each algorithm through the store, step by step against the pure algorithm on a random trace:
// costs from 0 (peeks) to above the capacity (never fits), random gaps, occasional steps back.
TEST_P(StoreConformanceTest, EveryAlgorithmDecidesAsThePureAlgorithmOnARandomTrace) {
  std::mt19937_64 rng(20261129);
  for (Algorithm a : kAllAlgorithms) {
    SCOPED_TRACE(AlgorithmName(a));
    const Limit limit = IsWindowAlgorithm(a) ? Window(a, 20, milliseconds(500))
                                             : Bucket(a, 20, {7, milliseconds(300)});
    const std::string key = Key(AlgorithmName(a));
    ReferenceModel model;
    for (int i = 0; i < 400; ++i) {
      const int64_t gap_us = static_cast<int64_t>(rng() % 60'000) - (rng() % 20 == 0 ? 80'000 : 0);
      clock_.Advance(Micros(gap_us));
      const int64_t cost = rng() % 25 == 0 ? 21 : static_cast<int64_t>(rng() % 6);
      const ConsumeEntry e{.key = key, .limit = &limit, .cost = cost};
      const DecideRequest one{.consumes = {&e, 1}};
      const DecideResponse got = MustDecide(one);
      const DecideResponse want = model.Decide(one, Micros(clock_.Now().count() / 1000));
      ASSERT_EQ(got.decisions, want.decisions) << "step " << i;
      ASSERT_EQ(got.allowed, want.allowed) << "step " << i;
    }
  }
}

TEST_P(StoreConformanceTest, RefusedRequestConsumesNothingAndSaysWhichLimitRefused) {
  const Limit wide = Bucket(Algorithm::kTokenBucket, 5, {1, seconds(10)});
  const Limit narrow = Window(Algorithm::kFixedWindow, 2, seconds(10));
  const std::string a = Key("wide");
  const std::string b = Key("narrow");
  const ConsumeEntry both[] = {{.key = a, .limit = &wide, .cost = 1},
                               {.key = b, .limit = &narrow, .cost = 1}};
  for (int i = 0; i < 2; ++i) ASSERT_TRUE(MustDecide({.consumes = both}).allowed) << i;

  const DecideResponse refused = MustDecide({.consumes = both});
  EXPECT_FALSE(refused.allowed);
  ASSERT_EQ(refused.decisions.size(), 2u);
  // The wide limit would have passed: reported as a peek, 3 left, nothing consumed.
  EXPECT_EQ(refused.decisions[0].verdict, Verdict::kAllowed);
  EXPECT_EQ(refused.decisions[0].remaining, 3);
  EXPECT_EQ(refused.decisions[1].verdict, Verdict::kDenied);
  EXPECT_GT(refused.decisions[1].retry_after, Micros(0));

  // Refused again and again: the wide bucket still holds 3.
  for (int i = 0; i < 5; ++i) EXPECT_FALSE(MustDecide({.consumes = both}).allowed);
  EXPECT_EQ(MustDecideOne(a, wide, 3).remaining, 0);
  EXPECT_EQ(MustDecideOne(a, wide, 1).verdict, Verdict::kDenied);
}

TEST_P(StoreConformanceTest, AllOrNothingAcrossEveryAlgorithmWhenTheLastEntryRefuses) {
  std::vector<Limit> limits;
  std::vector<std::string> keys;
  for (Algorithm a : kAllAlgorithms) {
    limits.push_back(TenPerSecond(a));
    keys.push_back(Key(AlgorithmName(a)));
  }
  const Limit tight = Window(Algorithm::kSlidingWindowLog, 1, seconds(5));
  limits.push_back(tight);
  keys.push_back(Key("tight"));
  std::vector<ConsumeEntry> entries;
  for (size_t i = 0; i < limits.size(); ++i) {
    entries.push_back({.key = keys[i], .limit = &limits[i], .cost = 1});
  }
  ASSERT_TRUE(MustDecide({.consumes = entries}).allowed);
  const DecideResponse refused = MustDecide({.consumes = entries});
  EXPECT_FALSE(refused.allowed);
  for (size_t i = 0; i + 1 < entries.size(); ++i) {
    EXPECT_TRUE(refused.decisions[i].allowed()) << i;
    EXPECT_EQ(refused.decisions[i].remaining, 9) << i;  // as after the first request
  }
  EXPECT_EQ(refused.decisions.back().verdict, Verdict::kDenied);
  // Each of the others still has exactly 9: nine single requests pass, the tenth does not.
  for (size_t i = 0; i + 1 < entries.size(); ++i) {
    for (int k = 0; k < 9; ++k) ASSERT_TRUE(MustDecideOne(keys[i], limits[i], 1).allowed()) << i;
    EXPECT_FALSE(MustDecideOne(keys[i], limits[i], 1).allowed()) << i;
  }
}

TEST_P(StoreConformanceTest, PeekReportsWithoutConsuming) {
  for (Algorithm a : kAllAlgorithms) {
    SCOPED_TRACE(AlgorithmName(a));
    const Limit limit = TenPerSecond(a);
    const std::string key = Key(AlgorithmName(a));
    EXPECT_EQ(MustDecideOne(key, limit, 0).remaining, 10);
    EXPECT_EQ(MustDecideOne(key, limit, 4).remaining, 6);
    for (int i = 0; i < 3; ++i) {
      const Decision peek = MustDecideOne(key, limit, 0);
      EXPECT_TRUE(peek.allowed());
      EXPECT_EQ(peek.remaining, 6);
    }
    EXPECT_EQ(MustDecideOne(key, limit, 6).remaining, 0);
    const Decision empty = MustDecideOne(key, limit, 0);
    EXPECT_TRUE(empty.allowed());
    EXPECT_EQ(empty.remaining, 0);
    EXPECT_GT(empty.reset_after, Micros(0));
  }
}

TEST_P(StoreConformanceTest, CostAboveCapacityNeverFitsAndBlocksTheWholeRequest) {
  const Limit small = Bucket(Algorithm::kGcra, 3, {1, seconds(1)});
  const Limit other = Window(Algorithm::kSlidingWindowCounter, 10, seconds(1));
  const std::string a = Key("small");
  const std::string b = Key("other");
  const ConsumeEntry entries[] = {{.key = b, .limit = &other, .cost = 2},
                                  {.key = a, .limit = &small, .cost = 4}};
  const DecideResponse r = MustDecide({.consumes = entries});
  EXPECT_FALSE(r.allowed);
  EXPECT_EQ(r.decisions[1].verdict, Verdict::kNeverFits);
  EXPECT_EQ(r.decisions[1].retry_after, Micros(0));
  EXPECT_EQ(r.decisions[0].remaining, 10);
  clock_.Advance(std::chrono::hours(24));
  EXPECT_EQ(MustDecide({.consumes = entries}).decisions[1].verdict, Verdict::kNeverFits);
  EXPECT_EQ(MustDecideOne(b, other, 0).remaining, 10);
}

TEST_P(StoreConformanceTest, RefusesMalformedRequestsWithInvalidArgument) {
  const Limit limit = TenPerSecond(Algorithm::kTokenBucket);
  const std::string key = Key("k");
  const std::string long_key(kMaxKeyLength + 1, 'x');
  auto code = [&](std::vector<ConsumeEntry> entries) {
    const Result<DecideResponse> r = store_->Decide({.consumes = entries});
    return r.status().code();
  };
  EXPECT_EQ(code({}), StatusCode::kInvalidArgument);
  EXPECT_EQ(code({{.key = "", .limit = &limit}}), StatusCode::kInvalidArgument);
  EXPECT_EQ(code({{.key = long_key, .limit = &limit}}), StatusCode::kInvalidArgument);
  EXPECT_EQ(code({{.key = key, .limit = nullptr}}), StatusCode::kInvalidArgument);
  EXPECT_EQ(code({{.key = key, .limit = &limit, .cost = -1}}), StatusCode::kInvalidArgument);
  EXPECT_EQ(code({{.key = key, .limit = &limit, .cost = kMaxCost + 1}}),
            StatusCode::kInvalidArgument);
  const std::string other = Key("other");
  EXPECT_EQ(code({{.key = key, .limit = &limit},
                  {.key = other, .limit = &limit},
                  {.key = key, .limit = &limit}}),
            StatusCode::kInvalidArgument);
  std::vector<std::string> keys;
  for (size_t i = 0; i <= kMaxEntriesPerRequest; ++i) keys.push_back(Key(std::to_string(i)));
  std::vector<ConsumeEntry> too_many;
  for (const std::string& k : keys) too_many.push_back({.key = k, .limit = &limit});
  EXPECT_EQ(code(too_many), StatusCode::kInvalidArgument);
  too_many.pop_back();
  EXPECT_EQ(code(too_many), StatusCode::kOk);  // exactly the maximum is fine
  // None of the refused requests consumed anything; the one of exactly 64 entries did.
  EXPECT_EQ(MustDecideOne(key, limit, 0).remaining, 10);
  EXPECT_EQ(MustDecideOne(keys[0], limit, 0).remaining, 9);
  EXPECT_EQ(MustDecideOne(keys[kMaxEntriesPerRequest], limit, 0).remaining, 10);
}

TEST_P(StoreConformanceTest, AsyncCallsDoneExactlyOnce) {
  const Limit limit = TenPerSecond(Algorithm::kFixedWindow);
  const std::string key = Key("async");
  const ConsumeEntry e{.key = key, .limit = &limit, .cost = 3};
  std::atomic<int> calls{0};
  std::promise<Result<DecideResponse>> promise;
  store_->DecideAsync({.consumes = {&e, 1}}, [&](Result<DecideResponse> r) {
    if (calls.fetch_add(1) == 0) promise.set_value(std::move(r));
  });
  Result<DecideResponse> r = promise.get_future().get();
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->decisions.at(0).remaining, 7);
  const ConsumeEntry bad{.key = "", .limit = &limit};
  std::promise<StatusCode> failed;
  store_->DecideAsync({.consumes = {&bad, 1}}, [&](Result<DecideResponse> r2) {
    if (calls.fetch_add(1) == 1) failed.set_value(r2.status().code());
  });
  EXPECT_EQ(failed.get_future().get(), StatusCode::kInvalidArgument);
  EXPECT_EQ(calls.load(), 2);
}

TEST_P(StoreConformanceTest, TimeMovingOnRefillsAndMovingBackAdmitsNothingExtra) {
  const Limit bucket = Bucket(Algorithm::kTokenBucket, 4, {2, seconds(1)});
  const Limit window = Window(Algorithm::kFixedWindow, 4, seconds(1));
  const std::string b = Key("bucket");
  const std::string w = Key("window");
  EXPECT_EQ(MustDecideOne(b, bucket, 4).remaining, 0);
  EXPECT_EQ(MustDecideOne(w, window, 4).remaining, 0);
  clock_.Advance(milliseconds(500));
  EXPECT_EQ(MustDecideOne(b, bucket, 0).remaining, 1);
  EXPECT_EQ(MustDecideOne(w, window, 1).verdict, Verdict::kDenied);
  clock_.Advance(milliseconds(-500));  // a clock step back
  EXPECT_EQ(MustDecideOne(b, bucket, 2).verdict, Verdict::kDenied);
  EXPECT_EQ(MustDecideOne(w, window, 1).verdict, Verdict::kDenied);
  clock_.Advance(seconds(2));
  EXPECT_EQ(MustDecideOne(b, bucket, 4).remaining, 0);
  EXPECT_EQ(MustDecideOne(w, window, 4).remaining, 0);
}

TEST_P(StoreConformanceTest, KeysAreIndependent) {
  const Limit limit = Window(Algorithm::kSlidingWindowLog, 2, seconds(1));
  const std::string a = Key("a");
  const std::string b = Key("b");
  EXPECT_EQ(MustDecideOne(a, limit, 2).remaining, 0);
  EXPECT_EQ(MustDecideOne(b, limit, 1).remaining, 1);
  EXPECT_FALSE(MustDecideOne(a, limit, 1).allowed());
}

// Several threads hammer overlapping keys without time moving: every limit admits exactly its
// bound in total (never more), and multi-key requests stay all-or-nothing.
TEST_P(StoreConformanceTest, ConcurrentRequestsNeverAdmitMoreThanTheBound) {
  constexpr int kThreads = 4;
  constexpr int kPerThread = 300;
  const Limit shared = Bucket(Algorithm::kTokenBucket, 400, {1, std::chrono::hours(1)});
  const Limit pair = Window(Algorithm::kSlidingWindowLog, 200, seconds(60));
  const std::string s = Key("shared");
  const std::string p = Key("pair");
  std::atomic<int64_t> admitted_shared{0};
  std::atomic<int64_t> admitted_pair{0};
  std::atomic<int> errors{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kPerThread; ++i) {
        const ConsumeEntry both[] = {{.key = s, .limit = &shared, .cost = 1},
                                     {.key = p, .limit = &pair, .cost = 1}};
        // Every other request on even threads touches only the shared bucket.
        const bool only_shared = t % 2 == 0 && i % 2 == 0;
        const Result<DecideResponse> r =
            store_->Decide({.consumes = std::span<const ConsumeEntry>(both, only_shared ? 1 : 2)});
        if (!r.ok()) {
          errors.fetch_add(1);
          continue;
        }
        if (r->allowed) {
          admitted_shared.fetch_add(1);
          if (!only_shared) admitted_pair.fetch_add(1);
        }
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(errors.load(), 0);
  // 1200 requests: 300 touch only the bucket, 900 both. Whatever the interleaving, the bucket
  // (400) is emptied exactly: if it were not, all 300 bucket-only requests and 200 paired ones
  // would have passed, 500 > 400. The pair log admits at most 200, and consumed exactly what
  // the admitted requests say: refused requests took nothing.
  EXPECT_EQ(admitted_shared.load(), 400);
  EXPECT_LE(admitted_pair.load(), 200);
  EXPECT_GE(admitted_pair.load(), 100);  // the bucket-only requests take at most 300
  EXPECT_EQ(MustDecideOne(s, shared, 0).remaining, 0);
  EXPECT_EQ(MustDecideOne(p, pair, 0).remaining, 200 - admitted_pair.load());
}

TEST_P(StoreConformanceTest, RefundsGiveUnitsBackEvenInARefusedRequest) {
  for (Algorithm a : kAllAlgorithms) {
    SCOPED_TRACE(AlgorithmName(a));
    const Limit limit = TenPerSecond(a);
    const std::string key = Key(std::string(AlgorithmName(a)));
    ASSERT_TRUE(MustDecideOne(key, limit, 10).allowed());
    const RefundEntry refund{.key = key, .limit = &limit, .cost = 4};
    const DecideResponse back = MustDecide({.refunds = {&refund, 1}});
    EXPECT_TRUE(back.allowed);
    EXPECT_EQ(back.decisions[0].verdict, Verdict::kAllowed);
    EXPECT_EQ(back.decisions[0].remaining, 4);
    EXPECT_TRUE(MustDecideOne(key, limit, 4).allowed());
    EXPECT_EQ(MustDecideOne(key, limit, 1).verdict, Verdict::kDenied);

    // Beside an entry that refuses, the refund still applies; the consumption does not.
    const std::string other = Key(std::string(AlgorithmName(a)) + ":other");
    const RefundEntry give{.key = key, .limit = &limit, .cost = 3};
    const ConsumeEntry take{.key = other, .limit = &limit, .cost = 11};
    const DecideResponse refused = MustDecide({.consumes = {&take, 1}, .refunds = {&give, 1}});
    EXPECT_FALSE(refused.allowed);
    EXPECT_EQ(refused.decisions[0].verdict, Verdict::kNeverFits);
    EXPECT_EQ(refused.decisions[1].remaining, 3);
    EXPECT_TRUE(MustDecideOne(key, limit, 3).allowed());
    EXPECT_EQ(MustDecideOne(key, limit, 1).verdict, Verdict::kDenied);

    // Never past a fresh state, and nothing to give back on a key never seen.
    const RefundEntry all{.key = key, .limit = &limit, .cost = kMaxCost};
    EXPECT_EQ(MustDecide({.refunds = {&all, 1}}).decisions[0].remaining, 10);
    const std::string unseen_key = Key("unseen");  // outlives the entry that views it
    const RefundEntry unseen{.key = unseen_key, .limit = &limit, .cost = 5};
    const DecideResponse nothing = MustDecide({.refunds = {&unseen, 1}});
    EXPECT_EQ(nothing.decisions[0].remaining, 10);
    EXPECT_EQ(nothing.decisions[0].reset_after, Micros(0));
    EXPECT_TRUE(MustDecideOne(key, limit, 10).allowed());
    EXPECT_EQ(MustDecideOne(key, limit, 1).verdict, Verdict::kDenied);
  }
}

// A charge (envoyproxy/ratelimit's INCRBY) counts a refused hit: after 6 of 10, a charge of 5
// is refused and still counted (11 of 10), so remaining is 0 and even a peek is refused until
// the next window, which starts empty.
TEST_P(StoreConformanceTest, ChargeCountsARefusedHitAndOverdrawsTheWindow) {
  const Limit limit = Window(Algorithm::kFixedWindow, 10, seconds(60));
  const std::string key = Key("charged");
  auto charge = [&](int64_t cost) {
    const ChargeEntry e{.key = key, .limit = &limit, .cost = cost};
    DecideResponse r = MustDecide({.charges = {&e, 1}});
    EXPECT_EQ(r.allowed, !r.decisions.empty() && r.decisions[0].allowed());
    return r.decisions.empty() ? Decision{} : r.decisions[0];
  };
  Decision d = charge(6);
  EXPECT_EQ(d.verdict, Verdict::kAllowed);
  EXPECT_EQ(d.remaining, 4);
  d = charge(5);
  EXPECT_EQ(d.verdict, Verdict::kDenied);
  EXPECT_EQ(d.remaining, 0);
  EXPECT_EQ(d.overdrawn, 1) << "11 of 10";
  EXPECT_GT(d.retry_after, Micros(0));
  EXPECT_EQ(d.retry_after, d.reset_after) << "the next window starts empty";
  EXPECT_EQ(charge(0).verdict, Verdict::kDenied) << "a peek on an overdrawn window";
  // An ordinary consume sees the overdraw; its own peek still passes (the peek contract).
  EXPECT_EQ(MustDecideOne(key, limit, 1).verdict, Verdict::kDenied);
  EXPECT_EQ(MustDecideOne(key, limit, 0).verdict, Verdict::kAllowed);
  EXPECT_EQ(MustDecideOne(key, limit, 0).remaining, 0);
  // Giving one back leaves 10 of 10: used up, not over, so a charge of 0 passes again.
  const RefundEntry back{.key = key, .limit = &limit, .cost = 1};
  EXPECT_EQ(MustDecide({.refunds = {&back, 1}}).decisions[0].remaining, 0);
  EXPECT_EQ(charge(0).verdict, Verdict::kAllowed);
  EXPECT_EQ(charge(11).verdict, Verdict::kNeverFits);  // above the limit: counted all the same
  EXPECT_EQ(charge(0).verdict, Verdict::kDenied);
  clock_.Advance(seconds(60));
  d = charge(0);
  EXPECT_EQ(d.verdict, Verdict::kAllowed);
  EXPECT_EQ(d.remaining, 10);
}

// Beside a consume that refuses, a charge is applied all the same; a charge that does not fit
// refuses the request, so its consumes consume nothing.
TEST_P(StoreConformanceTest, ChargeAppliesWhateverTheRequestDecides) {
  const Limit limit = Window(Algorithm::kFixedWindow, 10, seconds(60));
  const std::string charged = Key("charged"), consumed = Key("consumed");
  const ChargeEntry four{.key = charged, .limit = &limit, .cost = 4};
  const ConsumeEntry eleven{.key = consumed, .limit = &limit, .cost = 11};
  DecideResponse r = MustDecide({.consumes = {&eleven, 1}, .charges = {&four, 1}});
  EXPECT_FALSE(r.allowed);
  EXPECT_EQ(r.decisions[1].verdict, Verdict::kAllowed);
  EXPECT_EQ(r.decisions[1].remaining, 6);
  EXPECT_EQ(r.decisions[0].verdict, Verdict::kNeverFits);
  EXPECT_EQ(MustDecideOne(charged, limit, 0).remaining, 6);

  const ChargeEntry seven{.key = charged, .limit = &limit, .cost = 7};
  const ConsumeEntry two{.key = consumed, .limit = &limit, .cost = 2};
  r = MustDecide({.consumes = {&two, 1}, .charges = {&seven, 1}});
  EXPECT_FALSE(r.allowed);
  EXPECT_EQ(r.decisions[1].verdict, Verdict::kDenied);
  EXPECT_EQ(r.decisions[1].remaining, 0);
  EXPECT_EQ(r.decisions[0].verdict, Verdict::kAllowed);
  EXPECT_EQ(r.decisions[0].remaining, 10) << "reported as before the refused request";
  EXPECT_EQ(MustDecideOne(consumed, limit, 0).remaining, 10);
}

TEST_P(StoreConformanceTest, ChargeOnAnAlgorithmWithoutOverdraftIsRefused) {
  for (Algorithm a : kAllAlgorithms) {
    if (SupportsCharge(a)) continue;  // the sliding windows cannot count past their limit
    SCOPED_TRACE(AlgorithmName(a));
    const Limit limit = TenPerSecond(a);
    const std::string key = Key("charge:" + std::string(AlgorithmName(a)));
    const ChargeEntry e{.key = key, .limit = &limit, .cost = 1};
    const Result<DecideResponse> r = store_->Decide({.charges = {&e, 1}});
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(r.status().message().find("fixed_window"), std::string::npos) << r.status().message();
    EXPECT_EQ(MustDecideOne(key, limit, 0).remaining, 10) << "nothing was counted";
  }
}

// Random multi-key requests over a small pool of keys of every algorithm, against the model.
TEST_P(StoreConformanceTest, RandomMultiKeyRequestsMatchTheReferenceModel) {
  std::mt19937_64 rng(7);
  std::vector<Limit> limits;
  std::vector<std::string> keys;
  for (Algorithm a : kAllAlgorithms) {
    for (int i = 0; i < 2; ++i) {
      limits.push_back(IsWindowAlgorithm(a) ? Window(a, 8 + i, milliseconds(200))
                                            : Bucket(a, 8 + i, {3, milliseconds(100)}));
      keys.push_back(Key(std::string(AlgorithmName(a)) + std::to_string(i)));
    }
  }
  ReferenceModel model;
  for (int step = 0; step < 600; ++step) {
    clock_.Advance(Micros(static_cast<int64_t>(rng() % 30'000)));
    // Each entry a refund one time in eight, a charge one in four where it is defined.
    std::vector<ConsumeEntry> consumes;
    std::vector<RefundEntry> refunds;
    std::vector<ChargeEntry> charges;
    std::vector<bool> used(keys.size(), false);
    const size_t n = 1 + rng() % 4;
    for (size_t j = 0; j < n; ++j) {
      const size_t k = rng() % keys.size();
      if (used[k]) continue;
      used[k] = true;
      const int64_t cost = static_cast<int64_t>(rng() % 4);
      const uint64_t op = rng() % 8;
      if (op == 0) {
        refunds.push_back({.key = keys[k], .limit = &limits[k], .cost = cost});
      } else if (op >= 6 && SupportsCharge(limits[k].algorithm())) {
        charges.push_back({.key = keys[k], .limit = &limits[k], .cost = cost});
      } else {
        consumes.push_back({.key = keys[k], .limit = &limits[k], .cost = cost});
      }
    }
    const DecideRequest request{.consumes = consumes, .refunds = refunds, .charges = charges};
    const DecideResponse got = MustDecide(request);
    const DecideResponse want = model.Decide(request, Micros(clock_.Now().count() / 1000));
    ASSERT_EQ(got.allowed, want.allowed) << "step " << step;
    ASSERT_EQ(got.decisions, want.decisions) << "step " << step;
  }
}

}  // namespace
}  // namespace caudal
