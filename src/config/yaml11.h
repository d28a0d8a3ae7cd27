// Yaml11: what a YAML scalar means to YAML 1.1 as yaml.v2 (envoyproxy/ratelimit's YAML library)
// resolves it. yaml-cpp hands every scalar over as text; files written for the reference rely on
// YAML 1.1's reading of unquoted text: `yes` and `on` are booleans, `0x1F` an integer, `1.5` a
// float, `~` null, while anything quoted is a string.
//
// Thread-safety: pure functions.
#pragma once

#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <string>
#include <string_view>

namespace caudal::config_internal {

struct Yaml11Scalar {
  enum class Kind : uint8_t { kNull, kBool, kInt, kFloat, kString };
  Kind kind = Kind::kString;
  bool boolean = false;  // kBool
  int64_t integer = 0;   // kInt: the value, when it fits in int64 (else the kind is kFloat)
  double number = 0;     // kInt and kFloat
};

// The meaning of an unquoted (plain) scalar's text.
Yaml11Scalar ResolvePlain(std::string_view text);

// The meaning of a null or scalar node: quoted and block scalars, and those tagged !!str, are
// strings; plain ones resolve as ResolvePlain says.
Yaml11Scalar Resolve(const YAML::Node& n);

// How Go's fmt prints the value (%v): "true", "42", "1.5", "1e+20"; the text for a string.
std::string GoText(const Yaml11Scalar& s, std::string_view text);

}  // namespace caudal::config_internal
