// RequestParser: one HTTP/1.x request, framed by Beast's basic_parser (request line, fields,
// Content-Length and chunked bodies, header and body limits, keep-alive), stored in a
// ParsedRequest that the connection keeps from request to request. Storage is cleared, never
// freed, so once a connection has seen its largest request, parsing allocates nothing (Beast's
// own request_parser allocates every field on its own).
//
// Framing is RFC 9112's, strictly: where the body ends must never be in doubt, since whatever
// follows a body is read as the next request. Beyond Beast's own checks the parser refuses
// (FramingError) a Transfer-Encoding whose final coding is not chunked, that names chunked
// twice or any other coding, that comes with Content-Length, or that comes in an HTTP/1.0
// request; a line (of the header, a chunk's size, the trailer) that ends in a bare LF, at once
// (Beast would wait for a CR that never comes); and, as RFC 9112 §3.2 asks, an HTTP/1.1
// request without Host, or any request with two. A target is a path (origin-form), `*`, or an
// absolute http or https URI (absolute-form, §3.2.2), which every server must accept: its path
// and query are the target, "/" when its path is empty, and its authority takes the place of
// Host; any other target (another scheme, no host, user info, a fragment) is refused. A field line
// folded onto the next (obs-fold, RFC 9112 §5.2), which Beast would unfold, is refused in every
// field: a recipient that did not unfold it would read another value, of Transfer-Encoding and
// Content-Length as of any other. Every parse error leaves the connection's framing unknown: the
// server answers (RefusalFor) and closes.
//
//   ParsedRequest req;                    // one per connection
//   RequestParser parser(req);            // one per request
//   parser.header_limit(16 * 1024);
//   size_t used = parser.Put(net::buffer(data, n), ec);   // error::need_more: feed more bytes
//
// Does no I/O. Thread-safety: none; a connection's parser and request are its own.
#pragma once

#include <boost/beast/http/basic_parser.hpp>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "server/http_api.h"

namespace caudal::http_server {

namespace http = boost::beast::http;
using BeastStringView = boost::beast::string_view;

// The framing errors RequestParser adds to Beast's (boost::beast::http::error).
enum class FramingError {
  kFinalCodingNotChunked = 1,   // Transfer-Encoding: identity / gzip / chunked, gzip: 400
  kChunkedTwice,                // Transfer-Encoding: chunked, chunked: 400
  kBadTransferCoding,           // empty, not a token, or chunked with parameters: 400
  kUnsupportedTransferCoding,   // Transfer-Encoding: gzip, chunked (a coding caudal lacks): 501
  kTransferEncodingWithLength,  // Transfer-Encoding and Content-Length together: 400
  kTransferEncodingInHttp10,    // HTTP/1.0 has no Transfer-Encoding: 400
  kBareLineFeed,                // a line ends in LF alone, not CRLF: 400
  kNoHost,                      // HTTP/1.1 without Host: 400
  kRepeatedHost,                // Host given twice: 400
  kObsFold,                     // a field line continued on the next (obs-fold): 400
  kBadTarget,                   // neither a path, `*`, nor an absolute http(s) URI: 400
};
boost::system::error_code make_error_code(FramingError e);

// The answer to a request the parser refused with `ec`, the connection closing after it: 400
// (501 for an unsupported transfer coding, 413 for a body over the limit, 431 for a header over
// it), or nullopt when there is nothing to answer (the peer left, a request cut short by EOF).
std::optional<http_api::ApiError> RefusalFor(boost::beast::error_code ec);

class ParsedRequest {
 public:
  std::string_view method() const { return Slice(method_); }
  http::verb verb() const { return verb_; }
  // The path and query (origin-form), an absolute-form target's included, or `*`.
  std::string_view target() const { return Slice(target_); }
  // The host the request is for: an absolute-form target's authority, else the Host field.
  std::string_view host() const { return authority_.len > 0 ? Slice(authority_) : Field("Host"); }
  int version() const { return version_; }  // 10 or 11
  const std::string& body() const { return body_; }

  // The first field named `name` (ASCII case-insensitive), or "" when absent.
  std::string_view Field(std::string_view name) const;
  // Every value of the fields named `name`, comma-joined in order (RFC 9110 §5.3), into `out`.
  void JoinFields(std::string_view name, std::string& out) const;
  // How many fields are named `name` (ASCII case-insensitive).
  size_t FieldCount(std::string_view name) const;
  size_t field_count() const { return fields_.size(); }

  // Forgets the request, keeping the capacity.
  void Clear();

 private:
  friend class RequestParser;
  struct Span {
    uint32_t pos = 0;
    uint32_t len = 0;
  };
  struct FieldSpans {
    Span name;
    Span value;
  };
  std::string_view Slice(Span s) const { return {text_.data() + s.pos, s.len}; }
  Span Append(std::string_view s);

  std::string text_;  // the method, the target, and every field name and value, back to back
  Span method_;
  Span target_;
  Span authority_;  // an absolute-form target's; empty otherwise
  std::vector<FieldSpans> fields_;
  std::string body_;
  http::verb verb_ = http::verb::unknown;
  int version_ = 11;
};

class RequestParser final : public http::basic_parser<true> {
 public:
  // Clears `out` and fills it as the request arrives; `out` must outlive the parser.
  explicit RequestParser(ParsedRequest& out) : out_(out) { out_.Clear(); }

  // basic_parser::put, and the bare LF check: `in` holds what the connection has buffered and
  // not yet had consumed (the bytes after the last call's return value, and newer ones).
  size_t Put(boost::asio::const_buffer in, boost::beast::error_code& ec);

 private:
  void on_request_impl(http::verb method, BeastStringView method_str, BeastStringView target,
                       int version, boost::beast::error_code& ec) override;
  void on_response_impl(int, BeastStringView, int, boost::beast::error_code& ec) override;
  void on_field_impl(http::field f, BeastStringView name, BeastStringView value,
                     boost::beast::error_code& ec) override;
  void on_header_impl(boost::beast::error_code& ec) override;
  // Whether the field line starting with `name` is continued on the next line (obs-fold).
  bool Folded(BeastStringView name) const;
  void on_body_init_impl(const boost::optional<std::uint64_t>& content_length,
                         boost::beast::error_code& ec) override;
  size_t on_body_impl(BeastStringView body, boost::beast::error_code& ec) override;
  void on_chunk_header_impl(std::uint64_t, BeastStringView, boost::beast::error_code&) override {}
  size_t on_chunk_body_impl(std::uint64_t, BeastStringView body,
                            boost::beast::error_code& ec) override;
  void on_finish_impl(boost::beast::error_code&) override {}

  ParsedRequest& out_;
  // The Transfer-Encoding codings seen so far, over every field line, in order.
  struct Codings {
    bool any = false;  // a Transfer-Encoding field was present
    bool last_chunked = false;
    int chunked = 0;     // how many times chunked was named
    bool other = false;  // a coding other than chunked was named
    bool malformed = false;
  };
  Codings codings_;
  bool content_length_ = false;
  int hosts_ = 0;
  size_t checked_ = 0;            // bytes at the start of Put's next `in` known to hold no bare LF
  const char* in_end_ = nullptr;  // the end of the bytes the running Put was given
};

}  // namespace caudal::http_server
