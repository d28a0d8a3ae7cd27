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
// without a store; Idempotent::Run drives a store (store/idempotency_store.h) and the
// endpoint's decision.
//
// Thread-safety: the functions are pure; Idempotent's methods may be called from any thread.
#pragma once

#include <atomic>
#include <boost/json/value.hpp>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "common/caller_auth.h"
#include "observe/metrics.h"
#include "server/http_api.h"
#include "server/server.h"
#include "store/idempotency_store.h"

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

// What one keyed request asks.
struct Request {
  std::string record;       // RecordKey
  std::string fingerprint;  // Fingerprint of its body
};

class Idempotent {
 public:
  // `store` and `metrics` must outlive this object.
  Idempotent(IdempotencyStore& store, Metrics& metrics);

  // The endpoint's decision: calls `then` exactly once with the reply. `records` is ok when the
  // request's record was claimed; otherwise it is why the record could not be read, and the
  // endpoint decides as it does when the store fails with that error, asking the store nothing
  // (a check or reserve: CheckRequest::store_failed, each policy by its failure mode; a settle:
  // its 503).
  using Decide =
      std::function<void(const Status& records, std::function<void(http_api::Reply)> then)>;
  // Answers `request` through `answer` (exactly once, possibly on the store's thread): claims its
  // record for options.in_progress; when claimed, decides, then keeps a 200 or a 429 for
  // options.window before answering it, and releases the claim on any other answer (nothing was
  // charged: a retry decides). A done record is replayed (Idempotent-Replayed: true), one in
  // progress refused with 409, one of another fingerprint with 422, neither deciding. A record
  // that cannot be read (the store failed or passed its deadline, its calls are at their bound,
  // or what it holds is not a reply) is decided by the failure modes (Decide), not recorded.
  // Each record call is bounded by the store's deadline (store.timeout).
  void Run(const IdempotencyOptions& options, Request request, Decide decide,
           std::function<void(http_api::Reply)> answer) const;
  // A request refused for its Idempotency-Key field (400), counted.
  void CountInvalid() const;

 private:
  // Metrics' series, which outlive the server (and so any store answer still on its way).
  struct Counters {
    std::atomic<uint64_t>* first;
    std::atomic<uint64_t>* replayed;
    std::atomic<uint64_t>* conflict;
    std::atomic<uint64_t>* mismatch;
    std::atomic<uint64_t>* unavailable;
    std::atomic<uint64_t>* invalid;
  };
  struct Call;
  static void Claimed(const std::shared_ptr<Call>& call, Result<IdempotencyClaim> claimed);
  static void Unreadable(const std::shared_ptr<Call>& call, const Status& why);
  static void Decided(const std::shared_ptr<Call>& call, http_api::Reply reply);

  IdempotencyStore& store_;
  const Counters counters_;
};

}  // namespace caudal::idempotency
