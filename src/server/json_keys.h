// FindRepeatedKey: the first object key a JSON text repeats within one object, at any depth.
//
// Boost.JSON keeps the last of repeated keys, other parsers the first: a body whose meaning
// depends on that choice is ambiguous, and /v1/check refuses it rather than pick one. Pure
// (no I/O); one pass of Boost.JSON's SAX parser, O(n) for a document of n bytes.
//
// Thread-safety: a pure function.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace caudal::http_api {

// The path of the first repeated key, its parents' keys joined with '.' ("descriptors.api_key"),
// or nullopt when no object repeats a key. Only the first kMaxKeysCompared keys of an object are
// compared: an object with more has already broken every rule /v1/check reads it by. `json` is
// expected to parse with `max_depth`; a document that does not yields nullopt.
inline constexpr size_t kMaxKeysCompared = 64;
std::optional<std::string> FindRepeatedKey(std::string_view json, size_t max_depth);

}  // namespace caudal::http_api
