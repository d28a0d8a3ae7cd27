// Sentinel failovers under load: a manual one (SENTINEL FAILOVER), then a killed primary. One
// setup (a primary, its replica, 3 sentinels) for the binary (CTest runs it as one test); the
// tests run in order. Keys are counters (a bucket of 10^6 that refills one unit per 30 minutes),
// so what the new primary holds can be compared with what the old one acknowledged.
//
// Each prints what the docs quote (docs/scaling.md).
#include <gtest/gtest.h>

#include <iostream>
#include <map>
#include <thread>

#include "caudal/redis/redis_store.h"
#include "common/cat.h"
#include "redis/load_threads.h"
#include "redis/redis_test_util.h"
#include "support/redis_sentinel.h"

namespace caudal {
namespace {

using load::Load;
using load::Outcome;
using load::SteadyClock;
using std::chrono::milliseconds;
using std::chrono::seconds;
using testing::RedisSentinels;

constexpr auto kDeadline = milliseconds(100);
constexpr int64_t kCapacity = 1'000'000;

std::unique_ptr<RedisSentinels>& SetupSlot() {
  static std::unique_ptr<RedisSentinels> setup;
  return setup;
}

RedisSentinels* Sentinels() {
  std::unique_ptr<RedisSentinels>& slot = SetupSlot();
  if (!slot) {
    Result<std::unique_ptr<RedisSentinels>> s = RedisSentinels::Start();
    if (!s.ok()) ADD_FAILURE() << s.status().ToString();
    if (s.ok()) slot = std::move(*s);
  }
  return slot.get();
}

class SentinelEnvironment : public ::testing::Environment {
 public:
  void TearDown() override { SetupSlot().reset(); }
};
const auto* const kEnvironment = ::testing::AddGlobalTestEnvironment(new SentinelEnvironment);

const Limit& Counter() {
  static const Limit counter =
      Bucket(Algorithm::kTokenBucket, kCapacity, {1, std::chrono::minutes(30)});
  return counter;
}

std::vector<std::string> Keys(const std::string& base) {
  std::vector<std::string> keys;
  for (int i = 0; i < 20; ++i) keys.push_back(Cat(base, i));
  return keys;
}

struct Report {
  SteadyClock::time_point first_failure = SteadyClock::time_point::max();
  SteadyClock::time_point last_failure = SteadyClock::time_point::min();
  int64_t failures = 0, other_failures = 0, slow_failures = 0, lost = 0, acked = 0;
};

// Failures, and what the store now holds against every admission it acknowledged: a counter
// holding less than it admitted lost the difference.
// A failure is slow past the deadline, 400 ms and the machine's worst scheduling stall
// (`stall`, a StallProbe's): what caudal adds, not what the load on the machine does.
Report Analyse(Store& store, const std::vector<std::string>& keys,
               const std::vector<Outcome>& outcomes, SteadyClock::duration stall) {
  Report r;
  std::map<size_t, int64_t> acked;
  for (const Outcome& o : outcomes) {
    if (o.allowed) ++acked[o.key];
    if (o.ok) continue;
    ++r.failures;
    r.first_failure = std::min(r.first_failure, o.sent);
    r.last_failure = std::max(r.last_failure, o.answered);
    if (o.code != StatusCode::kUnavailable) ++r.other_failures;
    if (o.answered - o.sent > kDeadline + milliseconds(400) + stall) ++r.slow_failures;
  }
  for (const auto& [k, n] : acked) {
    const ConsumeEntry peek{.key = keys[k], .limit = &Counter(), .cost = 0};
    const Result<DecideResponse> now = store.Decide({.consumes = {&peek, 1}});
    EXPECT_TRUE(now.ok()) << now.status().ToString();
    if (!now.ok()) continue;
    const int64_t held = kCapacity - now->decisions[0].remaining;
    r.lost += std::max<int64_t>(0, n - held);
    r.acked += n;
  }
  return r;
}

// SENTINEL FAILOVER: the sentinels promote the replica, then turn the old primary into a replica
// (killing its clients). The store follows the promotion as soon as a sentinel announces it. What
// the old primary admitted between the promotion and the switch is lost with its data (Sentinel
// does not stop writes first): counted and printed, not a failure.
TEST(SentinelUnderLoad, AManualFailoverIsFollowed) {
  RedisSentinels* setup = Sentinels();
  ASSERT_NE(setup, nullptr);
  auto store = RedisSentinelStore::Open(SystemClock::Instance(),
                                        {.url = setup->url(), .deadline = kDeadline});
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  const std::vector<std::string> keys = Keys("manual:");
  std::vector<std::vector<size_t>> requests;
  for (size_t k = 0; k < keys.size(); ++k) requests.push_back({k});
  load::StallProbe stalls;
  Load traffic(**store, keys, Counter(), requests, 2);
  std::this_thread::sleep_for(milliseconds(300));  // steady load first (no decision timing)
  const auto started = SteadyClock::now();
  ASSERT_TRUE(setup->sentinel(0).Command({"SENTINEL", "FAILOVER", "mymaster"}).ok());
  SteadyClock::time_point switched = SteadyClock::time_point::max();
  for (auto until = started + seconds(30); SteadyClock::now() < until;) {
    if ((*store)->Stats().primary_switches > 0) {
      switched = SteadyClock::now();
      break;
    }
    std::this_thread::sleep_for(milliseconds(5));  // polling a counter; no decision timing
  }
  const Status promoted = setup->WaitPrimary(1, seconds(30), /*replica_too=*/false);
  std::this_thread::sleep_for(milliseconds(300));  // steady load after
  const std::vector<Outcome> outcomes = traffic.Stop();
  ASSERT_TRUE(promoted.ok()) << promoted.ToString();
  const RedisStoreStats stats = (*store)->Stats();
  EXPECT_EQ(stats.primary_switches, 1u);
  bool resumed = false;
  for (const Outcome& o : outcomes) resumed |= o.ok && o.sent > started && o.answered > started;
  EXPECT_TRUE(resumed);
  const Report r = Analyse(**store, keys, outcomes, stalls.worst());
  EXPECT_EQ(r.other_failures, 0);
  EXPECT_EQ(r.slow_failures, 0) << "worst scheduling stall " << load::Ms(stalls.worst()) << " ms";
  std::cout << "sentinel manual failover: switched " << load::Ms(switched - started)
            << " ms after SENTINEL FAILOVER; " << outcomes.size() << " requests, " << r.failures
            << " failed (kUnavailable) over "
            << (r.failures > 0 ? load::Ms(r.last_failure - r.first_failure) : 0.0) << " ms; lost "
            << r.lost << " of " << r.acked << " acknowledged; asks " << stats.topology_refreshes
            << "\n";
}

// The primary is killed: decisions fail at once with kUnavailable (nothing admitted) until the
// sentinels promote the replica, then resume there with the same store. The old primary comes
// back (empty, as a primary for a moment) and is turned into a replica; decisions never go to it.
TEST(SentinelUnderLoad, AKilledPrimaryIsReplacedWithoutARestart) {
  RedisSentinels* setup = Sentinels();
  ASSERT_NE(setup, nullptr);
  Result<size_t> primary = setup->PrimaryIndex();
  ASSERT_TRUE(primary.ok());
  ASSERT_TRUE(setup->WaitPrimary(*primary, seconds(30)).ok());
  auto store = RedisSentinelStore::Open(SystemClock::Instance(),
                                        {.url = setup->url(), .deadline = kDeadline});
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  const std::vector<std::string> keys = Keys("killed:");
  std::vector<std::vector<size_t>> requests;
  for (size_t k = 0; k < keys.size(); ++k) requests.push_back({k});
  load::StallProbe stalls;
  Load traffic(**store, keys, Counter(), requests, 2);
  std::this_thread::sleep_for(milliseconds(500));
  const auto killed_at = SteadyClock::now();
  setup->server(*primary).Kill();
  const Status promoted = setup->WaitPrimary(1 - *primary, seconds(30), /*replica_too=*/false);
  // Decisions resume on the new primary.
  const ConsumeEntry probe{.key = keys[0], .limit = &Counter(), .cost = 0};
  bool resumed = false;
  for (auto until = SteadyClock::now() + seconds(10); !resumed && SteadyClock::now() < until;) {
    resumed = (*store)->Decide({.consumes = {&probe, 1}}).ok();
    if (!resumed) std::this_thread::sleep_for(milliseconds(20));
  }
  std::this_thread::sleep_for(milliseconds(500));
  const std::vector<Outcome> outcomes = traffic.Stop();
  ASSERT_TRUE(promoted.ok()) << promoted.ToString();
  ASSERT_TRUE(resumed);
  SteadyClock::time_point first_back = SteadyClock::time_point::max();
  int64_t admitted_in_gap = 0;
  for (const Outcome& o : outcomes) {
    if (o.ok && o.sent > killed_at) first_back = std::min(first_back, o.sent);
  }
  for (const Outcome& o : outcomes) {
    if (o.allowed && o.sent > killed_at && o.sent < first_back) ++admitted_in_gap;
  }
  const Report r = Analyse(**store, keys, outcomes, stalls.worst());
  EXPECT_GT(r.failures, 0);
  EXPECT_EQ(r.other_failures, 0);
  EXPECT_EQ(r.slow_failures, 0) << "failures come within the deadline (worst scheduling stall "
                                << load::Ms(stalls.worst()) << " ms)";
  EXPECT_EQ(admitted_in_gap, 0);
  const RedisStoreStats stats = (*store)->Stats();
  EXPECT_EQ(stats.primary_switches, 1u);
  std::cout << "sentinel failover: gap " << load::Ms(first_back - killed_at) << " ms, "
            << r.failures << " decisions failed (kUnavailable), " << admitted_in_gap
            << " admitted meanwhile; lost " << r.lost << " of " << r.acked
            << " acknowledged admissions; asks " << stats.topology_refreshes << "\n";

  // The old primary comes back empty; the sentinels turn it into a replica. The store stays on
  // the new primary: the counters keep what they had.
  const int64_t before = kCapacity - DecideOne(**store, keys[0], Counter(), 0).remaining;
  ASSERT_TRUE(setup->server(*primary).Restart().ok());
  const Status demoted = setup->WaitPrimary(1 - *primary, seconds(30));
  ASSERT_TRUE(demoted.ok()) << demoted.ToString();
  EXPECT_EQ(kCapacity - DecideOne(**store, keys[0], Counter(), 0).remaining, before);
  EXPECT_EQ((*store)->Stats().primary_switches, 1u);
}

}  // namespace
}  // namespace caudal
