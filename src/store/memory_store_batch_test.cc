// MemoryStore::DecideEach: the batch form decides exactly as one-entry Decide calls would, at
// one clock reading, and refuses a bad batch before deciding anything.
#include <gtest/gtest.h>

#include <atomic>
#include <string>
#include <vector>

#include "caudal/store/memory_store.h"
#include "support/manual_clock.h"

namespace caudal {
namespace {

using std::chrono::milliseconds;

// Counts wall-clock readings of the clock it wraps.
class CountingClock final : public Clock {
 public:
  explicit CountingClock(const Clock& inner) : inner_(inner) {}
  Nanos Now() const override {
    reads_.fetch_add(1);
    return inner_.Now();
  }
  Nanos Monotonic() const override { return inner_.Monotonic(); }
  int reads() const { return reads_.load(); }

 private:
  const Clock& inner_;
  mutable std::atomic<int> reads_{0};
};

// prefix + number (spelled out: GCC 12 warns falsely on "literal" + std::to_string(..)).
std::string BatchKeyName(std::string_view prefix, int i) {
  std::string s(prefix);
  s += std::to_string(i);
  return s;
}

std::vector<Limit> OneLimitPerAlgorithm() {
  std::vector<Limit> limits;
  for (Algorithm a : kAllAlgorithms) {
    const LimitSpec spec = IsWindowAlgorithm(a) ? LimitSpec::Window(a, 5, milliseconds(700))
                                                : LimitSpec::Bucket(a, 5, {3, milliseconds(700)});
    limits.push_back(*Limit::Create(spec));
  }
  return limits;
}

TEST(MemoryStoreBatchTest, DecidesAsOneEntryDecidesInOrder) {
  ManualClock clock;
  MemoryStore batched(clock, {.max_keys = 2000});
  MemoryStore single(clock, {.max_keys = 2000});
  const std::vector<Limit> limits = OneLimitPerAlgorithm();
  std::vector<std::string> keys;
  for (int i = 0; i < 7; ++i) keys.push_back(BatchKeyName("k", i));
  uint64_t x = 88172645463325252ULL;
  const auto next = [&x](uint64_t n) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return x % n;
  };
  int allowed = 0;
  int denied = 0;
  for (int round = 0; round < 40; ++round) {
    // Batches of 0..70 entries: repeated keys, every algorithm, costs 0..3.
    std::vector<ConsumeEntry> entries(next(71));
    for (ConsumeEntry& e : entries) {
      e = {.key = keys[next(keys.size())],
           .limit = &limits[next(limits.size())],
           .cost = static_cast<int64_t>(next(4))};
    }
    std::vector<Decision> got(entries.size());
    ASSERT_TRUE(batched.DecideEach(entries, got).ok());
    for (size_t i = 0; i < entries.size(); ++i) {
      const Result<DecideResponse> want = single.Decide({.consumes = {&entries[i], 1}});
      ASSERT_TRUE(want.ok());
      EXPECT_EQ(got[i], want->decisions[0]) << "round " << round << " entry " << i;
      (got[i].allowed() ? allowed : denied) += 1;
    }
    clock.Advance(milliseconds(next(400)));
  }
  EXPECT_GT(allowed, 100);  // the trace exercises both outcomes
  EXPECT_GT(denied, 100);
}

TEST(MemoryStoreBatchTest, ReadsTheClockOncePerBatch) {
  ManualClock manual;
  CountingClock clock(manual);
  MemoryStore store(clock);
  const int at_start = clock.reads();
  const Limit limit = OneLimitPerAlgorithm()[0];
  std::vector<std::string> keys;
  for (int i = 0; i < 100; ++i) keys.push_back(BatchKeyName("key", i));
  std::vector<ConsumeEntry> entries;
  for (const std::string& k : keys) entries.push_back({.key = k, .limit = &limit});
  std::vector<Decision> decisions(entries.size());
  ASSERT_TRUE(store.DecideEach(entries, decisions).ok());
  EXPECT_EQ(clock.reads() - at_start, 1);
  ASSERT_TRUE(store.Decide({.consumes = {&entries[0], 1}}).ok());
  EXPECT_EQ(clock.reads() - at_start, 2);  // and once per Decide
}

TEST(MemoryStoreBatchTest, RefusesABadBatchBeforeDecidingAnything) {
  ManualClock clock;
  MemoryStore store(clock);
  const Limit limit = OneLimitPerAlgorithm()[0];
  const std::vector<ConsumeEntry> entries = {{.key = "a", .limit = &limit, .cost = 5},
                                             {.key = "", .limit = &limit}};
  std::vector<Decision> decisions(entries.size());
  EXPECT_EQ(store.DecideEach(entries, decisions).code(), StatusCode::kInvalidArgument);
  std::vector<Decision> one(1);
  EXPECT_EQ(store.DecideEach(entries, one).code(), StatusCode::kInvalidArgument);
  // "a" consumed nothing: its whole capacity is still there.
  const ConsumeEntry peek{.key = "a", .limit = &limit, .cost = 0};
  const Result<DecideResponse> r = store.Decide({.consumes = {&peek, 1}});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->decisions[0].remaining, 5);
  EXPECT_EQ(store.Size(), 0u);
}

}  // namespace
}  // namespace caudal
