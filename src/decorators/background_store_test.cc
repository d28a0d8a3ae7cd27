#include "decorators/background_store.h"

#include <gtest/gtest.h>

#include <thread>
#include <vector>

#include "support/fake_store.h"
#include "support/manual_clock.h"

namespace caudal {
namespace {

using std::chrono::milliseconds;

// Polls for something the background thread will do (it has connected, it has stopped): a
// presence, never an absence, and nothing that depends on how much real time passes.
template <typename Pred>
bool Eventually(Pred pred) {
  for (int i = 0; i < 5000; ++i) {
    if (pred()) return true;
    std::this_thread::sleep_for(milliseconds(1));
  }
  return false;
}

Result<DecideResponse> DecideOne(Store& store, const Limit& limit) {
  const ConsumeEntry e{.key = "k", .limit = &limit, .cost = 1};
  return store.Decide({.consumes = {&e, 1}});
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

TEST_F(BackgroundStoreTest, RetriesWithBackoffOnTheClockUntilTheOpenSucceeds) {
  // Refused four times (the third for another reason), then the store comes up.
  std::atomic<int> attempt{0};
  BackgroundStore store(
      [&]() -> Result<std::unique_ptr<Store>> {
        const int n = ++attempt;
        if (n == 3) return Status::Unavailable("cannot resolve redis.internal");
        if (n <= 4) return Status::Unavailable("cannot connect to redis at 127.0.0.1:1: refused");
        return std::unique_ptr<Store>(std::make_unique<testing::FakeStore>(clock_, "map"));
      },
      clock_,
      {.name = "redis",
       .backoff_min = milliseconds(100),
       .backoff_max = milliseconds(300),
       .log = &log_});
  // After each refusal the thread waits on the clock: 100 ms doubling, capped at 300.
  const std::vector<milliseconds> backoffs = {milliseconds(100), milliseconds(200),
                                              milliseconds(300), milliseconds(300)};
  for (size_t i = 0; i < backoffs.size(); ++i) {
    ASSERT_TRUE(clock_.AwaitWaits(i + 1)) << "no wait after attempt " << i + 1;
    EXPECT_EQ(store.attempts(), i + 1);
    EXPECT_EQ(clock_.deadlines(), std::vector<Nanos>{clock_.Monotonic() + backoffs[i]}) << i;
    auto r = DecideOne(store, limit_);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), StatusCode::kUnavailable);
    EXPECT_NE(r.status().message().find("store \"redis\" not connected yet: "), std::string::npos)
        << r.status().message();
    EXPECT_EQ(store.Ping().code(), StatusCode::kUnavailable);
    EXPECT_EQ(store.Name(), "redis");
    EXPECT_FALSE(store.opened());
    clock_.Advance(backoffs[i]);
  }

  ASSERT_TRUE(Eventually([&] { return !store.retrying(); }));
  EXPECT_TRUE(store.opened());
  EXPECT_EQ(store.attempts(), 5u);
  EXPECT_EQ(clock_.waits(), 4u) << "no wait once open";
  EXPECT_TRUE(store.Ping().ok());
  EXPECT_EQ(store.Name(), "map");
  auto r = DecideOne(store, limit_);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->decisions[0].remaining, 1);
  const std::vector<std::string> lines = Lines();
  ASSERT_EQ(lines.size(), 4u) << "one warning per change of cause, however often it repeats";
  EXPECT_NE(lines[0].find("warning store \"redis\" not connected (cannot connect"),
            std::string::npos)
      << lines[0];
  EXPECT_NE(lines[1].find("warning store \"redis\" not connected (cannot resolve"),
            std::string::npos)
      << lines[1];
  EXPECT_NE(lines[2].find("warning store \"redis\" not connected (cannot connect"),
            std::string::npos)
      << lines[2];
  EXPECT_EQ(lines[3], "info store \"map\" connected after 5 attempts");
}

TEST_F(BackgroundStoreTest, AConfigurationErrorStopsTheRetries) {
  BackgroundStore store(
      []() -> Result<std::unique_ptr<Store>> {
        return Status::InvalidArgument("redis refused the credentials of user \"default\"");
      },
      clock_, {.name = "redis", .backoff_min = milliseconds(1), .log = &log_});
  // The thread has ended, so no retry can follow; and it ended without waiting for one.
  ASSERT_TRUE(Eventually([&] { return !store.retrying(); }));
  EXPECT_EQ(store.attempts(), 1u);
  EXPECT_EQ(clock_.waits(), 0u);
  EXPECT_FALSE(store.opened());
  const Status s = store.Ping();
  EXPECT_EQ(s.code(), StatusCode::kUnavailable);
  EXPECT_NE(s.message().find("cannot be opened: redis refused the credentials"), std::string::npos)
      << s.message();
  const std::vector<std::string> lines = Lines();
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_NE(lines[0].find("error store \"redis\" cannot be opened, no more retries"),
            std::string::npos)
      << lines[0];
}

TEST_F(BackgroundStoreTest, BadRequestsAreRefusedAsByAnyStoreEvenBeforeOpening) {
  BackgroundStore store(
      []() -> Result<std::unique_ptr<Store>> { return Status::Unavailable("down"); }, clock_,
      {.backoff_min = std::chrono::hours(1)});
  const ConsumeEntry empty_key{.key = "", .limit = &limit_, .cost = 1};
  auto r = store.Decide({.consumes = {&empty_key, 1}});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
}

TEST_F(BackgroundStoreTest, DestroyingEndsAWaitingRetry) {
  std::atomic<int> attempts{0};
  {
    BackgroundStore store(
        [&]() -> Result<std::unique_ptr<Store>> {
          ++attempts;
          return Status::Unavailable("down");
        },
        clock_, {.backoff_min = std::chrono::hours(1), .backoff_max = std::chrono::hours(1)});
    ASSERT_TRUE(clock_.AwaitWaits(1));
  }  // the clock never reaches the retry: only the destructor can end the wait (or this hangs)
  EXPECT_EQ(attempts.load(), 1) << "no retry on the way out";
  EXPECT_TRUE(clock_.deadlines().empty());
}

}  // namespace
}  // namespace caudal
