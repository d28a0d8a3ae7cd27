// Forward-auth descriptors from a request's pieces, without sockets.
#include "server/routes.h"

#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

namespace caudal::routes {
namespace {

struct Fields {
  std::vector<std::pair<std::string, std::string>> list;

  std::string_view First(std::string_view name) const {
    for (const auto& [n, v] : list) {
      if (n == name) return v;
    }
    return {};
  }
  size_t Count(std::string_view name) const {
    size_t c = 0;
    for (const auto& [n, v] : list) c += n == name;
    return c;
  }
};

ForwardAuth Derive(const Fields& f) {
  const ForwardAuthOptions auth{
      .trusted_proxies = {},
      .descriptor_headers = {{"api_key", "X-API-Key"}, {"tenant", "X-Tenant"}},
      .caller = {},
      .admin_token = {}};
  const Request r{.method = "GET",
                  .target = "/v1/auth",
                  .body = "",
                  .peer = *IpAddress::Parse("192.0.2.7"),
                  .header = [&f](std::string_view n) { return f.First(n); },
                  .header_count = [&f](std::string_view n) { return f.Count(n); },
                  .forwarded_for = ""};
  return ForwardAuthDescriptors(auth, r);
}

TEST(ForwardAuthDescriptors, IpThenEachConfiguredHeaderPresent) {
  const ForwardAuth d = Derive({{{"X-Tenant", "t1"}, {"X-Other", "o"}}});
  ASSERT_FALSE(d.error.has_value()) << d.error->message;
  ASSERT_EQ(d.descriptors.size(), 2u);
  EXPECT_EQ(d.descriptors[0].name, "ip");
  EXPECT_EQ(d.descriptors[0].value, "192.0.2.7");
  EXPECT_EQ(d.descriptors[1].name, "tenant");
  EXPECT_EQ(d.descriptors[1].value, "t1");
}

TEST(ForwardAuthDescriptors, RefusesAnIdentityHeaderGivenTwice) {
  const ForwardAuth d = Derive({{{"X-API-Key", "mine"}, {"X-API-Key", "someone-else"}}});
  ASSERT_TRUE(d.error.has_value());
  EXPECT_EQ(d.error->status, 400);
  EXPECT_EQ(d.error->code, "ambiguous_identity");
  EXPECT_EQ(d.error->message,
            "header X-API-Key: given 2 times (an identity header must be given once)");
  // Headers caudal does not key by may repeat.
  EXPECT_FALSE(Derive({{{"X-Other", "a"}, {"X-Other", "b"}}}).error.has_value());
}

TEST(ForwardAuthDescriptors, RefusesIdentitiesWithControlCharactersOrIllFormedUtf8) {
  for (std::string bad : {std::string("a\0b", 3), std::string("a\tb"), std::string("\xff\xfe"),
                          std::string("k\xc3")}) {
    const ForwardAuth d = Derive({{{"X-API-Key", bad}}});
    ASSERT_TRUE(d.error.has_value()) << bad;
    EXPECT_EQ(d.error->code, "invalid_identity");
    EXPECT_TRUE(d.error->message.starts_with("header X-API-Key: ")) << d.error->message;
  }
  EXPECT_FALSE(Derive({{{"X-API-Key", "caf\xc3\xa9"}}}).error.has_value());
}

std::optional<http_api::Reply> Refuse(const CallerAuth& caller, std::string_view path,
                                      const Fields& f, std::vector<std::string> ids = {}) {
  const Request r{.method = "POST",
                  .target = path,
                  .body = "",
                  .peer = *IpAddress::Parse("192.0.2.7"),
                  .header = [&f](std::string_view n) { return f.First(n); },
                  .header_count = [&f](std::string_view n) { return f.Count(n); },
                  .forwarded_for = "",
                  .identities = ids};
  const Route* route = FindRoute(path);
  return RefuseCaller(caller, route != nullptr ? route->access : Access::kAnyone, r);
}

TEST(RefuseCaller, DecisionEndpointsNeedTheTokenHealthStaysOpen) {
  const CallerAuth caller{.token = "t0ken", .allowed = {}, .protect_metrics = false};
  for (std::string_view path : {"/v1/check", "/v1/auth"}) {
    auto missing = Refuse(caller, path, {});
    ASSERT_TRUE(missing.has_value()) << path;
    EXPECT_EQ(missing->status, 401);
    EXPECT_EQ(missing->headers.Get("WWW-Authenticate"), "Bearer realm=\"caudal\"");
    EXPECT_NE(missing->body.find("\"unauthenticated\""), std::string::npos) << missing->body;
    auto wrong = Refuse(caller, path, {{{"Authorization", "Bearer t0kem"}}});
    ASSERT_TRUE(wrong.has_value());
    EXPECT_EQ(wrong->status, 401);
    EXPECT_EQ(wrong->headers.Get("WWW-Authenticate"),
              "Bearer realm=\"caudal\", error=\"invalid_token\"");
    // The reply never echoes the token it was given or the one it expects.
    EXPECT_EQ(wrong->body.find("t0ke"), std::string::npos) << wrong->body;
    EXPECT_FALSE(Refuse(caller, path, {{{"Authorization", "Bearer t0ken"}}}).has_value());
  }
  for (std::string_view path : {"/healthz", "/readyz", "/metrics", "/v1/top-refused", "/"}) {
    EXPECT_FALSE(Refuse(caller, path, {}).has_value()) << path;
  }
}

TEST(RefuseCaller, ProtectedMetricsNeedCredentialsToo) {
  const CallerAuth caller{.token = "t0ken", .allowed = {}, .protect_metrics = true};
  EXPECT_EQ(Refuse(caller, "/metrics", {})->status, 401);
  EXPECT_EQ(Refuse(caller, "/v1/top-refused", {})->status, 401);
  EXPECT_FALSE(Refuse(caller, "/metrics", {{{"Authorization", "Bearer t0ken"}}}).has_value());
  EXPECT_FALSE(Refuse(caller, "/healthz", {}).has_value());
}

TEST(RefuseCaller, CertificateIdentitiesNotAllowedAre403) {
  const CallerAuth caller{.token = "", .allowed = {"envoy"}, .protect_metrics = false};
  EXPECT_FALSE(Refuse(caller, "/v1/check", {}, {"envoy"}).has_value());
  EXPECT_EQ(Refuse(caller, "/v1/check", {}, {"intruder"})->status, 403);
  EXPECT_EQ(Refuse(caller, "/v1/check", {})->status, 401);
}

// Two Authorization headers, even if one holds the token: which one a proxy checked is unknown.
TEST(RefuseCaller, TwoAuthorizationHeadersAreAmbiguous) {
  const CallerAuth caller{.token = "t0ken", .allowed = {}, .protect_metrics = true};
  for (std::string_view path : {"/v1/check", "/v1/auth", "/metrics"}) {
    auto two = Refuse(caller, path,
                      {{{"Authorization", "Bearer t0ken"}, {"Authorization", "Bearer other"}}});
    ASSERT_TRUE(two.has_value()) << path;
    EXPECT_EQ(two->status, 400);
    EXPECT_NE(two->body.find("\"ambiguous_identity\""), std::string::npos) << two->body;
    EXPECT_NE(two->body.find("header Authorization: given 2 times"), std::string::npos);
    EXPECT_EQ(two->body.find("t0ke"), std::string::npos) << two->body;
  }
}

TEST(RefuseCaller, NothingConfiguredRefusesNobody) {
  EXPECT_FALSE(Refuse(CallerAuth{}, "/v1/check", {}).has_value());
}

// The table's rows agree with what each path promises its callers: a body only where a method
// that carries one is required, Idempotency-Key only where a body names the identity, no path
// served twice, and the admin API behind its own token alone.
TEST(RouteTable, RowsAreConsistent) {
  std::vector<std::string_view> paths;
  for (const Route& route : RouteTable()) {
    SCOPED_TRACE(route.path);
    ASSERT_NE(route.handle, nullptr);
    EXPECT_EQ(FindRoute(route.path), &route);  // no earlier row shadows it
    if (route.body_depth > 0) {
      EXPECT_EQ(route.methods, "POST");
    }
    if (route.idempotent) {
      EXPECT_GT(route.body_depth, 0u);
    }
    if (route.methods == "GET, HEAD") {
      EXPECT_EQ(route.body_depth, 0u);
    }
    EXPECT_EQ(route.access == Access::kAdmin, route.path.starts_with("/v1/admin/"));
    for (std::string_view p : paths) EXPECT_NE(p, route.path);
    paths.push_back(route.path);
  }
  EXPECT_EQ(FindRoute("/v1/admin/overrides")->access, Access::kAdmin);
  EXPECT_EQ(FindRoute("/v1/checks"), nullptr);
  EXPECT_EQ(FindRoute("/v1/check/"), nullptr);
  for (std::string_view decision :
       {"/v1/check", "/v1/auth", "/v1/release", "/v1/reserve", "/v1/settle"}) {
    EXPECT_EQ(FindRoute(decision)->access, Access::kCaller) << decision;
  }
}

}  // namespace
}  // namespace caudal::routes
