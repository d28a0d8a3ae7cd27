// Native counts (store.h, src/redis/native_count.h) on a real redis-server: consume_each's fixed
// windows counted as envoyproxy/ratelimit counts them, INCRBY and PEXPIRE pipelined.
//   - on a given clock they decide every request as the reference model decides the same
//     charges and refunds (the script's semantics, which the conformance suites pin);
//   - on Redis's own clock each hit lands in the counter of the window TIME says, which expires
//     after that window ends;
//   - the estimate of Redis's clock asks TIME at most once a refresh, and a step of the local
//     clock moves hits to another window only until the next TIME corrects it;
//   - three processes count every hit once, and admit exactly the limit;
//   - a counter holding something else fails its request only; a request that mixes native
//     counts with other entries is refused.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "caudal/redis/redis_store.h"
#include "caudal/store/memory_store.h"
#include "redis/redis_test_util.h"
#include "store/batch.h"
#include "support/manual_clock.h"
#include "support/redis_server.h"

namespace caudal {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

ChargeEntry Count(std::string_view key, const Limit& limit, int64_t cost) {
  return {.key = key, .limit = &limit, .cost = cost, .native = true};
}

// A command's reply as text, or `otherwise` when it failed.
std::string Text(const testing::RedisServer& server, const std::vector<std::string>& argv,
                 std::string otherwise = "") {
  Result<std::string> r = server.Command(argv);
  return r.ok() ? *r : otherwise;
}

int64_t WallMicros() {
  return std::chrono::duration_cast<Micros>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

TEST(NativeCounts, DecideAsTheReferenceModelDecidesTheSameCharges) {
  auto server = StartServer();
  ManualClock clock(seconds(1'699'920'000));
  auto redis = MustOpen({.url = server->url(), .decision_clock = &clock});
  MemoryStore model(clock);
  const Limit second = Window(Algorithm::kFixedWindow, 10, seconds(1));
  const Limit minute = Window(Algorithm::kFixedWindow, 25, std::chrono::minutes(1));
  std::mt19937_64 rng(7);
  int refused = 0, never = 0, refunds = 0;
  for (int i = 0; i < 400; ++i) {
    // Costs up to past the per-second limit (never fits), one key or two keys with two limits.
    const int64_t a = static_cast<int64_t>(rng() % 13), b = static_cast<int64_t>(rng() % 4);
    const bool two = rng() % 3 == 0;
    std::vector<ChargeEntry> native = {Count("k", second, a)};
    std::vector<RefundEntry> native_refunds;
    if (rng() % 6 == 0) {
      native.clear();  // is_negative_hits: never below 0
      native_refunds.push_back({.key = "k", .limit = &second, .cost = a, .native = true});
      ++refunds;
    } else if (two) {
      native.push_back(Count("m", minute, b));
    }
    std::vector<ChargeEntry> charges = native;
    for (ChargeEntry& e : charges) e.native = false;
    std::vector<RefundEntry> plain_refunds = native_refunds;
    for (RefundEntry& e : plain_refunds) e.native = false;
    const Result<DecideResponse> got =
        redis->Decide({.refunds = native_refunds, .charges = native});
    const Result<DecideResponse> want =
        model.Decide({.refunds = plain_refunds, .charges = charges});
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    ASSERT_TRUE(want.ok());
    SCOPED_TRACE("request " + std::to_string(i));
    EXPECT_EQ(got->allowed, want->allowed);
    ASSERT_EQ(got->decisions.size(), want->decisions.size());
    for (size_t e = 0; e < got->decisions.size(); ++e) {
      const Decision& g = got->decisions[e];
      const Decision& w = want->decisions[e];
      EXPECT_EQ(g.verdict, w.verdict);
      EXPECT_EQ(g.remaining, w.remaining);
      EXPECT_EQ(g.overdrawn, w.overdrawn);
      EXPECT_EQ(g.reset_after, w.reset_after);
      EXPECT_EQ(g.retry_after, w.retry_after);
      refused += g.verdict == Verdict::kDenied;
      never += g.verdict == Verdict::kNeverFits;
    }
    clock.Advance(milliseconds(static_cast<int64_t>(rng() % 300)));
  }
  EXPECT_GT(refused, 20) << "the sequence reaches the limits";
  EXPECT_GT(never, 0) << "and costs past them";
  EXPECT_GT(refunds, 20);
  // The state is the reference's: a counter per window, no script state.
  const auto scripted = server->Keys("caudal:{k}");
  ASSERT_TRUE(scripted.ok());
  EXPECT_TRUE(scripted->empty());
  const auto counters = server->Keys("caudal:{k}|w*");
  ASSERT_TRUE(counters.ok());
  EXPECT_FALSE(counters->empty());
}

TEST(NativeCounts, OnRedisClockEachHitLandsInTheWindowTimeSaysAndExpiresAfterIt) {
  auto server = StartServer();
  auto redis = MustOpen({.url = server->url()});
  const Limit minute = Window(Algorithm::kFixedWindow, 100, std::chrono::minutes(1));
  // Away from a window's edge, where the estimate of Redis's clock could pick either window.
  while (WallMicros() % 60'000'000 > 58'000'000 || WallMicros() % 60'000'000 < 1'000'000) {
    std::this_thread::sleep_for(milliseconds(100));
  }
  const ChargeEntry e = Count("t", minute, 3);
  const Result<DecideResponse> r = redis->Decide({.charges = {&e, 1}});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(r->allowed);
  EXPECT_EQ(r->decisions[0].remaining, 97);
  const Result<std::string> time = server->Command({"TIME"});
  ASSERT_TRUE(time.ok());
  const int64_t now_s = std::stoll(time->substr(0, time->find('\n')));
  const std::string key = "caudal:{t}|w" + std::to_string(now_s / 60 * 60 * 1'000'000);
  EXPECT_EQ(Text(*server, {"GET", key}, ""), "3");
  const int64_t pttl = std::stoll(Text(*server, {"PTTL", key}, "-3"));
  const int64_t to_end_ms = (now_s / 60 * 60 + 60 - now_s) * 1000;
  EXPECT_GT(pttl, to_end_ms - 1000) << "lives to the window's end";
  EXPECT_LE(pttl, to_end_ms + 1000 + 1000) << "and at most the margin after it";
  EXPECT_EQ(r->decisions[0].reset_after.count() / 1'000'000, (to_end_ms - 1) / 1000)
      << "reset_after counts to the window's end";
}

// The system's clocks, with the wall clock moved by a step the test sets (an NTP step, say).
class SteppedClock final : public Clock {
 public:
  Nanos Now() const override { return SystemClock::Instance().Now() + step_.load(); }
  Nanos Monotonic() const override { return SystemClock::Instance().Monotonic(); }
  void Step(Nanos by) { step_ = step_.load() + by; }

 private:
  std::atomic<Nanos> step_{Nanos(0)};
};

int64_t TimeCalls(const testing::RedisServer& server) {
  const std::string info = Text(server, {"INFO", "commandstats"});
  const size_t at = info.find("cmdstat_time:calls=");
  return at == std::string::npos ? 0 : std::stoll(info.substr(at + 19));
}

TEST(NativeCounts, TimeIsAskedOncePerRefreshAndCorrectsAStepOfTheLocalClock) {
  auto server = StartServer();
  SteppedClock clock;
  auto opened = RedisStore::Open(clock, {.url = server->url(), .deadline = seconds(2)});
  ASSERT_TRUE(opened.ok()) << opened.status().ToString();
  RedisStore& redis = **opened;
  const Limit hour = Window(Algorithm::kFixedWindow, 1'000, std::chrono::hours(1));
  while (WallMicros() % 3'600'000'000 > 3'580'000'000) std::this_thread::sleep_for(seconds(1));
  const ChargeEntry e = Count("s", hour, 1);
  for (int i = 0; i < 50; ++i) ASSERT_TRUE(redis.Decide({.charges = {&e, 1}}).ok());
  EXPECT_EQ(TimeCalls(*server), 1) << "one TIME for fifty calls within a refresh";
  const std::string window =
      "caudal:{s}|w" + std::to_string(WallMicros() / 3'600'000'000 * 3'600'000'000);
  EXPECT_EQ(Text(*server, {"GET", window}), "50");
  clock.Step(std::chrono::hours(2));  // the estimate is now two windows ahead, and stale
  int64_t decided = 50;
  auto decide = [&] {
    ++decided;
    return redis.Decide({.charges = {&e, 1}}).ok();
  };
  ASSERT_TRUE(decide());
  // That call's TIME comes back after it; the calls after the answer pick Redis's window again.
  for (int i = 0; i < 100 && TimeCalls(*server) < 2; ++i) ASSERT_TRUE(decide());
  ASSERT_EQ(TimeCalls(*server), 2);
  const int64_t before = std::stoll(Text(*server, {"GET", window}, "0"));
  for (int i = 0; i < 10; ++i) ASSERT_TRUE(decide());
  EXPECT_EQ(std::stoll(Text(*server, {"GET", window}, "0")) - before, 10)
      << "once TIME is answered, every hit is in Redis's window again";
  const auto counters = server->Keys("caudal:{s}|w*");
  ASSERT_TRUE(counters.ok());
  int64_t elsewhere = 0;
  for (const std::string& k : *counters) {
    if (k != window) elsewhere += std::stoll(Text(*server, {"GET", k}, "0"));
  }
  EXPECT_GE(elsewhere, 1) << "the stepped clock's first call lands where it says";
  EXPECT_EQ(std::stoll(Text(*server, {"GET", window}, "0")) + elsewhere, decided)
      << "every hit counted once";
}

TEST(NativeCounts, ThreeProcessesCountEveryHitOnceAndAdmitExactlyTheLimit) {
  auto server = StartServer();
  // A window of an hour, at least 20 s before its end: every hit of the run in one window.
  while (WallMicros() % 3'600'000'000 > 3'580'000'000) std::this_thread::sleep_for(seconds(1));
  const Limit hour = Window(Algorithm::kFixedWindow, 1'000, std::chrono::hours(1));
  constexpr int kProcesses = 3, kHits = 600;
  std::vector<std::pair<pid_t, int>> children;
  for (int p = 0; p < kProcesses; ++p) {  // every fork before the parent starts any thread
    int fds[2];
    ASSERT_EQ(::pipe(fds), 0);
    const pid_t pid = ::fork();
    if (pid == 0) {
      ::close(fds[0]);
      auto store =
          RedisStore::Open(SystemClock::Instance(), {.url = server->url(), .deadline = seconds(2)});
      int64_t allowed = 0, failed = 0;
      for (int i = 0; store.ok() && i < kHits; ++i) {
        const ChargeEntry e = Count("hot", hour, 1);
        const Result<DecideResponse> r = (*store)->Decide({.charges = {&e, 1}});
        failed += !r.ok();
        allowed += r.ok() && r->allowed;
      }
      const std::string out =
          std::to_string(store.ok() ? allowed : -1) + " " + std::to_string(failed);
      (void)!::write(fds[1], out.data(), out.size());
      ::_exit(0);
    }
    ::close(fds[1]);
    children.push_back({pid, fds[0]});
  }
  int64_t allowed = 0;
  for (const auto& [pid, fd] : children) {
    char buf[64] = {};
    const ssize_t n = ::read(fd, buf, sizeof(buf) - 1);
    ::close(fd);
    int status = 0;
    ::waitpid(pid, &status, 0);
    ASSERT_GT(n, 0);
    int64_t a = 0, failed = 0;
    ASSERT_EQ(std::sscanf(buf, "%ld %ld", &a, &failed), 2);
    EXPECT_EQ(failed, 0);
    ASSERT_GE(a, 0) << "a child could not open the store";
    allowed += a;
  }
  const auto counters = server->Keys("caudal:{hot}|w*");
  ASSERT_TRUE(counters.ok());
  ASSERT_EQ(counters->size(), 1u);
  EXPECT_EQ(Text(*server, {"GET", counters->front()}, ""), std::to_string(kProcesses * kHits))
      << "every hit counted once, refused ones too (the reference's INCRBY)";
  EXPECT_EQ(allowed, 1'000) << "exactly the limit admitted";
}

TEST(NativeCounts, ACounterHoldingSomethingElseFailsItsRequestOnly) {
  auto server = StartServer();
  ManualClock clock(seconds(1'699'920'000));
  auto redis = MustOpen({.url = server->url(), .decision_clock = &clock});
  const Limit second = Window(Algorithm::kFixedWindow, 10, seconds(1));
  ASSERT_TRUE(server->Command({"SET", "caudal:{bad}|w1699920000000000", "x"}).ok());
  const ChargeEntry bad = Count("bad", second, 1);
  const Result<DecideResponse> r = redis->Decide({.charges = {&bad, 1}});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(r.status().message().find("not an integer"), std::string::npos)
      << r.status().ToString();
  const ChargeEntry good = Count("good", second, 1);
  const Result<DecideResponse> ok = redis->Decide({.charges = {&good, 1}});
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_EQ(ok->decisions[0].remaining, 9);
  EXPECT_EQ(Text(*server, {"GET", "caudal:{bad}|w1699920000000000"}), "x");
}

TEST(NativeCounts, ARequestMixingNativeCountsWithOtherEntriesIsRefused) {
  auto server = StartServer();
  auto redis = MustOpen({.url = server->url()});
  const Limit second = Window(Algorithm::kFixedWindow, 10, seconds(1));
  const Limit bucket = Bucket(Algorithm::kTokenBucket, 10, {10, seconds(1)});
  const ChargeEntry mixed[] = {Count("a", second, 1), {.key = "a2", .limit = &second, .cost = 1}};
  const ChargeEntry on_bucket = Count("c", bucket, 1);
  const ConsumeEntry consume{.key = "e", .limit = &second, .cost = 1};
  const ChargeEntry beside = Count("f", second, 1);
  const DecideRequest refused[] = {
      {.charges = mixed},  // one native, one not
      {.charges = {&on_bucket, 1}},
      {.consumes = {&consume, 1}, .charges = {&beside, 1}},
  };
  for (const DecideRequest& request : refused) {
    const Result<DecideResponse> r = redis->Decide(request);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << r.status().ToString();
  }
  // What the verbs cannot express, the batch encoding (store/batch.h) still refuses.
  const std::vector<std::vector<EntryRef>> batches = {
      {{.key = "b", .limit = &second, .cost = 1, .native_count = true}},  // a consume
      {{.key = "d",
        .limit = &second,
        .cost = 1,
        .op = EntryOp::kCharge,
        .lease = 3,
        .native_count = true}}};
  for (const auto& entries : batches) {
    const Result<DecideResponse> r = DecideBatch(*redis, entries);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << r.status().ToString();
  }
  const auto keys = server->Keys("*");
  ASSERT_TRUE(keys.ok());
  EXPECT_TRUE(keys->empty()) << "nothing written";
}

}  // namespace
}  // namespace caudal
