// Idempotency-Key (draft-ietf-httpapi-idempotency-key-header) on the decision endpoints that
// charge (POST /v1/check, /v1/reserve and /v1/settle; the flow is the endpoint's own only in its
// name and its decision): a request retried with the same key is answered its first answer,
// charged once, by any instance sharing the store; the same key with another body is refused (422);
// a duplicate while the first is being decided is refused (409). docs/http-api.md says why each
// choice was made.
//
// The record's key is a SHA-256 of the endpoint, the caller (CallerScope) narrowed to the
// identity (IdentityScope) and the key's value, so that callers never see each other's keys; its
// fingerprint a SHA-256 of the body in a canonical form (keys sorted, no spaces), so that a client
// re-serializing the same request matches. The parsing, hashing and encoding are pure and tested
// without a store; Run answers a keyed request through the engine's Idempotency
// (engine/idempotency.h), which keeps the records.
//
// Thread-safety: the functions are pure, but Run, which may be called from any thread.
#pragma once

#include <boost/json/value.hpp>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "common/caller_auth.h"
#include "engine/idempotency.h"
#include "server/http_api.h"
#include "server/server.h"

namespace caudal::idempotency {

inline constexpr std::string_view kHeader = "Idempotency-Key";
inline constexpr std::string_view kReplayedHeader = "Idempotent-Replayed";
inline constexpr size_t kMaxKeyChars = 255;

// The key of an Idempotency-Key field given `count` times with `value` (the first): an sf-string
// (RFC 8941 §3.3.3: "...", printable ASCII, \" and \\ the only escapes), or the same characters
// unquoted as many clients send them (no quote, backslash, space or control character), which
// names the same key. 1 to 255 characters. Else the 400 invalid_idempotency_key saying why (given
// twice, empty, too long, a character outside visible ASCII, parameters after the string).
struct ParsedKey {
  std::string key;
  std::optional<http_api::ApiError> error;
};
ParsedKey ParseKeyField(std::string_view value, size_t count);

// Whose keys these are, for a caller RefuseCaller let through: the client certificate's
// identities when one is allowed, else "token" (the caller token: every holder of it is one
// caller); "" when the decision APIs are open.
std::string CallerScope(const CallerAuth& caller, std::span<const std::string> identities);

// `caller` (CallerScope) narrowed to the identity a request's `body` names: its "descriptors"
// (a check, a reserve) or its "reservation" (a settle), written canonically, so that two
// identities never share a key's record (the same key for another identity is another record,
// not a 422).
std::string IdentityScope(std::string caller, const boost::json::value& body);

// The store's key of one key: lowercase hex of SHA-256 over the endpoint, the scope and the key.
std::string RecordKey(std::string_view endpoint, std::string_view scope, std::string_view key);
// Lowercase hex of SHA-256 of `body` written canonically: objects' keys sorted bytewise, arrays in
// order, no whitespace, strings and numbers as Boost.JSON writes them.
std::string Fingerprint(const boost::json::value& body);
// The canonical text Fingerprint hashes.
std::string Canonical(const boost::json::value& body);

// A reply as the store keeps it ("<status>\n<content type>\n<body>"; the other header fields,
// RateLimit and Retry-After, describe the moment of the first answer and are not kept), and
// back; nullopt for text that is not one.
std::string EncodeReply(const http_api::Reply& reply);
std::optional<http_api::Reply> DecodeReply(std::string_view text);

// Whether `kept` is a reply EncodeReply wrote (Idempotency::Readable).
bool Replayable(std::string_view kept);

// A keyed endpoint's decision: `records` as Idempotency::Decide's (ok, or why the record could
// not be read: a check or reserve then decides with CheckRequest::store_failed, a settle answers
// its 503); calls `then` exactly once with the reply.
using Decide =
    std::function<void(const Status& records, std::function<void(http_api::Reply)> then)>;

// Answers a keyed request through `idempotency` (engine/idempotency.h), exactly once through
// `answer`, possibly on the store's thread: the decision's reply the first time (kept when it is
// a 200 or a 429, which charged), the kept reply with Idempotent-Replayed: true after it, 409
// while the first is deciding (Retry-After: 1), 422 for the key with another body.
void Run(const Idempotency& idempotency, const IdempotencyOptions& options, std::string record,
         std::string fingerprint, Decide decide, std::function<void(http_api::Reply)> answer);

}  // namespace caudal::idempotency
