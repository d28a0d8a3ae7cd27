#include "server/request_parser.h"

#include <gtest/gtest.h>

#include <boost/asio/buffer.hpp>
#include <string>

namespace caudal::http_server {
namespace {

namespace net = boost::asio;
using boost::beast::error_code;

// Feeds `wire` to a fresh parser over `req` in pieces of `step` bytes, as reads would deliver
// it; returns the bytes consumed (the rest belongs to the next request) and the last error.
struct Fed {
  size_t used = 0;
  error_code ec;
  bool done = false;
  bool keep_alive = false;
};
Fed Feed(ParsedRequest& req, std::string_view wire, size_t step = 1 << 20) {
  RequestParser parser(req);
  parser.header_limit(1024);
  parser.body_limit(64);
  parser.eager(true);
  Fed out;
  std::string pending;
  size_t given = 0;
  while (!parser.is_done()) {
    if (given < wire.size()) {
      const size_t n = std::min(step, wire.size() - given);
      pending.append(wire.substr(given, n));
      given += n;
    } else if (pending.empty() || out.ec == boost::beast::http::error::need_more) {
      break;  // the wire ran out before the request did
    }
    out.ec = {};
    const size_t used = parser.put(net::buffer(pending), out.ec);
    pending.erase(0, used);
    out.used += used;
    if (out.ec && out.ec != boost::beast::http::error::need_more) break;
  }
  out.done = parser.is_done();
  out.keep_alive = out.done && parser.keep_alive();
  return out;
}

TEST(RequestParser, KeepsRequestLineFieldsAndBody) {
  ParsedRequest req;
  const std::string wire =
      "POST /v1/check?x=1 HTTP/1.1\r\nHost: a\r\nX-API-Key: k1\r\nContent-Length: 5\r\n\r\nhello";
  const Fed f = Feed(req, wire);
  ASSERT_TRUE(f.done) << f.ec.message();
  EXPECT_EQ(f.used, wire.size());
  EXPECT_EQ(req.method(), "POST");
  EXPECT_EQ(req.verb(), boost::beast::http::verb::post);
  EXPECT_EQ(req.target(), "/v1/check?x=1");
  EXPECT_EQ(req.version(), 11);
  EXPECT_EQ(req.body(), "hello");
  EXPECT_EQ(req.field_count(), 3u);
  EXPECT_EQ(req.Field("x-api-key"), "k1");  // names compare without case
  EXPECT_EQ(req.Field("X-Missing"), "");
  EXPECT_TRUE(f.keep_alive);
}

TEST(RequestParser, SameResultWhenBytesArriveOneAtATime) {
  ParsedRequest req;
  const std::string wire =
      "GET /v1/auth HTTP/1.0\r\nConnection: keep-alive\r\nX-Forwarded-For: 10.0.0.1\r\n\r\n";
  const Fed f = Feed(req, wire, 1);
  ASSERT_TRUE(f.done) << f.ec.message();
  EXPECT_EQ(req.target(), "/v1/auth");
  EXPECT_EQ(req.version(), 10);
  EXPECT_EQ(req.Field("X-Forwarded-For"), "10.0.0.1");
  EXPECT_TRUE(f.keep_alive);
}

TEST(RequestParser, JoinsRepeatedFieldsInOrder) {
  ParsedRequest req;
  ASSERT_TRUE(Feed(req,
                   "GET / HTTP/1.1\r\nX-Forwarded-For: 1.1.1.1\r\nHost: h\r\n"
                   "x-forwarded-for: 2.2.2.2, 3.3.3.3\r\n\r\n")
                  .done);
  std::string joined = "stale";
  req.JoinFields("X-Forwarded-For", joined);
  EXPECT_EQ(joined, "1.1.1.1,2.2.2.2, 3.3.3.3");
  req.JoinFields("X-None", joined);
  EXPECT_EQ(joined, "");
}

TEST(RequestParser, ReadsAChunkedBody) {
  ParsedRequest req;
  const Fed f = Feed(req,
                     "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"
                     "3\r\nabc\r\n2;ext=1\r\nde\r\n0\r\n\r\n",
                     4);
  ASSERT_TRUE(f.done) << f.ec.message();
  EXPECT_EQ(req.body(), "abcde");
}

TEST(RequestParser, StopsAtTheEndOfTheFirstOfPipelinedRequests) {
  ParsedRequest req;
  const std::string first = "GET /a HTTP/1.1\r\nConnection: close\r\n\r\n";
  const Fed f = Feed(req, first + "GET /b HTTP/1.1\r\n\r\n");
  ASSERT_TRUE(f.done);
  EXPECT_EQ(f.used, first.size());
  EXPECT_EQ(req.target(), "/a");
  EXPECT_FALSE(f.keep_alive);
}

TEST(RequestParser, AFreshParserForgetsThePreviousRequest) {
  ParsedRequest req;
  ASSERT_TRUE(Feed(req, "POST /a HTTP/1.1\r\nX-A: 1\r\nContent-Length: 2\r\n\r\nhi").done);
  ASSERT_TRUE(Feed(req, "GET /b HTTP/1.1\r\nX-B: 2\r\n\r\n").done);
  EXPECT_EQ(req.target(), "/b");
  EXPECT_EQ(req.Field("X-A"), "");
  EXPECT_EQ(req.Field("X-B"), "2");
  EXPECT_EQ(req.body(), "");
  EXPECT_EQ(req.field_count(), 1u);
}

TEST(RequestParser, EnforcesTheLimits) {
  ParsedRequest req;
  Fed f = Feed(req, "GET / HTTP/1.1\r\nX-Big: " + std::string(2000, 'a') + "\r\n\r\n");
  EXPECT_EQ(f.ec, boost::beast::http::error::header_limit);
  f = Feed(req, "POST / HTTP/1.1\r\nContent-Length: 65\r\n\r\n");
  EXPECT_EQ(f.ec, boost::beast::http::error::body_limit);
  f = Feed(req, "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n40\r\n" +
                    std::string(64, 'a') + "\r\n1\r\nb\r\n0\r\n\r\n");
  EXPECT_EQ(f.ec, boost::beast::http::error::body_limit);
  f = Feed(req, "GET / HTTP/1.1\r\nBad Name: x\r\n\r\n");
  EXPECT_EQ(f.ec, boost::beast::http::error::bad_field);
  EXPECT_FALSE(f.done);
}

}  // namespace
}  // namespace caudal::http_server
