#include "redis/sentinel_protocol.h"

#include <hiredis/hiredis.h>

#include <charconv>
#include <sstream>
#include <string>

#include "common/port.h"

namespace caudal::redis {
namespace {

constexpr size_t kMaxSentinelHostLength = 255;

}  // namespace

Result<std::optional<Endpoint>> ParseMasterAddr(const redisReply& reply) {
  if (reply.type == REDIS_REPLY_NIL) return std::optional<Endpoint>();
  if (IsError(reply)) return Status::Unavailable(std::string(Text(reply)));
  const bool shaped = reply.type == REDIS_REPLY_ARRAY && reply.elements == 2 &&
                      reply.element[0]->type == REDIS_REPLY_STRING &&
                      reply.element[1]->type == REDIS_REPLY_STRING &&
                      !Text(*reply.element[0]).empty() &&
                      Text(*reply.element[0]).size() <= kMaxSentinelHostLength;
  const std::optional<uint16_t> port = shaped ? ParsePort(Text(*reply.element[1])) : std::nullopt;
  if (!port) return Status::Internal("malformed reply to SENTINEL GET-MASTER-ADDR-BY-NAME");
  return std::optional<Endpoint>(
      Endpoint{.host = std::string(Text(*reply.element[0])), .port = *port});
}

std::optional<Endpoint> ParseSwitchMaster(const redisReply& message, std::string_view master_name) {
  if (message.type != REDIS_REPLY_ARRAY || message.elements != 3) return std::nullopt;
  for (size_t i = 0; i < 3; ++i) {
    if (message.element[i]->type != REDIS_REPLY_STRING) return std::nullopt;
  }
  const std::string_view channel = Text(*message.element[1]);
  const std::string_view text = Text(*message.element[2]);
  if (Text(*message.element[0]) != "message" || text.size() > 1024) return std::nullopt;
  std::istringstream in{std::string(text)};
  std::string name, host, port;
  if (channel == "+switch-master") {
    std::string old_host, old_port;
    if (!(in >> name >> old_host >> old_port >> host >> port)) return std::nullopt;
  } else if (channel == "+promoted-slave" || channel == "+selected-slave") {
    std::string type, id, at;
    if (!(in >> type >> id >> host >> port >> at >> name) || type != "slave" || at != "@") {
      return std::nullopt;
    }
  } else {
    return std::nullopt;
  }
  if (name != master_name || host.size() > kMaxSentinelHostLength) return std::nullopt;
  const std::optional<uint16_t> p = ParsePort(port);
  if (!p) return std::nullopt;
  return Endpoint{.host = host, .port = *p};
}

}  // namespace caudal::redis
