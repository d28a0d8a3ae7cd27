// A program outside caudal's tree, built against the installed package: a token bucket of 2
// refilled at 1 per hour, on the memory store, asked three times at one instant.
#include <algorithms/algorithm.h>
#include <caudal/algorithms/limit.h>
#include <caudal/common/clock.h>
#include <caudal/store/memory_store.h>

#include <chrono>
#include <cstdio>
#include <string>

namespace {

// Time stands still: the answers do not depend on how fast the program runs.
class StillClock final : public caudal::Clock {
 public:
  caudal::Nanos Now() const override { return std::chrono::hours(24 * 365 * 50); }
  caudal::Nanos Monotonic() const override { return caudal::Nanos(0); }
};

}  // namespace

int main() {
  const StillClock clock;
  caudal::MemoryStore store(clock);
  const caudal::Result<caudal::Limit> limit = caudal::Limit::Create(caudal::LimitSpec::Bucket(
      caudal::Algorithm::kTokenBucket, 2, {.count = 1, .period = std::chrono::hours(1)}));
  if (!limit.ok()) {
    std::fprintf(stderr, "%s\n", limit.status().ToString().c_str());
    return 1;
  }
  for (int i = 0; i < 3; ++i) {
    const caudal::EntryRef entry{.key = "user:42", .limit = &*limit, .cost = 1};
    const caudal::Result<caudal::StoreResponse> r = store.Decide({&entry, 1});
    if (!r.ok()) {
      std::fprintf(stderr, "%s\n", r.status().ToString().c_str());
      return 1;
    }
    const caudal::Decision& d = r->decisions[0];
    std::printf("%s %s remaining=%lld retry_after_us=%lld\n",
                std::string(caudal::AlgorithmName(limit->algorithm())).c_str(),
                std::string(caudal::VerdictName(d.verdict)).c_str(),
                static_cast<long long>(d.remaining), static_cast<long long>(d.retry_after.count()));
  }
  return 0;
}
