// ParseJson: a JSON text read once, into its value and the first object key it repeats.
//
// Boost.JSON keeps the last of repeated keys, other parsers the first: a body whose meaning
// depends on that choice is ambiguous, and the API refuses it rather than pick one. One pass of
// Boost.JSON's parser builds the value and compares each object's keys as they come, so a body
// is read once whatever it is checked for. Pure (no I/O); O(n) for a document of n bytes.
//
// Thread-safety: pure functions.
#pragma once

#include <boost/json/error.hpp>
#include <boost/json/value.hpp>
#include <optional>
#include <string>
#include <string_view>

namespace caudal::http_api {

// Only the first kMaxKeysCompared keys of an object are compared: an object with more has
// already broken every rule the API reads a body by.
inline constexpr size_t kMaxKeysCompared = 64;

struct ParsedJson {
  boost::json::error_code error;  // set: not JSON nested at most max_depth deep (value is null)
  boost::json::value value;
  // The path of the first repeated key, its parents' keys joined with '.' and an array as "[]"
  // ("descriptors.api_key", "c[].d"); nullopt when no object repeats a key.
  std::optional<std::string> repeated;
};
ParsedJson ParseJson(std::string_view json, size_t max_depth);

// ParseJson(json, max_depth).repeated, or nullopt when `json` does not parse.
std::optional<std::string> FindRepeatedKey(std::string_view json, size_t max_depth);

}  // namespace caudal::http_api
