#include "server/request_parser.h"

#include <boost/beast/core/string.hpp>

namespace caudal::http_server {

namespace beast = boost::beast;

namespace {
std::string_view Sv(BeastStringView s) { return {s.data(), s.size()}; }
}  // namespace

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

void ParsedRequest::Clear() {
  text_.clear();
  method_ = {};
  target_ = {};
  fields_.clear();
  body_.clear();
  verb_ = http::verb::unknown;
  version_ = 11;
}

void RequestParser::on_request_impl(http::verb method, BeastStringView method_str,
                                    BeastStringView target, int version, beast::error_code&) {
  out_.verb_ = method;
  out_.method_ = out_.Append(Sv(method_str));
  out_.target_ = out_.Append(Sv(target));
  out_.version_ = version;
}

void RequestParser::on_response_impl(int, BeastStringView, int, beast::error_code& ec) {
  ec = http::error::bad_version;  // unreachable: this is a request parser
}

void RequestParser::on_field_impl(http::field, BeastStringView name, BeastStringView value,
                                  beast::error_code&) {
  const ParsedRequest::Span n = out_.Append(Sv(name));
  const ParsedRequest::Span v = out_.Append(Sv(value));
  out_.fields_.push_back({.name = n, .value = v});
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
