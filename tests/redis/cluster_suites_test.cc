// The shared suites on Redis Cluster, one cluster of 3 primaries for the whole binary (CTest runs
// it as one test): the Store conformance suite and the Lua ≡ C++ equivalence replay, both through
// RedisClusterStore deciding at a ManualClock's time.
//
// The suites' keys each get their own hash tag, so multi-key requests span slots and go through
// reserve, then commit or undo; each suite runs a second time with every key in one slot (a key
// prefix holding a hash tag), where each request is one atomic call.
#include <gtest/gtest.h>

#include "caudal/redis/redis_store.h"
#include "common/cat.h"
#include "redis/equivalence_replay.h"
#include "store/batch.h"
#include "support/grouping_store.h"
#include "support/manual_clock.h"
#include "support/redis_cluster.h"
#include "support/store_conformance.h"

namespace caudal {
namespace {

using testing::RedisCluster;

std::unique_ptr<RedisCluster>& ClusterSlot() {
  static std::unique_ptr<RedisCluster> cluster;
  return cluster;
}

RedisCluster* Cluster() {
  std::unique_ptr<RedisCluster>& slot = ClusterSlot();
  if (!slot) {
    Result<std::unique_ptr<RedisCluster>> c = RedisCluster::Start();
    if (!c.ok()) ADD_FAILURE() << c.status().ToString();
    if (c.ok()) slot = std::move(*c);
  }
  return slot.get();
}

class ClusterEnvironment : public ::testing::Environment {
 public:
  void TearDown() override { ClusterSlot().reset(); }
};
const auto* const kEnvironment = ::testing::AddGlobalTestEnvironment(new ClusterEnvironment);

std::unique_ptr<RedisClusterStore> Open(const Clock& clock, std::string key_prefix) {
  // A generous deadline: the suites check decisions, not latency (and run under sanitizers).
  Result<std::unique_ptr<RedisClusterStore>> store = RedisClusterStore::Open(
      SystemClock::Instance(),
      {.url = Cluster() != nullptr ? Cluster()->url() : "redis-cluster://unavailable:1",
       .key_prefix = std::move(key_prefix),
       .deadline = std::chrono::seconds(5),
       .decision_clock = &clock});
  EXPECT_TRUE(store.ok()) << store.status().ToString();
  return store.ok() ? std::move(*store) : nullptr;
}

INSTANTIATE_TEST_SUITE_P(
    RedisCluster, StoreConformanceTest,
    ::testing::Values(
        StoreConformanceParam{.name = "slots_apart",
                              .make = [](ManualClock& c) { return Open(c, "caudal:"); }},
        StoreConformanceParam{.name = "one_slot",
                              .make = [](ManualClock& c) { return Open(c, "caudal:{one}:"); }},
        // The keys of compact algorithms grouped (testing::GroupKeys): groups in slots apart.
        StoreConformanceParam{
            .name = "slots_apart_grouped",
            .make = [](ManualClock& c) { return testing::GroupKeys(Open(c, "caudal:")); }}),
    StoreConformanceParamName);

// Each request decided through the store, in order, at the trace's time: once with every key in
// one slot (each request one atomic call; the traces' time moves back too), once with each key
// its own slot (multi-key requests split, reserve then commit or undo; time moving forward only,
// see lua/undo.lua).
struct EquivalenceParam {
  std::string name;
  std::string key_prefix;
  bool split;
};

class ClusterEquivalence : public ::testing::TestWithParam<EquivalenceParam> {
 protected:
  void SetUp() override {
    store_ = Open(clock_, GetParam().key_prefix);
    ASSERT_NE(store_, nullptr);
  }

  void Replay(uint64_t seed, const std::function<Algorithm(equivalence::Tracer&)>& pick) {
    const bool split = GetParam().split;
    equivalence::Replay(
        seed, pick, equivalence::kDecisionsPerAlgorithm / 2,
        [this](const std::vector<std::vector<EntryRef>>& requests, int64_t now) {
          clock_.Set(std::chrono::microseconds(now));
          std::vector<StoreResponse> out;
          for (const std::vector<EntryRef>& r : requests) {
            Result<StoreResponse> got = DecideBatch(*store_, r);
            EXPECT_TRUE(got.ok()) << got.status().ToString();
            out.push_back(got.ok() ? *got : StoreResponse{});
          }
          return out;
        },
        Cat("eq:", GetParam().name, ':', seed, ':'), /*forward_only=*/split);
    if (split) {
      EXPECT_GT(store_->Stats().split_requests, 0u);
      EXPECT_GT(store_->Stats().undos, 0u);
    } else {
      EXPECT_EQ(store_->Stats().split_requests, 0u);
    }
  }

  ManualClock clock_;
  std::unique_ptr<RedisClusterStore> store_;
};

INSTANTIATE_TEST_SUITE_P(
    RedisCluster, ClusterEquivalence,
    ::testing::Values(EquivalenceParam{.name = "one_slot", .key_prefix = "c:{eq}:", .split = false},
                      EquivalenceParam{.name = "slots_apart", .key_prefix = "c:", .split = true}),
    [](const ::testing::TestParamInfo<EquivalenceParam>& p) { return p.param.name; });

TEST_P(ClusterEquivalence, FixedWindow) {
  Replay(11, [](equivalence::Tracer&) { return Algorithm::kFixedWindow; });
}
TEST_P(ClusterEquivalence, SlidingWindowLog) {
  Replay(12, [](equivalence::Tracer&) { return Algorithm::kSlidingWindowLog; });
}
TEST_P(ClusterEquivalence, SlidingWindowCounter) {
  Replay(13, [](equivalence::Tracer&) { return Algorithm::kSlidingWindowCounter; });
}
TEST_P(ClusterEquivalence, TokenBucket) {
  Replay(14, [](equivalence::Tracer&) { return Algorithm::kTokenBucket; });
}
TEST_P(ClusterEquivalence, Gcra) {
  Replay(15, [](equivalence::Tracer&) { return Algorithm::kGcra; });
}
TEST_P(ClusterEquivalence, RequestsMixingAlgorithms) {
  Replay(16, [](equivalence::Tracer& t) {
    return kAllAlgorithms[static_cast<size_t>(t.Uniform(0, std::ssize(kAllAlgorithms) - 1))];
  });
}

}  // namespace
}  // namespace caudal
