// The query parameters of /v1/auth: which statuses it answers for a refusal and for a store that
// cannot decide, for proxies that understand only some codes.
//
// nginx's auth_request passes 2xx, 401 and 403 from the subrequest and turns every other status
// into a 500, so 429 and 503 arrive as the same 500 as "caudal is down". A proxy asks instead for
//   /v1/auth?refused_status=401&unavailable_status=403
// and maps each code back (error_page 401 = @rate_limited; see docs/integrations.md). Only the
// status changes: the headers (Retry-After, RateLimit, RateLimit-Policy) stay as they are.
//
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

#include "server/http_api.h"

namespace caudal::http_api {

struct ParsedAuthQuery {
  AuthStatuses statuses;
  std::optional<ApiError> error;  // 400 invalid_parameter / unknown_parameter / duplicate_parameter
};

// Reads the query of `target` (query_string.h: a malformed one is refused as such). Each status
// must be an integer in 400..599 (a 2xx would admit a refused request; 1xx and 3xx mean
// something else to a proxy); any other parameter is refused, so that a misspelt one cannot
// silently change nothing.
ParsedAuthQuery ParseAuthQuery(std::string_view target);

// /v1/check takes no query parameter: one in `target` is refused (400 unknown_parameter), as
// /v1/auth refuses one it does not know, rather than ignored; a malformed query is refused as
// such (query_string.h). An empty query ("?", "?&") is none.
std::optional<ApiError> RefuseCheckQuery(std::string_view target);

}  // namespace caudal::http_api
