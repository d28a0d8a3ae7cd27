#include "redis/redis_url.h"

#include <charconv>

#include "common/cat.h"
#include "common/port.h"

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
    const std::optional<uint16_t> p = ParsePort(port);
    if (!p) {
      return Bad("port must be a number between 1 and 65535 (got \"" + std::string(port) + "\")");
    }
    url.port = *p;
  }
  return Status::Ok();
}

std::string HostPort(const std::string& host, uint16_t port) {
  const bool ipv6 = host.find(':') != std::string::npos;
  return ipv6 ? Cat('[', host, "]:", port) : Cat(host, ':', port);
}

// What ClusterUrl and SentinelUrl share: scheme, credentials, hosts, path, query.
struct MultiHost {
  Transport transport = Transport::kPlain;
  std::string user, password;
  std::vector<Endpoint> hosts;
  std::string_view path;  // after the hosts' '/', if any
  std::vector<std::pair<std::string, std::string>> query;
};

Result<MultiHost> ParseMultiHost(std::string_view text, std::string_view scheme,
                                 uint16_t default_port) {
  MultiHost out;
  const std::string expected = Cat(scheme, "://");
  if (!text.starts_with(expected)) {
    return Bad(Cat("expected ", expected, "[[user]:password@]host[:port][,host[:port]...]"));
  }
  std::string_view rest = text.substr(expected.size());
  if (rest.find('#') != std::string_view::npos) return Bad("fragments are not supported");
  const size_t q = rest.find('?');
  if (q != std::string_view::npos) {
    std::string_view query = rest.substr(q + 1);
    rest = rest.substr(0, q);
    while (!query.empty()) {
      const size_t amp = query.find('&');
      const std::string_view pair = query.substr(0, amp);
      query = amp == std::string_view::npos ? std::string_view() : query.substr(amp + 1);
      const size_t eq = pair.find('=');
      if (eq == std::string_view::npos || eq == 0) {
        return Bad("query parameters must be name=value");
      }
      const std::string name(pair.substr(0, eq));
      Result<std::string> value = PercentDecode(pair.substr(eq + 1), Cat("query parameter ", name));
      if (!value.ok()) return value.status();
      out.query.emplace_back(name, std::move(*value));
    }
  }
  const size_t at = rest.rfind('@');
  if (at != std::string_view::npos) {
    RedisUrl creds;
    if (Status st = ParseUserInfo(rest.substr(0, at), creds); !st.ok()) return st;
    out.user = std::move(creds.user);
    out.password = std::move(creds.password);
    rest = rest.substr(at + 1);
  }
  const size_t slash = rest.find('/');
  if (slash != std::string_view::npos) out.path = rest.substr(slash + 1);
  std::string_view hosts = rest.substr(0, slash);
  while (true) {
    const size_t comma = hosts.find(',');
    RedisUrl one;
    one.port = default_port;
    if (Status st = ParseHostPort(hosts.substr(0, comma), one); !st.ok()) return st;
    if (out.hosts.size() == kMaxSeeds) {
      return Bad(Cat("at most ", kMaxSeeds, " hosts"));
    }
    out.hosts.push_back({.host = std::move(one.host), .port = one.port});
    if (comma == std::string_view::npos) break;
    hosts = hosts.substr(comma + 1);
  }
  return out;
}

Result<bool> ParseBool(std::string_view name, std::string_view value) {
  if (value == "true" || value == "yes" || value == "1") return true;
  if (value == "false" || value == "no" || value == "0") return false;
  return Bad(Cat(name, " must be true or false (got ", Quoted(value), ')'));
}

std::string RedactedHosts(std::string_view scheme, const std::string& user,
                          const std::string& password, const std::vector<Endpoint>& hosts) {
  std::string out = Cat(scheme, "://");
  if (!password.empty()) {
    out.append(user);
    out.append(":***@");
  }
  for (size_t i = 0; i < hosts.size(); ++i) {
    if (i > 0) out.push_back(',');
    out.append(HostPort(hosts[i].host, hosts[i].port));
  }
  return out;
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

Result<ClusterUrl> ParseClusterUrl(std::string_view text) {
  Result<MultiHost> m = ParseMultiHost(text, "redis-cluster", 6379);
  if (!m.ok()) return m.status();
  if (!m->path.empty()) {
    return Bad("a cluster URL has no path (Redis Cluster has only database 0)");
  }
  ClusterUrl url{.transport = Transport::kPlain,
                 .user = std::move(m->user),
                 .password = std::move(m->password),
                 .seeds = std::move(m->hosts)};
  for (const auto& [name, value] : m->query) {
    if (name != "tls") return Bad(Cat("unknown query parameter ", Quoted(name), " (expected tls)"));
    Result<bool> tls = ParseBool(name, value);
    if (!tls.ok()) return tls.status();
    url.transport = *tls ? Transport::kTls : Transport::kPlain;
  }
  return url;
}

Result<SentinelUrl> ParseSentinelUrl(std::string_view text) {
  Result<MultiHost> m = ParseMultiHost(text, "redis-sentinel", 26379);
  if (!m.ok()) return m.status();
  SentinelUrl url{.transport = Transport::kPlain,
                  .user = std::move(m->user),
                  .password = std::move(m->password),
                  .sentinels = std::move(m->hosts)};
  const std::string_view path = m->path;
  const size_t slash = path.find('/');
  url.master_name = std::string(path.substr(0, slash));
  if (url.master_name.empty()) {
    return Bad(
        "expected the primary's name after the sentinels: "
        "redis-sentinel://host:port[,host:port...]/master-name[/db]");
  }
  for (const char c : url.master_name) {
    if (c <= ' ' || c == 127) return Bad("the master name must be printable, without spaces");
  }
  if (slash != std::string_view::npos) {
    const std::string_view db = path.substr(slash + 1);
    if (!ParseInt(db, 0, kMaxDbIndex, url.db)) {
      return Bad(
          Cat("database must be a number between 0 and ", kMaxDbIndex, " (got ", Quoted(db), ')'));
    }
  }
  for (const auto& [name, value] : m->query) {
    if (name == "tls") {
      Result<bool> tls = ParseBool(name, value);
      if (!tls.ok()) return tls.status();
      url.transport = *tls ? Transport::kTls : Transport::kPlain;
    } else if (name == "sentinel_user") {
      url.sentinel_user = value;
    } else if (name == "sentinel_password") {
      if (value.empty()) return Bad("empty sentinel_password");
      url.sentinel_password = value;
    } else {
      return Bad(Cat("unknown query parameter ", Quoted(name),
                     " (expected tls, sentinel_user or sentinel_password)"));
    }
  }
  if (!url.sentinel_user.empty() && url.sentinel_password.empty()) {
    return Bad("sentinel_user needs a sentinel_password");
  }
  return url;
}

Result<AddressMap> ParseAddressMap(const std::vector<std::pair<std::string, std::string>>& pairs) {
  if (pairs.size() > kMaxAddressMap) {
    return Status::InvalidArgument(Cat("address map: at most ", kMaxAddressMap, " entries"));
  }
  const auto parse = [](const std::string& text) -> Result<Endpoint> {
    RedisUrl one;
    one.port = 0;
    if (Status st = ParseHostPort(text, one); !st.ok()) {
      std::string_view why = st.message();
      if (why.starts_with("redis URL: ")) why.remove_prefix(sizeof("redis URL: ") - 1);
      return Status::InvalidArgument(Cat("address map: ", Quoted(text), ": ", why));
    }
    if (one.port == 0) {
      return Status::InvalidArgument(Cat("address map: ", Quoted(text), " has no port"));
    }
    return Endpoint{.host = std::move(one.host), .port = one.port};
  };
  AddressMap map;
  for (const auto& [named_text, dial_text] : pairs) {
    Result<Endpoint> named = parse(named_text);
    if (!named.ok()) return named.status();
    Result<Endpoint> dial = parse(dial_text);
    if (!dial.ok()) return dial.status();
    for (const AddressMapEntry& e : map) {
      if (e.named == *named) {
        return Status::InvalidArgument(Cat("address map: ", Quoted(named_text), " given twice"));
      }
    }
    map.push_back({.named = std::move(*named), .dial = std::move(*dial)});
  }
  return map;
}

}  // namespace caudal::redis

namespace caudal {

Status ValidateRedisAddressMap(const std::vector<std::pair<std::string, std::string>>& map) {
  return redis::ParseAddressMap(map).status();
}

}  // namespace caudal

namespace caudal::redis {
namespace {

// `url`, dialled at its entry in `map` if it has one.
RedisUrl Mapped(RedisUrl url, const AddressMap& map) {
  for (const AddressMapEntry& e : map) {
    if (e.named.host == url.host && e.named.port == url.port) {
      url.dial.host = e.dial.host;
      url.dial.port = e.dial.port;
      break;
    }
  }
  return url;
}

}  // namespace

RedisUrl ClusterUrl::Node(const Endpoint& at) const {
  return Mapped({.transport = transport,
                 .user = user,
                 .password = password,
                 .host = at.host,
                 .port = at.port,
                 .db = 0,
                 .tls_server_name = tls_server_name},
                address_map);
}

std::string ClusterUrl::Redacted() const {
  std::string out = RedactedHosts("redis-cluster", user, password, seeds);
  if (transport == Transport::kTls) out.append("?tls=true");
  return out;
}

RedisUrl SentinelUrl::Primary(const Endpoint& at) const {
  return Mapped({.transport = transport,
                 .user = user,
                 .password = password,
                 .host = at.host,
                 .port = at.port,
                 .db = db,
                 .tls_server_name = tls_server_name},
                address_map);
}

RedisUrl SentinelUrl::Sentinel(const Endpoint& at) const {
  return Mapped({.transport = transport,
                 .user = sentinel_user,
                 .password = sentinel_password,
                 .host = at.host,
                 .port = at.port,
                 .db = 0,
                 .tls_server_name = tls_server_name},
                address_map);
}

std::string SentinelUrl::Redacted() const {
  std::string out = RedactedHosts("redis-sentinel", user, password, sentinels);
  out.append(Cat('/', master_name, '/', db));
  std::string query;
  if (transport == Transport::kTls) query.append("&tls=true");
  if (!sentinel_user.empty()) query.append(Cat("&sentinel_user=", sentinel_user));
  if (!sentinel_password.empty()) query.append("&sentinel_password=***");
  if (!query.empty()) out.append(Cat('?', std::string_view(query).substr(1)));
  return out;
}

}  // namespace caudal::redis
