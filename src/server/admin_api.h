// The admin API (/v1/admin/, docs/http-api.md "Admin API") as translation: the request's pieces
// → an Admin operation, its result → a JSON reply. The admin token check, the path and query
// parsing and the body's limits are pure and tested without sockets; the operation itself runs
// on the Admin's thread (it blocks on the store), and the reply is sent from there.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "admin/admin.h"
#include "server/http_api.h"
#include "server/routes.h"

namespace caudal::admin_api {

inline constexpr size_t kMaxAdminBodyBytes = 16 * 1024;

// The reply refusing an admin request, or nullopt when it may go on: 404 without a configured
// token (the API is off), 400 for two Authorization headers, 401 without the bearer or with
// another token. Compared in constant time; the token is never part of a reply.
std::optional<http_api::Reply> RefuseAdmin(std::string_view token, std::string_view authorization,
                                           size_t authorization_count);

// /v1/admin/policies/{policy}/{overrides|state}?query, decoded.
struct AdminPath {
  std::string policy;
  bool state = false;  // .../state, else .../overrides
  std::vector<std::pair<std::string, std::string>> params;
};
struct ParsedPath {
  AdminPath path;
  std::optional<http_api::ApiError> error;  // 404 for a path that is none of these, 400 a query
};
ParsedPath ParseAdminTarget(std::string_view target);

// A PUT's body: {"limits": [...], "expires_in": "1h"}, or for a policy with share
// {"weight": 4, "expires_in": "1h"}.
struct ParsedOverride {
  std::vector<Limit> limits;
  std::optional<int64_t> weight;  // 1..kMaxShareWeight
  std::optional<Micros> expires_in;
  std::optional<http_api::ApiError> error;
};
ParsedOverride ParseOverrideBody(std::string_view body);

// The JSON of an override and of a state (docs/http-api.md).
std::string OverrideJson(const OverrideView& v);
std::string StateJson(const StateView& v);
std::string OverrideListJson(std::string_view policy, OverrideKind kind,
                             const std::vector<OverrideView>& list);

// Answers a request under /v1/admin/: refused (RefuseAdmin, a bad path, query, method or body)
// at once, else run on `admin`'s thread, which replies (503 admin_busy when its queue is full).
// `admin` null or `token` empty: the API is off (404).
void Dispatch(Admin* admin, std::string_view token, Metrics& metrics, const routes::Request& r,
              routes::Responder& responder);

}  // namespace caudal::admin_api
