#include "server/auth_query.h"

#include <charconv>

#include "common/cat.h"

namespace caudal::http_api {
namespace {

constexpr size_t kMaxQuoted = 64;  // of a bad parameter, in a message

ApiError BadParameter(std::string code, std::string message) {
  return {.status = 400, .code = std::move(code), .message = std::move(message)};
}

std::optional<ApiError> ReadStatus(std::string_view name, std::string_view value, bool& seen,
                                   uint16_t& out) {
  if (seen) {
    return BadParameter("invalid_parameter",
                        Cat(name, ": given more than once (ambiguous; refused)"));
  }
  seen = true;
  int v = 0;
  const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), v);
  if (ec != std::errc() || end != value.data() + value.size() || value.size() != 3 || v < 400 ||
      v > 599) {
    return BadParameter("invalid_parameter", Cat(name, ": expected a status from 400 to 599 (got ",
                                                 Quoted(value.substr(0, kMaxQuoted)), ')'));
  }
  out = static_cast<uint16_t>(v);
  return std::nullopt;
}

}  // namespace

ParsedAuthQuery ParseAuthQuery(std::string_view target) {
  ParsedAuthQuery out;
  const size_t q = target.find('?');
  if (q == std::string_view::npos) return out;
  std::string_view rest = target.substr(q + 1);
  bool seen_refused = false;
  bool seen_unavailable = false;
  while (!rest.empty()) {
    const size_t amp = rest.find('&');
    const std::string_view pair = rest.substr(0, amp);
    rest = amp == std::string_view::npos ? std::string_view() : rest.substr(amp + 1);
    if (pair.empty()) continue;  // "a=1&&b=2", a trailing '&'
    const size_t eq = pair.find('=');
    const std::string_view name = pair.substr(0, eq);
    const std::string_view value =
        eq == std::string_view::npos ? std::string_view() : pair.substr(eq + 1);
    std::optional<ApiError> error;
    if (name == "refused_status") {
      error = ReadStatus(name, value, seen_refused, out.statuses.refused);
    } else if (name == "unavailable_status") {
      error = ReadStatus(name, value, seen_unavailable, out.statuses.unavailable);
    } else {
      error =
          BadParameter("unknown_parameter", Cat(Quoted(name.substr(0, kMaxQuoted)),
                                                ": unknown parameter (expected refused_status and "
                                                "unavailable_status)"));
    }
    if (error) {
      out.error = std::move(error);
      return out;
    }
  }
  return out;
}

std::optional<ApiError> RefuseCheckQuery(std::string_view target) {
  const size_t q = target.find('?');
  if (q == std::string_view::npos) return std::nullopt;
  std::string_view rest = target.substr(q + 1);
  while (!rest.empty() && rest.front() == '&') rest.remove_prefix(1);
  if (rest.empty()) return std::nullopt;
  const std::string_view name = rest.substr(0, rest.find_first_of("=&"));
  return BadParameter(
      "unknown_parameter",
      Cat(Quoted(name.substr(0, kMaxQuoted)),
          ": unknown parameter (/v1/check takes none: descriptors go in the body)"));
}

}  // namespace caudal::http_api
