// The undo request (src/redis/lua/undo.lua), which takes back what one slot group of a split
// request consumed once another group refused it. Undone at its own time, an admitted request
// leaves no trace: every later decision is the one a store that never saw it makes. Undone
// later, it gives back only what still counts: never more than if it had not come.
#include <gtest/gtest.h>

#include <random>
#include <sstream>

#include "common/cat.h"
#include "redis/equivalence_replay.h"
#include "redis/lua_protocol.h"
#include "redis/script.h"
#include "store/store_reference_model.h"
#include "support/redis_server.h"

namespace caudal::redis {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using testing::RedisServer;

constexpr int64_t kStart = int64_t{1'700'000'000'000'000};

class UndoTest : public ::testing::Test {
 public:
  void SetUp() override {
    Result<std::unique_ptr<RedisServer>> s = RedisServer::Start();
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    server_ = std::move(*s);
    Result<std::string> sha = server_->Command({"SCRIPT", "LOAD", std::string(kDecideScript)});
    ASSERT_TRUE(sha.ok()) << sha.status().ToString();
  }

  // One request (decide or undo) in one call at `now`.
  StoreResponse Run(const EncodedRequest& request, int64_t now) {
    const EncodedRequest* one[] = {&request};
    CallArgv call;
    BuildCall("EVALSHA", kDecideSha1, TimeSource::kGiven, now, one, call);
    Result<std::string> reply =
        server_->Command(std::vector<std::string>(call.argv.begin(), call.argv.end()));
    EXPECT_TRUE(reply.ok()) << reply.status().ToString();
    if (!reply.ok()) return {};
    std::vector<int64_t> ints;
    std::istringstream in(*reply);
    for (std::string line; std::getline(in, line);) ints.push_back(std::stoll(line));
    size_t pos = 0;
    Result<StoreResponse> r = DecodeResponse(ints, pos, request);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_TRUE(DecodeCallTime(ints, pos).ok());
    return r.ok() ? *r : StoreResponse{};
  }

  StoreResponse Decide(std::span<const EntryRef> entries, int64_t now) {
    return Run(EncodeRequest(entries, "u:", Micros(0)), now);
  }

  // Reserves `entries` at `at` (they must be admitted), then undoes them at `now`.
  StoreResponse ReserveThenUndo(std::span<const EntryRef> entries, int64_t at, int64_t now) {
    const EncodedRequest reserved = EncodeRequest(entries, "u:", Micros(0));
    const StoreResponse got = Run(reserved, at);
    EXPECT_TRUE(got.allowed);
    std::vector<uint16_t> undone;
    return Run(EncodeUndo(reserved, got, at, undone), now);
  }

  int64_t Remaining(const EntryRef& e, int64_t now) {
    const EntryRef peek{.key = e.key, .limit = e.limit, .cost = 0};
    return Decide({&peek, 1}, now).decisions.at(0).remaining;
  }

 protected:
  std::unique_ptr<RedisServer> server_;
};

Limit RandomLimit(std::mt19937_64& rng, Algorithm a) {
  auto pick = [&rng](int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
  };
  for (;;) {
    const int64_t cap = pick(1, 3) == 1 ? pick(1, 3) : pick(4, 40);
    const Micros period = milliseconds(pick(1, 2000));
    Result<Limit> l = Limit::Create(
        IsWindowAlgorithm(a) ? LimitSpec::Window(a, cap, period)
                             : LimitSpec::Bucket(a, cap, {.count = pick(1, 50), .period = period}));
    if (l.ok()) return *l;
  }
}

// Requests on a few keys, some of them "ghosts": sent to Redis, and undone at once if admitted.
// The reference model never sees the ghosts, yet every decision matches it, and each undo
// reports exactly the reference's peek of the same keys.
void ReplayWithGhosts(UndoTest& t, Algorithm a, uint64_t seed) {
  std::mt19937_64 rng(seed);
  auto pick = [&rng](int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
  };
  for (int trace = 0; trace < 12; ++trace) {
    ReferenceModel reference;
    std::vector<Limit> limits;
    std::vector<std::string> keys;
    for (int k = 0; k < 4; ++k) {
      limits.push_back(RandomLimit(rng, a));
      std::ostringstream key;
      key << "s" << seed << ":t" << trace << ":k" << k;
      keys.push_back(key.str());
    }
    int64_t now = kStart + pick(0, 1'000'000'000);
    int ghosts_undone = 0;
    for (int step = 0; step < 120; ++step) {
      now += pick(0, 3) == 0 ? 0 : pick(1, 400'000);
      std::vector<EntryRef> entries;
      std::vector<int> order = {0, 1, 2, 3};
      std::shuffle(order.begin(), order.end(), rng);
      for (int j = 0, n = static_cast<int>(pick(1, 3)); j < n; ++j) {
        const Limit& l = limits[order[j]];
        const bool refund = pick(1, 10) == 1;
        entries.push_back({.key = keys[order[j]],
                           .limit = &l,
                           .cost = pick(0, std::min<int64_t>(l.capacity(), 4)),
                           .op = refund ? EntryOp::kRefund : EntryOp::kConsume});
      }
      const bool ghost = pick(1, 4) == 1 &&
                         std::none_of(entries.begin(), entries.end(),
                                      [](const EntryRef& e) { return e.op == EntryOp::kRefund; });
      if (!ghost) {
        const StoreResponse got = t.Decide(entries, now);
        const StoreResponse want = reference.Decide(entries, Micros(now));
        ASSERT_EQ(got.allowed, want.allowed) << "trace " << trace << " step " << step;
        ASSERT_EQ(got.decisions, want.decisions) << "trace " << trace << " step " << step;
        continue;
      }
      const EncodedRequest reserved = EncodeRequest(entries, "u:", Micros(0));
      const StoreResponse got = t.Run(reserved, now);
      if (!got.allowed) continue;  // consumed nothing: nothing to undo
      std::vector<uint16_t> undone;
      const EncodedRequest undo = EncodeUndo(reserved, got, now, undone);
      if (undo.keys.empty()) continue;
      const StoreResponse after = t.Run(undo, now);
      ++ghosts_undone;
      for (size_t i = 0; i < undone.size(); ++i) {
        const EntryRef& e = entries[undone[i]];
        const EntryRef peek{.key = e.key, .limit = e.limit, .cost = 0};
        const StoreResponse want = reference.Decide({&peek, 1}, Micros(now));
        ASSERT_EQ(after.decisions[i], want.decisions[0])
            << e.limit->ToString() << " trace " << trace << " step " << step;
      }
    }
    EXPECT_GT(ghosts_undone, 0);
  }
}

// The same with the equivalence replay's limits, costs and times (bounds of every kind, window
// edges), time moving forward only: once an undo has followed a window's rollover, time moving
// back finds the new window empty rather than the old one's count (see lua/undo.lua).
void ReplayEdgeCasesWithGhosts(UndoTest& t, Algorithm a, uint64_t seed) {
  equivalence::Tracer tr(seed);
  int ghosts_undone = 0;
  for (int trace = 0; trace < 24; ++trace) {
    ReferenceModel reference;
    std::vector<Limit> limits;
    std::vector<std::string> keys;
    for (int k = 0; k < 4; ++k) {
      limits.push_back(tr.RandomLimit(a));
      std::ostringstream key;
      key << "e" << seed << ":t" << trace << ":k" << k;
      keys.push_back(key.str());
    }
    const int64_t scale = equivalence::Tracer::Scale(limits[0]);
    int64_t now = kStart + tr.Uniform(0, equivalence::kYear);
    for (int step = 0; step < 40; ++step) {
      const int64_t gap = std::max<int64_t>(0, tr.Gap(scale, now));
      if (now + gap > 0 && now + gap < int64_t{8'000'000'000'000'000}) now += gap;
      std::vector<EntryRef> entries;
      std::vector<int> order = {0, 1, 2, 3};
      std::shuffle(order.begin(), order.end(), std::mt19937(tr.Uniform(0, 1 << 30)));
      const bool ghost = tr.Chance(30);
      for (int j = 0, n = static_cast<int>(tr.Uniform(1, 3)); j < n; ++j) {
        const Limit& l = limits[order[j]];
        const bool refund = !ghost && tr.Chance(12);
        entries.push_back({.key = keys[order[j]],
                           .limit = &l,
                           .cost = tr.Cost(l),
                           .op = refund ? EntryOp::kRefund : EntryOp::kConsume});
      }
      if (!ghost) {
        const StoreResponse got = t.Decide(entries, now);
        const StoreResponse want = reference.Decide(entries, Micros(now));
        ASSERT_EQ(got.allowed, want.allowed) << "trace " << trace << " step " << step;
        ASSERT_EQ(got.decisions, want.decisions) << "trace " << trace << " step " << step;
        continue;
      }
      const EncodedRequest reserved = EncodeRequest(entries, "u:", Micros(0));
      const StoreResponse got = t.Run(reserved, now);
      if (!got.allowed) continue;
      std::vector<uint16_t> undone;
      const EncodedRequest undo = EncodeUndo(reserved, got, now, undone);
      if (undo.keys.empty()) continue;
      const StoreResponse after = t.Run(undo, now);
      ++ghosts_undone;
      for (size_t i = 0; i < undone.size(); ++i) {
        const EntryRef& e = entries[undone[i]];
        const EntryRef peek{.key = e.key, .limit = e.limit, .cost = 0};
        const StoreResponse want = reference.Decide({&peek, 1}, Micros(now));
        ASSERT_EQ(after.decisions[i], want.decisions[0])
            << e.limit->ToString() << " cost " << e.cost << " now " << now << " trace " << trace
            << " step " << step;
      }
    }
  }
  EXPECT_GT(ghosts_undone, 20);
}

TEST_F(UndoTest, AtItsOwnTimeLeavesNoTraceOnEdgeCases) {
  for (Algorithm a : kAllAlgorithms) {
    SCOPED_TRACE(AlgorithmName(a));
    ReplayEdgeCasesWithGhosts(*this, a, 20 + static_cast<uint64_t>(a));
  }
}

TEST_F(UndoTest, AtItsOwnTimeLeavesNoTraceFixedWindow) {
  ReplayWithGhosts(*this, Algorithm::kFixedWindow, 1);
}
TEST_F(UndoTest, AtItsOwnTimeLeavesNoTraceSlidingWindowCounter) {
  ReplayWithGhosts(*this, Algorithm::kSlidingWindowCounter, 2);
}
TEST_F(UndoTest, AtItsOwnTimeLeavesNoTraceSlidingWindowLog) {
  ReplayWithGhosts(*this, Algorithm::kSlidingWindowLog, 3);
}
TEST_F(UndoTest, AtItsOwnTimeLeavesNoTraceTokenBucket) {
  ReplayWithGhosts(*this, Algorithm::kTokenBucket, 4);
}
TEST_F(UndoTest, AtItsOwnTimeLeavesNoTraceGcra) { ReplayWithGhosts(*this, Algorithm::kGcra, 5); }

TEST_F(UndoTest, FixedWindowGivesBackOnlyInTheWindowItCountedIn) {
  const Limit l = *Limit::Create(LimitSpec::Window(Algorithm::kFixedWindow, 10, seconds(1)));
  const int64_t w0 = kStart;  // a window start
  const EntryRef other{.key = "fw", .limit = &l, .cost = 3};
  const EntryRef reserve{.key = "fw", .limit = &l, .cost = 2};
  // Undone in the same window, later: given back.
  EXPECT_EQ(ReserveThenUndo({&reserve, 1}, w0 + 100, w0 + 900'000).decisions[0].remaining, 10);
  // Reserved at the end of one window, undone in the next, which holds 3 units of its own:
  // the 2 units stayed in the window that passed, and the next one keeps its 3.
  const EncodedRequest reserved = EncodeRequest({&reserve, 1}, "u:", Micros(0));
  const StoreResponse got = Run(reserved, w0 + 999'999);
  ASSERT_TRUE(got.allowed);
  ASSERT_TRUE(Decide({&other, 1}, w0 + 1'000'100).allowed);
  std::vector<uint16_t> undone;
  const StoreResponse after = Run(EncodeUndo(reserved, got, w0 + 999'999, undone), w0 + 1'000'200);
  EXPECT_EQ(after.decisions[0].remaining, 7);
  EXPECT_EQ(Remaining(other, w0 + 1'000'300), 7);
}

TEST_F(UndoTest, SlidingWindowCounterGivesBackToTheWindowItCountedIn) {
  const Limit l =
      *Limit::Create(LimitSpec::Window(Algorithm::kSlidingWindowCounter, 100, seconds(1)));
  const int64_t w0 = kStart;
  const EntryRef reserve{.key = "swc", .limit = &l, .cost = 40};
  const EncodedRequest reserved = EncodeRequest({&reserve, 1}, "u:", Micros(0));
  const StoreResponse got = Run(reserved, w0 + 10);
  ASSERT_TRUE(got.allowed);
  // Halfway through the next window, 40 units of the previous window weigh about 20.
  EXPECT_EQ(Remaining(reserve, w0 + 1'500'000), 80);
  std::vector<uint16_t> undone;
  EXPECT_EQ(Run(EncodeUndo(reserved, got, w0 + 10, undone), w0 + 1'500'000).decisions[0].remaining,
            100);
  // Two windows on, the units no longer count: nothing to give back.
  const StoreResponse again = Run(reserved, w0 + 3'000'000);
  ASSERT_TRUE(again.allowed);
  const EntryRef other{.key = "swc", .limit = &l, .cost = 10};
  ASSERT_TRUE(Decide({&other, 1}, w0 + 5'000'000).allowed);
  EXPECT_EQ(Run(EncodeUndo(reserved, again, w0 + 3'000'000, undone), w0 + 5'000'001)
                .decisions[0]
                .remaining,
            90);
}

TEST_F(UndoTest, SlidingWindowLogTakesTheUnitsOffTheReservationsOwnEntry) {
  const Limit l = *Limit::Create(LimitSpec::Window(Algorithm::kSlidingWindowLog, 5, seconds(10)));
  const EntryRef one{.key = "log", .limit = &l, .cost = 1};
  const EncodedRequest reserved = EncodeRequest({&one, 1}, "u:", Micros(0));
  const StoreResponse got = Run(reserved, kStart);
  ASSERT_TRUE(got.allowed);
  ASSERT_TRUE(Decide({&one, 1}, kStart + 4'000'000).allowed);  // a later entry
  std::vector<uint16_t> undone;
  const StoreResponse after = Run(EncodeUndo(reserved, got, kStart, undone), kStart + 5'000'000);
  EXPECT_EQ(after.decisions[0].remaining, 4);
  // What is left is the later entry: the log turns fresh 10 s after it, not after the first.
  EXPECT_EQ(after.decisions[0].reset_after.count(), 9'000'000);
  Result<std::string> list = server_->Command({"LRANGE", "u:{log}:log", "0", "-1"});
  ASSERT_TRUE(list.ok());
  EXPECT_EQ(*list, Cat(kStart + 4'000'000, ":1"));
}

// Buckets, undone later than reserved. With nothing in between, the bucket ends exactly as if
// the request had never come, however far it refilled meanwhile. With requests in between, the
// undo gives back what the reservation certainly still holds (min(cost, time to full - elapsed)),
// so the bucket never ends fuller than without the request.
void BucketUndoneLater(UndoTest& t, Algorithm a) {
  const Limit l = *Limit::Create(LimitSpec::Bucket(a, 10, {1, seconds(1)}));
  auto check = [&](const std::string& key, ReferenceModel& without, int64_t at) {
    const EntryRef peek{.key = key, .limit = &l, .cost = 0};
    return std::make_pair(t.Remaining(peek, at),
                          without.Decide({&peek, 1}, Micros(at)).decisions[0].remaining);
  };
  // Alone: reserved from a full bucket at 10 s, undone at 10.4 s (0.6 s before it would have
  // been full again): full at once, as without it.
  {
    ReferenceModel without;
    const std::string key = Cat("alone", static_cast<int>(a));
    const EntryRef one{.key = key, .limit = &l, .cost = 3};
    t.ReserveThenUndo({&one, 1}, kStart + 10'000'000, kStart + 10'400'000);
    for (int64_t at : {10'400'000, 10'500'000, 13'000'000}) {
      const auto [got, want] = check(key, without, kStart + at);
      EXPECT_EQ(got, want) << "at " << at;
    }
  }
  // In between: full at 10 s, reserve 1 (full again at 11 s), another request at 10.5 s, undone
  // at 10.8 s: at most 0.2 s of the reservation is surely held, 0.2 units given back.
  {
    ReferenceModel without;
    const std::string key = Cat("between", static_cast<int>(a));
    const EntryRef one{.key = key, .limit = &l, .cost = 1};
    const EncodedRequest reserved = EncodeRequest({&one, 1}, "u:", Micros(0));
    const StoreResponse got = t.Run(reserved, kStart + 10'000'000);
    ASSERT_TRUE(got.allowed);
    ASSERT_TRUE(t.Decide({&one, 1}, kStart + 10'500'000).allowed);
    ASSERT_TRUE(without.Decide({&one, 1}, Micros(kStart + 10'500'000)).allowed);
    std::vector<uint16_t> undone;
    t.Run(EncodeUndo(reserved, got, kStart + 10'000'000, undone), kStart + 10'800'000);
    for (int64_t at : {10'800'000, 11'200'000, 11'750'000, 12'600'000}) {
      const auto [with_undo, never] = check(key, without, kStart + at);
      EXPECT_LE(with_undo, never) << "at " << at;
      if (at == 10'800'000) {
        EXPECT_EQ(with_undo, 9);  // 8.8 + 0.2: the fraction was given back
      }
    }
  }
  // Half empty: the reservation holds for 5.9 s more, so an undo 0.8 s later gives it all back.
  {
    ReferenceModel without;
    const std::string key = Cat("half", static_cast<int>(a));
    const EntryRef five{.key = key, .limit = &l, .cost = 5};
    ASSERT_TRUE(t.Decide({&five, 1}, kStart).allowed);
    ASSERT_TRUE(without.Decide({&five, 1}, Micros(kStart)).allowed);
    const EntryRef one{.key = key, .limit = &l, .cost = 1};
    t.ReserveThenUndo({&one, 1}, kStart + 100'000, kStart + 900'000);
    for (int64_t at : {900'000, 2'000'000, 6'000'000}) {
      const auto [got, want] = check(key, without, kStart + at);
      EXPECT_EQ(got, want) << "at " << at;
    }
  }
}

TEST_F(UndoTest, TokenBucketUndoneLaterNeverEndsFullerThanWithoutTheRequest) {
  BucketUndoneLater(*this, Algorithm::kTokenBucket);
}
TEST_F(UndoTest, GcraUndoneLaterNeverEndsFullerThanWithoutTheRequest) {
  BucketUndoneLater(*this, Algorithm::kGcra);
}

}  // namespace
}  // namespace caudal::redis
