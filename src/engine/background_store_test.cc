#include "engine/background_store.h"

#include <gtest/gtest.h>

#include <thread>
#include <vector>

#include "engine/testing_store.h"
#include "support/manual_clock.h"

namespace caudal {
namespace {

using std::chrono::milliseconds;

// Polls for the background thread's progress: readiness, never rate-limit time.
template <typename Pred>
bool Eventually(Pred pred) {
  for (int i = 0; i < 5000; ++i) {
    if (pred()) return true;
    std::this_thread::sleep_for(milliseconds(1));
  }
  return false;
}

Result<StoreResponse> DecideOne(Store& store, const Limit& limit) {
  const EntryRef e{.key = "k", .limit = &limit, .cost = 1};
  return store.Decide({&e, 1});
}

class BackgroundStoreTest : public ::testing::Test {
 protected:
  BackgroundStoreTest()
      : log_([this](LogLevel, std::string_view m) {
          std::lock_guard<std::mutex> lock(mu_);
          lines_.push_back(std::string(m));
        }) {}
  std::vector<std::string> Lines() {
    std::lock_guard<std::mutex> lock(mu_);
    return lines_;
  }

  ManualClock clock_;
  const Limit limit_ =
      *Limit::Create(LimitSpec::Bucket(Algorithm::kTokenBucket, 2, {2, std::chrono::minutes(1)}));
  std::mutex mu_;
  std::vector<std::string> lines_;  // guarded by mu_
  Logger log_;
};

TEST_F(BackgroundStoreTest, UnavailableUntilTheOpenSucceedsThenDecidesThroughTheStore) {
  std::atomic<int> failures_left{3};
  std::atomic<bool> down{true};
  BackgroundStore store(
      [&]() -> Result<std::unique_ptr<Store>> {
        if (down.load() || failures_left.fetch_sub(1) > 0) {
          return Status::Unavailable("cannot connect to redis at 127.0.0.1:1: refused");
        }
        return std::unique_ptr<Store>(std::make_unique<testing::MapStore>(clock_));
      },
      {.name = "redis",
       .backoff_min = milliseconds(1),
       .backoff_max = milliseconds(2),
       .log = &log_});
  ASSERT_TRUE(Eventually([&] { return store.attempts() >= 2; }));
  auto r = DecideOne(store, limit_);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(r.status().message().find("not connected yet: cannot connect"), std::string::npos)
      << r.status().message();
  EXPECT_EQ(store.Ping().code(), StatusCode::kUnavailable);
  EXPECT_EQ(store.Name(), "redis");
  EXPECT_FALSE(store.opened());

  down = false;  // the store comes up; three more refusals, then it opens
  ASSERT_TRUE(Eventually([&] { return store.opened(); }));
  EXPECT_TRUE(store.Ping().ok());
  EXPECT_EQ(store.Name(), "map");
  r = DecideOne(store, limit_);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->decisions[0].remaining, 1);
  const uint64_t attempts = store.attempts();
  EXPECT_GE(attempts, 5u);
  const std::vector<std::string> lines = Lines();
  ASSERT_EQ(lines.size(), 2u) << "one warning for a cause however often it repeats";
  EXPECT_NE(lines[0].find("warning store \"redis\" not connected (cannot connect"),
            std::string::npos);
  EXPECT_EQ(lines[1],
            "info store \"map\" connected after " + std::to_string(attempts) + " attempts");
}

TEST_F(BackgroundStoreTest, AConfigurationErrorStopsTheRetries) {
  BackgroundStore store(
      []() -> Result<std::unique_ptr<Store>> {
        return Status::InvalidArgument("redis refused the credentials of user \"default\"");
      },
      {.name = "redis", .backoff_min = milliseconds(1), .log = &log_});
  ASSERT_TRUE(Eventually([&] { return !Lines().empty(); }));
  std::this_thread::sleep_for(milliseconds(20));  // room for retries that must not happen
  EXPECT_EQ(store.attempts(), 1u);
  const Status s = store.Ping();
  EXPECT_EQ(s.code(), StatusCode::kUnavailable);
  EXPECT_NE(s.message().find("cannot be opened: redis refused the credentials"), std::string::npos)
      << s.message();
  EXPECT_NE(Lines()[0].find("error store \"redis\" cannot be opened, no more retries"),
            std::string::npos);
}

TEST_F(BackgroundStoreTest, BadRequestsAreRefusedAsByAnyStoreEvenBeforeOpening) {
  BackgroundStore store(
      []() -> Result<std::unique_ptr<Store>> { return Status::Unavailable("down"); },
      {.backoff_min = std::chrono::hours(1)});
  const EntryRef empty_key{.key = "", .limit = &limit_, .cost = 1};
  auto r = store.Decide({&empty_key, 1});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
}

TEST_F(BackgroundStoreTest, DestroyingStopsAWaitingRetryAtOnce) {
  const auto start = std::chrono::steady_clock::now();
  {
    BackgroundStore store(
        []() -> Result<std::unique_ptr<Store>> { return Status::Unavailable("down"); },
        {.backoff_min = std::chrono::hours(1), .backoff_max = std::chrono::hours(1)});
    ASSERT_TRUE(Eventually([&] { return store.attempts() == 1; }));
  }
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(30));
}

}  // namespace
}  // namespace caudal
