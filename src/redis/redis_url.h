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
#include <utility>
#include <vector>

#include "caudal/common/status.h"
#include "caudal/redis/redis_store.h"

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
  // Where to connect when it is not host:port: an entry of store.address_map (AddressMap below).
  // host and port stay the server's name, which TLS verifies and logs show. Not part of the URL
  // text either.
  struct Dial {
    std::string host{};  // empty: host:port itself
    uint16_t port = 0;
    friend bool operator==(const Dial&, const Dial&) = default;
  };
  Dial dial{};

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

// store.address_map: the address to dial for an address a cluster or a Sentinel group names
// (a seed, a node from CLUSTER SLOTS or a redirection, a primary a Sentinel names, a Sentinel),
// for instances that reach the group through proxies or NAT of their own while its nodes
// announce addresses they cannot reach (docs/stores.md). Exact host:port matches; an address
// not in the map is dialled as named.
struct AddressMapEntry {
  Endpoint named{};
  Endpoint dial{};
};
using AddressMap = std::vector<AddressMapEntry>;
inline constexpr size_t kMaxAddressMap = kMaxRedisAddressMap;

// The map from its text pairs ("host:port" to "host:port"): kInvalidArgument for a malformed or
// portless address, a named address given twice, or more than kMaxAddressMap entries.
Result<AddressMap> ParseAddressMap(const std::vector<std::pair<std::string, std::string>>& pairs);

struct ClusterUrl {
  Transport transport = Transport::kPlain;
  std::string user{};
  std::string password{};
  std::vector<Endpoint> seeds{};
  std::string tls_server_name{};  // every node's, see RedisUrl
  AddressMap address_map{};       // store.address_map

  // A node's URL: this URL's transport and credentials, database 0, dialled through the map.
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
  AddressMap address_map{};       // store.address_map

  // The primary's URL once a Sentinel named it, dialled through the map.
  RedisUrl Primary(const Endpoint& at) const;
  // A Sentinel's URL (its own credentials; no database), dialled through the map.
  RedisUrl Sentinel(const Endpoint& at) const;
  std::string Redacted() const;
};

Result<ClusterUrl> ParseClusterUrl(std::string_view url);
Result<SentinelUrl> ParseSentinelUrl(std::string_view url);

}  // namespace caudal::redis
