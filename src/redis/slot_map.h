// SlotMap: which primary serves each of Redis Cluster's 16384 hash slots, as CLUSTER SLOTS says,
// and the redirects (MOVED, ASK) a node answers with when the map is stale.
//
// Pure: replies in, values out; the cluster store does the I/O. What comes from the network is
// checked (slot ranges, ports, array shapes): a malformed reply is kInternal, never a crash.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "caudal/common/status.h"
#include "redis/hash_slot.h"
#include "redis/redis_url.h"
#include "redis/resp.h"

namespace caudal::redis {

class SlotMap {
 public:
  // From a CLUSTER SLOTS reply, sent to `asked` (a primary whose endpoint is NULL or "" is on
  // that host). Ranges whose primary's endpoint is "?" (unknown) stay unassigned.
  static Result<SlotMap> FromClusterSlots(const redisReply& reply, const Endpoint& asked);

  // The primary serving `slot`, or nullptr when none does.
  const Endpoint* PrimaryOf(int slot) const {
    const int16_t i = owner_[static_cast<size_t>(slot)];
    return i < 0 ? nullptr : &primaries_[static_cast<size_t>(i)];
  }
  const std::vector<Endpoint>& primaries() const { return primaries_; }
  // Slots that have a primary.
  int covered() const { return covered_; }

 private:
  int16_t IndexOf(const Endpoint& e);

  std::vector<Endpoint> primaries_;
  std::array<int16_t, kHashSlots> owner_{};
  int covered_ = 0;
};

// A MOVED or ASK error reply ("MOVED 3999 127.0.0.1:6381"; an empty host means the host of the
// node that answered, `from`).
struct Redirect {
  enum class Kind : uint8_t { kMoved, kAsk };
  Kind kind = Kind::kMoved;
  int slot = 0;
  Endpoint to;
};
std::optional<Redirect> ParseRedirect(std::string_view error, const Endpoint& from);

}  // namespace caudal::redis
