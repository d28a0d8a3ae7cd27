// The IdempotencyStore contract (store/idempotency_store.h), checked the same way on every
// implementation: the memory store's test and the Redis stores' (one server, Cluster) call
// ExpectIdempotencyContract on a store of their own. What depends on time (records ending) and
// bounds is each implementation's own test. Test code only.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <optional>
#include <string>
#include <string_view>

#include "store/idempotency_store.h"

namespace caudal::testing {

// The store's answers, awaited (a Redis store answers on its own thread).
inline Result<IdempotencyClaim> ClaimOf(IdempotencyStore& store, std::string_view key,
                                        std::string_view fingerprint, std::string_view claim,
                                        Micros ttl = std::chrono::seconds(60)) {
  std::promise<Result<IdempotencyClaim>> p;
  store.Claim(key, fingerprint, claim, ttl,
              [&p](Result<IdempotencyClaim> r) { p.set_value(std::move(r)); });
  return p.get_future().get();
}
inline Result<bool> CompleteOf(IdempotencyStore& store, std::string_view key,
                               std::string_view fingerprint, std::string_view claim,
                               std::string_view result, Micros ttl = std::chrono::seconds(60)) {
  std::promise<Result<bool>> p;
  store.Complete(key, fingerprint, claim, result, ttl,
                 [&p](Result<bool> r) { p.set_value(std::move(r)); });
  return p.get_future().get();
}
inline Result<bool> ReleaseOf(IdempotencyStore& store, std::string_view key,
                              std::string_view fingerprint, std::string_view claim) {
  std::promise<Result<bool>> p;
  store.Release(key, fingerprint, claim, [&p](Result<bool> r) { p.set_value(std::move(r)); });
  return p.get_future().get();
}

// Complete's or Release's answer; nullopt for an error.
inline std::optional<bool> Changed(const Result<bool>& r) {
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? std::optional<bool>(*r) : std::nullopt;
}

inline ClaimOutcome OutcomeOf(const Result<IdempotencyClaim>& r) {
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? r->outcome : ClaimOutcome::kClaimed;
}

// Keys start with `prefix`, so that one server may hold several runs.
inline void ExpectIdempotencyContract(IdempotencyStore& store, const std::string& prefix) {
  const std::string k = prefix + "k1";
  // The first claim is the caller's; while it decides, the same request waits (in progress)
  // and another request under the key is a mismatch.
  EXPECT_EQ(OutcomeOf(ClaimOf(store, k, "fpA", "c1")), ClaimOutcome::kClaimed);
  EXPECT_EQ(OutcomeOf(ClaimOf(store, k, "fpA", "c2")), ClaimOutcome::kInProgress);
  EXPECT_EQ(OutcomeOf(ClaimOf(store, k, "fpB", "c3")), ClaimOutcome::kMismatch);
  // Only the claim's own id completes it.
  EXPECT_EQ(Changed(CompleteOf(store, k, "fpA", "c2", "other")), false);
  EXPECT_EQ(Changed(CompleteOf(store, k, "fpB", "c1", "other")), false);
  EXPECT_EQ(Changed(ReleaseOf(store, k, "fpA", "c2")), false);
  EXPECT_EQ(Changed(CompleteOf(store, k, "fpA", "c1", "200\nresult: any bytes \x01\n")), true);
  // Done: every later claim of the same request is the first one's result, byte for byte.
  auto replay = ClaimOf(store, k, "fpA", "c4");
  ASSERT_TRUE(replay.ok()) << replay.status().ToString();
  EXPECT_EQ(replay->outcome, ClaimOutcome::kDone);
  EXPECT_EQ(replay->result, "200\nresult: any bytes \x01\n");
  EXPECT_EQ(OutcomeOf(ClaimOf(store, k, "fpB", "c5")), ClaimOutcome::kMismatch);
  // A done record is neither completed again nor released.
  EXPECT_EQ(Changed(CompleteOf(store, k, "fpA", "c1", "again")), false);
  EXPECT_EQ(Changed(ReleaseOf(store, k, "fpA", "c1")), false);
  EXPECT_EQ(ClaimOf(store, k, "fpA", "c6")->result, "200\nresult: any bytes \x01\n");

  // A released claim leaves no trace: the next request under the key claims it afresh, even
  // another one.
  const std::string k2 = prefix + "k2";
  EXPECT_EQ(OutcomeOf(ClaimOf(store, k2, "fpA", "c1")), ClaimOutcome::kClaimed);
  EXPECT_EQ(Changed(ReleaseOf(store, k2, "fpA", "c1")), true);
  EXPECT_EQ(OutcomeOf(ClaimOf(store, k2, "fpB", "c2")), ClaimOutcome::kClaimed);
  EXPECT_EQ(Changed(CompleteOf(store, k2, "fpB", "c2", "")), true);
  auto empty = ClaimOf(store, k2, "fpB", "c3");
  ASSERT_TRUE(empty.ok());
  EXPECT_EQ(empty->outcome, ClaimOutcome::kDone);
  EXPECT_EQ(empty->result, "");

  // Keys are independent.
  EXPECT_EQ(OutcomeOf(ClaimOf(store, prefix + "k3", "fpA", "c1")), ClaimOutcome::kClaimed);

  // Malformed arguments are refused before anything is stored.
  for (const std::string& bad : {std::string(), std::string(129, 'a'), std::string("a b"),
                                 std::string("a\nb"), std::string("a:b")}) {
    EXPECT_EQ(ClaimOf(store, bad, "fp", "c").status().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(ClaimOf(store, k, bad, "c").status().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(ClaimOf(store, k, "fp", bad).status().code(), StatusCode::kInvalidArgument);
  }
  EXPECT_EQ(ClaimOf(store, prefix + "k4", "fp", "c", Micros(999)).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(OutcomeOf(ClaimOf(store, prefix + "k4", "fp", "c")), ClaimOutcome::kClaimed);
  EXPECT_EQ(
      CompleteOf(store, prefix + "k4", "fp", "c", std::string(kMaxIdempotentResultBytes + 1, 'x'))
          .status()
          .code(),
      StatusCode::kInvalidArgument);
}

}  // namespace caudal::testing
