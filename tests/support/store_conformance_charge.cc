// The conformance suite's charges of buckets (store_conformance.h; the fixed window's are in
// store_conformance.cc): a charge of token_bucket or gcra counts its cost whatever the verdict,
// into debt; its peek is refused exactly until the debt is paid; it is applied whatever the
// request's other entries decide; debt stops at MaxDebt.
#include "algorithms/algorithm.h"
#include "support/store_conformance.h"

namespace caudal {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

constexpr Algorithm kBuckets[] = {Algorithm::kTokenBucket, Algorithm::kGcra};

Limit ChargeBucket(Algorithm a, int64_t capacity, int64_t count, Micros period) {
  return *Limit::Create(LimitSpec::Bucket(a, capacity, {.count = count, .period = period}));
}

ChargeEntry Charge(const std::string& key, const Limit& limit, int64_t cost) {
  return {.key = key, .limit = &limit, .cost = cost};
}

// 10 per second, burst 10: 4 fit; 8 do not (6 left) and are counted, 2 into debt. A charged peek
// is refused until the debt is paid, 200 ms later, and not 1 µs earlier; a consume's own peek
// still passes (the peek contract); a consume of 1 waits for one more unit.
TEST_P(StoreConformanceTest, ABucketsChargeCountsARefusedHitIntoDebt) {
  for (const Algorithm a : kBuckets) {
    SCOPED_TRACE(AlgorithmName(a));
    const Limit limit = ChargeBucket(a, 10, 10, seconds(1));
    const std::string key = Key("charged:" + std::string(AlgorithmName(a)));
    auto charge = [&](int64_t cost) {
      const ChargeEntry e = Charge(key, limit, cost);
      DecideResponse r = MustDecide({.charges = {&e, 1}});
      EXPECT_EQ(r.allowed, r.decisions[0].allowed());
      return r.decisions[0];
    };
    Decision d = charge(4);
    EXPECT_EQ(d.verdict, Verdict::kAllowed);
    EXPECT_EQ(d.remaining, 6);
    d = charge(8);
    EXPECT_EQ(d.verdict, Verdict::kDenied) << "8 did not fit the 6 left";
    EXPECT_EQ(d.remaining, 0);
    EXPECT_EQ(d.overdrawn, 0);
    EXPECT_EQ(d.reset_after, milliseconds(1200)) << "counted all the same: 12 to refill";
    EXPECT_EQ(d.retry_after, seconds(1)) << "8 fit once 10 are back";
    d = charge(0);
    EXPECT_EQ(d.verdict, Verdict::kDenied) << "a charged peek in debt";
    EXPECT_EQ(d.retry_after, milliseconds(200));
    EXPECT_EQ(MustDecideOne(key, limit, 0).verdict, Verdict::kAllowed) << "a consume's peek";
    clock_.Advance(milliseconds(200) - Micros(1));
    d = charge(0);
    EXPECT_EQ(d.verdict, Verdict::kDenied);
    EXPECT_EQ(d.retry_after, Micros(1));
    EXPECT_EQ(MustDecideOne(key, limit, 1).verdict, Verdict::kDenied);
    clock_.Advance(Micros(1));
    d = charge(0);
    EXPECT_EQ(d.verdict, Verdict::kAllowed) << "the debt is paid";
    EXPECT_EQ(d.remaining, 0);
    EXPECT_EQ(d.reset_after, seconds(1));
    const Decision one = MustDecideOne(key, limit, 1);
    EXPECT_EQ(one.verdict, Verdict::kDenied);
    EXPECT_EQ(one.retry_after, milliseconds(100));
    clock_.Advance(milliseconds(100));
    EXPECT_EQ(MustDecideOne(key, limit, 1).verdict, Verdict::kAllowed);
  }
}

// Beside a consume that refuses the request, a bucket's charge is applied all the same; one that
// does not fit refuses the request (its consume consumes nothing) and is counted into debt.
TEST_P(StoreConformanceTest, ABucketsChargeAppliesWhateverTheRequestDecides) {
  for (const Algorithm a : kBuckets) {
    SCOPED_TRACE(AlgorithmName(a));
    const Limit bucket = ChargeBucket(a, 10, 1, std::chrono::hours(1));
    const Limit window = *Limit::Create(LimitSpec::Window(Algorithm::kFixedWindow, 10, seconds(1)));
    const std::string charged = Key("charged:" + std::string(AlgorithmName(a)));
    const std::string consumed = Key("consumed:" + std::string(AlgorithmName(a)));
    const ChargeEntry three = Charge(charged, bucket, 3);
    const ConsumeEntry eleven{.key = consumed, .limit = &window, .cost = 11};
    DecideResponse r = MustDecide({.consumes = {&eleven, 1}, .charges = {&three, 1}});
    EXPECT_FALSE(r.allowed);
    EXPECT_EQ(r.decisions[1].verdict, Verdict::kAllowed);
    EXPECT_EQ(r.decisions[1].remaining, 7);
    EXPECT_EQ(r.decisions[0].verdict, Verdict::kNeverFits);
    EXPECT_EQ(MustDecideOne(charged, bucket, 0).remaining, 7) << "charged";

    const ChargeEntry nine = Charge(charged, bucket, 9);
    const ConsumeEntry two{.key = consumed, .limit = &window, .cost = 2};
    r = MustDecide({.consumes = {&two, 1}, .charges = {&nine, 1}});
    EXPECT_FALSE(r.allowed);
    EXPECT_EQ(r.decisions[1].verdict, Verdict::kDenied);
    EXPECT_EQ(r.decisions[1].remaining, 0);
    EXPECT_EQ(r.decisions[1].reset_after, std::chrono::hours(12)) << "2 of debt, 10 to refill";
    EXPECT_EQ(r.decisions[0].verdict, Verdict::kAllowed);
    EXPECT_EQ(r.decisions[0].remaining, 10) << "reported as before the refused request";
    EXPECT_EQ(MustDecideOne(consumed, window, 0).remaining, 10);
    const ChargeEntry peek = Charge(charged, bucket, 0);
    const DecideResponse p = MustDecide({.charges = {&peek, 1}});
    EXPECT_EQ(p.decisions[0].verdict, Verdict::kDenied);
    EXPECT_EQ(p.decisions[0].retry_after, std::chrono::hours(2)) << "until the debt is paid";
  }
}

// At MaxDebt what is past it is forgiven: the peek waits MaxDebt's refill time, no longer, and a
// charge past the cap changes nothing.
TEST_P(StoreConformanceTest, ABucketsDebtStopsAtMaxDebt) {
  for (const Algorithm a : kBuckets) {
    SCOPED_TRACE(AlgorithmName(a));
    const Limit limit = ChargeBucket(a, 2, 1, std::chrono::hours(1));
    const int64_t most = MaxDebt(limit);
    ASSERT_EQ(most, 24 * 365 * 25);
    const std::string key = Key("deep:" + std::string(AlgorithmName(a)));
    const ChargeEntry big = Charge(key, limit, kMaxCost);
    EXPECT_EQ(MustDecide({.charges = {&big, 1}}).decisions[0].verdict, Verdict::kNeverFits);
    const DecideResponse again = MustDecide({.charges = {&big, 1}});
    EXPECT_EQ(again.decisions[0].reset_after, std::chrono::hours(2 + most));
    const ChargeEntry one = Charge(key, limit, 1);
    const DecideResponse past = MustDecide({.charges = {&one, 1}});
    EXPECT_EQ(past.decisions[0].verdict, Verdict::kDenied);
    EXPECT_EQ(past.decisions[0].retry_after, std::chrono::hours(most + 1));
    const ChargeEntry peek = Charge(key, limit, 0);
    EXPECT_EQ(MustDecide({.charges = {&peek, 1}}).decisions[0].retry_after,
              std::chrono::hours(most));
  }
}

}  // namespace
}  // namespace caudal
