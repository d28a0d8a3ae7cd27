// The conformance suite's reservation tests (store_conformance.h): a reserve consumes its
// estimate all-or-nothing and records the reservation; a settle gives back the unused part or
// overdraws the excess into debt, once (a repeat answers the first result, another cost a
// conflict); an unsettled reservation expires keeping or giving back its estimate; a key holds
// at most max_open open ones; malformed entries are refused; random traces match the model.
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

Limit Bucket(Algorithm a, int64_t capacity, int64_t count, Micros period) {
  return *Limit::Create(LimitSpec::Bucket(a, capacity, {.count = count, .period = period}));
}

constexpr Algorithm kReserving[] = {Algorithm::kTokenBucket, Algorithm::kGcra,
                                    Algorithm::kFixedWindow};

Limit LimitOf(Algorithm a) {
  return a == Algorithm::kFixedWindow
             ? *Limit::Create(LimitSpec::Window(a, 1000, std::chrono::minutes(1)))
             : Bucket(a, 1000, 1000, std::chrono::minutes(1));
}

struct Ops {
  std::string key;
  const Limit* limit;
  ReservationTerms terms;
  ReserveEntry Reserve(const ReservationId& id, int64_t cost) const {
    return {.key = key, .limit = limit, .cost = cost, .id = id, .terms = terms};
  }
  SettleEntry Settle(const ReservationId& id, int64_t cost) const {
    return {.key = key, .limit = limit, .cost = cost, .id = id, .terms = terms};
  }
  ConsumeEntry Consume(int64_t cost) const {
    return {.key = key, .limit = limit, .cost = cost, .reservations = &terms};
  }
};

TEST_P(StoreConformanceTest, ReserveThenSettleUnderTheEstimateGivesTheDifferenceBack) {
  for (const Algorithm a : kReserving) {
    SCOPED_TRACE(AlgorithmName(a));
    const Limit limit = LimitOf(a);
    const Ops ops{.key = Key(std::string("under:") + std::string(AlgorithmName(a))),
                  .limit = &limit,
                  .terms = {.ttl = seconds(60)}};
    const ReservationId id{7, 1};
    const ReserveEntry reserve = ops.Reserve(id, 800);
    const DecideResponse r = MustDecide({.reserves = {&reserve, 1}});
    ASSERT_TRUE(r.allowed);
    EXPECT_EQ(r.decisions[0].remaining, 200);
    EXPECT_EQ(r.decisions[0].reservation, Reservation::kOpened);
    const SettleEntry settle = ops.Settle(id, 731);
    const std::vector<Decision> s = MustSettle({&settle, 1});
    EXPECT_EQ(s[0].reservation, Reservation::kSettled);
    EXPECT_EQ(s[0].remaining, 269) << "731 counted, exactly";
    clock_.Advance(milliseconds(5));
    const std::vector<Decision> again = MustSettle({&settle, 1});
    EXPECT_EQ(again[0].reservation, Reservation::kRepeated);
    EXPECT_EQ(again[0].remaining, 269) << "the first settle's decision";
    const SettleEntry other = ops.Settle(id, 700);
    const std::vector<Decision> conflict = MustSettle({&other, 1});
    EXPECT_EQ(conflict[0].reservation, Reservation::kConflict);
    const ConsumeEntry peek = ops.Consume(0);
    EXPECT_EQ(MustDecide({.consumes = {&peek, 1}}).decisions[0].remaining, 269)
        << "neither the repeat nor the conflict changed anything";
  }
}

TEST_P(StoreConformanceTest, SettleOverTheEstimateChargesTheExcessIntoDebt) {
  for (const Algorithm a : {Algorithm::kTokenBucket, Algorithm::kGcra}) {
    SCOPED_TRACE(AlgorithmName(a));
    const Limit limit = Bucket(a, 10, 10, seconds(1));
    const Ops ops{.key = Key(std::string("over:") + std::string(AlgorithmName(a))),
                  .limit = &limit,
                  .terms = {}};
    const ReservationId id{7, 2};
    const ReserveEntry reserve = ops.Reserve(id, 10);
    ASSERT_TRUE(MustDecide({.reserves = {&reserve, 1}}).allowed);
    const SettleEntry settle = ops.Settle(id, 15);
    const Decision d = MustSettle({&settle, 1})[0];
    EXPECT_EQ(d.reservation, Reservation::kSettled);
    EXPECT_EQ(d.remaining, 0);
    EXPECT_EQ(d.reset_after, milliseconds(1500)) << "5 of debt, 10 to refill";
    const ConsumeEntry one = ops.Consume(1);
    const DecideResponse refused = MustDecide({.consumes = {&one, 1}});
    ASSERT_FALSE(refused.allowed);
    EXPECT_EQ(refused.decisions[0].retry_after, milliseconds(600));
    clock_.Advance(milliseconds(600) - Micros(1));
    EXPECT_FALSE(MustDecide({.consumes = {&one, 1}}).allowed);
    clock_.Advance(Micros(1));
    EXPECT_TRUE(MustDecide({.consumes = {&one, 1}}).allowed) << "the debt was paid";
  }
  const Limit window = *Limit::Create(LimitSpec::Window(Algorithm::kFixedWindow, 10, seconds(60)));
  const Ops ops{.key = Key("over:fixed_window"), .limit = &window, .terms = {}};
  const ReservationId id{7, 3};
  const ReserveEntry reserve = ops.Reserve(id, 4);
  ASSERT_TRUE(MustDecide({.reserves = {&reserve, 1}}).allowed);
  const SettleEntry settle = ops.Settle(id, 13);
  const Decision d = MustSettle({&settle, 1})[0];
  EXPECT_EQ(d.remaining, 0);
  EXPECT_EQ(d.overdrawn, 3) << "13 counted in a window of 10";
}

// One reservation over several keys, each with its own estimate and settled at its own actual
// cost (a request's dimensions: requests, input tokens, output tokens, money): each key gives
// back or overdraws on its own, and a repeat or a conflict is judged per key.
TEST_P(StoreConformanceTest, EachKeyOfAReservationReservesAndSettlesAtItsOwnCost) {
  const Limit bucket = Bucket(Algorithm::kTokenBucket, 1000, 1000, std::chrono::minutes(1));
  const Limit gcra = Bucket(Algorithm::kGcra, 500, 500, std::chrono::minutes(1));
  const Limit window =
      *Limit::Create(LimitSpec::Window(Algorithm::kFixedWindow, 2000, std::chrono::minutes(1)));
  const Ops a{.key = Key("dims:requests"), .limit = &bucket, .terms = {}};
  const Ops b{.key = Key("dims:input"), .limit = &gcra, .terms = {}};
  const Ops c{.key = Key("dims:money"), .limit = &window, .terms = {}};
  const ReservationId id{7, 40};
  const ReserveEntry reserves[] = {a.Reserve(id, 1), b.Reserve(id, 300), c.Reserve(id, 900)};
  const DecideResponse r = MustDecide({.reserves = reserves});
  ASSERT_TRUE(r.allowed);
  EXPECT_EQ(r.decisions[0].remaining, 999);
  EXPECT_EQ(r.decisions[1].remaining, 200);
  EXPECT_EQ(r.decisions[2].remaining, 1100);
  // Input came in under its estimate, money over it, the request as reserved.
  const SettleEntry settles[] = {a.Settle(id, 1), b.Settle(id, 120), c.Settle(id, 1250)};
  const std::vector<Decision> s = MustSettle(settles);
  ASSERT_EQ(s.size(), 3u);
  EXPECT_EQ(s[0].reservation, Reservation::kSettled);
  EXPECT_EQ(s[0].remaining, 999);
  EXPECT_EQ(s[1].remaining, 380) << "180 given back";
  EXPECT_EQ(s[2].remaining, 750) << "350 more counted";
  EXPECT_EQ(s[2].overrun, 350);
  EXPECT_EQ(s[1].overrun, 0);
  // The same costs repeat on every key; another cost on one key conflicts there only.
  const std::vector<Decision> again = MustSettle(settles);
  for (const Decision& d : again) EXPECT_EQ(d.reservation, Reservation::kRepeated);
  const SettleEntry other[] = {a.Settle(id, 1), b.Settle(id, 121), c.Settle(id, 1250)};
  const std::vector<Decision> conflict = MustSettle(other);
  EXPECT_EQ(conflict[0].reservation, Reservation::kRepeated);
  EXPECT_EQ(conflict[1].reservation, Reservation::kConflict);
  EXPECT_EQ(conflict[2].reservation, Reservation::kRepeated);
  const ConsumeEntry peeks[] = {a.Consume(0), b.Consume(0), c.Consume(0)};
  const DecideResponse after = MustDecide({.consumes = peeks});
  EXPECT_EQ(after.decisions[0].remaining, 999);
  EXPECT_EQ(after.decisions[1].remaining, 380);
  EXPECT_EQ(after.decisions[2].remaining, 750) << "neither the repeat nor the conflict changed";
}

// A settle charges at most the limit's capacity above its estimate: one settle delays the key by
// no more than its limit refills in, however far past its estimate it goes. The overrun reported
// is all of it, a repeat included.
TEST_P(StoreConformanceTest, ASettleChargesAtMostTheCapacityAboveItsEstimate) {
  for (const Algorithm a : {Algorithm::kTokenBucket, Algorithm::kGcra}) {
    SCOPED_TRACE(AlgorithmName(a));
    const Limit limit = Bucket(a, 10, 10, seconds(1));
    const Ops ops{.key = Key(std::string("capped:") + std::string(AlgorithmName(a))),
                  .limit = &limit,
                  .terms = {}};
    const ReservationId id{7, 4};
    const ReserveEntry reserve = ops.Reserve(id, 10);
    ASSERT_TRUE(MustDecide({.reserves = {&reserve, 1}}).allowed);
    const SettleEntry settle = ops.Settle(id, 10 + 25);
    const Decision d = MustSettle({&settle, 1})[0];
    EXPECT_EQ(d.reservation, Reservation::kSettled);
    EXPECT_EQ(d.overrun, 25);
    EXPECT_EQ(d.reset_after, seconds(2)) << "10 of debt, not 25, and 10 to refill";
    const Decision again = MustSettle({&settle, 1})[0];
    EXPECT_EQ(again.reservation, Reservation::kRepeated);
    EXPECT_EQ(again.overrun, 25);
    const ConsumeEntry one = ops.Consume(1);
    const DecideResponse refused = MustDecide({.consumes = {&one, 1}});
    ASSERT_FALSE(refused.allowed);
    EXPECT_EQ(refused.decisions[0].retry_after, milliseconds(1100));
    clock_.Advance(milliseconds(1100) - Micros(1));
    EXPECT_FALSE(MustDecide({.consumes = {&one, 1}}).allowed);
    clock_.Advance(Micros(1));
    EXPECT_TRUE(MustDecide({.consumes = {&one, 1}}).allowed) << "the capped debt was paid";
  }
  const Limit window = *Limit::Create(LimitSpec::Window(Algorithm::kFixedWindow, 10, seconds(60)));
  const Ops ops{.key = Key("capped:fixed_window"), .limit = &window, .terms = {}};
  const ReservationId id{7, 5};
  const ReserveEntry reserve = ops.Reserve(id, 4);
  ASSERT_TRUE(MustDecide({.reserves = {&reserve, 1}}).allowed);
  const SettleEntry settle = ops.Settle(id, 4 + 25);
  const Decision d = MustSettle({&settle, 1})[0];
  EXPECT_EQ(d.overrun, 25);
  EXPECT_EQ(d.overdrawn, 4) << "4 + 10 counted in a window of 10";
}

// A state's debt stops at MaxDebt: a bucket refilling one a day owes at most 25 years of it,
// however many settles pass its capacity, so that its times stay exact.
TEST_P(StoreConformanceTest, ASettlesDebtStopsAtItsCap) {
  for (const Algorithm a : {Algorithm::kTokenBucket, Algorithm::kGcra}) {
    SCOPED_TRACE(AlgorithmName(a));
    const Limit limit = Bucket(a, 20'000, 1, std::chrono::hours(24));
    const int64_t cap = MaxDebt(limit);
    ASSERT_EQ(cap, 25 * 365) << "one a day for 25 years, below the capacity";
    const Ops ops{.key = Key(std::string("cap:") + std::string(AlgorithmName(a))),
                  .limit = &limit,
                  .terms = {}};
    const ReservationId id{7, 9};
    const ReserveEntry reserve = ops.Reserve(id, 20'000);
    ASSERT_TRUE(MustDecide({.reserves = {&reserve, 1}}).allowed);
    const SettleEntry settle = ops.Settle(id, 20'000 + cap + 500);
    const Decision d = MustSettle({&settle, 1})[0];
    EXPECT_EQ(d.reservation, Reservation::kSettled);
    EXPECT_EQ(d.remaining, 0);
    EXPECT_EQ(d.reset_after, std::chrono::hours(24) * (cap + 20'000))
        << "the debt capped, then full";
    const ConsumeEntry one = ops.Consume(1);
    const DecideResponse refused = MustDecide({.consumes = {&one, 1}});
    ASSERT_FALSE(refused.allowed);
    EXPECT_EQ(refused.decisions[0].retry_after, std::chrono::hours(24) * (cap + 1));
  }
}

// A reserve of 0 takes no slot but a settle may charge it: on a state in debt (or a window
// overdrawn) it is refused, as a charge's peek, and records nothing, so that settles cannot pile
// debt up through reserves of 0.
TEST_P(StoreConformanceTest, AReserveOfZeroIsRefusedInDebt) {
  for (const Algorithm a : kReserving) {
    SCOPED_TRACE(AlgorithmName(a));
    const bool window = a == Algorithm::kFixedWindow;
    const Limit limit = window ? *Limit::Create(LimitSpec::Window(a, 10, seconds(1)))
                               : Bucket(a, 10, 10, seconds(1));
    const Ops ops{.key = Key(std::string("indebt:") + std::string(AlgorithmName(a))),
                  .limit = &limit,
                  .terms = {}};
    const ReservationId id{7, 6}, zero{7, 7}, later{7, 8};
    const ReserveEntry reserve = ops.Reserve(id, 10);
    ASSERT_TRUE(MustDecide({.reserves = {&reserve, 1}}).allowed);
    const ReserveEntry at_zero = ops.Reserve(zero, 0);
    EXPECT_TRUE(MustDecide({.reserves = {&at_zero, 1}}).allowed) << "empty, not in debt";
    const SettleEntry settle = ops.Settle(id, 15);
    ASSERT_EQ(MustSettle({&settle, 1})[0].reservation, Reservation::kSettled);
    const ReserveEntry in_debt = ops.Reserve(later, 0);
    const DecideResponse refused = MustDecide({.reserves = {&in_debt, 1}});
    ASSERT_FALSE(refused.allowed);
    EXPECT_EQ(refused.decisions[0].verdict, Verdict::kDenied);
    EXPECT_EQ(refused.decisions[0].reservation, Reservation::kNone);
    const Micros wait = refused.decisions[0].retry_after;
    EXPECT_EQ(wait, window ? seconds(1) - Micros(clock_.Now().count() / 1000 % 1'000'000)
                           : milliseconds(500))
        << "until the debt is paid, or the window ends";
    const SettleEntry settle_later = ops.Settle(later, 0);
    EXPECT_EQ(MustSettle({&settle_later, 1})[0].reservation, Reservation::kUnknown)
        << "nothing recorded";
    clock_.Advance(wait);
    EXPECT_EQ(MustDecide({.reserves = {&in_debt, 1}}).decisions[0].reservation,
              Reservation::kOpened);
  }
}

TEST_P(StoreConformanceTest, AnUnsettledReservationExpiresKeepingOrGivingBackItsEstimate) {
  const Limit limit = Bucket(Algorithm::kTokenBucket, 10, 1, seconds(1));
  for (const ExpiryOutcome outcome : {ExpiryOutcome::kKeep, ExpiryOutcome::kGiveBack}) {
    const bool give_back = outcome == ExpiryOutcome::kGiveBack;
    SCOPED_TRACE(give_back ? "give_back" : "keep");
    const Ops ops{.key = Key(give_back ? "expiry:give" : "expiry:keep"),
                  .limit = &limit,
                  .terms = {.ttl = seconds(1), .on_expiry = outcome}};
    const ReservationId id{8, give_back ? 2 : 1};
    const ReserveEntry reserve = ops.Reserve(id, 8);
    ASSERT_TRUE(MustDecide({.reserves = {&reserve, 1}}).allowed);
    clock_.Advance(seconds(1) - Micros(1));
    const ConsumeEntry peek = ops.Consume(0);
    EXPECT_EQ(MustDecide({.consumes = {&peek, 1}}).decisions[0].remaining, 2) << "still open";
    clock_.Advance(Micros(1));
    // 1 refilled; giving back 8 at 1 s returns what had not refilled since: 7.
    EXPECT_EQ(MustDecide({.consumes = {&peek, 1}}).decisions[0].remaining, give_back ? 10 : 3);
    const SettleEntry settle = ops.Settle(id, 1);
    const Decision late = MustSettle({&settle, 1})[0];
    EXPECT_EQ(late.reservation, Reservation::kUnknown) << "expired";
    EXPECT_EQ(late.remaining, give_back ? 10 : 3) << "and nothing charged";
  }
}

TEST_P(StoreConformanceTest, AKeyHoldsAtMostMaxOpenReservations) {
  const Limit limit = Bucket(Algorithm::kGcra, 100, 100, seconds(1));
  const Ops ops{.key = Key("bound"), .limit = &limit, .terms = {.ttl = seconds(10), .max_open = 2}};
  const ReservationId a{9, 1}, b{9, 2}, c{9, 3};
  const ReserveEntry ra = ops.Reserve(a, 1), rb = ops.Reserve(b, 1), rc = ops.Reserve(c, 1);
  ASSERT_TRUE(MustDecide({.reserves = {&ra, 1}}).allowed);
  clock_.Advance(seconds(1));
  ASSERT_TRUE(MustDecide({.reserves = {&rb, 1}}).allowed);
  const DecideResponse full = MustDecide({.reserves = {&rc, 1}});
  ASSERT_FALSE(full.allowed);
  EXPECT_EQ(full.decisions[0].reservation, Reservation::kFull);
  EXPECT_EQ(full.decisions[0].verdict, Verdict::kDenied);
  EXPECT_EQ(full.decisions[0].retry_after, seconds(9)) << "until the first expires";
  const ConsumeEntry peek = ops.Consume(0);
  EXPECT_EQ(MustDecide({.consumes = {&peek, 1}}).decisions[0].remaining, 99)
      << "the refusal consumed nothing";
  const SettleEntry sa = ops.Settle(a, 1);
  ASSERT_EQ(MustSettle({&sa, 1})[0].reservation, Reservation::kSettled);
  ASSERT_TRUE(MustDecide({.reserves = {&rc, 1}}).allowed) << "a settled reservation is not open";
  EXPECT_EQ(MustSettle({&sa, 1})[0].reservation, Reservation::kRepeated);
}

// A reserve of 0 consumes nothing, so it takes no open slot (max_open of them, a day each, would
// lock the key's reserves out for a day): the key keeps max_open of them besides, forgetting the
// one that expires first, and the others settle as any reservation does.
TEST_P(StoreConformanceTest, AReserveOfZeroTakesNoOpenSlot) {
  const Limit limit = Bucket(Algorithm::kTokenBucket, 100, 100, seconds(1));
  const Ops ops{
      .key = Key("zero"), .limit = &limit, .terms = {.ttl = std::chrono::hours(24), .max_open = 2}};
  const ReservationId z1{11, 1}, z2{11, 2}, z3{11, 3}, a{11, 4}, b{11, 5}, c{11, 6};
  for (const ReservationId* z : {&z1, &z2, &z3}) {
    const ReserveEntry reserve = ops.Reserve(*z, 0);
    const DecideResponse r = MustDecide({.reserves = {&reserve, 1}});
    ASSERT_TRUE(r.allowed);
    EXPECT_EQ(r.decisions[0].reservation, Reservation::kOpened);
    EXPECT_EQ(r.decisions[0].remaining, 100);
    clock_.Advance(seconds(1));
  }
  const ReserveEntry ra = ops.Reserve(a, 1), rb = ops.Reserve(b, 1), rc = ops.Reserve(c, 1);
  ASSERT_TRUE(MustDecide({.reserves = {&ra, 1}}).allowed) << "the reserves of 0 hold no slot";
  ASSERT_TRUE(MustDecide({.reserves = {&rb, 1}}).allowed);
  EXPECT_EQ(MustDecide({.reserves = {&rc, 1}}).decisions[0].reservation, Reservation::kFull)
      << "2 open";
  const SettleEntry s1 = ops.Settle(z1, 5);
  const Decision forgotten = MustSettle({&s1, 1})[0];
  EXPECT_EQ(forgotten.reservation, Reservation::kUnknown) << "the third of 0 forgot the first";
  EXPECT_EQ(forgotten.remaining, 98) << "and its settle charges nothing";
  const SettleEntry s2 = ops.Settle(z2, 5);
  const Decision d = MustSettle({&s2, 1})[0];
  EXPECT_EQ(d.reservation, Reservation::kSettled);
  EXPECT_EQ(d.overrun, 5);
  EXPECT_EQ(d.remaining, 93) << "the whole cost, at the settle";
  const SettleEntry s3 = ops.Settle(z3, 0);
  EXPECT_EQ(MustSettle({&s3, 1})[0].reservation, Reservation::kSettled);
  EXPECT_EQ(MustDecide({.reserves = {&rc, 1}}).decisions[0].reservation, Reservation::kFull)
      << "settling those of 0 freed no slot: they held none";
  const ReserveEntry z4 = ops.Reserve(c, 0);
  EXPECT_EQ(MustDecide({.reserves = {&z4, 1}}).decisions[0].reservation, Reservation::kOpened)
      << "a reserve of 0 passes a key whose slots are all held";
}

// A reset (the admin's: a refund of everything that forgets the key's reservations) clears them
// with the state, in one step: no open one settles, holds a slot or gives back at its expiry, and
// no settled one answers a repeat. A control key, fresh, takes the same requests after it.
TEST_P(StoreConformanceTest, AResetForgetsTheKeysReservations) {
  for (const Algorithm a : kReserving) {
    SCOPED_TRACE(AlgorithmName(a));
    const Limit limit = LimitOf(a);
    const ReservationTerms terms{
        .ttl = seconds(1), .on_expiry = ExpiryOutcome::kGiveBack, .max_open = 2};
    const std::string name(AlgorithmName(a));
    const Ops ops{.key = Key("reset:" + name), .limit = &limit, .terms = terms};
    const Ops control{.key = Key("reset:control:" + name), .limit = &limit, .terms = terms};
    const ReservationId o1{12, 1}, o2{12, 2}, done{12, 3}, zero{12, 4}, next{12, 5};
    const ReserveEntry first = ops.Reserve(done, 200);
    ASSERT_TRUE(MustDecide({.reserves = {&first, 1}}).allowed);
    const SettleEntry settled = ops.Settle(done, 200);
    ASSERT_EQ(MustSettle({&settled, 1})[0].reservation, Reservation::kSettled);
    for (const ReserveEntry& e :
         {ops.Reserve(o1, 300), ops.Reserve(o2, 100), ops.Reserve(zero, 0)}) {
      ASSERT_TRUE(MustDecide({.reserves = {&e, 1}}).allowed);
    }
    const ReserveEntry reserve = ops.Reserve(next, 1);
    ASSERT_EQ(MustDecide({.reserves = {&reserve, 1}}).decisions[0].reservation, Reservation::kFull);
    const RefundEntry reset{
        .key = ops.key, .limit = &limit, .cost = kMaxCost, .forget_reservations = true};
    EXPECT_EQ(MustDecide({.refunds = {&reset, 1}}).decisions[0].remaining, 1000);
    for (const SettleEntry& e : {ops.Settle(o1, 300), ops.Settle(done, 200), ops.Settle(zero, 5)}) {
      const Decision d = MustSettle({&e, 1})[0];
      EXPECT_EQ(d.reservation, Reservation::kUnknown);
      EXPECT_EQ(d.remaining, 1000) << "nothing charged";
    }
    for (const Ops* k : {&ops, &control}) {
      const ReserveEntry r = k->Reserve(next, 1);
      const ConsumeEntry c = k->Consume(500);
      EXPECT_EQ(MustDecide({.reserves = {&r, 1}}).decisions[0].reservation, Reservation::kOpened);
      ASSERT_TRUE(MustDecide({.consumes = {&c, 1}}).allowed);
    }
    clock_.Advance(seconds(1));  // every reservation made before the reset would expire now
    const ConsumeEntry peek = ops.Consume(0), peek_control = control.Consume(0);
    EXPECT_EQ(MustDecide({.consumes = {&peek, 1}}).decisions[0],
              MustDecide({.consumes = {&peek_control, 1}}).decisions[0])
        << "none gave its estimate back";
  }
}

TEST_P(StoreConformanceTest, AReserveIsAllOrNothingWithTheRequestsOtherLimits) {
  const Limit roomy = Bucket(Algorithm::kTokenBucket, 100, 100, seconds(1));
  const Limit tight = Bucket(Algorithm::kGcra, 5, 5, seconds(1));
  const Ops r1{.key = Key("aon:roomy"), .limit = &roomy, .terms = {}};
  const Ops r2{.key = Key("aon:tight"), .limit = &tight, .terms = {}};
  const ReservationId id{10, 1};
  const ReserveEntry both[] = {r1.Reserve(id, 6), r2.Reserve(id, 6)};
  const DecideResponse refused = MustDecide({.reserves = both});
  ASSERT_FALSE(refused.allowed);
  EXPECT_TRUE(refused.decisions[0].allowed());
  EXPECT_EQ(refused.decisions[0].remaining, 100) << "nothing consumed";
  EXPECT_EQ(refused.decisions[0].reservation, Reservation::kNone) << "nothing recorded";
  const SettleEntry settle = r1.Settle(id, 1);
  const Decision d = MustSettle({&settle, 1})[0];
  EXPECT_EQ(d.reservation, Reservation::kUnknown);
  EXPECT_EQ(d.remaining, 100) << "a settle of no reservation charges nothing";
}

TEST_P(StoreConformanceTest, ReservationEntriesAreValidated) {
  const Limit bucket = Bucket(Algorithm::kTokenBucket, 5, 5, seconds(1));
  const Limit log = *Limit::Create(LimitSpec::Window(Algorithm::kSlidingWindowLog, 5, seconds(1)));
  const std::string key = Key("bad"), other = Key("bad:other");
  const ReservationId id{3, 3}, too_big{kHoldIdWordLimit, 0};
  const ReservationTerms ok{}, short_ttl{.ttl = Micros(999)},
      long_ttl{.ttl = std::chrono::hours(25)}, none_open{.max_open = 0},
      many_open{.max_open = kMaxOpenReservations + 1};
  const auto reserve = [&](const Limit* l, const ReservationId& rid,
                           const ReservationTerms& t) -> ReserveEntry {
    return {.key = key, .limit = l, .cost = 1, .id = rid, .terms = t};
  };
  const ReserveEntry bad[] = {
      reserve(&bucket, too_big, ok),   reserve(&log, id, ok),
      reserve(&bucket, id, short_ttl), reserve(&bucket, id, long_ttl),
      reserve(&bucket, id, none_open), reserve(&bucket, id, many_open),
  };
  std::vector<Status> refused;
  for (const ReserveEntry& e : bad)
    refused.push_back(store_->Decide({.reserves = {&e, 1}}).status());
  const SettleEntry settles[] = {
      {.key = key, .limit = &log, .cost = 1, .id = id, .terms = ok},
      {.key = key, .limit = &bucket, .cost = 1, .id = too_big, .terms = ok},
      {.key = key, .limit = &bucket, .id = id, .terms = short_ttl}};
  for (const SettleEntry& e : settles) refused.push_back(store_->Settle({&e, 1}).status());
  const Limit window = *Limit::Create(LimitSpec::Window(Algorithm::kFixedWindow, 5, seconds(1)));
  const RefundEntry natively{
      .key = other, .limit = &window, .cost = 1, .native = true, .forget_reservations = true};
  refused.push_back(store_->Decide({.refunds = {&natively, 1}}).status());
  for (size_t i = 0; i < refused.size(); ++i) {
    SCOPED_TRACE(i);
    EXPECT_EQ(refused[i].code(), StatusCode::kInvalidArgument) << refused[i].ToString();
  }
  // What the verbs cannot express, the batch encoding (store/batch.h) still refuses.
  const HoldId hold{3, 3};
  const EntryRef batch_reserve{
      .key = key, .limit = &bucket, .cost = 1, .op = EntryOp::kReserve, .reservation = &ok};
  const EntryRef batch_settle{.key = key,
                              .limit = &bucket,
                              .cost = 1,
                              .op = EntryOp::kSettle,
                              .hold = &hold,
                              .reservation = &ok};
  const std::vector<std::vector<EntryRef>> batches = {
      {batch_reserve},                                                                      // no id
      {{.key = key, .limit = &bucket, .cost = 1, .op = EntryOp::kReserve, .hold = &hold}},  // no
                                                                                            // terms
      {batch_settle, {.key = other, .limit = &bucket, .cost = 1}},
      {{.key = other, .limit = &bucket, .cost = 1}, batch_settle},
      {{.key = other, .limit = &bucket, .cost = 1, .forget_reservations = true}},
  };
  for (size_t i = 0; i < batches.size(); ++i) {
    SCOPED_TRACE(i);
    const Result<DecideResponse> r = DecideBatch(*store_, batches[i]);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << r.status().ToString();
  }
  EXPECT_EQ(MustDecideOne(key, bucket, 0).remaining, 5) << "nothing consumed";
  EXPECT_EQ(MustDecideOne(other, bucket, 0).remaining, 5) << "nothing consumed";
}

// Random reserves, settles (of live, settled, expired and unknown ids), consumes and refunds over
// the three algorithms that reserve, both expiry outcomes, against the model.
TEST_P(StoreConformanceTest, ReservationRandomRequestsMatchTheReferenceModel) {
  std::mt19937_64 rng(25);
  const std::vector<Limit> limits = {
      Bucket(Algorithm::kTokenBucket, 20, 10, milliseconds(100)),
      Bucket(Algorithm::kGcra, 15, 3, milliseconds(100)),
      *Limit::Create(LimitSpec::Window(Algorithm::kFixedWindow, 25, milliseconds(300)))};
  const std::vector<ReservationTerms> terms = {
      {.ttl = milliseconds(150), .on_expiry = ExpiryOutcome::kGiveBack, .max_open = 3},
      {.ttl = milliseconds(400), .on_expiry = ExpiryOutcome::kKeep, .max_open = 2},
      {.ttl = milliseconds(250), .on_expiry = ExpiryOutcome::kGiveBack, .max_open = 4}};
  std::vector<std::string> keys;
  for (size_t i = 0; i < limits.size(); ++i) keys.push_back(Key("model" + std::to_string(i)));
  ReferenceModel model;
  std::vector<ReservationId> ids;
  int64_t next = 1;
  for (int step = 0; step < 600; ++step) {
    clock_.Advance(Micros(static_cast<int64_t>(rng() % 30'000)));
    std::vector<ConsumeEntry> consumes;
    std::vector<ReserveEntry> reserves;
    std::vector<RefundEntry> refunds;
    std::vector<SettleEntry> settles;
    const ReservationId fresh{static_cast<int64_t>(rng() % 4), next++};
    const ReservationId old = ids.empty() || rng() % 8 == 0 ? fresh : ids[rng() % ids.size()];
    const int kind = static_cast<int>(rng() % 4);
    for (size_t k = 0; k < keys.size(); ++k) {
      if (rng() % 2 != 0) continue;
      const int64_t cost = static_cast<int64_t>(rng() % 12);
      const ConsumeEntry e{
          .key = keys[k], .limit = &limits[k], .cost = cost, .reservations = &terms[k]};
      if (kind == 0) {
        reserves.push_back(
            {.key = keys[k], .limit = &limits[k], .cost = cost, .id = fresh, .terms = terms[k]});
      } else if (kind == 1) {
        settles.push_back({.key = keys[k],
                           .limit = &limits[k],
                           .cost = static_cast<int64_t>(rng() % 30),
                           .id = old,
                           .terms = terms[k]});
      } else if (kind == 2 && rng() % 3 == 0) {
        refunds.push_back(
            {.key = keys[k], .limit = &limits[k], .cost = cost, .reservations = &terms[k]});
      } else {
        consumes.push_back(e);
      }
    }
    if (consumes.empty() && reserves.empty() && refunds.empty() && settles.empty()) continue;
    if (kind == 0) ids.push_back(fresh);
    const Micros now(clock_.Now().count() / 1000);
    if (!settles.empty()) {
      const EncodedBatch batch(settles);
      ASSERT_EQ(MustSettle(settles), model.Decide(batch.entries(), now).decisions)
          << "step " << step;
      continue;
    }
    const DecideRequest request{.consumes = consumes, .reserves = reserves, .refunds = refunds};
    const DecideResponse got = MustDecide(request);
    const DecideResponse want = model.Decide(request, now);
    ASSERT_EQ(got.allowed, want.allowed) << "step " << step;
    ASSERT_EQ(got.decisions, want.decisions) << "step " << step;
  }
}

}  // namespace
}  // namespace caudal
