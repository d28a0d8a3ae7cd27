// IP addresses and CIDR blocks, as the limiter keys clients and the server trusts proxies.
//
// Pure parsing and masking (no I/O). An `ip` descriptor is normalised to its network under the
// policy's prefix ("2001:db8::1" under /64 → "2001:db8::/64"), so every address of one client
// network shares one key. IPv4-mapped IPv6 addresses ("::ffff:1.2.3.4") are treated as IPv4.
//
// Thread-safety: values.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

#include "caudal/common/status.h"

namespace caudal {

enum class IpFamily : uint8_t { kV4, kV6 };

struct IpAddress {
  IpFamily family = IpFamily::kV4;
  std::array<uint8_t, 16> bytes{};  // v4 uses the first 4

  // Accepts dotted IPv4 and RFC 4291 IPv6 text; kInvalidArgument otherwise.
  static Result<IpAddress> Parse(std::string_view text);
  int Bits() const { return family == IpFamily::kV4 ? 32 : 128; }
  // Zeroes every bit after the first `prefix` (clamped to Bits()).
  IpAddress Masked(int prefix) const;
  std::string ToString() const;
  friend bool operator==(const IpAddress&, const IpAddress&) = default;
};

struct CidrBlock {
  IpAddress network;
  int prefix = 32;

  // "10.0.0.0/8", "::1/128"; a bare address means a single host. Host bits must be zero.
  static Result<CidrBlock> Parse(std::string_view text);
  bool Contains(const IpAddress& a) const;
  std::string ToString() const;
  friend bool operator==(const CidrBlock&, const CidrBlock&) = default;
};

}  // namespace caudal
