// No double spend: 4 processes × 8 threads, each process with its own RedisStore, hammer the
// same keys. Over the run the total admitted stays within what the limits allow. Next to it a
// deliberately non-atomic GET-then-SET limiter (test only) breaks the same check — the double
// spend the atomic script exists to prevent — so the check demonstrably detects it.
#include "redis/double_spend.h"

#include <gtest/gtest.h>
#include <hiredis/hiredis.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <iostream>
#include <map>
#include <mutex>
#include <sstream>
#include <thread>

#include "algorithms/algorithm.h"
#include "caudal/redis/redis_store.h"
#include "decorators/lease_store.h"
#include "redis/redis_test_util.h"
#include "support/redis_server.h"

namespace caudal {
namespace {

using std::chrono::hours;
using std::chrono::milliseconds;
using std::chrono::seconds;
using SteadyClock = std::chrono::steady_clock;

using double_spend::Limits;
using double_spend::Tally;
using double_spend::Violations;

constexpr int kProcesses = 4;
constexpr int kThreads = 8;
constexpr auto kRunFor = milliseconds(1500);

TEST(DoubleSpend, AtomicScriptNeverAdmitsMoreThanTheLimits) {
  auto server = StartServer();
  const std::string url = server->url();
  const Limits limits;
  const auto start = SteadyClock::now();
  const Tally total = double_spend::RunProcesses(kProcesses, [&](Tally& tally) {
    auto store = RedisStore::Open(SystemClock::Instance(), {.url = url, .deadline = seconds(2)});
    if (!store.ok()) {
      tally.errors = 1'000'000;
      return;
    }
    double_spend::Hammer(tally, limits, kThreads, kRunFor,
                         [&](int, const std::string& name, const Limit& limit) -> Result<Decision> {
                           const ConsumeEntry e{.key = name, .limit = &limit, .cost = 1};
                           Result<DecideResponse> r = (*store)->Decide({.consumes = {&e, 1}});
                           if (!r.ok()) return r.status();
                           return r->decisions[0];
                         });
  });
  const auto elapsed = SteadyClock::now() - start;
  EXPECT_EQ(total.errors, 0);
  for (const std::string& v : Violations(total, limits, elapsed)) ADD_FAILURE() << v;
  // The limits were actually reached: the check is not passing for lack of traffic.
  EXPECT_GE(total.admitted.at("token_bucket"), 20);
  EXPECT_EQ(total.admitted.at("sliding_window_log"), limits.log.capacity());
  EXPECT_GE(total.admitted.at("sliding_window_counter"), limits.counter.capacity() - 1);
  EXPECT_GE(total.fixed_per_window.size(), 2u);
  for (const auto& [name, n] : total.admitted) std::cout << "atomic: " << name << " " << n << "\n";
}

// The same, every process deciding through leases (LeaseStore) over its store: each process asks
// for leases of every key it sees again, spends them locally and gives them back; the total stays
// within the bounds with leases (buckets: B + r·(t + ttl); windows: unchanged).
TEST(DoubleSpend, WithLeasesNeverAdmitsMoreThanTheLimitsAllowWithLeases) {
  auto server = StartServer();
  const std::string url = server->url();
  const Limits limits;
  constexpr Nanos kTtl = milliseconds(100);
  const auto start = SteadyClock::now();
  const Tally total = double_spend::RunProcesses(kProcesses, [&](Tally& tally) {
    auto store = RedisStore::Open(SystemClock::Instance(), {.url = url, .deadline = seconds(2)});
    if (!store.ok()) {
      tally.errors = 1'000'000;
      return;
    }
    LeaseStore leases(**store, SystemClock::Instance(),
                      {.ttl = kTtl,
                       .max_share_ppm = 1'000'000,
                       .instances = kProcesses,
                       .return_interval = kTtl / 4});
    double_spend::Hammer(tally, limits, kThreads, kRunFor,
                         [&](int, const std::string& name, const Limit& limit) -> Result<Decision> {
                           const ConsumeEntry e{.key = name, .limit = &limit, .cost = 1};
                           Result<DecideResponse> r = leases.Decide({.consumes = {&e, 1}});
                           if (!r.ok()) return r.status();
                           return r->decisions[0];
                         });
    tally.admitted["~from_leases"] += static_cast<int64_t>(leases.counters().local);
    leases.ReturnAll(seconds(2));
  });
  const auto elapsed = SteadyClock::now() - start;
  EXPECT_EQ(total.errors, 0);
  for (const std::string& v : Violations(total, limits, elapsed, kTtl)) ADD_FAILURE() << v;
  EXPECT_GE(total.admitted.at("token_bucket"), 20);
  EXPECT_EQ(total.admitted.at("sliding_window_log"), limits.log.capacity());
  EXPECT_GE(total.fixed_per_window.size(), 2u);
  EXPECT_GT(total.admitted.at("~from_leases"), 20) << "the leases were spent";
  for (const auto& [name, n] : total.admitted) std::cout << "leases: " << name << " " << n << "\n";
}

// The race a shared limiter must not have, made concrete: read the balance, decide, write it
// back — three steps.
TEST(DoubleSpend, NonAtomicGetThenSetDoubleSpendsAndTheCheckCatchesIt) {
  auto server = StartServer();
  const uint16_t port = server->port();
  const Limits limits;
  const auto start = SteadyClock::now();
  const Tally total = double_spend::RunProcesses(kProcesses, [&](Tally& tally) {
    std::vector<redisContext*> conns;
    for (int t = 0; t < kThreads; ++t) conns.push_back(redisConnect("127.0.0.1", port));
    double_spend::Hammer(
        tally, limits, kThreads, kRunFor,
        [&](int t, const std::string& name, const Limit& limit) -> Result<Decision> {
          if (limit.algorithm() == Algorithm::kSlidingWindowLog) {  // list state: not shown here
            return Decision{.verdict = Verdict::kDenied};
          }
          redisContext* c = conns[t];
          const std::string key = "naive:" + name;
          auto* got = static_cast<redisReply*>(redisCommand(c, "GET %s", key.c_str()));
          if (got == nullptr) return Status::Unavailable("GET failed");
          CompactState state;
          const bool had = got->type == REDIS_REPLY_STRING;
          if (had) {
            std::istringstream in(std::string(got->str, got->len));
            in >> state.w[0] >> state.w[1] >> state.w[2];
          }
          freeReplyObject(got);
          const Micros now = std::chrono::duration_cast<Micros>(
              std::chrono::system_clock::now().time_since_epoch());
          const Step step = DecideCompact(limit, had ? &state : nullptr, now, 1);
          if (step.changed) {
            std::ostringstream v;
            v << step.next.w[0] << " " << step.next.w[1] << " " << step.next.w[2];
            auto* set = static_cast<redisReply*>(
                redisCommand(c, "SET %s %s", key.c_str(), v.str().c_str()));
            if (set == nullptr) return Status::Unavailable("SET failed");
            freeReplyObject(set);
          }
          return step.decision;
        });
    for (redisContext* c : conns) redisFree(c);
  });
  const auto elapsed = SteadyClock::now() - start;
  EXPECT_EQ(total.errors, 0);
  const std::vector<std::string> violations = Violations(total, limits, elapsed);
  EXPECT_FALSE(violations.empty()) << "32 racing read-modify-write clients should overspend";
  for (const std::string& v : violations) std::cout << "non-atomic: " << v << "\n";
}

}  // namespace
}  // namespace caudal
