#include "redis/slot_map.h"

#include <hiredis/hiredis.h>

#include <charconv>

#include "common/cat.h"
#include "common/port.h"

namespace caudal::redis {
namespace {

constexpr size_t kMaxSlotHostLength = 255;  // a DNS name's limit

Status Malformed(std::string_view what) {
  return Status::Internal(Cat("malformed CLUSTER SLOTS reply: ", what));
}

bool SlotNumber(const redisReply& r, int& out) {
  if (r.type != REDIS_REPLY_INTEGER || r.integer < 0 || r.integer >= kHashSlots) return false;
  out = static_cast<int>(r.integer);
  return true;
}

}  // namespace

int16_t SlotMap::IndexOf(const Endpoint& e) {
  for (size_t i = 0; i < primaries_.size(); ++i) {
    if (primaries_[i] == e) return static_cast<int16_t>(i);
  }
  primaries_.push_back(e);
  return static_cast<int16_t>(primaries_.size() - 1);
}

Result<SlotMap> SlotMap::FromClusterSlots(const redisReply& reply, const Endpoint& asked) {
  if (reply.type != REDIS_REPLY_ARRAY) return Malformed("not an array");
  SlotMap map;
  map.owner_.fill(-1);
  for (size_t i = 0; i < reply.elements; ++i) {
    const redisReply& range = *reply.element[i];
    int first = 0;
    int last = 0;
    if (range.type != REDIS_REPLY_ARRAY || range.elements < 3 ||
        !SlotNumber(*range.element[0], first) || !SlotNumber(*range.element[1], last) ||
        first > last) {
      return Malformed("a slot range is not [first, last, primary, ...] within 0..16383");
    }
    const redisReply& node = *range.element[2];
    if (node.type != REDIS_REPLY_ARRAY || node.elements < 2 ||
        node.element[1]->type != REDIS_REPLY_INTEGER || node.element[1]->integer < 1 ||
        node.element[1]->integer > 65535) {
      return Malformed("a primary is not [endpoint, port, ...]");
    }
    const redisReply& host = *node.element[0];
    Endpoint primary{.host = {}, .port = static_cast<uint16_t>(node.element[1]->integer)};
    // NULL, or "" (a node that does not know its own address: alone, or not yet joined): the
    // host of the node asked.
    if (host.type == REDIS_REPLY_NIL || (host.type == REDIS_REPLY_STRING && Text(host).empty())) {
      primary.host = asked.host;
    } else if (host.type == REDIS_REPLY_STRING) {
      primary.host = std::string(Text(host));
      if (primary.host == "?") continue;  // misconfigured announced hostname: leave unassigned
      if (primary.host.size() > kMaxSlotHostLength) return Malformed("an endpoint is too long");
    } else {
      return Malformed("a primary's endpoint is neither a string nor NULL");
    }
    if (map.primaries_.size() >= kHashSlots) return Malformed("too many primaries");
    const int16_t owner = map.IndexOf(primary);
    for (int s = first; s <= last; ++s) {
      if (map.owner_[static_cast<size_t>(s)] < 0) ++map.covered_;
      map.owner_[static_cast<size_t>(s)] = owner;
    }
  }
  return map;
}

std::optional<Redirect> ParseRedirect(std::string_view error, const Endpoint& from) {
  Redirect r;
  if (error.starts_with("MOVED ")) {
    r.kind = Redirect::Kind::kMoved;
    error.remove_prefix(6);
  } else if (error.starts_with("ASK ")) {
    r.kind = Redirect::Kind::kAsk;
    error.remove_prefix(4);
  } else {
    return std::nullopt;
  }
  const size_t space = error.find(' ');
  if (space == std::string_view::npos) return std::nullopt;
  const std::string_view slot = error.substr(0, space);
  const auto res = std::from_chars(slot.data(), slot.data() + slot.size(), r.slot);
  if (res.ec != std::errc() || res.ptr != slot.data() + slot.size() || r.slot < 0 ||
      r.slot >= kHashSlots) {
    return std::nullopt;
  }
  const std::string_view address = error.substr(space + 1);
  const size_t colon = address.rfind(':');
  const std::optional<uint16_t> port =
      colon == std::string_view::npos ? std::nullopt : ParsePort(address.substr(colon + 1));
  if (!port) return std::nullopt;
  r.to.port = *port;
  std::string_view host = address.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  if (host.size() > kMaxSlotHostLength) return std::nullopt;
  r.to.host = host.empty() ? from.host : std::string(host);
  return r;
}

}  // namespace caudal::redis
