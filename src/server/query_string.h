// The one query-string parser: every endpoint reads its parameters through it.
//
// A query is what follows the target's first '?': parameters separated by '&', each a name and,
// after the first '=', a value, both percent-decoded with '+' as a space (the form encoding
// browsers and curl's --data-urlencode write). An empty parameter ("a=1&&b=2", a trailing '&',
// a bare '?') is none; a name without '=' has an empty value. Decoded names and values are
// bytes: an endpoint that needs text checks them itself.
//
// A query is refused with 400 as a whole, before any endpoint reads it: a '%' not followed by
// two hex digits, or more than kMaxQueryParams parameters (invalid_parameter), and a name given
// twice, however it is spelt (duplicate_parameter): which of its values counts would be a guess.
//
//   const ParsedQuery q = ParseQuery("/v1/auth?refused_status=401");
//   if (q.error) return ErrorReply(*q.error);
//   if (const std::string* v = q.Find("refused_status")) ...
//
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "server/http_api.h"

namespace caudal::http_api {

// As many as a check's descriptors (kMaxDescriptors): no endpoint reads more.
inline constexpr size_t kMaxQueryParams = 32;
// How much of a bad parameter's name or value a message quotes.
inline constexpr size_t kMaxQuotedParameter = 64;

enum class Plus : uint8_t {
  kLiteral,  // a path segment's
  kSpace,    // a query's
};
// `s` with each %XX replaced by its byte (and '+' as `plus` says); nullopt for a '%' not
// followed by two hex digits.
std::optional<std::string> PercentDecode(std::string_view s, Plus plus);

struct QueryParam {
  std::string name;
  std::string value;
};
struct ParsedQuery {
  std::vector<QueryParam> params;  // in the order given; empty when `error`
  std::optional<ApiError> error;

  // The value of the parameter `name`, or null when it was not given.
  const std::string* Find(std::string_view name) const;
};
ParsedQuery ParseQuery(std::string_view target);

}  // namespace caudal::http_api
