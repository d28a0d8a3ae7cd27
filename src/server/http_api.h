// The HTTP API as pure translation: request pieces → CheckRequest, CheckResult → reply.
// No sockets here (the transport is http_server.cc), so every case is unit-tested directly.
#pragma once

#include <boost/json/value.hpp>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "caudal/config/config.h"
#include "caudal/engine/engine.h"
#include "caudal/engine/ip.h"
#include "common/cat.h"
#include "observe/refusals.h"

namespace caudal::http_api {

// "an integer", "a string", ...: what a JSON value is, for an error message.
std::string_view JsonTypeName(const boost::json::value& v);

inline constexpr size_t kMaxBodyBytes = 64 * 1024;

// A reply's header fields, kept as their "Name: value\r\n" lines in one string: one allocation
// for all of them, and the transport copies them as they are. Names and values must not contain
// CR or LF (every caller passes literals, validated names and numbers).
class HeaderList {
 public:
  // Appends a field whose value is `parts` concatenated (strings, characters, integers).
  template <typename... Parts>
  void Add(std::string_view name, const Parts&... parts) {
    if (lines_.empty()) lines_.reserve(kTypicalBytes);
    lines_.append(name).append(": ");
    (cat_internal::Append(lines_, parts), ...);
    lines_.append("\r\n");
  }
  // The value of the first field named `name` (exact case), or nullopt.
  std::optional<std::string_view> Get(std::string_view name) const;
  std::string_view lines() const { return lines_; }
  bool empty() const { return lines_.empty(); }

 private:
  static constexpr size_t kTypicalBytes = 128;  // RateLimit-Policy, RateLimit, Retry-After
  std::string lines_;
};

struct Reply {
  int status = 200;
  std::string content_type;  // empty: no body
  std::string body;
  HeaderList headers;
};

// A client mistake: 400 (or 404/405/413/431) with {"error": {"code", "message"}}.
struct ApiError {
  int status = 400;
  std::string code;     // "invalid_json", "unknown_field", "invalid_cost", ...
  std::string message;  // names the field
};
Reply ErrorReply(const ApiError& e);

// `body` as a JSON object nested at most `max_depth` deep with no key repeated in any object (which
// one a client meant is anyone's guess): its value, or the 400 that says why (invalid_json,
// invalid_body, duplicate_field). The start of every body parser here.
struct ParsedObject {
  boost::json::value value;
  std::optional<ApiError> error;
};
ParsedObject ParseObjectBody(std::string_view body, size_t max_depth);

// Parses a /v1/check body: {"descriptors": {name: "value", ...}, "cost": N, "refund": false},
// or "costs": {dimension: N, ...} instead of "cost" (CheckRequest::costs; both: invalid_cost).
// Every key and type is checked; nothing is consumed for a bad body because the engine is never
// asked. "refund": true gives the costs back to every applicable policy instead of taking them. A
// key repeated in any object is refused (duplicate_field), as is a descriptor value
// IdentityValueProblem refuses (invalid_descriptors).
struct ParsedCheck {
  CheckRequest request;
  std::optional<ApiError> error;
};
inline constexpr size_t kCheckBodyDepth = 8;  // the nesting ParseObjectBody allows a check's body
ParsedCheck ParseCheckBody(std::string_view body);
// The same from a body ParseObjectBody has read.
ParsedCheck ReadCheckBody(const boost::json::object& body);
// "costs": an object of 1..kMaxCostDimensions dimension names to integers of 0..2^40; which
// names a request may give is the engine's to say (ValidateCosts).
std::optional<ApiError> ReadCosts(const boost::json::value& v, Costs& out);
// Why `value` cannot be an identity, or nullopt when it can: it holds a NUL or another control
// character (C0, DEL, C1), or bytes that are not well-formed UTF-8 (RFC 3629). Identities are
// compared byte by byte, and a value that other layers read differently (a C string ends at NUL,
// a decoder replaces bad bytes, a log line breaks at a newline) lets one client pass as several.
std::optional<std::string> IdentityValueProblem(std::string_view value);

// `s` with every byte that does not start a well-formed UTF-8 sequence replaced by U+FFFD: a
// message may quote whatever bytes a client sent, and JSON text must be UTF-8 (RFC 8259 §8.1).
std::string ValidUtf8(std::string_view s);

// The one mapping of a Status to the API's error: its code to the HTTP status (kInvalidArgument
// 400, kNotFound 404, kResourceExhausted 409, kUnavailable and kDeadlineExceeded 503, else 500),
// its reason to `error.code` (without one, the code's name in lower case), its message as it is.
ApiError FromStatus(const Status& s);

// A check's or a reserve's error (engine.h: kInvalidArgument, bad descriptors unless its reason
// names another field) as FromStatus maps it.
ApiError FromEngineError(const Status& s);

// The client address for forward-auth: the peer itself, unless the peer is a trusted proxy, in
// which case X-Forwarded-For is walked from the right and the first untrusted address wins (the
// left-most when every hop is trusted). A malformed entry stops the walk at the last good hop.
IpAddress ClientAddress(const IpAddress& peer, std::string_view forwarded_for,
                        const std::vector<CidrBlock>& trusted);

enum class Endpoint : uint8_t { kCheck, kAuth };
// The statuses a refusal and an unavailable store are answered with (/v1/auth may ask for
// others: see auth_query.h).
struct AuthStatuses {
  uint16_t refused = 429;      // Outcome::kDenied
  uint16_t unavailable = 503;  // Outcome::kUnavailable (a policy fails closed)
};
// 200 / 429 / 503 with RateLimit-Policy and RateLimit for the policy closest to its limit;
// Retry-After in whole seconds rounded up on 429 (and a short one on 503). `statuses` replaces
// 429 and 503 (the body's "status" says the one sent); nothing else changes.
Reply DecisionReply(const CheckResult& result, Endpoint endpoint, AuthStatuses statuses = {});

// Structured-field values (draft-ietf-httpapi-ratelimit-headers-10), for the closest policy:
//   RateLimit-Policy: "per-api-key";q=100;w=60     RateLimit: "per-api-key";r=37;t=12
// Added to `out`; nothing when no enforced policy reported a limit.
void AddRateLimitFields(const CheckResult& result, HeaderList& out);

// GET /v1/top-refused: every tracked check with its `top` (from 1 to the sketch's size) most
// refused identities, as shown by the Refusals' options.
std::string TopRefusedJson(const Refusals& refusals, size_t top);

// Seconds, rounded up; at least 1 for a positive duration.
int64_t CeilSeconds(Micros d);

}  // namespace caudal::http_api
