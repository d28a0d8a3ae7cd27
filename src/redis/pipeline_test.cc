#include "redis/pipeline.h"

#include <gtest/gtest.h>

#include <functional>
#include <optional>

#include "support/manual_clock.h"

namespace caudal::redis {
namespace {

using std::chrono::microseconds;
using std::chrono::milliseconds;

constexpr auto kDeadline = milliseconds(1);

// Sends what is routed while it has a free call slot, at the manual clock's time; says whether
// the node is late as the test sets it.
class FakeRouter final : public Router {
 public:
  explicit FakeRouter(const ManualClock& clock) : clock_(clock) {}

  void Route(RequestPartPtr part) override { queued.push_back(std::move(part)); }
  void Send() override {
    while (!queued.empty() && in_flight.size() < slots) {
      queued.front()->sent_at = clock_.Monotonic();
      in_flight.push_back(std::move(queued.front()));
      queued.erase(queued.begin());
    }
  }
  void CheckStalls(Nanos) override {}
  std::optional<Nanos> NextStallCheck() const override { return std::nullopt; }
  bool Late(const RequestPart&, Nanos, Nanos) const override { return late; }
  bool ReplyUnread(const RequestPart&) const override {
    ++unread_queries;
    if (unread && on_unread) on_unread();
    return unread;
  }

  std::vector<RequestPartPtr> queued;
  std::vector<RequestPartPtr> in_flight;
  size_t slots = 1;
  bool late = false;
  bool unread = false;  // bytes from the node wait unread
  mutable int unread_queries = 0;
  std::function<void()> on_unread;  // when asked while bytes wait

 private:
  const ManualClock& clock_;
};

class PipelineDeadline : public ::testing::Test {
 protected:
  PipelineDeadline() : router_(clock_), pipeline_(io_, clock_, {.deadline = kDeadline}, router_) {}
  ~PipelineDeadline() override {
    pipeline_.Shutdown(Status::Unavailable("test over"));
    io_.run_for(milliseconds(1));
  }

  // Submits one request; its answer lands in the returned slot.
  std::shared_ptr<std::optional<Status>> Submit() {
    auto answer = std::make_shared<std::optional<Status>>();
    const EntryRef e{.key = "k", .limit = &limit_, .cost = 1};
    pipeline_.Submit(std::span(&e, 1), [answer](Result<StoreResponse> r) { *answer = r.status(); });
    io_.poll();  // Flush: routed and sent
    io_.restart();
    return answer;
  }
  // Moves the manual clock, then lets the sweep timer (real time) run.
  void Advance(microseconds d) {
    clock_.Advance(d);
    io_.restart();
    io_.run_for(milliseconds(5));
  }
  // Moves the manual clock, then runs the io thread until `answer` comes (at most 2 s of real
  // time, in steps: a loaded machine may run the real-time sweep timer late).
  void AdvanceUntilAnswered(microseconds d, const std::optional<Status>& answer) {
    clock_.Advance(d);
    for (int i = 0; i < 400 && !answer.has_value(); ++i) {
      io_.restart();
      io_.run_for(milliseconds(5));
    }
  }
  static bool TimedOut(const std::optional<Status>& s) {
    return s.has_value() && s->message().find("deadline") != std::string::npos;
  }

  boost::asio::io_context io_;
  ManualClock clock_;
  FakeRouter router_;
  Pipeline pipeline_;
  const Limit limit_ = *Limit::Create(
      LimitSpec::Bucket(Algorithm::kTokenBucket, 10, Rate{10, std::chrono::seconds(1)}));
};

TEST_F(PipelineDeadline, QueueingInCaudalDoesNotCountAgainstTheDeadline) {
  auto first = Submit();
  auto second = Submit();  // waits: the one call slot is taken
  ASSERT_EQ(router_.in_flight.size(), 1u);
  ASSERT_EQ(router_.queued.size(), 1u);

  Advance(microseconds(800));
  // The first call answers within its deadline; the second request is sent only now.
  pipeline_.Fail(router_.in_flight.front(), Status::Internal("answered"));
  router_.in_flight.clear();
  router_.Send();
  EXPECT_EQ(first->value().message(), "answered");
  ASSERT_EQ(router_.in_flight.size(), 1u);

  Advance(microseconds(700));  // 1.5 ms since it was submitted, 0.7 ms since it was sent
  EXPECT_FALSE(second->has_value())
      << "timed out for the time it queued: " << second->value().ToString();
  EXPECT_EQ(pipeline_.counters().timeouts.load(), 0u);

  Advance(microseconds(400));  // 1.1 ms since it was sent: Redis is late
  ASSERT_TRUE(TimedOut(*second)) << (second->has_value() ? second->value().ToString() : "pending");
  EXPECT_EQ(second->value().code(), StatusCode::kUnavailable);
  EXPECT_EQ(pipeline_.counters().timeouts.load(), 1u);
}

TEST_F(PipelineDeadline, ARequestWaitingForALateNodeFailsAtItsDeadline) {
  auto first = Submit();
  auto second = Submit();
  ASSERT_EQ(router_.queued.size(), 1u);
  router_.late = true;  // every call slot held by a call Redis has not answered in time

  Advance(microseconds(500));
  EXPECT_FALSE(first->has_value());
  EXPECT_FALSE(second->has_value()) << "a deadline counts from the request's submission at most";

  Advance(microseconds(600));
  EXPECT_TRUE(TimedOut(*first));
  EXPECT_TRUE(TimedOut(*second)) << "it would wait behind a stalled call: failed, not held";
  EXPECT_EQ(pipeline_.counters().timeouts.load(), 2u);
}

TEST_F(PipelineDeadline, AWaitingRequestFailsOnceItsNodeTurnsLate) {
  auto first = Submit();
  auto second = Submit();
  Advance(microseconds(1100));  // the first was sent 1.1 ms ago: timed out
  EXPECT_TRUE(TimedOut(*first));
  EXPECT_FALSE(second->has_value()) << "the node is not late yet";

  router_.late = true;
  Advance(microseconds(300));  // looked at again within a quarter of the deadline
  EXPECT_TRUE(TimedOut(*second));
}

TEST_F(PipelineDeadline, AReplyWaitingUnreadIsReadBeforeTheDeadlineJudges) {
  auto first = Submit();
  // The io thread ran late: the answer sits in the socket, read on the reactor's next pass
  // (posted here, as the read handler would run).
  router_.unread = true;
  router_.on_unread = [this] {
    router_.on_unread = nullptr;
    boost::asio::post(io_, [this] {
      pipeline_.Fail(router_.in_flight.front(), Status::Internal("answered"));
      router_.in_flight.clear();
      router_.unread = false;
    });
  };
  AdvanceUntilAnswered(microseconds(1100), *first);
  ASSERT_TRUE(first->has_value());
  EXPECT_EQ(first->value().message(), "answered") << "timed out with its answer unread";
  EXPECT_EQ(pipeline_.counters().timeouts.load(), 0u);
}

TEST_F(PipelineDeadline, UnreadBytesThatAreNotItsAnswerDelayItOnlyBriefly) {
  auto first = Submit();
  router_.unread = true;  // bytes keep coming, none of them its answer
  AdvanceUntilAnswered(microseconds(1100), *first);
  ASSERT_TRUE(TimedOut(*first)) << "waited on unread bytes without bound";
  EXPECT_EQ(pipeline_.counters().timeouts.load(), 1u);
  EXPECT_GE(router_.unread_queries, 2) << "looked again after the reactor's pass";
}

}  // namespace
}  // namespace caudal::redis
