// A program outside caudal's tree, built against the installed package: a token bucket of 2
// refilled at 1 per hour, asked three times at once on the memory store and, given a Redis URL,
// on that Redis.
#include <caudal/algorithms/limit.h>
#include <caudal/common/clock.h>
#include <caudal/redis/redis_store.h>
#include <caudal/store/memory_store.h>

#include <chrono>
#include <cstdio>
#include <memory>
#include <string>

namespace {

// The memory store's time stands still: its answers do not depend on how fast the program runs.
// Redis decides at its own TIME.
class StillClock final : public caudal::Clock {
 public:
  caudal::Nanos Now() const override { return std::chrono::hours(24 * 365 * 50); }
  caudal::Nanos Monotonic() const override { return caudal::Nanos(0); }
};

// Three requests of one unit on `store`: two allowed, then one refused for an hour (in whole
// seconds, rounded up: Redis decides on its own clock, which moves while the program runs).
bool AskThrice(caudal::Store& store, const caudal::Limit& limit) {
  for (int i = 0; i < 3; ++i) {
    const caudal::ConsumeEntry entry{.key = "user:42", .limit = &limit, .cost = 1};
    const caudal::Result<caudal::DecideResponse> r = store.Decide({.consumes = {&entry, 1}});
    if (!r.ok()) {
      std::fprintf(stderr, "%s\n", r.status().ToString().c_str());
      return false;
    }
    const caudal::Decision& d = r->decisions[0];
    const long long retry_after_s = (d.retry_after.count() + 999'999) / 1'000'000;
    std::printf("%s %s %s remaining=%lld retry_after_s=%lld\n", std::string(store.Name()).c_str(),
                std::string(caudal::AlgorithmName(limit.algorithm())).c_str(),
                std::string(caudal::VerdictName(d.verdict)).c_str(),
                static_cast<long long>(d.remaining), retry_after_s);
  }
  return true;
}

}  // namespace

// consumer [redis://host:port]
int main(int argc, char** argv) {
  const StillClock clock;
  const caudal::Result<caudal::Limit> limit = caudal::Limit::Create(caudal::LimitSpec::Bucket(
      caudal::Algorithm::kTokenBucket, 2, {.count = 1, .period = std::chrono::hours(1)}));
  if (!limit.ok()) {
    std::fprintf(stderr, "%s\n", limit.status().ToString().c_str());
    return 1;
  }
  caudal::MemoryStore memory(clock);
  if (!AskThrice(memory, *limit)) return 1;
  if (argc > 1) {
    caudal::Result<std::unique_ptr<caudal::RedisStore>> redis =
        caudal::RedisStore::Open(caudal::SystemClock::Instance(),
                                 // A loaded test machine: a deadline no answer misses.
                                 {.url = argv[1], .deadline = std::chrono::seconds(5)});
    if (!redis.ok()) {
      std::fprintf(stderr, "%s\n", redis.status().ToString().c_str());
      return 1;
    }
    if (!AskThrice(**redis, *limit)) return 1;
  }
  return 0;
}
