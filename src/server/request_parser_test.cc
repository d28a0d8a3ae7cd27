#include "server/request_parser.h"

#include <gtest/gtest.h>

#include <boost/asio/buffer.hpp>
#include <boost/asio/error.hpp>
#include <string>
#include <vector>

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
    const size_t used = parser.Put(net::buffer(pending), out.ec);
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
                     "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n"
                     "3\r\nabc\r\n2;ext=1\r\nde\r\n0\r\n\r\n",
                     4);
  ASSERT_TRUE(f.done) << f.ec.message();
  EXPECT_EQ(req.body(), "abcde");
}

TEST(RequestParser, StopsAtTheEndOfTheFirstOfPipelinedRequests) {
  ParsedRequest req;
  const std::string first = "GET /a HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n";
  const Fed f = Feed(req, first + "GET /b HTTP/1.1\r\nHost: h\r\n\r\n");
  ASSERT_TRUE(f.done);
  EXPECT_EQ(f.used, first.size());
  EXPECT_EQ(req.target(), "/a");
  EXPECT_FALSE(f.keep_alive);
}

TEST(RequestParser, AFreshParserForgetsThePreviousRequest) {
  ParsedRequest req;
  ASSERT_TRUE(
      Feed(req, "POST /a HTTP/1.1\r\nHost: h\r\nX-A: 1\r\nContent-Length: 2\r\n\r\nhi").done);
  ASSERT_TRUE(Feed(req, "GET /b HTTP/1.1\r\nHost: h\r\nX-B: 2\r\n\r\n").done);
  EXPECT_EQ(req.target(), "/b");
  EXPECT_EQ(req.Field("X-A"), "");
  EXPECT_EQ(req.Field("X-B"), "2");
  EXPECT_EQ(req.body(), "");
  EXPECT_EQ(req.field_count(), 2u);  // Host and X-B
}

TEST(RequestParser, EnforcesTheLimits) {
  ParsedRequest req;
  Fed f = Feed(req, "GET / HTTP/1.1\r\nHost: h\r\nX-Big: " + std::string(2000, 'a') + "\r\n\r\n");
  EXPECT_EQ(f.ec, boost::beast::http::error::header_limit);
  f = Feed(req, "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 65\r\n\r\n");
  EXPECT_EQ(f.ec, boost::beast::http::error::body_limit);
  f = Feed(req, "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n40\r\n" +
                    std::string(64, 'a') + "\r\n1\r\nb\r\n0\r\n\r\n");
  EXPECT_EQ(f.ec, boost::beast::http::error::body_limit);
  f = Feed(req, "GET / HTTP/1.1\r\nHost: h\r\nBad Name: x\r\n\r\n");
  EXPECT_EQ(f.ec, boost::beast::http::error::bad_field);
  EXPECT_FALSE(f.done);
}

// RFC 9112 §6.1 and §6.3: a Transfer-Encoding caudal cannot frame exactly is refused, never
// read as a request without a body (whose body would then be parsed as the next request).
TEST(RequestParser, RefusesTransferEncodingsItCannotFrame) {
  struct Case {
    std::string fields;
    FramingError error;
    int status;
  };
  const std::vector<Case> cases = {
      {"Transfer-Encoding: identity\r\n", FramingError::kFinalCodingNotChunked, 400},
      {"Transfer-Encoding: gzip\r\n", FramingError::kFinalCodingNotChunked, 400},
      {"Transfer-Encoding: chunked, identity\r\n", FramingError::kFinalCodingNotChunked, 400},
      {"Transfer-Encoding: chunked, gzip\r\n", FramingError::kFinalCodingNotChunked, 400},
      {"Transfer-Encoding: gzip\r\nTransfer-Encoding: identity\r\n",
       FramingError::kFinalCodingNotChunked, 400},
      {"Transfer-Encoding: chunked, chunked\r\n", FramingError::kChunkedTwice, 400},
      {"Transfer-Encoding: gzip, chunked\r\n", FramingError::kUnsupportedTransferCoding, 501},
      {"Transfer-Encoding: gzip\r\nTransfer-Encoding: chunked\r\n",
       FramingError::kUnsupportedTransferCoding, 501},
      {"Transfer-Encoding: x-custom;q=1, chunked\r\n", FramingError::kUnsupportedTransferCoding,
       501},
      {"Transfer-Encoding: chunked;foo=bar\r\n", FramingError::kBadTransferCoding, 400},
      {"Transfer-Encoding: \r\n", FramingError::kBadTransferCoding, 400},
      {"Transfer-Encoding: , ,\r\n", FramingError::kBadTransferCoding, 400},
      {"Transfer-Encoding: chu\"nked\r\n", FramingError::kBadTransferCoding, 400},
      {"Transfer-Encoding: identity\r\nContent-Length: 5\r\n",
       FramingError::kTransferEncodingWithLength, 400},
  };
  for (const Case& c : cases) {
    for (size_t step : {size_t{1}, size_t{1} << 20}) {
      ParsedRequest req;
      const std::string wire = "POST /v1/check HTTP/1.1\r\nHost: h\r\n" + c.fields +
                               "\r\n0\r\n\r\nGET /smuggled HTTP/1.1\r\nHost: h\r\n\r\n";
      const Fed f = Feed(req, wire, step);
      EXPECT_EQ(f.ec, make_error_code(c.error)) << c.fields << ": " << f.ec.message();
      const auto refusal = RefusalFor(f.ec);
      ASSERT_TRUE(refusal.has_value()) << c.fields;
      EXPECT_EQ(refusal->status, c.status) << c.fields;
      EXPECT_NE(refusal->message.find("closed"), std::string::npos) << refusal->message;
      EXPECT_NE(req.target(), "/smuggled");
    }
  }
}

TEST(RequestParser, RefusesTransferEncodingInHttp10EvenWhenChunked) {
  ParsedRequest req;
  const Fed f = Feed(req, "POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n");
  EXPECT_EQ(f.ec, make_error_code(FramingError::kTransferEncodingInHttp10));
}

// Beast refuses these itself, whichever field comes first; they must still be answered.
TEST(RequestParser, RefusesContentLengthWithChunkedInEitherOrder) {
  for (const std::string fields : {"Content-Length: 5\r\nTransfer-Encoding: chunked\r\n",
                                   "Transfer-Encoding: chunked\r\nContent-Length: 5\r\n",
                                   "Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n",
                                   "Content-Length: 1\r\nContent-Length: 2\r\n"}) {
    ParsedRequest req;
    const Fed f = Feed(req, "POST / HTTP/1.1\r\nHost: h\r\n" + fields + "\r\nhello");
    ASSERT_TRUE(f.ec && f.ec != boost::beast::http::error::need_more) << fields;
    const auto refusal = RefusalFor(f.ec);
    ASSERT_TRUE(refusal.has_value()) << fields;
    EXPECT_EQ(refusal->status, 400) << fields;
  }
}

TEST(RequestParser, AcceptsChunkedWhateverItsCaseAndSpacing) {
  for (const std::string te : {"chunked", "Chunked", " CHUNKED ", ", chunked", "chunked ,"}) {
    ParsedRequest req;
    const Fed f = Feed(req, "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding:" + te +
                                "\r\n\r\n2\r\nhi\r\n0\r\n\r\n");
    ASSERT_TRUE(f.done && !f.ec) << te << ": " << f.ec.message();
    EXPECT_EQ(req.body(), "hi");
  }
}

// RFC 9112 §3.2: an HTTP/1.1 request names its host once; which host two of them mean is a guess.
TEST(RequestParser, RefusesAMissingOrRepeatedHost) {
  ParsedRequest req;
  Fed f = Feed(req, "GET /v1/auth HTTP/1.1\r\nX-API-Key: k\r\n\r\n");
  EXPECT_EQ(f.ec, make_error_code(FramingError::kNoHost));
  f = Feed(req, "GET /v1/auth HTTP/1.1\r\nHost: a\r\nX-API-Key: k\r\nhost: b\r\n\r\n");
  EXPECT_EQ(f.ec, make_error_code(FramingError::kRepeatedHost));
  f = Feed(req, "GET / HTTP/1.0\r\nHost: a\r\nHost: a\r\n\r\n");
  EXPECT_EQ(f.ec, make_error_code(FramingError::kRepeatedHost));
  EXPECT_TRUE(Feed(req, "GET / HTTP/1.0\r\n\r\n").done);           // HTTP/1.0 needs none
  EXPECT_TRUE(Feed(req, "GET / HTTP/1.1\r\nHost:\r\n\r\n").done);  // empty: no authority
  const auto refusal = RefusalFor(make_error_code(FramingError::kNoHost));
  ASSERT_TRUE(refusal.has_value());
  EXPECT_EQ(refusal->status, 400);
  EXPECT_EQ(refusal->code, "bad_host");
}

// Beast ends a line at CRLF only: a LF alone would leave it waiting, for the body timeout, for a
// CR that never comes. It is refused when it arrives, wherever a line is being read, whatever
// the reads' sizes; a LF inside a chunk's data, a CRLF split between reads, are nothing.
TEST(RequestParser, RefusesALineEndingInABareLineFeedAtOnce) {
  const std::string head =
      "POST /v1/check HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n";
  const std::string waits_forever[] = {
      head + "5\nhello\n0\n\n",                    // every chunk line ends in LF
      head + "5\r\nhello\r\n0\r\nX-Trailer: 1\n",  // a trailer line
      "GET / HTTP/1.1\nHost: h\n\n",               // the header
  };
  for (const std::string& wire : waits_forever) {
    for (size_t step : {size_t{1}, size_t{7}, wire.size()}) {
      ParsedRequest req;
      const Fed f = Feed(req, wire, step);
      // Beast refuses some of these itself, when it holds a whole start line.
      ASSERT_TRUE(f.ec && f.ec != boost::beast::http::error::need_more) << wire << " by " << step;
      EXPECT_EQ(RefusalFor(f.ec)->status, 400) << wire << " by " << step;
      EXPECT_FALSE(f.done);
      if (wire.starts_with("POST")) {
        EXPECT_EQ(f.ec, make_error_code(FramingError::kBareLineFeed));
      }
    }
  }
  const std::string fine = head + "6\r\na\nb\r\nc\r\n0\r\n\r\n";  // LFs in the data
  for (size_t step = 1; step <= fine.size(); ++step) {
    ParsedRequest req;
    const Fed f = Feed(req, fine, step);
    ASSERT_TRUE(f.done) << f.ec.message() << " by " << step;
    EXPECT_EQ(req.body(), "a\nb\r\nc");
  }
}

// RFC 9112 §5.2: a field line continued on the next by SP or HTAB (obs-fold) is refused in any
// field, never unfolded: Beast would join the lines with a space, and a proxy that did not would
// frame the request otherwise. Whatever the reads' sizes, before the request is handed on.
TEST(RequestParser, RefusesAFoldedFieldLineInAnyField) {
  const std::string folded[] = {
      "X-Anything: a\r\n b\r\n",
      "X-API-Key: k1\r\n\tk2\r\n",  // HTAB
      "X-Empty:\r\n tail\r\n",      // the first line empty: Beast keeps only the tail
      "X-Blank: a\r\n \r\n",        // continued by blanks alone
      "X-Twice: a\r\n b\r\n c\r\n", "Transfer-Encoding: gzip,\r\n chunked\r\n",
      "Content-Length:\r\n 5\r\n",  "Host: h\r\n h2\r\n",
  };
  for (const std::string& fields : folded) {
    for (size_t step : {size_t{1}, size_t{5}, size_t{1} << 20}) {
      ParsedRequest req;
      const std::string head = fields.starts_with("Host") ? "" : "Host: h\r\n";
      const Fed f = Feed(req, "POST /v1/check HTTP/1.1\r\n" + head + fields + "\r\nhello", step);
      EXPECT_EQ(f.ec, make_error_code(FramingError::kObsFold))
          << fields << " by " << step << ": " << f.ec.message();
      EXPECT_FALSE(f.done);
    }
  }
  // In a chunked body's trailer too.
  ParsedRequest req;
  Fed f = Feed(req,
               "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n"
               "2\r\nhi\r\n0\r\nX-Trailer: a\r\n b\r\n\r\n");
  EXPECT_EQ(f.ec, make_error_code(FramingError::kObsFold)) << f.ec.message();
  const auto refusal = RefusalFor(make_error_code(FramingError::kObsFold));
  ASSERT_TRUE(refusal.has_value());
  EXPECT_EQ(refusal->status, 400);
  EXPECT_EQ(refusal->code, "bad_framing");
  EXPECT_NE(refusal->message.find("obs-fold"), std::string::npos) << refusal->message;
  EXPECT_NE(refusal->message.find("closed"), std::string::npos) << refusal->message;
  // Whitespace inside a value, or around it, folds nothing.
  f = Feed(req, "GET / HTTP/1.1\r\nHost: h\r\nX-A: a \t b \t\r\nX-B:\t\tc\r\n\r\n", 1);
  ASSERT_TRUE(f.done) << f.ec.message();
  EXPECT_EQ(req.Field("X-A"), "a \t b");
  EXPECT_EQ(req.Field("X-B"), "c");
}

// RFC 9112 §3.2.2: a server must accept the absolute-form. Its path and query are the target,
// whatever the scheme's case, "/" when its path is empty; its authority takes Host's place.
TEST(RequestParser, ReadsAnAbsoluteFormTargetAsItsPathAndQuery) {
  struct Case {
    std::string target;
    std::string path;
    std::string host;
  };
  const Case cases[] = {
      {"http://127.0.0.1:8080/v1/check?a=1", "/v1/check?a=1", "127.0.0.1:8080"},
      {"HTTPS://Example.COM/v1/auth", "/v1/auth", "Example.COM"},
      {"http://h", "/", "h"},
      {"http://h?x=1&y", "/?x=1&y", "h"},
      {"http://[::1]:80/a/b", "/a/b", "[::1]:80"},
      {"http://h:/x", "/x", "h:"},
      {"http://my-host.local/p%20q?r=http://s", "/p%20q?r=http://s", "my-host.local"},
  };
  for (const Case& c : cases) {
    for (size_t step : {size_t{1}, size_t{1} << 20}) {
      ParsedRequest req;
      const Fed f = Feed(req, "GET " + c.target + " HTTP/1.1\r\nHost: other\r\nX: 1\r\n\r\n", step);
      ASSERT_TRUE(f.done) << c.target << ": " << f.ec.message();
      EXPECT_EQ(req.target(), c.path) << c.target;
      EXPECT_EQ(req.host(), c.host) << c.target;
      EXPECT_EQ(req.Field("Host"), "other");
      EXPECT_EQ(req.Field("X"), "1");
    }
  }
  // Origin-form and `*` stay as sent; their host is the Host field.
  ParsedRequest req;
  ASSERT_TRUE(Feed(req, "OPTIONS * HTTP/1.1\r\nHost: h:1\r\n\r\n").done);
  EXPECT_EQ(req.target(), "*");
  EXPECT_EQ(req.host(), "h:1");
  ASSERT_TRUE(Feed(req, "GET //b/c HTTP/1.1\r\nHost: h\r\n\r\n").done);  // a path, not b's
  EXPECT_EQ(req.target(), "//b/c");
  EXPECT_EQ(req.host(), "h");
  ASSERT_TRUE(Feed(req, "GET /a?http://b HTTP/1.1\r\nHost: h\r\n\r\n").done);
  EXPECT_EQ(req.target(), "/a?http://b");
  EXPECT_EQ(req.host(), "h");
  // Host is still required of HTTP/1.1 (RFC 9112 §3.2), and still once.
  EXPECT_EQ(Feed(req, "GET http://h/ HTTP/1.1\r\n\r\n").ec, make_error_code(FramingError::kNoHost));
}

TEST(RequestParser, RefusesATargetThatIsNoPathNorAnHttpUri) {
  for (const std::string target : {"ftp://h/x",        "h:8080",          "example.com:443",
                                   "v1/check",         "http:/v1/check",  "http:v1",
                                   "http:///v1/check", "http://:80/x",    "http://user@h/x",
                                   "http://u:p@h/",    "http://h/x#frag", "http://h#",
                                   "http://h:8a/x",    "http://h:80:90/", "http://[::1/x",
                                   "http://[]/x",      "http://[::1]x/",  "http://h]/",
                                   "http://h\"/x",     "http://h{/x",     "**",
                                   "mailto:a@b"}) {
    for (size_t step : {size_t{1}, size_t{1} << 20}) {
      ParsedRequest req;
      const Fed f = Feed(req, "GET " + target + " HTTP/1.1\r\nHost: h\r\n\r\n", step);
      EXPECT_EQ(f.ec, make_error_code(FramingError::kBadTarget))
          << target << " by " << step << ": " << f.ec.message();
      EXPECT_FALSE(f.done) << target;
    }
  }
  const auto refusal = RefusalFor(make_error_code(FramingError::kBadTarget));
  ASSERT_TRUE(refusal.has_value());
  EXPECT_EQ(refusal->status, 400);
  EXPECT_EQ(refusal->code, "bad_request");
  EXPECT_NE(refusal->message.find("closed"), std::string::npos) << refusal->message;
}

TEST(RequestParser, RefusalsSayWhatToAnswer) {
  EXPECT_EQ(RefusalFor(boost::beast::http::error::body_limit)->status, 413);
  EXPECT_EQ(RefusalFor(boost::beast::http::error::header_limit)->status, 431);
  EXPECT_EQ(RefusalFor(boost::beast::http::error::bad_field)->status, 400);
  EXPECT_FALSE(RefusalFor(boost::beast::http::error::end_of_stream).has_value());
  EXPECT_FALSE(RefusalFor(boost::beast::http::error::partial_message).has_value());
  EXPECT_FALSE(RefusalFor(boost::asio::error::connection_reset).has_value());
}

TEST(RequestParser, CountsRepeatedFields) {
  ParsedRequest req;
  ASSERT_TRUE(
      Feed(req, "GET / HTTP/1.1\r\nHost: h\r\nX-API-Key: a\r\nx-api-key: b\r\nX-B: 1\r\n\r\n")
          .done);
  EXPECT_EQ(req.FieldCount("X-API-Key"), 2u);
  EXPECT_EQ(req.FieldCount("x-b"), 1u);
  EXPECT_EQ(req.FieldCount("X-None"), 0u);
}

}  // namespace
}  // namespace caudal::http_server
