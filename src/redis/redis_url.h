// RedisUrl: where a RedisStore connects, parsed from
//   redis://[[user]:password@]host[:port][/db]      (rediss:// for TLS)
// e.g. "redis://127.0.0.1:6379/0", "redis://:s3cret@cache:6380", "rediss://app:pw@[::1]/2".
//
// Parsing is pure (no I/O, no name resolution). User and password may be percent-encoded
// ("p%40ss" is "p@ss"). Errors are kInvalidArgument naming the offending part; they never
// repeat the password.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "caudal/status.h"

namespace caudal::redis {

enum class Transport : uint8_t { kPlain, kTls };

struct RedisUrl {
  Transport transport = Transport::kPlain;
  std::string user{};      // empty: the default user (AUTH <password>)
  std::string password{};  // empty: no AUTH
  std::string host{};      // a name, an IPv4 address or an IPv6 address (without brackets)
  uint16_t port = 6379;
  int64_t db = 0;

  // The URL with the password replaced by "***", for logs and error messages.
  std::string Redacted() const;
  friend bool operator==(const RedisUrl&, const RedisUrl&) = default;
};

inline constexpr int64_t kMaxDbIndex = 1'000'000;

Result<RedisUrl> ParseRedisUrl(std::string_view url);

}  // namespace caudal::redis
