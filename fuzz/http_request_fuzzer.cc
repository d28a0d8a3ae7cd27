// Fuzzer for the HTTP/1.x request framing the server runs on every connection (RequestParser on
// Beast's basic_parser), with the server's limits, and for the X-Forwarded-For walk.
//
// The first input byte picks a chunk size; the rest is the bytes a client sends. They are parsed
// twice, once whole and once in chunks, the way the server feeds a parser as reads arrive: both
// yield a request or neither does, and then the same one (method, target, host, version,
// fields, body), its target a path or `*` (an absolute-form one reduced to its path and query). A
// parsed request's X-Forwarded-For, behind a trusted peer, must resolve to the peer or to an
// address one of its hops spells. RFC 9112's framing: a request that parses has a body length no
// one can read otherwise (a Transfer-Encoding only as exactly `chunked`, never with Content-Length,
// never in HTTP/1.0) and no field line folded onto the next (obs-fold), and every refusal has an
// answer (400, 413, 431 or 501) after which the server closes. Never a crash, an overflow or an
// exception.
#include <boost/asio/buffer.hpp>
#include <boost/beast/core/string.hpp>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "caudal/engine/ip.h"
#include "fuzz_check.h"
#include "server/http_api.h"
#include "server/request_parser.h"

namespace caudal {
namespace {

constexpr size_t kHeaderLimit = 16 * 1024;  // as http_server.cc

struct Outcome {
  bool done = false;
  boost::beast::error_code ec;
};

// Feeds `bytes` in pieces of `chunk`, keeping what the parser did not take, as the server does.
Outcome Feed(std::string_view bytes, size_t chunk, http_server::ParsedRequest& req) {
  http_server::RequestParser parser(req);
  parser.header_limit(kHeaderLimit);
  parser.body_limit(http_api::kMaxBodyBytes);
  parser.eager(true);
  std::string pending;
  Outcome out;
  for (size_t at = 0; at < bytes.size() && !parser.is_done();) {
    const size_t n = std::min(chunk, bytes.size() - at);
    pending.append(bytes.substr(at, n));
    at += n;
    while (!pending.empty() && !parser.is_done()) {
      boost::beast::error_code ec;
      const size_t used = parser.Put(boost::asio::buffer(pending.data(), pending.size()), ec);
      FUZZ_CHECK(used <= pending.size());
      pending.erase(0, used);
      if (ec == boost::beast::http::error::need_more) break;
      if (ec) {
        out.ec = ec;
        return out;
      }
      if (used == 0) break;
    }
  }
  out.done = parser.is_done();
  return out;
}

bool SameRequest(const http_server::ParsedRequest& a, const http_server::ParsedRequest& b) {
  if (a.method() != b.method() || a.verb() != b.verb() || a.target() != b.target() ||
      a.host() != b.host() || a.version() != b.version() || a.body() != b.body() ||
      a.field_count() != b.field_count()) {
    return false;
  }
  for (std::string_view name : {"host", "x-api-key", "x-forwarded-for", "content-length"}) {
    if (a.Field(name) != b.Field(name)) return false;
  }
  std::string ja, jb;
  a.JoinFields("X-Forwarded-For", ja);
  b.JoinFields("X-Forwarded-For", jb);
  return ja == jb;
}

// The framing a parsed request was read with leaves no doubt about where its body ended.
void CheckFraming(const http_server::ParsedRequest& req) {
  std::string te;
  req.JoinFields("Transfer-Encoding", te);
  if (req.FieldCount("Transfer-Encoding") == 0) return;
  FUZZ_CHECK(req.FieldCount("Content-Length") == 0);
  FUZZ_CHECK(req.version() == 11);
  int chunked = 0;
  std::string_view rest = te;
  while (true) {
    const size_t comma = rest.find(',');
    std::string_view coding = rest.substr(0, comma);
    while (!coding.empty() && (coding.front() == ' ' || coding.front() == '\t')) {
      coding.remove_prefix(1);
    }
    while (!coding.empty() && (coding.back() == ' ' || coding.back() == '\t')) {
      coding.remove_suffix(1);
    }
    if (!coding.empty()) {
      FUZZ_CHECK(boost::beast::iequals(coding, "chunked"));
      ++chunked;
    }
    if (comma == std::string_view::npos) break;
    rest.remove_prefix(comma + 1);
  }
  FUZZ_CHECK(chunked == 1);
}

// No line of a parsed request's header is continued on the next (RFC 9112 §5.2): the header is
// the bytes up to the first empty line, and a CRLF inside it is never followed by SP or HTAB.
void CheckNoObsFold(std::string_view bytes) {
  const size_t end = bytes.find("\r\n\r\n");
  FUZZ_CHECK(end != std::string_view::npos);
  for (size_t at = bytes.find("\r\n"); at < end; at = bytes.find("\r\n", at + 2)) {
    FUZZ_CHECK(bytes[at + 2] != ' ' && bytes[at + 2] != '\t');
  }
}

// A refused request is answered with one of the documented statuses (the connection then closes).
void CheckRefusal(boost::beast::error_code ec) {
  const std::optional<http_api::ApiError> refusal = http_server::RefusalFor(ec);
  FUZZ_CHECK(refusal.has_value());
  FUZZ_CHECK(refusal->status == 400 || refusal->status == 413 || refusal->status == 431 ||
             refusal->status == 501);
  FUZZ_CHECK(!refusal->message.empty());
}

// The resolved client is the peer or an address that one comma-separated hop spells.
void CheckForwardedFor(std::string_view xff) {
  const IpAddress peer = *IpAddress::Parse("127.0.0.1");
  const std::vector<CidrBlock> trusted = {*CidrBlock::Parse("127.0.0.0/8"),
                                          *CidrBlock::Parse("10.0.0.0/8"),
                                          *CidrBlock::Parse("fd00::/8")};
  const IpAddress client = http_api::ClientAddress(peer, xff, trusted);
  if (client == peer) return;
  bool spelled = false;
  std::string_view rest = xff;
  while (!spelled) {
    const size_t comma = rest.find(',');
    std::string_view hop = rest.substr(0, comma);
    while (!hop.empty() && (hop.front() == ' ' || hop.front() == '\t')) hop.remove_prefix(1);
    while (!hop.empty() && (hop.back() == ' ' || hop.back() == '\t')) hop.remove_suffix(1);
    const Result<IpAddress> a = IpAddress::Parse(hop);
    spelled = a.ok() && *a == client;
    if (comma == std::string_view::npos) break;
    rest.remove_prefix(comma + 1);
  }
  FUZZ_CHECK(spelled);
}

void Run(const uint8_t* data, size_t size) {
  if (size == 0) return;
  const size_t chunk = 1 + data[0] % 64;
  const std::string_view bytes(reinterpret_cast<const char*>(data) + 1, size - 1);

  http_server::ParsedRequest whole_req, chunked_req;
  const Outcome whole = Feed(bytes, bytes.size() + 1, whole_req);
  const Outcome chunked = Feed(bytes, chunk, chunked_req);
  // Beast parses the fields of a header it holds whole as they come, so a bad field in a header
  // that has not ended yet is an error at once when the bytes arrive together, and a wait for
  // the end of the header when they trickle in. Either way no request comes out of it.
  FUZZ_CHECK(whole.done == chunked.done);
  if (whole.ec) CheckRefusal(whole.ec);
  if (chunked.ec) CheckRefusal(chunked.ec);
  if (!whole.done) return;
  CheckFraming(whole_req);
  CheckNoObsFold(bytes);
  // Origin-form or `*`: an absolute-form target is handed on as its path and query.
  FUZZ_CHECK(whole_req.target() == "*" || whole_req.target().starts_with('/'));
  FUZZ_CHECK(SameRequest(whole_req, chunked_req));
  FUZZ_CHECK(whole_req.body().size() <= http_api::kMaxBodyBytes);

  std::string xff;
  whole_req.JoinFields("X-Forwarded-For", xff);
  CheckForwardedFor(xff);
}

}  // namespace
}  // namespace caudal

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  caudal::Run(data, size);
  return 0;
}
