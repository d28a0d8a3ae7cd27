// Decisions per second and latency through a Redis-backed store, closed loop: `threads` caller
// threads each keep in_flight/threads decisions outstanding (DecideAsync; the callback frees a
// slot).
//
//   redis_load --url redis://127.0.0.1:6379 [--seconds 5] [--in-flight 64] [--threads 2]
//               [--keys 10000] [--connections 2] [--calls-in-flight N] [--entries 1]
//               [--same-slot 0|1] [--max-batch N] [--keys-dist uniform|zipf:S] [--lease TTL]
//               [--algorithm token_bucket|fixed_window] [--charge 0|1] [--native 0|1]
//               [--grouped 0|1] [--cost-spread N] [--spread-first 0|1] [--capacity N]
//               [--refill N]
//
// The URL picks the store: redis:// (RedisStore), redis-cluster:// (RedisClusterStore),
// redis-sentinel:// (RedisSentinelStore). Every decision is a token_bucket request that passes
// (capacity and rate 10^9/s over `keys` keys). With --entries N a request carries N such entries on
// N keys: keys of one hash tag with --same-slot 1 (one slot, one call), otherwise N slots (a
// cluster splits the request). With --max-batch 1 every request is a script call of its own,
// pipelined
// (--calls-in-flight per connection): one EVALSHA per decision, as a client that does not batch
// sends them. --keys-dist zipf:1.1 draws each request's key from a Zipf distribution of exponent
// S over the keys (a few keys carry most requests, as a real API's tenants do; default uniform:
// the keys in turn). --lease TTL (250ms, 1s) decides through a LeaseStore (leases of up to TTL, a
// tenth of the capacity at most) above the store, as `store.lease` does. --algorithm fixed_window
// decides windows of a minute instead (limit 10^9), and --charge 1 counts each hit whatever the
// verdict (ChargeEntry), as a `consume_each` Envoy domain counts; --native 1 makes them
// native counts (store.h), as the engine sends a consume_each domain's. --grouped 1 makes a
// request's N entries members of one group (grouped keys, store.h: one value in Redis), as the
// engine keys the limits of a policy counting several dimensions. --cost-spread N makes every
// entry but a request's first cost a number drawn uniformly from [1, N], as an AI gateway's
// requests spend tokens and money (the first, its request count, costs 1); by default every entry
// costs 1; with --spread-first 1 the first is drawn too, as a limit counting tokens alone is
// charged. --capacity N makes each limit N (a bucket refilling N a second, a window of N a minute)
// instead of 10^9: a small N puts the stream above its limits, most requests refused. --refill N
// makes a bucket refill N a second instead of its capacity: with the default capacity and a small
// N, every request still passes, but a bucket is no longer full again by its key's next request,
// so its state is kept (read, decided and written) rather than expired and started afresh, as a
// key below its limit is in production. Prints one line:
//   in_flight=64 threads=2 decisions_per_s=... p50_ms=... p99_ms=... p999_ms=...
//   requests_per_call=... errors=... split=... undos=... moved=... asked=... not_served=...
//   decisions_total=...
// (decisions_total counts the warm-up too: what the servers saw, for their CPU per decision).
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <random>
#include <semaphore>
#include <string>
#include <thread>
#include <vector>

#include "caudal/common/clock.h"
#include "caudal/redis/redis_store.h"
#include "decorators/lease_store.h"
#include "key_stream.h"

namespace caudal {
namespace {

using SteadyClock = std::chrono::steady_clock;

// Each limit's capacity by default: every request passes.
constexpr int64_t kPassing = 1'000'000'000;

struct Args {
  std::string url = "redis://127.0.0.1:6379";
  double seconds = 5;
  int in_flight = 64;
  int threads = 2;
  int keys = 10'000;
  int connections = 2;
  int calls_in_flight = 0;  // 0: the store's default
  int entries = 1;
  int same_slot = 0;
  int max_batch = 0;          // 0: the store's default; 1: one script call per request
  double zipf = 0;            // the Zipf exponent of --keys-dist zipf:S; 0: uniform
  int lease_ms = 0;           // --lease: 0, none
  bool fixed_window = false;  // --algorithm fixed_window (a window of a minute)
  bool charge = false;        // --charge 1: counted whatever the verdict, as consume_each counts
  bool native = false;        // --native 1: charges as native counts (store.h), as the engine sends
  bool grouped = false;       // --grouped 1: a request's entries members of one group
  int64_t cost_spread = 1;    // --cost-spread N: entries after the first cost [1, N]
  bool spread_first = false;  // --spread-first 1: the first entry's cost drawn too
  int64_t capacity = kPassing;  // --capacity N: each limit's
  int64_t refill = 0;           // --refill N: a bucket's refill a second (0: its capacity)
  bool module = true;           // --module 0: never the caudal module (RedisStoreOptions)
};

bool Parse(int argc, char** argv, Args& a) {
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    const char* v = argv[i + 1];
    if (flag == "--url")
      a.url = v;
    else if (flag == "--seconds")
      a.seconds = std::atof(v);
    else if (flag == "--in-flight")
      a.in_flight = std::atoi(v);
    else if (flag == "--threads")
      a.threads = std::atoi(v);
    else if (flag == "--keys")
      a.keys = std::atoi(v);
    else if (flag == "--connections")
      a.connections = std::atoi(v);
    else if (flag == "--calls-in-flight")
      a.calls_in_flight = std::atoi(v);
    else if (flag == "--entries")
      a.entries = std::atoi(v);
    else if (flag == "--same-slot")
      a.same_slot = std::atoi(v);
    else if (flag == "--max-batch")
      a.max_batch = std::atoi(v);
    else if (flag == "--keys-dist" && std::strcmp(v, "uniform") == 0)
      a.zipf = 0;
    else if (flag == "--keys-dist" && std::strncmp(v, "zipf:", 5) == 0 && std::atof(v + 5) > 0)
      a.zipf = std::atof(v + 5);
    else if (flag == "--algorithm" && std::strcmp(v, "token_bucket") == 0)
      a.fixed_window = false;
    else if (flag == "--algorithm" && std::strcmp(v, "fixed_window") == 0)
      a.fixed_window = true;
    else if (flag == "--charge")
      a.charge = std::atoi(v) != 0;
    else if (flag == "--native")
      a.native = std::atoi(v) != 0;
    else if (flag == "--module")
      a.module = std::atoi(v) != 0;
    else if (flag == "--grouped")
      a.grouped = std::atoi(v) != 0;
    else if (flag == "--cost-spread")
      a.cost_spread = std::atoll(v);
    else if (flag == "--spread-first")
      a.spread_first = std::atoi(v) != 0;
    else if (flag == "--capacity")
      a.capacity = std::atoll(v);
    else if (flag == "--refill")
      a.refill = std::atoll(v);
    else if (flag == "--lease") {
      auto ttl = ParseDuration(v);  // as store.lease.ttl is spelled
      if (!ttl.ok() || ttl->count() < 1000) return false;
      a.lease_ms = static_cast<int>(ttl->count() / 1000);
    } else
      return false;
  }
  return argc % 2 == 1 && a.seconds > 0 && a.threads > 0 && a.in_flight >= a.threads &&
         a.keys > 0 && a.connections > 0 && a.entries >= 1 && a.entries <= 64 && a.max_batch >= 0 &&
         a.lease_ms >= 0 && (!a.charge || a.fixed_window) && (!a.native || a.charge) &&
         (!a.grouped || !a.native) && a.cost_spread >= 1 && a.cost_spread <= 1'000'000 &&
         a.capacity >= 1 && a.capacity <= kPassing && a.refill >= 0 && a.refill <= kPassing &&
         (a.refill == 0 || !a.fixed_window);
}

// The store the URL names, and its counters.
struct Opened {
  std::unique_ptr<Store> store;
  std::function<RedisStoreStats()> stats;
};

Result<Opened> Open(RedisStoreOptions options) {
  const std::string url = options.url;
  auto wrap = [](auto store) -> Result<Opened> {
    if (!store.ok()) return store.status();
    auto* raw = store->get();
    return Opened{.store = std::move(*store), .stats = [raw] { return raw->Stats(); }};
  };
  if (url.starts_with("redis-cluster://")) {
    return wrap(RedisClusterStore::Open(SystemClock::Instance(), std::move(options)));
  }
  if (url.starts_with("redis-sentinel://"))
    return wrap(RedisSentinelStore::Open(SystemClock::Instance(), std::move(options)));
  return wrap(RedisStore::Open(SystemClock::Instance(), std::move(options)));
}

double Percentile(std::vector<int64_t>& v, double p) {
  if (v.empty()) return 0;
  const size_t i = std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size())));
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(i), v.end());
  return static_cast<double>(v[i]) / 1000.0;  // µs -> ms
}

int Run(const Args& a) {
  const Limit limit = a.fixed_window
                          ? *Limit::Create(LimitSpec::Window(Algorithm::kFixedWindow, a.capacity,
                                                             std::chrono::minutes(1)))
                          : *Limit::Create(LimitSpec::Bucket(
                                Algorithm::kTokenBucket, a.capacity,
                                {a.refill > 0 ? a.refill : a.capacity, std::chrono::seconds(1)}));
  // keys[i * entries + j]: entry j of request key i (one hash tag per request with --same-slot).
  std::vector<std::string> keys;
  for (int i = 0; i < a.keys; ++i) {
    for (int j = 0; j < a.entries; ++j) {
      const std::string n = std::to_string(i);
      if (a.grouped) {
        keys.push_back("#" + std::to_string(j) + "#bench:{" + n + "}");
      } else {
        keys.push_back(a.same_slot != 0 ? "{bench:" + n + "}:" + std::to_string(j)
                                        : "bench:" + n + ":" + std::to_string(j));
      }
    }
  }

  std::atomic<bool> measuring{false};
  std::atomic<int64_t> errors{0};
  std::atomic<int64_t> refused{0};  // with --capacity, the requests refused
  std::atomic<int64_t> answered{0};
  // Written by callbacks: on the io thread, or inline on the caller's (a LeaseStore's answers).
  struct Latencies {
    std::mutex mu;
    std::vector<int64_t> us;  // guarded by mu
  };
  std::vector<Latencies> latencies(static_cast<size_t>(a.threads));
  const auto warmup = std::chrono::milliseconds(500);
  const auto measure =
      std::chrono::duration_cast<SteadyClock::duration>(std::chrono::duration<double>(a.seconds));
  const auto start = SteadyClock::now();
  const auto measure_from = start + warmup;
  const auto until = measure_from + measure;
  std::atomic<uint64_t> calls_at_start{0}, requests_at_start{0};
  // Declared before the store, so they outlive it: its destructor joins the callback thread.
  std::vector<std::unique_ptr<std::counting_semaphore<1 << 20>>> slots;
  for (int t = 0; t < a.threads; ++t) {
    const int window = a.in_flight / a.threads + (t < a.in_flight % a.threads ? 1 : 0);
    slots.push_back(std::make_unique<std::counting_semaphore<1 << 20>>(window));
  }
  RedisStoreOptions options{.url = a.url,
                            .deadline = std::chrono::seconds(1),
                            .connections = static_cast<size_t>(a.connections),
                            .module = a.module};
  if (a.calls_in_flight > 0) {  // per connection, whatever the store (a cluster's primaries too)
    options.max_calls_in_flight = static_cast<size_t>(a.calls_in_flight);
    options.cluster_calls_in_flight = static_cast<size_t>(a.calls_in_flight);
  }
  if (a.max_batch > 0) options.max_batch = static_cast<size_t>(a.max_batch);
  Result<Opened> opened = Open(options);
  if (!opened.ok()) {
    std::fprintf(stderr, "redis_load: %s\n", opened.status().ToString().c_str());
    return 1;
  }
  Store* store = opened->store.get();
  std::unique_ptr<LeaseStore> leases;
  if (a.lease_ms > 0) {
    leases = std::make_unique<LeaseStore>(
        *store, SystemClock::Instance(),
        LeaseStoreOptions{.ttl = std::chrono::milliseconds(a.lease_ms),
                          .return_interval = std::chrono::milliseconds(50)});
    store = leases.get();
  }
  std::vector<std::thread> threads;
  for (int t = 0; t < a.threads; ++t) {
    threads.emplace_back([&, t] {
      const int window = a.in_flight / a.threads + (t < a.in_flight % a.threads ? 1 : 0);
      std::counting_semaphore<1 << 20>& free_slots = *slots[t];
      bench::KeyStream stream(a.keys, a.zipf, static_cast<uint64_t>(t) + 1,
                              static_cast<uint64_t>(t) * 7919);
      std::mt19937_64 costs(static_cast<uint64_t>(t) + 17);
      std::uniform_int_distribution<int64_t> spread(1, a.cost_spread);
      while (SteadyClock::now() < until) {
        free_slots.acquire();
        std::vector<ConsumeEntry> consumes;
        std::vector<ChargeEntry> charges;
        const size_t key = stream.Next();
        const size_t first = key * static_cast<size_t>(a.entries);
        for (int j = 0; j < a.entries; ++j) {
          const std::string_view k = keys[first + static_cast<size_t>(j)];
          const int64_t cost =
              (j == 0 && !a.spread_first) || a.cost_spread == 1 ? 1 : spread(costs);
          if (a.charge) {
            charges.push_back({.key = k, .limit = &limit, .cost = cost, .native = a.native});
          } else {
            consumes.push_back({.key = k, .limit = &limit, .cost = cost});
          }
        }
        const auto issued = SteadyClock::now();
        store->DecideAsync(
            {.consumes = consumes, .charges = charges}, [&, t, issued](Result<DecideResponse> r) {
              answered.fetch_add(1, std::memory_order_relaxed);
              if (issued >= measure_from && issued < until) {
                // Above its limits (--capacity) a refusal is counted; otherwise every request
                // passes, and a refusal is an error.
                if (!r.ok() || (!r->allowed && a.capacity == kPassing)) {
                  errors.fetch_add(1);
                } else if (!r->allowed) {
                  refused.fetch_add(1, std::memory_order_relaxed);
                }
                const int64_t us = std::chrono::duration_cast<std::chrono::microseconds>(
                                       SteadyClock::now() - issued)
                                       .count();
                std::lock_guard lock(latencies[static_cast<size_t>(t)].mu);
                latencies[static_cast<size_t>(t)].us.push_back(us);
              }
              free_slots.release();
            });
        if (!measuring.load() && SteadyClock::now() >= measure_from && t == 0) {
          measuring.store(true);
          const RedisStoreStats s = opened->stats();
          calls_at_start.store(s.calls);
          requests_at_start.store(s.requests);
        }
      }
      for (int k = 0; k < window; ++k) free_slots.acquire();  // drain: every callback has run
    });
  }
  for (std::thread& t : threads) t.join();
  const RedisStoreStats s = opened->stats();

  std::vector<int64_t> all;
  for (Latencies& v : latencies) all.insert(all.end(), v.us.begin(), v.us.end());
  const double secs = std::chrono::duration<double>(measure).count();
  const double calls = static_cast<double>(s.calls - calls_at_start.load());
  const double requests = static_cast<double>(s.requests - requests_at_start.load());
  std::printf(
      "in_flight=%d threads=%d decisions_per_s=%.0f p50_ms=%.3f p99_ms=%.3f p999_ms=%.3f "
      "requests_per_call=%.1f errors=%lld refused=%lld split=%llu undos=%llu moved=%llu asked=%llu "
      "not_served=%llu decisions_total=%lld from_leases=%llu\n",
      a.in_flight, a.threads, static_cast<double>(all.size()) / secs, Percentile(all, 0.50),
      Percentile(all, 0.99), Percentile(all, 0.999), calls > 0 ? requests / calls : 0.0,
      static_cast<long long>(errors.load()), static_cast<long long>(refused.load()),
      static_cast<unsigned long long>(s.split_requests), static_cast<unsigned long long>(s.undos),
      static_cast<unsigned long long>(s.moved), static_cast<unsigned long long>(s.asked),
      static_cast<unsigned long long>(s.not_served), static_cast<long long>(answered.load()),
      static_cast<unsigned long long>(leases != nullptr ? leases->counters().local : 0));
  return errors.load() == 0 ? 0 : 1;
}

}  // namespace
}  // namespace caudal

int main(int argc, char** argv) {
  caudal::Args args;
  if (!caudal::Parse(argc, argv, args)) {
    std::fprintf(
        stderr,
        "usage: redis_load --url URL [--seconds S] [--in-flight N] [--threads T] "
        "[--keys K] [--connections C] [--calls-in-flight N] [--entries E] [--max-batch N] "
        "[--same-slot 0|1] [--keys-dist uniform|zipf:S] [--lease TTL] "
        "[--algorithm token_bucket|fixed_window] [--charge 0|1] [--native 0|1] [--grouped 0|1] "
        "[--cost-spread N] [--spread-first 0|1] [--capacity N] [--refill N] [--module 0|1]\n");
    return 2;
  }
  return caudal::Run(args);
}
