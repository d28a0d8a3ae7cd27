// Concurrency limits across processes on a real redis-server: three processes, each with its own
// RedisStore and Engine, take and release the slots of one identity.
//   - never above `limit` in flight at once: each process counts its admitted requests in a
//     counter shared by all three (shared memory) while it holds their slots;
//   - exact: without releases, exactly `limit` requests are admitted among the three;
//   - on Redis Cluster, with a request whose two concurrency limits live in two slots (reserved
//     slot by slot, the other undone when one refuses): exactly the binding limit admitted, and
//     no slot of the other left held by an undone request;
//   - a killed process's slots stay held until `hold` has passed on the store's clock (a
//     decision clock every process shares here), then free themselves.
// Every process is forked before any thread is started in the parent (see lease_test.cc).
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include "caudal/engine/engine.h"
#include "caudal/redis/redis_store.h"
#include "redis/redis_test_util.h"
#include "support/manual_clock.h"
#include "support/redis_cluster.h"
#include "support/redis_server.h"

namespace caudal {
namespace {

using std::chrono::seconds;

constexpr int kProcesses = 3;

// What the processes share: counters in one anonymous shared mapping.
struct Shared {
  std::atomic<int64_t> in_flight{0};
  std::atomic<int64_t> most_in_flight{0};
  std::atomic<int64_t> admitted{0};
  std::atomic<int64_t> released{0};
  std::atomic<int64_t> refused{0};
  std::atomic<int64_t> errors{0};
};
static_assert(std::atomic<int64_t>::is_always_lock_free);

Shared* MapShared() {
  void* p =
      ::mmap(nullptr, sizeof(Shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return nullptr;
  return new (p) Shared();
}

std::shared_ptr<const PolicySet> Policies(const Limit& limit) {
  PolicySpec p;
  p.name = "inflight";
  p.identity = {"user"};
  p.limits = {limit};
  return *PolicySet::Create({p}, {});
}

CheckRequest ForUser() { return {.descriptors = {{"user", "u"}}, .cost = std::nullopt}; }

// Forks `n` processes running work(i); returns their pids. Nothing in the parent runs a thread.
std::vector<pid_t> ForkAll(int n, const std::function<void(int)>& work) {
  std::vector<pid_t> pids;
  for (int i = 0; i < n; ++i) {
    const pid_t pid = ::fork();
    if (pid == 0) {
      work(i);
      ::_exit(0);
    }
    pids.push_back(pid);
  }
  return pids;
}

void ExpectExitedCleanly(const std::vector<pid_t>& pids) {
  for (const pid_t pid : pids) {
    int status = 0;
    ::waitpid(pid, &status, 0);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "process " << pid;
  }
}

// One process: `tries` checks of one identity; each admitted one is counted in flight while it
// holds its slot, then released.
void TakeAndRelease(const std::string& url, const Limit& limit, int tries, Shared& shared) {
  auto store = RedisStore::Open(SystemClock::Instance(), {.url = url, .deadline = seconds(5)});
  if (!store.ok()) {
    shared.errors.fetch_add(1);
    return;
  }
  Engine engine(**store, SystemClock::Instance(), {});
  if (!engine.SetPolicies(Policies(limit)).ok()) shared.errors.fetch_add(1);
  for (int i = 0; i < tries; ++i) {
    const Result<CheckResult> r = engine.Check(ForUser());
    if (!r.ok()) {
      shared.errors.fetch_add(1);
      continue;
    }
    if (!r->allowed()) {
      shared.refused.fetch_add(1);
      continue;
    }
    shared.admitted.fetch_add(1);
    const int64_t now = shared.in_flight.fetch_add(1) + 1;
    int64_t most = shared.most_in_flight.load();
    while (now > most && !shared.most_in_flight.compare_exchange_weak(most, now)) {
    }
    // Work in flight: long enough for the others' checks to meet this one's slot.
    for (int spin = 0; spin < 200'000; ++spin) std::atomic_signal_fence(std::memory_order_seq_cst);
    shared.in_flight.fetch_sub(1);  // before the release: the slot is still held here
    const Result<ReleaseResult> back = engine.Release(r->hold);
    if (back.ok() && back->released) {
      shared.released.fetch_add(1);
    } else {
      shared.errors.fetch_add(1);
    }
  }
}

TEST(Concurrency, ThreeProcessesNeverHoldMoreThanTheLimit) {
  auto server = StartServer();
  ASSERT_NE(server, nullptr);
  Shared* shared = MapShared();
  ASSERT_NE(shared, nullptr);
  // Fewer slots than processes, each holding at most one at a time: they contend.
  const Limit limit = *Limit::Create(LimitSpec::Concurrency(2, seconds(60)));
  const std::string url = server->url();
  const std::vector<pid_t> pids =
      ForkAll(kProcesses, [&](int) { TakeAndRelease(url, limit, 400, *shared); });
  ExpectExitedCleanly(pids);
  EXPECT_EQ(shared->errors.load(), 0);
  EXPECT_LE(shared->most_in_flight.load(), limit.capacity());
  EXPECT_GT(shared->refused.load(), 0) << "the processes did contend for the slots";
  EXPECT_EQ(shared->released.load(), shared->admitted.load()) << "every slot released once";
  // Every slot came back: the next `limit` checks pass, and then one is refused.
  auto store = MustOpen({.url = url});
  Engine engine(*store, SystemClock::Instance(), {});
  ASSERT_TRUE(engine.SetPolicies(Policies(limit)).ok());
  for (int64_t i = 0; i < limit.capacity(); ++i) {
    EXPECT_TRUE(engine.Check(ForUser())->allowed());
  }
  EXPECT_FALSE(engine.Check(ForUser())->allowed());
  std::cout << "admitted " << shared->admitted.load() << ", refused " << shared->refused.load()
            << ", most in flight " << shared->most_in_flight.load() << " of " << limit.capacity()
            << "\n";
}

TEST(Concurrency, ThreeProcessesAdmitExactlyTheLimitWithoutReleases) {
  auto server = StartServer();
  ASSERT_NE(server, nullptr);
  Shared* shared = MapShared();
  ASSERT_NE(shared, nullptr);
  const Limit limit = *Limit::Create(LimitSpec::Concurrency(25, seconds(60)));
  const std::string url = server->url();
  const std::vector<pid_t> pids = ForkAll(kProcesses, [&](int) {
    auto store = RedisStore::Open(SystemClock::Instance(), {.url = url, .deadline = seconds(5)});
    if (!store.ok()) return shared->errors.fetch_add(1), void();
    Engine engine(**store, SystemClock::Instance(), {});
    if (!engine.SetPolicies(Policies(limit)).ok()) shared->errors.fetch_add(1);
    for (int i = 0; i < 40; ++i) {
      const Result<CheckResult> r = engine.Check(ForUser());
      if (!r.ok()) shared->errors.fetch_add(1);
      if (r.ok() && r->allowed()) shared->admitted.fetch_add(1);
      if (r.ok() && !r->allowed()) shared->refused.fetch_add(1);
    }
  });
  ExpectExitedCleanly(pids);
  EXPECT_EQ(shared->errors.load(), 0);
  EXPECT_EQ(shared->admitted.load(), limit.capacity());
  EXPECT_EQ(shared->refused.load(), kProcesses * 40 - limit.capacity());
}

TEST(Concurrency, AKilledProcessesSlotsFreeThemselvesAfterHold) {
  auto server = StartServer();
  ASSERT_NE(server, nullptr);
  Shared* shared = MapShared();
  ASSERT_NE(shared, nullptr);
  const Limit limit = *Limit::Create(LimitSpec::Concurrency(4, seconds(30)));
  const std::string url = server->url();
  int ready[2];
  ASSERT_EQ(::pipe(ready), 0);
  // Every process decides at the same given time, so that the store's clock is the test's.
  const std::vector<pid_t> pids = ForkAll(1, [&](int) {
    ManualClock at_start;
    auto store = RedisStore::Open(
        SystemClock::Instance(), {.url = url, .deadline = seconds(5), .decision_clock = &at_start});
    if (!store.ok()) return shared->errors.fetch_add(1), void();
    Engine engine(**store, SystemClock::Instance(), {});
    if (!engine.SetPolicies(Policies(limit)).ok()) shared->errors.fetch_add(1);
    for (int i = 0; i < 4; ++i) {
      const Result<CheckResult> r = engine.Check(ForUser());
      if (r.ok() && r->allowed()) shared->admitted.fetch_add(1);
    }
    (void)!::write(ready[1], "x", 1);
    for (;;) ::pause();  // holding its slots until killed
  });
  // The child's write end only: a child that ends without writing ends the read (0), not a
  // wait forever.
  ::close(ready[1]);
  char c = 0;
  ASSERT_EQ(::read(ready[0], &c, 1), 1) << "the child ended before taking its slots";
  ASSERT_EQ(::kill(pids[0], SIGKILL), 0);
  int status = 0;
  ::waitpid(pids[0], &status, 0);
  ASSERT_EQ(shared->admitted.load(), 4);
  ManualClock clock;  // starts where the child's did
  auto store = MustOpen({.url = url, .decision_clock = &clock});
  Engine engine(*store, SystemClock::Instance(), {});
  ASSERT_TRUE(engine.SetPolicies(Policies(limit)).ok());
  const Result<CheckResult> held = engine.Check(ForUser());
  ASSERT_TRUE(held.ok());
  EXPECT_FALSE(held->allowed()) << "the killed process's slots are still held";
  EXPECT_EQ(held->retry_after, seconds(30));
  clock.Advance(seconds(30) - std::chrono::microseconds(1));
  EXPECT_FALSE(engine.Check(ForUser())->allowed());
  clock.Advance(std::chrono::microseconds(1));
  for (int i = 0; i < 4; ++i) {
    EXPECT_TRUE(engine.Check(ForUser())->allowed()) << i;
  }
  EXPECT_FALSE(engine.Check(ForUser())->allowed());
}

// Two policies keyed by different identities: a request's slots live in two Cluster slots.
std::shared_ptr<const PolicySet> TwoSlotPolicies(const Limit& per_tenant, const Limit& per_user) {
  PolicySpec tenant, user;
  tenant.name = "per-tenant";
  tenant.identity = {"tenant"};
  tenant.limits = {per_tenant};
  user.name = "per-user";
  user.identity = {"user"};
  user.limits = {per_user};
  return *PolicySet::Create({tenant, user}, {});
}

CheckRequest For(std::string tenant) {
  return {.descriptors = {{"tenant", std::move(tenant)}, {"user", "u"}}, .cost = std::nullopt};
}

TEST(Concurrency, OnAClusterThreeProcessesAdmitExactlyTheLimitAcrossTwoSlots) {
  Result<std::unique_ptr<testing::RedisCluster>> cluster = testing::RedisCluster::Start();
  ASSERT_TRUE(cluster.ok()) << cluster.status().ToString();
  Shared* shared = MapShared();
  ASSERT_NE(shared, nullptr);
  const std::string url = (*cluster)->url();
  const Limit per_tenant = *Limit::Create(LimitSpec::Concurrency(6, seconds(60)));
  const Limit per_user = *Limit::Create(LimitSpec::Concurrency(10, seconds(60)));
  const auto policies = TwoSlotPolicies(per_tenant, per_user);
  const std::vector<pid_t> pids = ForkAll(kProcesses, [&](int) {
    auto store =
        RedisClusterStore::Open(SystemClock::Instance(), {.url = url, .deadline = seconds(5)});
    if (!store.ok()) return shared->errors.fetch_add(1), void();
    Engine engine(**store, SystemClock::Instance(), {});
    if (!engine.SetPolicies(policies).ok()) shared->errors.fetch_add(1);
    for (int i = 0; i < 30; ++i) {
      const Result<CheckResult> r = engine.Check(For("t"));
      if (!r.ok()) shared->errors.fetch_add(1);
      if (r.ok() && r->allowed()) shared->admitted.fetch_add(1);
      if (r.ok() && !r->allowed()) shared->refused.fetch_add(1);
    }
  });
  ExpectExitedCleanly(pids);
  EXPECT_EQ(shared->errors.load(), 0);
  EXPECT_EQ(shared->admitted.load(), per_tenant.capacity());
  EXPECT_EQ(shared->refused.load(), kProcesses * 30 - per_tenant.capacity());
  // The user's limit holds exactly the admitted requests' slots: every refused request's user
  // slot, taken in its own Cluster slot before the tenant's refused, was undone.
  auto store =
      RedisClusterStore::Open(SystemClock::Instance(), {.url = url, .deadline = seconds(5)});
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  Engine engine(**store, SystemClock::Instance(), {});
  ASSERT_TRUE(engine.SetPolicies(policies).ok());
  int64_t more = 0;
  for (int i = 0; i < 10; ++i) more += engine.Check(For("other" + std::to_string(i)))->allowed();
  EXPECT_EQ(more, per_user.capacity() - per_tenant.capacity());
}

}  // namespace
}  // namespace caudal
