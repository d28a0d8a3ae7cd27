#include "redis/redis_url.h"

#include <charconv>

namespace caudal::redis {
namespace {

Status Bad(std::string_view what) {
  return Status::InvalidArgument("redis URL: " + std::string(what));
}

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

Result<std::string> PercentDecode(std::string_view s, std::string_view what) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '%') {
      out += s[i];
      continue;
    }
    const int hi = i + 2 < s.size() ? HexValue(s[i + 1]) : -1;
    const int lo = hi >= 0 ? HexValue(s[i + 2]) : -1;
    if (lo < 0) return Bad("malformed percent-encoding in the " + std::string(what));
    out += static_cast<char>(hi * 16 + lo);
    i += 2;
  }
  return out;
}

// Parses a decimal integer in [lo, hi]; the whole of `s` must be digits.
bool ParseInt(std::string_view s, int64_t lo, int64_t hi, int64_t& out) {
  if (s.empty() || s.size() > 18) return false;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
  }
  std::from_chars(s.data(), s.data() + s.size(), out);
  return out >= lo && out <= hi;
}

Status ParseUserInfo(std::string_view info, RedisUrl& url) {
  const size_t colon = info.find(':');
  if (colon == std::string_view::npos) {
    return Bad("credentials must be \"user:password@\" or \":password@\" (no password given)");
  }
  Result<std::string> user = PercentDecode(info.substr(0, colon), "user");
  if (!user.ok()) return user.status();
  Result<std::string> password = PercentDecode(info.substr(colon + 1), "password");
  if (!password.ok()) return password.status();
  if (password->empty()) return Bad("empty password after \":\"");
  url.user = std::move(*user);
  url.password = std::move(*password);
  return Status::Ok();
}

Status ParseHostPort(std::string_view hp, RedisUrl& url) {
  std::string_view port;
  if (!hp.empty() && hp.front() == '[') {  // [IPv6]
    const size_t close = hp.find(']');
    if (close == std::string_view::npos) return Bad("unterminated \"[\" in the host");
    url.host = std::string(hp.substr(1, close - 1));
    const std::string_view rest = hp.substr(close + 1);
    if (!rest.empty() && rest.front() != ':') return Bad("unexpected text after \"]\"");
    if (rest == ":") return Bad("empty port");
    if (!rest.empty()) port = rest.substr(1);
    if (url.host.empty()) return Bad("empty host");
  } else {
    const size_t colon = hp.find(':');
    url.host = std::string(hp.substr(0, colon));
    if (colon != std::string_view::npos) {
      port = hp.substr(colon + 1);
      if (port.empty()) return Bad("empty port");
    }
    if (url.host.empty()) return Bad("missing host");
    for (char c : url.host) {
      const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                      c == '.' || c == '-' || c == '_';
      if (!ok) return Bad("invalid character in host \"" + url.host + "\"");
    }
  }
  if (!port.empty()) {
    int64_t p = 0;
    if (!ParseInt(port, 1, 65535, p)) {
      return Bad("port must be a number between 1 and 65535 (got \"" + std::string(port) + "\")");
    }
    url.port = static_cast<uint16_t>(p);
  }
  return Status::Ok();
}

}  // namespace

Result<RedisUrl> ParseRedisUrl(std::string_view text) {
  RedisUrl url;
  const size_t sep = text.find("://");
  if (sep == std::string_view::npos) {
    return Bad("expected redis://[[user]:password@]host[:port][/db] or rediss://...");
  }
  const std::string_view scheme = text.substr(0, sep);
  if (scheme == "redis") {
    url.transport = Transport::kPlain;
  } else if (scheme == "rediss") {
    url.transport = Transport::kTls;
  } else {
    return Bad("unknown scheme \"" + std::string(scheme) + "\" (expected redis or rediss)");
  }
  std::string_view rest = text.substr(sep + 3);
  if (rest.find_first_of("?#") != std::string_view::npos) {
    return Bad("query strings and fragments are not supported");
  }
  // The credentials end at the last '@' before the path, so a password may contain '/'.
  const size_t at = rest.rfind('@');
  if (at != std::string_view::npos) {
    if (Status s = ParseUserInfo(rest.substr(0, at), url); !s.ok()) return s;
    rest = rest.substr(at + 1);
  }
  const size_t slash = rest.find('/');
  if (Status s = ParseHostPort(rest.substr(0, slash), url); !s.ok()) return s;
  if (slash != std::string_view::npos) {
    const std::string_view db = rest.substr(slash + 1);
    if (!db.empty() && !ParseInt(db, 0, kMaxDbIndex, url.db)) {
      return Bad("database must be a number between 0 and " + std::to_string(kMaxDbIndex) +
                 " (got \"" + std::string(db) + "\")");
    }
  }
  return url;
}

std::string RedisUrl::Redacted() const {
  std::string out = transport == Transport::kTls ? "rediss://" : "redis://";
  if (!password.empty()) {
    out.append(user);
    out.append(":***@");
  }
  const bool ipv6 = host.find(':') != std::string::npos;
  if (ipv6) out.push_back('[');
  out.append(host);
  if (ipv6) out.push_back(']');
  out.push_back(':');
  out.append(std::to_string(port));
  out.push_back('/');
  out.append(std::to_string(db));
  return out;
}

}  // namespace caudal::redis
