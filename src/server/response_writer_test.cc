#include "server/response_writer.h"

#include <gtest/gtest.h>

namespace caudal::http_server {
namespace {

http_api::Reply Refusal() {
  http_api::Reply r;
  r.status = 429;
  r.content_type = "application/problem+json";
  r.body = R"({"status":429})";
  r.headers.Add("RateLimit", "\"p\";r=", 0, ";t=", 12);
  r.headers.Add("Retry-After", 12);
  return r;
}

TEST(WriteResponse, WritesStatusFieldsLengthAndBody) {
  std::string out = "left over from the previous response";
  WriteResponse(Refusal(), {}, out);
  EXPECT_EQ(out,
            "HTTP/1.1 429 Too Many Requests\r\n"
            "RateLimit: \"p\";r=0;t=12\r\n"
            "Retry-After: 12\r\n"
            "Content-Type: application/problem+json\r\n"
            "Content-Length: 14\r\n"
            "\r\n"
            R"({"status":429})");
}

TEST(WriteResponse, AnEmptyAllowedReplyHasNoContentType) {
  http_api::Reply r;
  r.headers.Add("RateLimit-Policy", "\"p\";q=1000;w=1");
  std::string out;
  WriteResponse(r, {}, out);
  EXPECT_EQ(out,
            "HTTP/1.1 200 OK\r\nRateLimit-Policy: \"p\";q=1000;w=1\r\nContent-Length: 0\r\n\r\n");
}

TEST(WriteResponse, HeadKeepsTheLengthButSendsNoBody) {
  std::string out;
  WriteResponse(Refusal(), {.head = true}, out);
  EXPECT_TRUE(out.ends_with("Content-Length: 14\r\n\r\n")) << out;
}

TEST(WriteResponse, SaysWhenTheConnectionCloses) {
  std::string out;
  WriteResponse(Refusal(), {.connection = Connection::kClose}, out);
  EXPECT_NE(out.find("\r\nConnection: close\r\n"), std::string::npos);
  WriteResponse(Refusal(), {.version = 10}, out);
  EXPECT_TRUE(out.starts_with("HTTP/1.0 429 "));
  EXPECT_NE(out.find("\r\nConnection: keep-alive\r\n"), std::string::npos);
  WriteResponse(Refusal(), {.version = 10, .connection = Connection::kClose}, out);
  EXPECT_NE(out.find("\r\nConnection: close\r\n"), std::string::npos);
  EXPECT_EQ(out.find("keep-alive"), std::string::npos);
  WriteResponse(Refusal(), {}, out);
  EXPECT_EQ(out.find("Connection:"), std::string::npos);
}

TEST(HeaderList, FindsAFieldByItsExactName) {
  http_api::HeaderList h;
  EXPECT_TRUE(h.empty());
  h.Add("RateLimit-Policy", "\"a\";q=1;w=1");
  h.Add("RateLimit", "\"a\";r=0;t=1");
  EXPECT_EQ(h.Get("RateLimit"), "\"a\";r=0;t=1");  // not the field whose name it begins
  EXPECT_EQ(h.Get("RateLimit-Policy"), "\"a\";q=1;w=1");
  EXPECT_FALSE(h.Get("Retry-After").has_value());
  EXPECT_EQ(h.lines(), "RateLimit-Policy: \"a\";q=1;w=1\r\nRateLimit: \"a\";r=0;t=1\r\n");
}

}  // namespace
}  // namespace caudal::http_server
