#include "server/connection_limits.h"

#include <gtest/gtest.h>
#include <sys/resource.h>

#include <map>

#include "support/manual_clock.h"

namespace caudal::http_server {
namespace {

IpAddress Ip(const char* s) { return *IpAddress::Parse(s); }

TEST(ConnectionBudget, LeavesTheReserveAndWhatIsOpen) {
  EXPECT_EQ(ConnectionBudget(10'000, 1'048'576, 20), 10'000);
  EXPECT_EQ(ConnectionBudget(10'000, 1'024, 20), 1'024 - 20 - kReservedDescriptors);
  EXPECT_EQ(ConnectionBudget(10'000, 1'024, -1), 1'024 - kReservedDescriptors);  // unknown
  EXPECT_EQ(ConnectionBudget(10'000, 100, 20), 1);  // never none at all
  EXPECT_EQ(ConnectionBudget(50, INT64_MAX, 20), 50);
}

TEST(RaiseFileLimit, SoftReachesHard) {
  const FileLimit raised = RaiseFileLimit();
  rlimit now{};
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &now), 0);
  EXPECT_EQ(raised.soft, raised.hard);
  EXPECT_EQ(static_cast<int64_t>(now.rlim_cur), raised.soft);
  EXPECT_GT(OpenDescriptors(), 2);  // stdin, stdout, stderr at least
}

TEST(ClientConnections, CapsEachClientAlone) {
  ClientConnections c(2, {.v4 = 32, .v6 = 64});
  using A = ClientConnections::Admission;
  EXPECT_EQ(c.Admit(Ip("192.0.2.1")), A::kAdmitted);
  EXPECT_EQ(c.Admit(Ip("192.0.2.1")), A::kAdmitted);
  EXPECT_EQ(c.Admit(Ip("192.0.2.1")), A::kRefusedFirst);  // worth one log line
  EXPECT_EQ(c.Admit(Ip("192.0.2.1")), A::kRefused);       // and no more
  EXPECT_EQ(c.Admit(Ip("192.0.2.2")), A::kAdmitted);      // another client still gets in
  EXPECT_EQ(c.clients(), 2u);
  c.Release(Ip("192.0.2.1"));
  EXPECT_EQ(c.Admit(Ip("192.0.2.1")), A::kAdmitted);  // room again
  EXPECT_EQ(c.Admit(Ip("192.0.2.1")), A::kRefused);   // same episode: it never held none
  c.Release(Ip("192.0.2.1"));
  c.Release(Ip("192.0.2.1"));
  c.Release(Ip("192.0.2.2"));
  EXPECT_EQ(c.clients(), 0u);  // the table forgets clients without connections
  EXPECT_EQ(c.Admit(Ip("192.0.2.1")), A::kAdmitted);
  EXPECT_EQ(c.Admit(Ip("192.0.2.1")), A::kAdmitted);
  EXPECT_EQ(c.Admit(Ip("192.0.2.1")), A::kRefusedFirst);  // a new episode
}

TEST(ClientConnections, GroupsAddressesByPrefix) {
  ClientConnections c(1, {.v4 = 24, .v6 = 64});
  using A = ClientConnections::Admission;
  EXPECT_EQ(c.Admit(Ip("2001:db8:1:2::1")), A::kAdmitted);
  EXPECT_EQ(c.Admit(Ip("2001:db8:1:2:ffff::9")), A::kRefusedFirst);  // the same /64
  EXPECT_EQ(c.Admit(Ip("2001:db8:1:3::1")), A::kAdmitted);
  EXPECT_EQ(c.Admit(Ip("198.51.100.7")), A::kAdmitted);
  EXPECT_EQ(c.Admit(Ip("198.51.100.200")), A::kRefusedFirst);  // the same /24
  EXPECT_EQ(c.Admit(Ip("::ffff:198.51.100.9")), A::kRefused);  // IPv4-mapped is IPv4
  EXPECT_EQ(c.Group(Ip("198.51.100.7")).ToString(), "198.51.100.0");
}

using std::chrono::milliseconds;
using std::chrono::seconds;
constexpr ConnectionDeadline::Timeouts kTimeouts{
    .header = seconds(2), .body = seconds(3), .idle = seconds(60)};

TEST(ConnectionDeadline, FirstHeaderRunsFromAcceptHoweverItsBytesArrive) {
  ManualClock clock;
  ConnectionDeadline d(clock, kTimeouts);
  const Nanos accepted = clock.MonotonicCoarse();
  d.Accepted();
  for (int i = 0; i < 19; ++i) {  // a byte every 100 ms: none of them moves the deadline
    clock.Advance(milliseconds(100));
    d.RequestStarted();
  }
  EXPECT_EQ(d.at(), accepted + seconds(2));
  clock.Advance(milliseconds(99));
  EXPECT_FALSE(d.Expired(clock.MonotonicCoarse()));
  clock.Advance(milliseconds(1));
  EXPECT_TRUE(d.Expired(clock.MonotonicCoarse()));
}

TEST(ConnectionDeadline, KeepAliveWaitsIdleThenTimesTheHeaderFromItsFirstByte) {
  ManualClock clock;
  ConnectionDeadline d(clock, kTimeouts);
  d.AwaitNext();
  EXPECT_EQ(d.at(), clock.MonotonicCoarse() + seconds(60));
  clock.Advance(seconds(30));
  d.RequestStarted();  // the next request's first bytes
  const Nanos first_byte = clock.MonotonicCoarse();
  EXPECT_EQ(d.at(), first_byte + seconds(2));
  clock.Advance(seconds(1));
  d.RequestStarted();  // more of the same header
  EXPECT_EQ(d.at(), first_byte + seconds(2));
  d.BodyStarted();
  EXPECT_EQ(d.at(), clock.MonotonicCoarse() + seconds(3));
  d.Deciding();
  EXPECT_EQ(d.at(), kNoDeadline);
  EXPECT_FALSE(d.Expired(Nanos::max() - Nanos(1)));
  d.Sending();
  EXPECT_EQ(d.at(), clock.MonotonicCoarse() + seconds(3));
  d.RequestStarted();  // not idle: nothing changes
  EXPECT_EQ(d.at(), clock.MonotonicCoarse() + seconds(3));
}

// One timer per connection (the epoll transport), ticking every second against a 2 s header
// timeout, its phase 300 ms off the accept: it fires at the deadline itself, not at the tick
// after it (2.3 s), and never early.
TEST(ConnectionDeadline, ItsTimerFiresAtTheDeadlineNotATickLate) {
  ManualClock clock;
  ConnectionDeadline d(clock, kTimeouts);
  const Nanos tick = seconds(1);
  const Nanos accepted = clock.MonotonicCoarse();
  d.Accepted();
  clock.Advance(milliseconds(300));
  int firings = 0;
  while (!d.Expired(clock.MonotonicCoarse())) {
    clock.Advance(d.Wait(clock.MonotonicCoarse(), tick));
    ASSERT_LT(++firings, 10);
  }
  EXPECT_EQ(clock.MonotonicCoarse() - accepted, seconds(2));
  EXPECT_EQ(firings, 2);  // at 1.3 s, then at 2 s
  // A timer that fires just short of the deadline (the coarse reading lags the timer) waits the
  // least wait rather than spin; with no deadline, a tick.
  d.Accepted();
  EXPECT_EQ(d.Wait(d.at() - Nanos(1000), tick), kMinCheckWait);
  d.Deciding();
  EXPECT_EQ(d.Wait(clock.MonotonicCoarse(), tick), tick);
}

// One timer per thread (the io_uring transport), its sweeps a second apart, for connections
// whose deadlines fall between sweeps: each is cut at its deadline, not at the next sweep; a
// deadline that moved after it was noted is checked and left, and met at its new time.
TEST(DeadlineSweep, CutsEachConnectionAtItsDeadlineNotAtTheNextSweep) {
  ManualClock clock;
  const Nanos start = clock.MonotonicCoarse();
  DeadlineSweep<int> sweep(seconds(1));
  std::map<int, ConnectionDeadline> live;
  std::map<int, Nanos> cut;  // id → when, from start
  const auto now = [&] { return clock.MonotonicCoarse(); };
  const auto check = [&](int id) {
    auto it = live.find(id);
    if (it == live.end() || !it->second.Expired(now())) return;
    cut[id] = now() - start;
    live.erase(it);
  };
  int checked_between = 0;
  const auto fire = [&] {  // what the loop does when its timer fires
    if (sweep.SweepDue(now())) {
      sweep.BeginSweep(now());
      std::vector<int> ids;
      for (auto& [id, d] : live) ids.push_back(id);
      for (int id : ids) check(id);
      for (auto& [id, d] : live) sweep.Note(id, d.at());
      sweep.EndSweep();
    } else {
      sweep.TakeDue(now(), [&](int id) {
        ++checked_between;
        check(id);
      });
    }
  };
  const auto step = [&] {  // the timer fires, and is armed again
    fire();
    clock.Advance(sweep.Wait(now()));
  };

  step();  // the sweep at 0, with nothing yet; the next at 1 s
  step();
  ASSERT_EQ(now() - start, seconds(2));
  fire();  // the sweep at 2 s
  clock.Advance(milliseconds(300));
  live.emplace(1, ConnectionDeadline(clock, kTimeouts)).first->second.Accepted();  // due 4.3 s
  clock.Advance(milliseconds(200));
  live.emplace(2, ConnectionDeadline(clock, kTimeouts)).first->second.Accepted();  // due 4.5 s
  clock.Advance(milliseconds(500));
  ASSERT_EQ(now() - start, seconds(3));
  step();  // the sweep at 3 s notes neither: both are due after the next
  ASSERT_EQ(now() - start, seconds(4));
  step();  // the sweep at 4 s notes both
  ASSERT_EQ(now() - start, milliseconds(4300));
  live.at(2).Sending();  // connection 2 moves on: due at 4.3 s + 3 s
  while (!live.empty() && now() - start < seconds(20)) step();
  EXPECT_EQ(cut, (std::map<int, Nanos>{{1, milliseconds(4300)}, {2, milliseconds(7300)}}));
  // Between sweeps only the noted ones were looked at: 1 at 4.3 s (cut), 2 at 4.5 s (moved), and
  // 2 at 7.3 s (cut) after the sweep at 7 s noted it.
  EXPECT_EQ(checked_between, 3);
}

}  // namespace
}  // namespace caudal::http_server
