// RedisStore when Redis misbehaves: SCRIPT FLUSH, FUNCTION FLUSH (or no FUNCTION at all) and a
// restart mid-run, a Redis that stops answering (DEBUG SLEEP). These tests run against real time,
// the only clock Redis has.
#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "caudal/redis/redis_store.h"
#include "redis/redis_test_util.h"
#include "support/redis_server.h"

namespace caudal {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using SteadyClock = std::chrono::steady_clock;

// Threads deciding as fast as they can, recording when each decision and failure happened.
class Hammer {
 public:
  Hammer(Store& store, int threads)
      : limit_(Bucket(Algorithm::kTokenBucket, 1'000'000, {1'000'000, seconds(1)})) {
    for (int t = 0; t < threads; ++t) {
      threads_.emplace_back([this, &store, t] {
        for (int i = 0; !stop_.load(); ++i) {
          const std::string key =
              std::string("hammer:") + std::to_string(t) + ":" + std::to_string(i % 20);
          const ConsumeEntry e{.key = key, .limit = &limit_, .cost = 1};
          Result<DecideResponse> r = store.Decide({.consumes = {&e, 1}});
          {
            std::lock_guard lock(mu_);
            if (r.ok()) {
              ok_.push_back(SteadyClock::now());
            } else {
              failed_.push_back({SteadyClock::now(), r.status()});
            }
          }
          decided_.notify_all();
        }
      });
    }
  }
  ~Hammer() { Stop(); }
  size_t Oks() {
    std::lock_guard lock(mu_);
    return ok_.size();
  }
  // Waits until `done()` holds, looked at after each decision with the records locked (it may
  // read ok_ and failed_), or until 10 s have passed; returns done().
  bool Await(const std::function<bool()>& done) {
    std::unique_lock lock(mu_);
    return decided_.wait_for(lock, seconds(10), done);
  }
  void Stop() {
    stop_.store(true);
    for (std::thread& t : threads_) {
      if (t.joinable()) t.join();
    }
  }
  std::vector<SteadyClock::time_point> ok_;
  std::vector<std::pair<SteadyClock::time_point, Status>> failed_;

 private:
  Limit limit_;
  std::atomic<bool> stop_{false};
  std::mutex mu_;  // guards ok_ and failed_ until Stop()
  std::condition_variable decided_;
  std::vector<std::thread> threads_;
};

// Calls of `name` (EVALSHA, FCALL) Redis has run, from INFO commandstats.
uint64_t CallsOf(testing::RedisServer& server, const std::string& name) {
  Result<std::string> info = server.Command({"INFO", "commandstats"});
  if (!info.ok()) return 0;
  const std::string field = "cmdstat_" + name + ":calls=";
  const size_t at = info->find(field);
  return at == std::string::npos ? 0 : std::stoull(info->substr(at + field.size()));
}

// Sends `flush` (SCRIPT FLUSH, FUNCTION FLUSH) `times` times under the hammer: each must be noticed
// (the store reloads) and decisions go on, 20 more after each with what was flushed back.
void FlushUnderTheHammer(testing::RedisServer& server, RedisStore& store, Hammer& hammer,
                         const std::string& what, int times) {
  for (int i = 0; i < times; ++i) {
    const uint64_t reloads = store.Stats().script_reloads;
    ASSERT_EQ(*server.Command({what, "FLUSH"}), "OK");
    const size_t flushed = hammer.Oks();
    ASSERT_TRUE(hammer.Await([&] {
      return store.Stats().script_reloads > reloads && hammer.ok_.size() >= flushed + 20;
    })) << what
        << " FLUSH " << i << " was not noticed";
  }
}

// On a server without FUNCTION, so that the hammer's plain consumes go to the script too.
TEST(RedisFailure, ScriptFlushMidRunIsInvisible) {
  auto server = StartServer({.extra_args = {"--rename-command", "FUNCTION", ""}});
  auto store = MustOpen({.url = server->url(), .deadline = seconds(1)});
  Hammer hammer(*store, 4);
  FlushUnderTheHammer(*server, *store, hammer, "SCRIPT", 10);
  hammer.Stop();
  for (const auto& [at, status] : hammer.failed_) ADD_FAILURE() << status.ToString();
  EXPECT_GT(hammer.ok_.size(), 100u);
  ExpectEveryKeyHasATtl(*server, seconds(1));
}

TEST(RedisFailure, FunctionFlushMidRunIsInvisible) {
  auto server = StartServer();
  auto store = MustOpen({.url = server->url(), .deadline = seconds(1)});
  Hammer hammer(*store, 4);
  ASSERT_TRUE(hammer.Await([&] { return hammer.ok_.size() >= 20; }));
  const uint64_t fcalls = CallsOf(*server, "fcall");
  EXPECT_GT(fcalls, 0u) << "plain consumes go to the function";
  FlushUnderTheHammer(*server, *store, hammer, "FUNCTION", 5);
  hammer.Stop();
  for (const auto& [at, status] : hammer.failed_) ADD_FAILURE() << status.ToString();
  // The library is back: the next decision is a call of it.
  const uint64_t before = CallsOf(*server, "fcall");
  const Limit limit = Bucket(Algorithm::kTokenBucket, 10, {10, seconds(1)});
  const ConsumeEntry e{.key = "after", .limit = &limit, .cost = 1};
  ASSERT_TRUE(store->Decide({.consumes = {&e, 1}}).ok());
  EXPECT_EQ(CallsOf(*server, "fcall"), before + 1);
  ExpectEveryKeyHasATtl(*server, seconds(1));
}

// A server that refuses FUNCTION (renamed away here, as managed services and ACLs do) is sent
// the script, and decides the same.
TEST(RedisFailure, NoFunctionCommandFallsBackToTheScript) {
  auto server = StartServer({.extra_args = {"--rename-command", "FUNCTION", ""}});
  auto store = MustOpen({.url = server->url()});
  const Limit limit = Bucket(Algorithm::kTokenBucket, 3, {1, seconds(60)});
  const ConsumeEntry e{.key = "fallback", .limit = &limit, .cost = 1};
  std::vector<bool> allowed;
  for (int i = 0; i < 5; ++i) {
    Result<DecideResponse> r = store->Decide({.consumes = {&e, 1}});
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    allowed.push_back(r->allowed);
  }
  EXPECT_EQ(allowed, (std::vector<bool>{true, true, true, false, false}));
  EXPECT_EQ(CallsOf(*server, "fcall"), 0u);
  EXPECT_GE(CallsOf(*server, "evalsha"), 5u);
}

TEST(RedisFailure, RestartMidRunFailsOnlyWithinTheRestartWindow) {
  auto server = StartServer();
  const RedisStoreOptions options{.url = server->url(),
                                  .deadline = milliseconds(500),
                                  .reconnect_min = milliseconds(10),
                                  .reconnect_max = milliseconds(200)};
  auto store = MustOpen(options);
  Hammer hammer(*store, 4);
  ASSERT_TRUE(hammer.Await([&] { return hammer.ok_.size() >= 100; })) << "a steady load first";
  const auto down = SteadyClock::now();
  server->Kill();  // no goodbye: connections just break
  ASSERT_TRUE(hammer.Await([&] { return !hammer.failed_.empty(); })) << "the loss noticed";
  ASSERT_TRUE(server->Restart().ok());
  const auto up = SteadyClock::now();
  // Failures only between the kill and the restart plus one backoff step and a deadline; the
  // hammer runs until it has decided past that window.
  const auto window_end = up + options.reconnect_max + options.deadline + milliseconds(200);
  ASSERT_TRUE(hammer.Await([&] {
    size_t after = 0;  // the latest decisions are at the back
    for (auto at = hammer.ok_.rbegin(); at != hammer.ok_.rend() && *at > window_end; ++at) {
      ++after;
    }
    return after > 10;
  })) << "decisions continue after the restart";
  hammer.Stop();

  size_t in_window = 0;
  for (const auto& [at, status] : hammer.failed_) {
    EXPECT_GE(at, down) << status.ToString();
    EXPECT_LE(at, window_end) << status.ToString();
    EXPECT_EQ(status.code(), StatusCode::kUnavailable) << status.ToString();
    ++in_window;
  }
  EXPECT_GT(in_window, 0u) << "the restart was noticed";
  size_t after = 0;
  for (const auto& at : hammer.ok_) after += at > window_end;
  EXPECT_GT(after, 10u) << "decisions continue after the restart";
  EXPECT_GE(store->Stats().reconnects, 1u);
  EXPECT_TRUE(store->Ping().ok());
}

TEST(RedisFailure, ASleepingRedisTimesDecisionsOutAtTheDeadline) {
  auto server = StartServer();
  constexpr auto kDeadline = milliseconds(20);
  auto store = MustOpen({.url = server->url(), .deadline = kDeadline});
  const Limit limit = Bucket(Algorithm::kGcra, 100, {100, seconds(1)});
  ASSERT_TRUE(DecideOne(*store, "warm", limit, 1).allowed());

  std::thread sleeper([&] { (void)server->Command({"DEBUG", "SLEEP", "0.6"}); });
  // Wait until Redis is asleep: a decision times out.
  const ConsumeEntry e{.key = "k", .limit = &limit, .cost = 1};
  const auto give_up = SteadyClock::now() + seconds(5);
  while (store->Decide({.consumes = {&e, 1}}).ok() && SteadyClock::now() < give_up) {
  }
  for (int i = 0; i < 5; ++i) {
    const auto start = SteadyClock::now();
    Result<DecideResponse> r = store->Decide({.consumes = {&e, 1}});
    const auto took = SteadyClock::now() - start;
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), StatusCode::kUnavailable) << r.status().ToString();
    EXPECT_NE(r.status().message().find("within the 20ms deadline"), std::string::npos)
        << r.status().message();
    EXPECT_GE(took, kDeadline);
    EXPECT_LT(took, kDeadline + milliseconds(250)) << "it never hangs (slack for a busy machine)";
  }
  sleeper.join();
  // Redis is awake again: the late replies are dropped and decisions succeed.
  Result<DecideResponse> after = store->Decide({.consumes = {&e, 1}});
  for (int i = 0; i < 50 && !after.ok(); ++i) after = store->Decide({.consumes = {&e, 1}});
  ASSERT_TRUE(after.ok()) << after.status().ToString();
  EXPECT_GE(store->Stats().timeouts, 5u);
}

TEST(RedisFailure, DecisionsFailFastWhileRedisIsDown) {
  auto server = StartServer();
  auto store = MustOpen({.url = server->url(),
                         .deadline = seconds(1),
                         .reconnect_min = milliseconds(50),
                         .reconnect_max = seconds(5)});
  server->Stop();
  const Limit limit = Window(Algorithm::kFixedWindow, 10, seconds(1));
  const ConsumeEntry e{.key = "k", .limit = &limit, .cost = 1};
  // Once the loss is noticed, every decision fails at once, naming the cause.
  Result<DecideResponse> r = store->Decide({.consumes = {&e, 1}});
  for (int i = 0;
       i < 100 && (r.ok() || r.status().message().find("no connection") == std::string::npos);
       ++i) {
    std::this_thread::sleep_for(milliseconds(10));
    r = store->Decide({.consumes = {&e, 1}});
  }
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(r.status().message().find("no connection to redis://127.0.0.1:"), std::string::npos)
      << r.status().message();
  const auto start = SteadyClock::now();
  EXPECT_FALSE(store->Decide({.consumes = {&e, 1}}).ok());
  EXPECT_LT(SteadyClock::now() - start, milliseconds(100));
  EXPECT_FALSE(store->Ping().ok());
}

}  // namespace
}  // namespace caudal
