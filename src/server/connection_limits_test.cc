#include "server/connection_limits.h"

#include <gtest/gtest.h>
#include <sys/resource.h>

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

}  // namespace
}  // namespace caudal::http_server
