// The document GET /v1/openapi.json serves is the repository's docs/openapi.json, byte for byte,
// and names this build's version.
#include "server/openapi.h"

#include <gtest/gtest.h>

#include <boost/json.hpp>
#include <fstream>
#include <sstream>
#include <string>

namespace caudal::http_api {
namespace {

std::string ReadFile(const char* path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

TEST(OpenApiJson, IsTheRepositorysDocumentUnchanged) {
  const std::string file = ReadFile(CAUDAL_OPENAPI_JSON);
  ASSERT_GT(file.size(), 1000u) << CAUDAL_OPENAPI_JSON;
  EXPECT_EQ(OpenApiJson(), file);
}

TEST(OpenApiJson, IsOpenApi31ForThisVersionWithTheServedPaths) {
  boost::json::error_code ec;
  const boost::json::value doc = boost::json::parse(OpenApiJson(), ec);
  ASSERT_FALSE(ec) << ec.message();
  EXPECT_EQ(doc.at("openapi"), "3.1.0");
  EXPECT_EQ(doc.at("info").at("version"), CAUDAL_VERSION);
  const boost::json::object& paths = doc.at("paths").as_object();
  for (const char* path : {"/v1/check", "/v1/auth", "/healthz", "/readyz", "/metrics", "/v1/status",
                           "/v1/status/chart", "/v1/top-refused", "/", "/v1/openapi.json"}) {
    EXPECT_TRUE(paths.contains(path)) << path;
  }
}

}  // namespace
}  // namespace caudal::http_api
