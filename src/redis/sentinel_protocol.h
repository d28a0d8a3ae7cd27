// What Redis Sentinel answers, as pure functions: the primary's address
// (SENTINEL GET-MASTER-ADDR-BY-NAME) and +switch-master announcements (Pub/Sub). No I/O.
#pragma once

#include <optional>
#include <string_view>

#include "caudal/common/status.h"
#include "redis/redis_url.h"
#include "redis/resp.h"

namespace caudal::redis {

// The reply to SENTINEL GET-MASTER-ADDR-BY-NAME: the address, nullopt when the sentinel knows no
// master by that name (a nil reply), kUnavailable for an error reply, kInternal for anything
// that is not [host, port].
Result<std::optional<Endpoint>> ParseMasterAddr(const redisReply& reply);

// A Pub/Sub message; the new primary when it announces one for `master_name`: "+switch-master"
// ("<name> <old-ip> <old-port> <new-ip> <new-port>", the configuration changed), or, from the
// sentinel leading the failover and sooner, "+selected-slave" (the replica about to be promoted)
// and "+promoted-slave" (promoted), both "slave <ip:port> <ip> <port> @ <name> <old-ip>
// <old-port>". nullopt for anything else.
std::optional<Endpoint> ParseSwitchMaster(const redisReply& message, std::string_view master_name);

}  // namespace caudal::redis
