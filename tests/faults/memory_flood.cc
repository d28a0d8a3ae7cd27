// memory_flood: a flood of random new keys through a MemoryStore at its default size, and what
// it does to the keys that were there before and to those that come during it.
//
//   memory_flood [flood_keys=5000000] [max_keys=1000000]
//
// For each algorithm, at 100 per day: 1,000 known keys spend their whole limit, then
// `flood_keys` random keys arrive, one request each, 10 µs apart on a manual clock. Every 50,000
// flood keys, every known key is asked again (it must stay refused) and a late key arrives and
// sends 105 requests (it must get exactly 100), then every late key so far is asked again. The
// program prints one row per algorithm and exits 1 if any limit was broken or any flood key
// was refused.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "caudal/store/memory_store.h"
#include "support/manual_clock.h"

namespace caudal {
namespace {

using std::chrono::hours;

struct Row {
  uint64_t flood_refused = 0;  // flood keys not admitted (each sent one request)
  uint64_t known_extra = 0;    // admissions of known keys after they spent their limit
  uint64_t late_short = 0;     // late keys that got less than their limit
  uint64_t late_extra = 0;     // admissions beyond a late key's limit
  uint64_t evictions = 0;
  size_t size = 0;
  double seconds = 0;
};

int64_t Admitted(Store& store, const std::string& key, const Limit& limit, int attempts,
                 uint64_t& errors) {
  int64_t admitted = 0;
  for (int i = 0; i < attempts; ++i) {
    const ConsumeEntry e{.key = key, .limit = &limit, .cost = 1};
    const Result<DecideResponse> r = store.Decide({.consumes = {&e, 1}});
    if (!r.ok()) ++errors;
    admitted += r.ok() && r->allowed;
  }
  return admitted;
}

Row Flood(Algorithm algorithm, size_t flood_keys, size_t max_keys) {
  const Limit limit = IsWindowAlgorithm(algorithm)
                          ? *Limit::Create(LimitSpec::Window(algorithm, 100, hours(24)))
                          : *Limit::Create(LimitSpec::Bucket(algorithm, 100, {100, hours(24)}));
  ManualClock clock;
  MemoryStore store(clock, {.max_keys = max_keys});
  Row row;
  uint64_t errors = 0;
  std::vector<std::string> known;
  for (int k = 0; k < 1000; ++k) {
    known.push_back("known/" + std::to_string(k));
    Admitted(store, known.back(), limit, 100, errors);
  }
  std::vector<std::string> late;
  std::mt19937_64 rng(1);
  std::string key;
  const auto start = std::chrono::steady_clock::now();
  for (size_t i = 1; i <= flood_keys; ++i) {
    clock.Advance(std::chrono::microseconds(10));
    key = "flood/";
    key += std::to_string(rng());
    row.flood_refused += Admitted(store, key, limit, 1, errors) != 1;
    if (i % 50'000 != 0) continue;
    for (const std::string& k : known) row.known_extra += Admitted(store, k, limit, 1, errors);
    late.push_back("late/" + std::to_string(i));
    const int64_t got = Admitted(store, late.back(), limit, 105, errors);
    row.late_short += got < 100;
    row.late_extra += got > 100 ? got - 100 : 0;
    for (const std::string& k : late) row.late_extra += Admitted(store, k, limit, 1, errors);
  }
  row.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  row.evictions = store.evictions();
  row.size = store.Size();
  row.flood_refused += errors;
  return row;
}

int Run(size_t flood_keys, size_t max_keys) {
  std::printf(
      "memory_flood: %zu random keys through MemoryStore{max_keys=%zu}, 100 per day, "
      "1000 known keys at their limit, a late key every 50000\n",
      flood_keys, max_keys);
  std::printf("%-24s %10s %10s %10s %10s %10s %12s %10s %12s\n", "algorithm", "flood_ref", "known+",
              "late_short", "late+", "keys", "evictions", "seconds", "decisions/s");
  bool broken = false;
  for (Algorithm a : {Algorithm::kTokenBucket, Algorithm::kGcra, Algorithm::kFixedWindow,
                      Algorithm::kSlidingWindowCounter, Algorithm::kSlidingWindowLog}) {
    const Row r = Flood(a, flood_keys, max_keys);
    std::printf("%-24s %10llu %10llu %10llu %10llu %10zu %12llu %10.2f %12.0f\n",
                std::string(AlgorithmName(a)).c_str(),
                static_cast<unsigned long long>(r.flood_refused),
                static_cast<unsigned long long>(r.known_extra),
                static_cast<unsigned long long>(r.late_short),
                static_cast<unsigned long long>(r.late_extra), r.size,
                static_cast<unsigned long long>(r.evictions), r.seconds,
                static_cast<double>(flood_keys) / r.seconds);
    broken = broken || r.flood_refused > 0 || r.known_extra > 0 || r.late_short > 0 ||
             r.late_extra > 0 || r.size > max_keys;
  }
  std::printf("%s\n", broken ? "LIMITS BROKEN" : "every limit held");
  return broken ? 1 : 0;
}

}  // namespace
}  // namespace caudal

int main(int argc, char** argv) {
  const size_t flood = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 5'000'000;
  const size_t max_keys = argc > 2 ? std::strtoull(argv[2], nullptr, 10) : 1'000'000;
  if (flood == 0 || max_keys == 0) {
    std::fprintf(stderr, "usage: memory_flood [flood_keys] [max_keys]\n");
    return 2;
  }
  return caudal::Run(flood, max_keys);
}
