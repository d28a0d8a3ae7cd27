#include "server/auth_query.h"

#include <charconv>

#include "common/cat.h"
#include "server/query_string.h"

namespace caudal::http_api {
namespace {

ApiError BadParameter(std::string code, std::string message) {
  return {.status = 400, .code = std::move(code), .message = std::move(message)};
}

std::optional<ApiError> ReadStatus(std::string_view name, std::string_view value, uint16_t& out) {
  int v = 0;
  const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), v);
  if (ec != std::errc() || end != value.data() + value.size() || value.size() != 3 || v < 400 ||
      v > 599) {
    return BadParameter("invalid_parameter",
                        Cat(name, ": expected a status from 400 to 599 (got ",
                            Quoted(value.substr(0, kMaxQuotedParameter)), ')'));
  }
  out = static_cast<uint16_t>(v);
  return std::nullopt;
}

}  // namespace

ParsedAuthQuery ParseAuthQuery(std::string_view target) {
  ParsedAuthQuery out;
  ParsedQuery query = ParseQuery(target);
  out.error = std::move(query.error);
  for (const QueryParam& p : query.params) {
    if (p.name == "refused_status") {
      out.error = ReadStatus(p.name, p.value, out.statuses.refused);
    } else if (p.name == "unavailable_status") {
      out.error = ReadStatus(p.name, p.value, out.statuses.unavailable);
    } else {
      out.error =
          BadParameter("unknown_parameter", Cat(Quoted(p.name.substr(0, kMaxQuotedParameter)),
                                                ": unknown parameter (expected refused_status and "
                                                "unavailable_status)"));
    }
    if (out.error) break;
  }
  return out;
}

std::optional<ApiError> RefuseCheckQuery(std::string_view target) {
  ParsedQuery query = ParseQuery(target);
  if (query.error || query.params.empty()) return std::move(query.error);
  return BadParameter(
      "unknown_parameter",
      Cat(Quoted(query.params.front().name.substr(0, kMaxQuotedParameter)),
          ": unknown parameter (/v1/check takes none: descriptors go in the body)"));
}

}  // namespace caudal::http_api
