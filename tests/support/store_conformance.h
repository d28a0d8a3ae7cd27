// The conformance suite every Store passes: the same tests, written against the Store interface
// only, for the memory store, the Redis store and any later one.
//
// A store's test file instantiates it with a factory that builds a store whose notion of "now"
// comes from the given ManualClock (the Redis store uses its test clock override for this):
//
//   INSTANTIATE_TEST_SUITE_P(Memory, StoreConformanceTest,
//       ::testing::Values(StoreConformanceParam{
//           .name = "memory",
//           .make = [](ManualClock& c) { return std::make_unique<MemoryStore>(c); }}),
//       StoreConformanceParamName);
//
// and links `caudal::store_conformance`. The tests never sleep: time moves only through the
// ManualClock. Every key a test uses is prefixed with a per-test random tag (Key()), so stores
// that persist state (a shared Redis) see fresh keys on every run.
//
// The suite checks each algorithm's decisions through the store against the pure algorithms
// (store_reference_model.h), all-or-nothing across several limits, peeks, never-fits, request
// validation, time moving forwards and backwards, and concurrent use (the admitted total never
// exceeds the bound).
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "caudal/common/clock.h"
#include "caudal/store/store.h"
#include "store/batch.h"
#include "support/manual_clock.h"

namespace caudal {

// The algorithms that lease (SupportsLease), and so take shares.
inline constexpr Algorithm kLeasing[] = {Algorithm::kTokenBucket, Algorithm::kGcra,
                                         Algorithm::kFixedWindow};

using StoreFactory = std::function<std::unique_ptr<Store>(ManualClock& clock)>;

struct StoreConformanceParam {
  std::string name;  // a valid gtest name part: letters, digits, underscores
  StoreFactory make;
};

// For INSTANTIATE_TEST_SUITE_P's name generator argument.
std::string StoreConformanceParamName(const ::testing::TestParamInfo<StoreConformanceParam>& info);

class StoreConformanceTest : public ::testing::TestWithParam<StoreConformanceParam> {
 protected:
  void SetUp() override;

  // `name` prefixed with this test's random tag.
  std::string Key(std::string_view name) const;
  // Decides through Decide(); fails the test (and returns blank decisions) on an error.
  DecideResponse MustDecide(const DecideRequest& request);
  // The other verbs, likewise: their decisions, one per entry (blank ones on an error).
  std::vector<Decision> MustGiveBack(std::span<const GiveBackEntry> entries);
  std::vector<Decision> MustRelease(std::span<const ReleaseEntry> entries);
  std::vector<Decision> MustSettle(std::span<const SettleEntry> entries);
  // One entry.
  Decision MustDecideOne(std::string_view key, const Limit& limit, int64_t cost);

  ManualClock clock_;
  std::unique_ptr<Store> store_;
  std::string tag_;
};

}  // namespace caudal
