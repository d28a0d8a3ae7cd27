// Decisions per second and bytes per key of the MemoryStore, for each algorithm, against a
// baseline measured in the same run (baseline_token_bucket.h): one thread and two, 1,000 and
// 1,000,000 keys ("user:0000042", 12 bytes, short enough for std::string's inline buffer, so
// the baseline pays no extra allocation per key) chosen uniformly at random per request.
//
// Bytes per key are measured the same way for both: live heap bytes (malloc's usable size plus
// its 8-byte chunk header, counted by the replaced operator new/delete below) added while the
// table is filled with every key, divided by the keys. The store's own MemoryUsage() figure is
// reported beside it.
//
// At the end the program prints one table of ratios, caudal / baseline, from the medians when
// run with --benchmark_repetitions.
#include <benchmark/benchmark.h>
#include <malloc.h>

#include <array>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <new>
#include <set>
#include <string>
#include <vector>

#include "baseline_flat_table.h"
#include "baseline_token_bucket.h"
#include "caudal/store/memory_store.h"

namespace {

std::atomic<bool> g_count_heap{false};
std::atomic<int64_t> g_heap_bytes{0};

int64_t ChunkBytes(void* p) { return static_cast<int64_t>(malloc_usable_size(p) + 8); }

void Release(void* p) {
  if (p != nullptr && g_count_heap.load(std::memory_order_relaxed)) {
    g_heap_bytes.fetch_sub(ChunkBytes(p));
  }
  std::free(p);
}

__extension__ using Uint128 = unsigned __int128;

}  // namespace

void* operator new(size_t n) {
  void* p = std::malloc(n == 0 ? 1 : n);
  if (p == nullptr) throw std::bad_alloc();
  if (g_count_heap.load(std::memory_order_relaxed)) g_heap_bytes.fetch_add(ChunkBytes(p));
  return p;
}
void operator delete(void* p) noexcept { Release(p); }
void operator delete(void* p, size_t) noexcept { Release(p); }

namespace caudal::bench {
namespace {

constexpr size_t kSmallKeys = 1'000;
constexpr size_t kLargeKeys = 1'000'000;
// Every limit: 100 per hour, so that no key's state turns fresh (and is reclaimed) during the
// run and the table really holds every key: bytes per key are measured at that size.
constexpr int64_t kCapacity = 100;
constexpr std::chrono::hours kPeriod{1};

const std::vector<std::string>& Keys() {
  static const std::vector<std::string> keys = [] {
    std::vector<std::string> k(kLargeKeys);
    char buf[32];
    for (size_t i = 0; i < k.size(); ++i) {
      std::snprintf(buf, sizeof buf, "user:%07zu", i);
      k[i] = buf;
    }
    return k;
  }();
  return keys;
}

const Limit& LimitFor(Algorithm a) {
  static const std::map<Algorithm, Limit> limits = [] {
    std::map<Algorithm, Limit> m;
    for (Algorithm x : kAllAlgorithms) {
      const LimitSpec spec = IsWindowAlgorithm(x)
                                 ? LimitSpec::Window(x, kCapacity, kPeriod)
                                 : LimitSpec::Bucket(x, kCapacity, {kCapacity, kPeriod});
      m.emplace(x, *Limit::Create(spec));
    }
    return m;
  }();
  return limits.at(a);
}

// A per-thread xorshift generator: a uniform key index in a few instructions. It works one key
// ahead and prefetches that key's string, as a server would hold a key it has just parsed in
// cache: otherwise both sides would mostly measure the miss on this 32 MB array of strings.
class KeyPicker {
 public:
  KeyPicker(uint64_t seed, size_t n) : x_(seed * 0x9e3779b97f4a7c15ULL + 1), n_(n) {
    next_ = &Keys()[Draw()];
  }
  const std::string& Next() {
    const std::string* current = next_;
    next_ = &Keys()[Draw()];
    __builtin_prefetch(next_);
    return *current;
  }

 private:
  size_t Draw() {
    x_ ^= x_ << 13;
    x_ ^= x_ >> 7;
    x_ ^= x_ << 17;
    return static_cast<size_t>((static_cast<Uint128>(x_) * n_) >> 64);
  }
  uint64_t x_;
  size_t n_;
  const std::string* next_;
};

// The tables under test, built and filled once per (kind, keys) and kept for the whole run, so
// that repetitions can be interleaved (--benchmark_enable_random_interleaving) without
// refilling: the first thread to ask builds one while the others wait.
struct Prepared {
  std::unique_ptr<MemoryStore> store;
  std::unique_ptr<BaselineTokenBucket> baseline;
  std::unique_ptr<BaselineFlatTable> flat;
  double heap_bytes_per_key = 0;
  double reported_bytes_per_key = 0;
};

constexpr int kBaselineKind = -1;
constexpr int kFlatKind = -2;

const Prepared& Prepare(int kind, size_t keys) {  // kind: an Algorithm, or a k*Kind above
  static std::mutex mu;
  static std::map<std::pair<int, size_t>, Prepared> prepared;
  std::lock_guard<std::mutex> lock(mu);
  const auto found = prepared.find({kind, keys});
  if (found != prepared.end()) return found->second;
  Prepared p;
  const Clock& clock = SystemClock::Instance();
  Keys();  // built before counting: both sides are fed the same strings
  g_heap_bytes = 0;
  g_count_heap = true;
  if (kind == kFlatKind) {
    p.flat = std::make_unique<BaselineFlatTable>(
        keys, kCapacity, static_cast<double>(kCapacity) / std::chrono::seconds(kPeriod).count());
    for (size_t i = 0; i < keys; ++i) p.flat->Allow(Keys()[i], clock.Now().count());
  } else if (kind == kBaselineKind) {
    p.baseline = std::make_unique<BaselineTokenBucket>(
        kCapacity, static_cast<double>(kCapacity) / std::chrono::seconds(kPeriod).count());
    for (size_t i = 0; i < keys; ++i) p.baseline->Allow(Keys()[i], clock.Now().count());
  } else {
    // Sized like a deployment would be: room for a million keys plus the 5% margin that uneven
    // shards need (the fullest of 64 shards holds about 2.6% more than the mean).
    p.store = std::make_unique<MemoryStore>(clock, MemoryStoreOptions{.max_keys = 1'050'000});
    const Limit& limit = LimitFor(static_cast<Algorithm>(kind));
    for (size_t i = 0; i < keys; ++i) {
      const ConsumeEntry e{.key = Keys()[i], .limit = &limit, .cost = 1};
      if (!p.store->Decide({.consumes = {&e, 1}}).ok()) std::abort();
    }
    if (p.store->Size() != keys) std::abort();  // every key resident, none reclaimed
    p.reported_bytes_per_key = static_cast<double>(p.store->MemoryUsage()) / keys;
  }
  g_count_heap = false;
  p.heap_bytes_per_key = static_cast<double>(g_heap_bytes.load()) / static_cast<double>(keys);
  return prepared.emplace(std::make_pair(kind, keys), std::move(p)).first->second;
}

void SetCounters(benchmark::State& state, const Prepared& p, int64_t allowed) {
  state.SetItemsProcessed(state.iterations());
  using C = benchmark::Counter;
  state.counters["heap_bytes_per_key"] = C(p.heap_bytes_per_key, C::kAvgThreads);
  if (p.store) state.counters["store_bytes_per_key"] = C(p.reported_bytes_per_key, C::kAvgThreads);
  state.counters["allowed_fraction"] = C(
      static_cast<double>(allowed) / static_cast<double>(std::max<int64_t>(state.iterations(), 1)),
      C::kAvgThreads);
}

void BM_Caudal(benchmark::State& state, Algorithm a, size_t keys) {
  const Prepared& p = Prepare(static_cast<int>(a), keys);
  const Limit& limit = LimitFor(a);
  KeyPicker picker(static_cast<uint64_t>(state.thread_index()) + 1, keys);
  int64_t allowed = 0;
  for (auto _ : state) {
    const ConsumeEntry e{.key = picker.Next(), .limit = &limit, .cost = 1};
    Result<DecideResponse> r = p.store->Decide({.consumes = {&e, 1}});
    allowed += r.ok() && r->allowed;
    benchmark::DoNotOptimize(r);
  }
  SetCounters(state, p, allowed);
}

// The same decisions through DecideEach, kBatch at a time (one clock reading and no allocation
// per batch), as an event loop holding a turn's worth of requests would call it.
constexpr size_t kBatch = 64;

void BM_CaudalBatch(benchmark::State& state, Algorithm a, size_t keys) {
  const Prepared& p = Prepare(static_cast<int>(a), keys);
  const Limit& limit = LimitFor(a);
  KeyPicker picker(static_cast<uint64_t>(state.thread_index()) + 1, keys);
  std::array<ConsumeEntry, kBatch> entries;
  std::array<Decision, kBatch> decisions;
  int64_t allowed = 0;
  for (auto _ : state) {
    for (ConsumeEntry& e : entries) e = {.key = picker.Next(), .limit = &limit, .cost = 1};
    if (!p.store->DecideEach(entries, decisions).ok()) std::abort();
    for (const Decision& d : decisions) allowed += d.allowed();
  }
  SetCounters(state, p, allowed / static_cast<int64_t>(kBatch));  // the fraction of decisions
  state.SetItemsProcessed(state.iterations() * static_cast<int64_t>(kBatch));
}

void BM_Flat(benchmark::State& state, size_t keys) {
  const Prepared& p = Prepare(kFlatKind, keys);
  const Clock& clock = SystemClock::Instance();
  KeyPicker picker(static_cast<uint64_t>(state.thread_index()) + 1, keys);
  int64_t allowed = 0;
  for (auto _ : state) {
    allowed += p.flat->Allow(picker.Next(), clock.Now().count());
  }
  SetCounters(state, p, allowed);
}

void BM_Baseline(benchmark::State& state, size_t keys) {
  const Prepared& p = Prepare(kBaselineKind, keys);
  const Clock& clock = SystemClock::Instance();
  KeyPicker picker(static_cast<uint64_t>(state.thread_index()) + 1, keys);
  int64_t allowed = 0;
  for (auto _ : state) {
    allowed += p.baseline->Allow(picker.Next(), clock.Now().count());
  }
  SetCounters(state, p, allowed);
}

// Prints as usual and keeps each run's figures for the ratio table.
class RatioReporter : public benchmark::ConsoleReporter {
 public:
  struct Figures {
    double per_second = 0;
    double heap_bytes_per_key = 0;
  };

  void ReportRuns(const std::vector<Run>& runs) override {
    ConsoleReporter::ReportRuns(runs);
    for (const Run& r : runs) {
      if (r.error_occurred) continue;
      const bool median = r.run_type == Run::RT_Aggregate && r.aggregate_name == "median";
      if (r.run_type == Run::RT_Aggregate && !median) continue;
      const auto key = std::make_pair(r.run_name.function_name, r.threads);
      if (!median && medians_.count(key) > 0) continue;
      if (median) medians_.insert(key);
      auto get = [&](const char* name) {
        const auto it = r.counters.find(name);
        return it == r.counters.end() ? 0.0 : static_cast<double>(it->second);
      };
      figures_[key] = {get("items_per_second"), get("heap_bytes_per_key")};
    }
  }

  void PrintRatios() const {
    std::printf("\ncaudal MemoryStore vs baseline (unordered_map + one mutex), same run%s\n",
                medians_.empty() ? "" : ", medians");
    std::printf("%-9s %-7s %-24s %14s %14s %7s %10s %10s %7s\n", "keys", "threads", "algorithm",
                "decisions/s", "baseline/s", "ratio", "bytes/key", "baseline", "ratio");
    for (size_t keys : {kSmallKeys, kLargeKeys}) {
      for (int64_t threads : {1, 2}) {
        const auto base = figures_.find({"baseline/keys:" + std::to_string(keys), threads});
        if (base == figures_.end()) continue;
        for (Algorithm a : kAllAlgorithms) {
          const auto it = figures_.find(
              {"caudal/" + std::string(AlgorithmName(a)) + "/keys:" + std::to_string(keys),
               threads});
          if (it == figures_.end()) continue;
          const Figures& c = it->second;
          const Figures& b = base->second;
          std::printf("%-9zu %-7lld %-24s %14.0f %14.0f %6.2fx %10.1f %10.1f %6.2fx\n", keys,
                      static_cast<long long>(threads), std::string(AlgorithmName(a)).c_str(),
                      c.per_second, b.per_second, c.per_second / b.per_second, c.heap_bytes_per_key,
                      b.heap_bytes_per_key, c.heap_bytes_per_key / b.heap_bytes_per_key);
        }
      }
    }
  }

 private:
  std::map<std::pair<std::string, int64_t>, Figures> figures_;
  std::set<std::pair<std::string, int64_t>> medians_;
};

void RegisterAll() {
  for (size_t keys : {kSmallKeys, kLargeKeys}) {
    const std::string suffix = "/keys:" + std::to_string(keys);
    benchmark::RegisterBenchmark(("baseline" + suffix).c_str(), BM_Baseline, keys)
        ->Threads(1)
        ->Threads(2)
        ->UseRealTime();
    benchmark::RegisterBenchmark(("flat_table" + suffix).c_str(), BM_Flat, keys)
        ->Threads(1)
        ->Threads(2)
        ->UseRealTime();
    for (Algorithm a : kAllAlgorithms) {
      const std::string name = "caudal/" + std::string(AlgorithmName(a)) + suffix;
      benchmark::RegisterBenchmark(name.c_str(), BM_Caudal, a, keys)
          ->Threads(1)
          ->Threads(2)
          ->UseRealTime();
      benchmark::RegisterBenchmark(
          ("caudal_batch/" + std::string(AlgorithmName(a)) + suffix).c_str(), BM_CaudalBatch, a,
          keys)
          ->Threads(1)
          ->Threads(2)
          ->UseRealTime();
    }
  }
}

}  // namespace
}  // namespace caudal::bench

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  caudal::bench::RegisterAll();
  caudal::bench::RatioReporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  reporter.PrintRatios();
  benchmark::Shutdown();
  return 0;
}
