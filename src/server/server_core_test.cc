#include "server/server_core.h"

#include <gtest/gtest.h>

#include <boost/asio/error.hpp>
#include <string>
#include <thread>
#include <vector>

#include "caudal/store/memory_store.h"
#include "support/manual_clock.h"

namespace caudal::http_server {
namespace {

using std::chrono::milliseconds;

IpAddress ParseIp(const char* s) { return *IpAddress::Parse(s); }

class ServerCoreTest : public ::testing::Test {
 protected:
  ServerCoreTest()
      : store_(clock_),
        log_([this](LogLevel, std::string_view line) { lines_.emplace_back(line); }),
        engine_(store_, clock_, {}),
        health_(store_, clock_, {}) {}

  std::unique_ptr<ServerCore> Core(HttpServerOptions options, ForwardAuthOptions auth = {}) {
    return std::make_unique<ServerCore>(HttpServer::Deps{.engine = engine_,
                                                         .metrics = metrics_,
                                                         .log = log_,
                                                         .health = health_,
                                                         .clock = clock_},
                                        options, std::move(auth), nullptr);
  }

  ManualClock clock_;
  MemoryStore store_;
  Metrics metrics_;
  std::vector<std::string> lines_;
  Logger log_;
  Engine engine_;
  StoreHealth health_;  // never started
};

TEST_F(ServerCoreTest, AConnectionCountsTowardsTheCapsUntilItGoes) {
  ForwardAuthOptions auth;
  auth.trusted_proxies = {*CidrBlock::Parse("10.0.0.0/8")};
  auto core = Core({.max_connections = 3, .max_connections_per_client = 2}, std::move(auth));
  std::optional<AdmittedPeer> a = core->AdmitPeer(ParseIp("192.0.2.1"));
  std::optional<AdmittedPeer> b = core->AdmitPeer(ParseIp("192.0.2.1"));
  ASSERT_TRUE(a && b);
  EXPECT_EQ(a->address(), ParseIp("192.0.2.1"));
  EXPECT_FALSE(core->AdmitPeer(ParseIp("192.0.2.1")));  // its share is 2
  ASSERT_EQ(lines_.size(), 1u);
  EXPECT_NE(lines_[0].find("per-client connection cap (2) reached by 192.0.2.1"),
            std::string::npos);
  // A trusted proxy is held to the global cap alone.
  std::optional<AdmittedPeer> proxy = core->AdmitPeer(ParseIp("10.1.2.3"));
  ASSERT_TRUE(proxy);
  EXPECT_FALSE(core->AdmitPeer(ParseIp("10.1.2.3")));  // 3 of 3
  EXPECT_FALSE(core->AdmitPeer(ParseIp("192.0.2.9")));
  ASSERT_EQ(lines_.size(), 2u);  // the global cap, said once for the episode
  EXPECT_NE(lines_[1].find("connection cap (3) reached"), std::string::npos);
  // Moved, a connection still counts once; gone, it leaves room in both caps.
  AdmittedPeer moved = std::move(*a);
  a.reset();
  EXPECT_FALSE(core->AdmitPeer(ParseIp("192.0.2.9")));
  { const AdmittedPeer gone = std::move(moved); }
  std::optional<AdmittedPeer> again = core->AdmitPeer(ParseIp("192.0.2.1"));
  EXPECT_TRUE(again);
}

TEST_F(ServerCoreTest, FailedAcceptsBackOffAndAreLoggedOncePerEpisode) {
  auto core = Core({});
  const boost::system::error_code emfile(EMFILE, boost::system::system_category());
  std::vector<int64_t> pauses;
  for (int i = 0; i < 9; ++i) pauses.push_back(core->AcceptFailure(emfile).count());
  EXPECT_EQ(pauses, (std::vector<int64_t>{10, 20, 40, 80, 160, 320, 640, 1000, 1000}));
  ASSERT_EQ(lines_.size(), 1u);
  EXPECT_NE(lines_[0].find("accept failed"), std::string::npos);
  core->AcceptSucceeded();
  core->AcceptSucceeded();
  ASSERT_EQ(lines_.size(), 2u);
  EXPECT_NE(lines_[1].find("accepting connections again, after 9 failed accepts"),
            std::string::npos);
  EXPECT_EQ(core->AcceptFailure(emfile), milliseconds(10));  // a new episode
  EXPECT_EQ(lines_.size(), 3u);
}

TEST_F(ServerCoreTest, DeadlinesAreLookedAtHalfTheShortestTimeoutApart) {
  EXPECT_EQ(Core({.header_timeout = milliseconds(400)})->tick(), milliseconds(200));
  EXPECT_EQ(Core({.body_timeout = milliseconds(6)})->tick(), milliseconds(5));  // at least 5 ms
  EXPECT_EQ(Core({.idle_timeout = milliseconds(2)})->tick(), milliseconds(2));  // at most it
}

struct Recorder final : routes::Responder {
  void Reply(http_api::Reply r) override { replies.push_back(std::move(r)); }
  std::vector<http_api::Reply> replies;
};

routes::Request Get(std::string_view target) {
  return {.method = "GET",
          .target = target,
          .body = "",
          .peer = ParseIp("127.0.0.1"),
          .header = [](std::string_view) { return std::string_view(); },
          .header_count = [](std::string_view) { return size_t{0}; },
          .forwarded_for = ""};
}

TEST_F(ServerCoreTest, DrainingClosesRepliesAndWaitsForTheDecisionsInFlight) {
  auto core = Core({});
  Recorder r;
  core->Decide(Get("/healthz"), r);
  EXPECT_FALSE(core->EndDecision());  // not draining: the reply keeps its connection
  core->Decide(Get("/readyz"), r);    // in flight across the drain's start
  EXPECT_TRUE(core->BeginDraining());
  EXPECT_FALSE(core->BeginDraining());  // once
  EXPECT_TRUE(core->draining());
  std::thread waiter([&] { core->WaitDrained(clock_.Monotonic() + std::chrono::hours(1)); });
  EXPECT_TRUE(core->EndDecision());  // wakes the waiter: nothing left in flight
  waiter.join();
  core->Decide(Get("/readyz"), r);
  EXPECT_TRUE(core->EndDecision());
  ASSERT_EQ(r.replies.size(), 3u);
  EXPECT_EQ(r.replies[0].status, 200);
  EXPECT_EQ(r.replies[2].status, 503);
  EXPECT_EQ(r.replies[2].body, "not ready: shutting down\n");
}

}  // namespace
}  // namespace caudal::http_server
