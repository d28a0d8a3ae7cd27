// RedisUrl: where a RedisStore connects, parsed from
//   redis://[[user]:password@]host[:port][/db]      (rediss:// for TLS)
// e.g. "redis://127.0.0.1:6379/0", "redis://:s3cret@cache:6380", "rediss://app:pw@[::1]/2".
//
// ClusterUrl and SentinelUrl: several seed hosts, for RedisClusterStore and RedisSentinelStore:
//   redis-cluster://[[user]:password@]host[:port][,host[:port]...][?tls=true]
//   redis-sentinel://[[user]:password@]host[:port][,host[:port]...]/master-name[/db]
//                    [?tls=true&sentinel_user=...&sentinel_password=...]
// The credentials are the data nodes' (cluster nodes, the primary); a Sentinel's own password,
// if it has one, is sentinel_password. Ports default to 6379 (cluster) and 26379 (sentinel).
//
// Parsing is pure (no I/O, no name resolution). User and password may be percent-encoded
// ("p%40ss" is "p@ss"). Errors are kInvalidArgument naming the offending part; they never
// repeat the password.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "caudal/common/status.h"

namespace caudal::redis {

enum class Transport : uint8_t { kPlain, kTls };

struct RedisUrl {
  Transport transport = Transport::kPlain;
  std::string user{};      // empty: the default user (AUTH <password>)
  std::string password{};  // empty: no AUTH
  std::string host{};      // a name, an IPv4 address or an IPv6 address (without brackets)
  uint16_t port = 6379;
  int64_t db = 0;
  // TLS: the name sent as SNI and verified in the server's certificate; empty: `host`. Not part
  // of the URL text: it comes from the store's options (store.tls.server_name).
  std::string tls_server_name{};

  // The URL with the password replaced by "***", for logs and error messages.
  std::string Redacted() const;
  friend bool operator==(const RedisUrl&, const RedisUrl&) = default;
};

inline constexpr int64_t kMaxDbIndex = 1'000'000;

Result<RedisUrl> ParseRedisUrl(std::string_view url);

struct Endpoint {
  std::string host{};
  uint16_t port = 0;
  friend bool operator==(const Endpoint&, const Endpoint&) = default;
};

// At most this many seed hosts in one URL.
inline constexpr size_t kMaxSeeds = 64;

struct ClusterUrl {
  Transport transport = Transport::kPlain;
  std::string user{};
  std::string password{};
  std::vector<Endpoint> seeds{};
  std::string tls_server_name{};  // every node's, see RedisUrl

  // A node's URL: this URL's transport and credentials, database 0.
  RedisUrl Node(const Endpoint& at) const;
  std::string Redacted() const;
};

struct SentinelUrl {
  Transport transport = Transport::kPlain;
  std::string user{};      // the primary's
  std::string password{};  // the primary's
  std::vector<Endpoint> sentinels{};
  std::string master_name{};
  int64_t db = 0;
  std::string sentinel_user{};
  std::string sentinel_password{};
  std::string tls_server_name{};  // the primary's and the Sentinels', see RedisUrl

  // The primary's URL once a Sentinel named it.
  RedisUrl Primary(const Endpoint& at) const;
  // A Sentinel's URL (its own credentials; no database).
  RedisUrl Sentinel(const Endpoint& at) const;
  std::string Redacted() const;
};

Result<ClusterUrl> ParseClusterUrl(std::string_view url);
Result<SentinelUrl> ParseSentinelUrl(std::string_view url);

}  // namespace caudal::redis
