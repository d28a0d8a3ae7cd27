// CallerAuth: who may call the decision APIs (/v1/check, /v1/auth, ShouldRateLimit), checked
// the same way by the HTTP and gRPC front ends. A caller passes with the bearer token, or with a
// verified client certificate whose identity (subject CN or a SAN) is on the allow-list; with
// neither configured every caller passes.
//
// Pure: the transports hand in the Authorization value and the certificate's identities. The
// token is compared in constant time (its length aside), so response times tell nothing of how
// much of a guess was right.
//
// Thread-safety: values.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace caudal {

struct CallerAuth {
  std::string token{};                 // empty: no token accepted
  std::vector<std::string> allowed{};  // client certificate identities; empty: none accepted
  bool protect_metrics = false;        // /metrics, /v1/top-refused, /v1/status need credentials too
  bool enabled() const { return !token.empty() || !allowed.empty(); }
};

enum class CallerVerdict : uint8_t {
  kAllowed,
  kNoCredentials,  // no token and no allowed certificate: 401 / UNAUTHENTICATED
  kBadToken,       // a token that is not the configured one: 401 / UNAUTHENTICATED
  kNotAllowed,     // a certificate whose identities are not on the list: 403 / PERMISSION_DENIED
};

// `authorization`: the Authorization header's value ("" when absent); `identities`: the verified
// client certificate's CN and SANs (empty without one).
CallerVerdict CheckCaller(const CallerAuth& auth, std::string_view authorization,
                          std::span<const std::string> identities);

// The credentials of "Bearer <token>" (the scheme is case-insensitive, RFC 9110 §11.1), or "".
std::string_view BearerToken(std::string_view authorization);

// True when a and b are equal, reading every byte of both whatever they hold.
bool ConstantTimeEquals(std::string_view a, std::string_view b);

}  // namespace caudal
