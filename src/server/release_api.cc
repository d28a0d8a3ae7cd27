#include "server/release_api.h"

#include <boost/json.hpp>

#include "common/cat.h"
#include "server/json_keys.h"

namespace caudal::http_api {
namespace json = boost::json;
namespace {

ApiError BadRelease(std::string code, std::string message) {
  return {.status = 400, .code = std::move(code), .message = std::move(message)};
}

}  // namespace

ParsedRelease ParseReleaseBody(std::string_view body) {
  ParsedObject parsed = ParseObjectBody(body, kReleaseBodyDepth);
  if (parsed.error) return {.hold = {}, .error = std::move(parsed.error)};
  return ReadReleaseBody(parsed.value.get_object());
}

ParsedRelease ReadReleaseBody(const json::object& o) {
  ParsedRelease out;
  for (const auto& kv : o) {
    if (kv.key() != "hold") {
      out.error = BadRelease("unknown_field", Cat(Quoted(ValidUtf8(kv.key().substr(0, 64))),
                                                  ": unknown field (expected hold)"));
      return out;
    }
  }
  const json::value* h = o.if_contains("hold");
  if (h == nullptr) {
    out.error = BadRelease("missing_hold", "hold: required");
    return out;
  }
  if (!h->is_string()) {
    out.error =
        BadRelease("invalid_hold", Cat("hold: expected a string (got ", JsonTypeName(*h), ')'));
    return out;
  }
  out.hold = std::string(h->get_string());
  return out;
}

Reply ReleaseReply(const Result<ReleaseResult>& result) {
  if (!result.ok()) {
    if (result.status().code() == StatusCode::kInvalidArgument) {
      return ErrorReply(BadRelease("invalid_hold", result.status().message()));
    }
    Reply r = ErrorReply({.status = 503,
                          .code = "store_unavailable",
                          .message = "the rate-limit store cannot answer; the slots free "
                                     "themselves at their hold's end"});
    r.headers.Add("Retry-After", 1);
    return r;
  }
  if (!result->released) {
    return ErrorReply({.status = 404,
                       .code = "unknown_hold",
                       .message = "hold: no slot of it is held (unknown, released already, or "
                                  "expired)"});
  }
  Reply r;
  r.content_type = "application/json";
  r.body = json::serialize(json::object{{"released", true}, {"slots", result->slots}});
  return r;
}

}  // namespace caudal::http_api
