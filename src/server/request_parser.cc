#include "server/request_parser.h"

#include <boost/beast/core/string.hpp>
#include <cassert>
#include <cstring>

#include "common/cat.h"

namespace caudal::http_server {

namespace beast = boost::beast;

namespace {
std::string_view Sv(BeastStringView s) { return {s.data(), s.size()}; }

// boost::system::error_category's destructor is protected and non-virtual, by design: categories
// are never deleted through it.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wnon-virtual-dtor"
class FramingCategory final : public boost::system::error_category {
 public:
  const char* name() const noexcept override { return "caudal.http.framing"; }
  std::string message(int e) const override {
    switch (static_cast<FramingError>(e)) {
      case FramingError::kFinalCodingNotChunked:
        return "Transfer-Encoding: the final coding is not chunked, so where the body ends is "
               "unknown";
      case FramingError::kChunkedTwice:
        return "Transfer-Encoding: chunked applied twice";
      case FramingError::kBadTransferCoding:
        return "Transfer-Encoding: not a list of transfer codings";
      case FramingError::kUnsupportedTransferCoding:
        return "Transfer-Encoding: only chunked is supported";
      case FramingError::kTransferEncodingWithLength:
        return "Transfer-Encoding and Content-Length together";
      case FramingError::kTransferEncodingInHttp10:
        return "Transfer-Encoding in an HTTP/1.0 request";
      case FramingError::kBareLineFeed:
        return "a line ends in a bare LF, not CRLF";
      case FramingError::kNoHost:
        return "no Host field in an HTTP/1.1 request";
      case FramingError::kRepeatedHost:
        return "Host given more than once";
      case FramingError::kObsFold:
        return "a field line continued on the next (obs-fold) is refused";
      case FramingError::kBadTarget:
        return "the target is neither a path, *, nor an absolute http or https URI with a host "
               "and no user info or fragment";
    }
    return "framing error";
  }
};
#pragma GCC diagnostic pop

const FramingCategory& Framing() {
  static const FramingCategory category;
  return category;
}

bool IsTokenChar(char c) {  // RFC 9110 §5.6.2 tchar
  if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')) return true;
  return std::string_view("!#$%&'*+-.^_`|~").find(c) != std::string_view::npos;
}

// RFC 3986 §3.2: what an authority may hold (unreserved, pct-encoded, sub-delims, ':' and an
// IP literal's brackets).
bool IsAuthorityChar(char c) {
  if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')) return true;
  return std::string_view("-._~%!$&'()*+,;=:[]").find(c) != std::string_view::npos;
}

// An absolute-form target split into its authority and its path and query, or nullopt when it
// is not http-URI / https-URI (RFC 9110 §4.2): a scheme other than those, an empty host (which
// §4.2.1 says a recipient must refuse), user info (§4.2.4: an error), a port that is not digits,
// or a fragment, which no request-target has (RFC 9112 §3.2).
struct AbsoluteTarget {
  std::string_view authority;
  std::string_view path_and_query;  // empty when the path is: read as "/"
};
std::optional<AbsoluteTarget> ParseAbsoluteTarget(std::string_view t) {
  const size_t sep = t.find("://");
  if (sep == std::string_view::npos) return std::nullopt;
  const std::string_view scheme = t.substr(0, sep);
  if (!beast::iequals(scheme, "http") && !beast::iequals(scheme, "https")) return std::nullopt;
  t.remove_prefix(sep + 3);
  if (t.find('#') != std::string_view::npos) return std::nullopt;
  const size_t end = t.find_first_of("/?");
  const AbsoluteTarget out{.authority = t.substr(0, end),
                           .path_and_query = end == std::string_view::npos ? "" : t.substr(end)};
  const std::string_view a = out.authority;
  for (char c : a) {
    if (!IsAuthorityChar(c)) return std::nullopt;
  }
  // host [":" port]; the host an IP literal in brackets, or a name or IPv4 address.
  size_t host_end = a.find(':');
  if (a.starts_with('[')) {
    const size_t close = a.find(']');
    if (close == std::string_view::npos || close == 1) return std::nullopt;
    host_end = close + 1;
  } else if (a.find_first_of("[]") != std::string_view::npos) {
    return std::nullopt;
  }
  if (host_end == 0 || a.empty()) return std::nullopt;
  if (host_end < a.size()) {
    if (a[host_end] != ':') return std::nullopt;
    for (char c : a.substr(host_end + 1)) {
      if (c < '0' || c > '9') return std::nullopt;
    }
  }
  return out;
}

std::string_view TrimOws(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}
}  // namespace

boost::system::error_code make_error_code(FramingError e) {
  return {static_cast<int>(e), Framing()};
}

std::optional<http_api::ApiError> RefusalFor(beast::error_code ec) {
  if (ec.category() == Framing()) {
    const bool unsupported = ec == make_error_code(FramingError::kUnsupportedTransferCoding);
    const bool host = ec == make_error_code(FramingError::kNoHost) ||
                      ec == make_error_code(FramingError::kRepeatedHost);
    const bool target = ec == make_error_code(FramingError::kBadTarget);
    return http_api::ApiError{
        .status = unsupported ? 501 : 400,
        .code = unsupported ? "not_implemented"
                            : (host ? "bad_host" : (target ? "bad_request" : "bad_framing")),
        .message = Cat("request: ", ec.message(), " (RFC 9112); the connection is closed")};
  }
  if (ec == http::error::body_limit) {
    return http_api::ApiError{
        .status = 413, .code = "body_too_large", .message = "body: larger than 64 KiB"};
  }
  if (ec == http::error::header_limit) {
    return http_api::ApiError{
        .status = 431, .code = "header_too_large", .message = "request header: larger than 16 KiB"};
  }
  if (ec.category() == http::make_error_code(http::error::bad_method).category() &&
      ec != http::error::end_of_stream && ec != http::error::partial_message) {
    return http_api::ApiError{.status = 400,
                              .code = "bad_request",
                              .message = Cat("request: malformed HTTP (", ec.message(), ')')};
  }
  return std::nullopt;  // the peer left, or a socket error: nobody to answer
}

ParsedRequest::Span ParsedRequest::Append(std::string_view s) {
  // The header limit (at most a few tens of KiB) keeps every offset far below 2^32.
  const Span span{.pos = static_cast<uint32_t>(text_.size()),
                  .len = static_cast<uint32_t>(s.size())};
  text_.append(s);
  return span;
}

std::string_view ParsedRequest::Field(std::string_view name) const {
  for (const FieldSpans& f : fields_) {
    if (beast::iequals(Slice(f.name), name)) return Slice(f.value);
  }
  return {};
}

void ParsedRequest::JoinFields(std::string_view name, std::string& out) const {
  out.clear();
  for (const FieldSpans& f : fields_) {
    if (!beast::iequals(Slice(f.name), name)) continue;
    if (!out.empty()) out += ',';
    out.append(Slice(f.value));
  }
}

size_t ParsedRequest::FieldCount(std::string_view name) const {
  size_t n = 0;
  for (const FieldSpans& f : fields_) n += beast::iequals(Slice(f.name), name);
  return n;
}

void ParsedRequest::Clear() {
  text_.clear();
  method_ = {};
  target_ = {};
  authority_ = {};
  fields_.clear();
  body_.clear();
  verb_ = http::verb::unknown;
  version_ = 11;
}

size_t RequestParser::Put(boost::asio::const_buffer in, beast::error_code& ec) {
  in_end_ = static_cast<const char*>(in.data()) + in.size();
  const size_t used = put(in, ec);
  if (ec != http::error::need_more) return used;
  // What Beast left unconsumed while it waits is a line it has not seen the end of (a header,
  // a chunk's size, the trailer): body bytes are consumed as they come. A LF there without its
  // CR ends no line for Beast, which would wait for the body timeout; it is refused at once.
  const std::string_view rest(static_cast<const char*>(in.data()) + used, in.size() - used);
  for (size_t i = checked_ > used ? checked_ - used : 0; i < rest.size(); ++i) {
    if (rest[i] == '\n' && (i == 0 || rest[i - 1] != '\r')) {
      ec = make_error_code(FramingError::kBareLineFeed);
      return used;
    }
  }
  checked_ = rest.size();
  return used;
}

void RequestParser::on_request_impl(http::verb method, BeastStringView method_str,
                                    BeastStringView target, int version, beast::error_code& ec) {
  out_.verb_ = method;
  out_.method_ = out_.Append(Sv(method_str));
  out_.version_ = version;
  const std::string_view t = Sv(target);  // Beast's: never empty
  if (t.starts_with('/') || t == "*") {
    out_.target_ = out_.Append(t);
    return;
  }
  const std::optional<AbsoluteTarget> absolute = ParseAbsoluteTarget(t);
  if (!absolute) {
    ec = make_error_code(FramingError::kBadTarget);
    return;
  }
  out_.authority_ = out_.Append(absolute->authority);
  // RFC 9110 §4.2.3: an empty path is "/". Appended spans lie back to back: one span of both.
  const std::string_view path = absolute->path_and_query;
  const ParsedRequest::Span slash = out_.Append(path.starts_with('/') ? "" : "/");
  out_.target_ = {.pos = slash.pos, .len = slash.len + out_.Append(path).len};
}

void RequestParser::on_response_impl(int, BeastStringView, int, beast::error_code& ec) {
  ec = http::error::bad_version;  // unreachable: this is a request parser
}

bool RequestParser::Folded(BeastStringView name) const {
  // `name` lies in the bytes Put was given, and its line in full after it: Beast has read up to
  // the line's first control character, which must be a CR before a LF, and one byte past them
  // to tell whether the line goes on. Those are the bytes looked at here.
  const char* after = name.data() + name.size();
  assert(in_end_ != nullptr && after <= in_end_);
  const void* cr = std::memchr(after, '\r', static_cast<size_t>(in_end_ - after));
  if (cr == nullptr) return false;
  const char* next = static_cast<const char*>(cr) + 2;
  return next < in_end_ && (*next == ' ' || *next == '\t');
}

void RequestParser::on_field_impl(http::field f, BeastStringView name, BeastStringView value,
                                  beast::error_code& ec) {
  if (Folded(name)) {
    ec = make_error_code(FramingError::kObsFold);
    return;
  }
  const ParsedRequest::Span n = out_.Append(Sv(name));
  const ParsedRequest::Span v = out_.Append(Sv(value));
  out_.fields_.push_back({.name = n, .value = v});
  if (f == http::field::content_length) content_length_ = true;
  if (f == http::field::host) ++hosts_;
  if (f != http::field::transfer_encoding) return;
  // transfer-coding = token *( OWS ";" OWS transfer-parameter ), in a list whose empty elements
  // are ignored (RFC 9110 §5.6.1). Only the names matter: chunked takes no parameter, and any
  // other coding is refused whatever its parameters.
  codings_.any = true;
  std::string_view rest = Sv(value);
  while (true) {
    const size_t comma = rest.find(',');
    const std::string_view element = TrimOws(rest.substr(0, comma));
    if (!element.empty()) {
      const size_t semicolon = element.find(';');
      const std::string_view coding = TrimOws(element.substr(0, semicolon));
      bool token = !coding.empty();
      for (char c : coding) token = token && IsTokenChar(c);
      if (!token) codings_.malformed = true;
      codings_.last_chunked = beast::iequals(coding, "chunked");
      if (codings_.last_chunked) {
        ++codings_.chunked;
        if (semicolon != std::string_view::npos) codings_.malformed = true;
      } else {
        codings_.other = true;
      }
    }
    if (comma == std::string_view::npos) break;
    rest.remove_prefix(comma + 1);
  }
}

void RequestParser::on_header_impl(beast::error_code& ec) {
  // The target's authority: without it (or with two) which host is meant is unknown.
  if (hosts_ > 1 || (hosts_ == 0 && out_.version_ >= 11)) {
    ec = make_error_code(hosts_ > 1 ? FramingError::kRepeatedHost : FramingError::kNoHost);
    return;
  }
  if (!codings_.any) return;
  // In RFC 9112's order of precedence: an unknown body length (400) before a coding caudal
  // lacks (501). Beast has already refused some of these itself; the rest it would frame as
  // a request without a body, and read the body as the next request.
  FramingError e;
  if (out_.version_ < 11) {
    e = FramingError::kTransferEncodingInHttp10;
  } else if (content_length_) {
    e = FramingError::kTransferEncodingWithLength;
  } else if (codings_.malformed || codings_.chunked + codings_.other == 0) {
    e = FramingError::kBadTransferCoding;
  } else if (!codings_.last_chunked) {
    e = FramingError::kFinalCodingNotChunked;
  } else if (codings_.chunked > 1) {
    e = FramingError::kChunkedTwice;
  } else if (codings_.other) {
    e = FramingError::kUnsupportedTransferCoding;
  } else {
    return;  // exactly `chunked`
  }
  ec = make_error_code(e);
}

void RequestParser::on_body_init_impl(const boost::optional<std::uint64_t>& content_length,
                                      beast::error_code&) {
  // basic_parser has already refused a length above the body limit.
  if (content_length) out_.body_.reserve(static_cast<size_t>(*content_length));
}

size_t RequestParser::on_body_impl(BeastStringView body, beast::error_code&) {
  out_.body_.append(body.data(), body.size());
  return body.size();
}

size_t RequestParser::on_chunk_body_impl(std::uint64_t, BeastStringView body, beast::error_code&) {
  out_.body_.append(body.data(), body.size());
  return body.size();
}

}  // namespace caudal::http_server
