// POST /v1/release as pure translation: the body {"hold": "<id>"} → the hold id, the engine's
// ReleaseResult → the reply. No sockets (docs/http-api.md, Concurrency limits).
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "caudal/engine/engine.h"
#include "server/http_api.h"

namespace caudal::http_api {

// Every key and type is checked (a repeated key too), as for /v1/check; a hold that is no hold
// id is refused by the engine (invalid_hold), before any store call.
struct ParsedRelease {
  std::string hold;
  std::optional<ApiError> error;
};
inline constexpr size_t kReleaseBodyDepth = 4;
ParsedRelease ParseReleaseBody(std::string_view body);
ParsedRelease ReadReleaseBody(const boost::json::object& body);  // from ParseObjectBody's read

// 200 {"released": true, "slots": n}; 404 (unknown_hold) when no slot of the hold was live;
// 400 (invalid_hold) for text that is no hold id; 503 with Retry-After when the store failed.
Reply ReleaseReply(const Result<ReleaseResult>& result);

}  // namespace caudal::http_api
