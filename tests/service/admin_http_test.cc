// The admin API over HTTP, in-process on a manual clock: off without its token, refusing other
// credentials, runtime overrides set, listed and deleted, an identity's state read and reset,
// and bad input to every endpoint refused with a clear 4xx that changes nothing.
#include <arpa/inet.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <mutex>
#include <string>
#include <vector>

#include "service/service.h"
#include "support/manual_clock.h"

namespace caudal {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

constexpr std::string_view kToken = "admin-s3cret";

struct Answer {
  int status = 0;
  std::string head;
  std::string body;
};

Answer Http(uint16_t port, std::string_view method, std::string_view target,
            std::string_view body = "", std::string_view auth = kToken) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  std::string response;
  if (connect(fd, reinterpret_cast<const sockaddr*>(&a), sizeof a) == 0) {
    std::string request = std::string(method) + " " + std::string(target) +
                          " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n";
    if (!auth.empty()) request += "Authorization: Bearer " + std::string(auth) + "\r\n";
    request += "Content-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) +
               "\r\n\r\n" + std::string(body);
    if (send(fd, request.data(), request.size(), MSG_NOSIGNAL) ==
        static_cast<ssize_t>(request.size())) {
      char buf[4096];
      for (ssize_t n; (n = recv(fd, buf, sizeof buf, 0)) > 0;) response.append(buf, n);
    }
  }
  close(fd);
  if (!response.starts_with("HTTP/1.1 ") || response.size() < 12) return {};
  const size_t blank = response.find("\r\n\r\n");
  return {std::stoi(response.substr(9, 3)), response.substr(0, blank),
          blank == std::string::npos ? "" : response.substr(blank + 4)};
}

class AdminHttpTest : public ::testing::Test {
 protected:
  std::unique_ptr<Service> Start(bool admin = true) {
    const std::string yaml =
        "server:\n  http: 127.0.0.1:0\n"
        "policies:\n"
        "  - name: per-tenant\n"
        "    identity: [tenant]\n"
        "    limits: [{algorithm: token_bucket, capacity: 1, refill: 1/1m}]\n"
        "    overrides:\n"
        "      - match: {plan: pro}\n"
        "        limits: [{algorithm: token_bucket, capacity: 3, refill: 3/1m}]\n";
    auto config = ParseConfig(yaml, "admin_test.yaml");
    EXPECT_TRUE(config.ok()) << config.status().ToString();
    if (admin) config->server.admin.token = kToken;
    auto service = Service::Start(
        std::move(*config), {.clock = clock_, .log_sink = [this](LogLevel, std::string_view l) {
                               std::lock_guard lock(mu_);
                               lines_.emplace_back(l);
                             }});
    EXPECT_TRUE(service.ok()) << service.status().ToString();
    return service.ok() ? std::move(*service) : nullptr;
  }

  static int Check(uint16_t port, std::string_view descriptors) {
    return Http(port, "POST", "/v1/check", "{\"descriptors\": " + std::string(descriptors) + "}",
                "")
        .status;
  }

  std::string Log() {
    std::lock_guard lock(mu_);
    std::string all;
    for (const std::string& l : lines_) all += l + "\n";
    return all;
  }

  ManualClock clock_;
  std::mutex mu_;
  std::vector<std::string> lines_;  // guarded by mu_
};

constexpr std::string_view kAcme = "/v1/admin/policies/per-tenant/overrides?tenant=acme";
constexpr std::string_view kAcmeState = "/v1/admin/policies/per-tenant/state?tenant=acme";
constexpr std::string_view kRaise =
    R"({"limits": [{"algorithm": "token_bucket", "capacity": 5000, "refill": "5000/1m"}],
        "expires_in": "1h"})";

TEST_F(AdminHttpTest, IsNotFoundWithoutAnAdminTokenAndUnauthorizedWithoutTheBearer) {
  auto off = Start(false);
  ASSERT_NE(off, nullptr);
  EXPECT_EQ(Http(off->http_port(), "GET", "/v1/admin/policies/per-tenant/overrides").status, 404);
  off.reset();

  auto on = Start();
  ASSERT_NE(on, nullptr);
  const uint16_t port = on->http_port();
  Answer a = Http(port, "PUT", kAcme, kRaise, "");
  EXPECT_EQ(a.status, 401);
  EXPECT_THAT(a.head, HasSubstr("WWW-Authenticate: Bearer realm=\"caudal-admin\""));
  a = Http(port, "PUT", kAcme, kRaise, "wrong-token");
  EXPECT_EQ(a.status, 401);
  EXPECT_THAT(a.body, Not(HasSubstr("wrong-token")));
  EXPECT_THAT(a.body, Not(HasSubstr(kToken)));
  EXPECT_THAT(Http(port, "GET", "/v1/admin/policies/per-tenant/overrides").body,
              HasSubstr("\"count\":0"))
      << "nothing was set by the refused requests";
  EXPECT_THAT(Http(port, "GET", "/metrics", "", "").body,
              HasSubstr("caudal_admin_unauthenticated_total 2"));
  EXPECT_THAT(Log(), Not(HasSubstr(kToken)));
}

TEST_F(AdminHttpTest, SetsListsAndDeletesARuntimeOverrideThatAppliesAtOnce) {
  auto service = Start();
  ASSERT_NE(service, nullptr);
  const uint16_t port = service->http_port();
  EXPECT_EQ(Check(port, R"({"tenant": "acme"})"), 200);
  EXPECT_EQ(Check(port, R"({"tenant": "acme"})"), 429);

  Answer set = Http(port, "PUT", kAcme, kRaise);
  EXPECT_EQ(set.status, 201) << set.body;
  EXPECT_THAT(set.body, HasSubstr(R"("identity":{"tenant":"acme"})"));
  EXPECT_THAT(set.body, HasSubstr(R"("capacity":5000,"refill":"5000/1m")"));
  EXPECT_THAT(set.body, HasSubstr(R"("expires_in_ms":3600000)"));
  EXPECT_THAT(set.body, HasSubstr(R"("set_by":"127.0.0.1")"));
  EXPECT_EQ(Check(port, R"({"tenant": "acme"})"), 200) << "the raised limit applies at once";
  EXPECT_EQ(Http(port, "PUT", kAcme, kRaise).status, 200) << "replaced";

  Answer list = Http(port, "GET", "/v1/admin/policies/per-tenant/overrides");
  EXPECT_EQ(list.status, 200);
  EXPECT_THAT(list.body, HasSubstr(R"("count":1)"));
  Answer state = Http(port, "GET", kAcmeState);
  EXPECT_EQ(state.status, 200);
  EXPECT_THAT(state.body, HasSubstr(R"("limits_from":"runtime_override")"));
  EXPECT_THAT(state.body, HasSubstr(R"("remaining":4999)"));

  EXPECT_EQ(Http(port, "DELETE", kAcme).status, 200);
  EXPECT_EQ(Http(port, "DELETE", kAcme).status, 404);
  EXPECT_EQ(Check(port, R"({"tenant": "acme"})"), 429) << "the policy's limits, as left";
  const std::string log = Log();
  EXPECT_THAT(log, HasSubstr("admin: set the runtime override of policy \"per-tenant\""));
  EXPECT_THAT(log, HasSubstr("admin: deleted the runtime override"));
  EXPECT_THAT(Http(port, "GET", "/metrics", "", "").body,
              HasSubstr("caudal_admin_changes_total{op=\"set_override\"} 2"));
}

TEST_F(AdminHttpTest, InspectsWithoutChargingAndResets) {
  auto service = Start();
  ASSERT_NE(service, nullptr);
  const uint16_t port = service->http_port();
  EXPECT_THAT(Http(port, "GET", kAcmeState).body, HasSubstr(R"("remaining":1)"));
  EXPECT_THAT(Http(port, "GET", kAcmeState).body, HasSubstr(R"("remaining":1)"));
  EXPECT_EQ(Check(port, R"({"tenant": "acme"})"), 200);
  Answer s = Http(port, "GET", kAcmeState);
  EXPECT_THAT(s.body, HasSubstr(R"("remaining":0,"reset_after_ms":60000,"retry_after_ms":60000)"));
  EXPECT_EQ(Check(port, R"({"tenant": "acme"})"), 429);

  Answer reset = Http(port, "DELETE", kAcmeState);
  EXPECT_EQ(reset.status, 200) << reset.body;
  EXPECT_THAT(reset.body, HasSubstr(R"("remaining":1,"reset_after_ms":0,"retry_after_ms":0)"));
  EXPECT_EQ(Check(port, R"({"tenant": "acme"})"), 200);
  EXPECT_THAT(Log(), HasSubstr("admin: reset the state of policy \"per-tenant\""));
  // A tier by another descriptor of the request: plan=pro gets 3.
  for (int i = 0; i < 3; ++i) EXPECT_EQ(Check(port, R"({"tenant": "t", "plan": "pro"})"), 200);
  EXPECT_EQ(Check(port, R"({"tenant": "t", "plan": "pro"})"), 429);
}

TEST_F(AdminHttpTest, BadInputGetsAClear4xxAndChangesNothing) {
  auto service = Start();
  ASSERT_NE(service, nullptr);
  const uint16_t port = service->http_port();
  struct Case {
    std::string_view method;
    std::string target;
    std::string body;
    int status;
    std::string_view code;
  };
  const std::string base = "/v1/admin/policies/per-tenant/";
  const std::vector<Case> cases = {
      {"PUT", "/v1/admin/policies/nope/overrides?tenant=a", std::string(kRaise), 404,
       "unknown_policy"},
      {"PUT", base + "overrides", std::string(kRaise), 400, "missing_parameter"},
      {"PUT", base + "overrides?tenant=a&plan=pro", std::string(kRaise), 400, "unknown_parameter"},
      {"PUT", base + "overrides?tenant=a&tenant=b", std::string(kRaise), 400,
       "duplicate_parameter"},
      {"PUT", base + "overrides?tenant=%0a", std::string(kRaise), 400, "invalid_parameter"},
      {"PUT", base + "overrides?tenant=%zz", std::string(kRaise), 400, "invalid_parameter"},
      {"PUT", base + "overrides?tenant=a", "{", 400, "invalid_json"},
      {"PUT", base + "overrides?tenant=a", "[]", 400, "invalid_body"},
      {"PUT", base + "overrides?tenant=a", R"({"limits": [], "x": 1})", 400, "unknown_field"},
      {"PUT", base + "overrides?tenant=a", R"({"expires_in": "1h"})", 400, "missing_limits"},
      {"PUT", base + "overrides?tenant=a", R"({"weight": 2})", 400, "invalid_weight"},
      {"PUT", base + "overrides?tenant=a", R"({"weight": 0})", 400, "invalid_weight"},
      {"PUT", base + "overrides?tenant=a",
       R"({"limits": [{"algorithm": "token_bucket", "capacity": 5, "refill": "fast"}]})", 400,
       "invalid_limits"},
      {"PUT", base + "overrides?tenant=a",
       R"({"limits": [{"algorithm": "token_bucket", "capacity": 5, "refill": "5/1m"}],
           "expires_in": "0s"})",
       400, "invalid_expires_in"},
      {"PUT", base + "overrides?tenant=a",
       R"({"limits": [{"algorithm": "token_bucket", "capacity": 5, "refill": "5/1m"}],
           "limits": []})",
       400, "duplicate_field"},
      {"PUT", base + "overrides?tenant=a", std::string(17 * 1024, ' '), 413, "body_too_large"},
      {"PUT", base + "state?tenant=a", "", 405, "method_not_allowed"},
      {"GET", base + "state?tenant=a&tenant=b", "", 400, "duplicate_parameter"},
      {"DELETE", base + "state", "", 400, "missing_parameter"},
      {"DELETE", base + "overrides?tenant=a", "", 404, "no_override"},
      {"GET", base + "elsewhere", "", 404, "not_found"},
  };
  for (const Case& c : cases) {
    const Answer a = Http(port, c.method, c.target, c.body);
    EXPECT_EQ(a.status, c.status) << c.method << ' ' << c.target << ": " << a.body;
    EXPECT_THAT(a.body, HasSubstr("\"code\":\"" + std::string(c.code) + '"')) << c.target;
  }
  EXPECT_THAT(Http(port, "GET", base + "overrides").body, HasSubstr("\"count\":0"));
  EXPECT_THAT(Http(port, "GET", "/metrics", "", "").body,
              HasSubstr("caudal_admin_changes_total{op=\"set_override\"} 0"));
  EXPECT_EQ(Check(port, R"({"tenant": "a"})"), 200);
  EXPECT_EQ(Check(port, R"({"tenant": "a"})"), 429) << "nothing reset the state either";
}

}  // namespace
}  // namespace caudal
