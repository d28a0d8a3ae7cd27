// ShareBook: the consumers of one key's shares (store.h, ShareEntry) and the pure step that
// takes one consumer's share, for the memory store; the Redis script is its twin
// (src/redis/lua/share.lua). No clock, no locks.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "algorithms/algorithm.h"
#include "caudal/store/store.h"

namespace caudal {

struct ShareRecord {
  std::string consumer;
  std::string group;
  int64_t seq = 0;  // the order consumers first called in: the allocation's order
  int64_t demand = 0;
  int64_t weight = 1;
  int64_t expiry_us = 0;  // forgotten once the time passes it
  int64_t last_us = 0;    // its last call (a new one's: as if half a ttl ago)
  int64_t frac = 0;       // the accrual's remainder, over the limit's rate period
};

struct ShareBook {
  std::vector<ShareRecord> records;  // ascending seq
  int64_t next_seq = 0;
};

struct ShareTaken {
  Step step;  // the grant: a renewal of cost 0 leasing the accrual (DecideCompactWithLease)
  ShareState share;
};

// One Share entry at `now` on `book` and the key's state (null: fresh): updates `book` and
// returns the step to write. kResourceExhausted, `book` changed only by its expired consumers'
// going, when a new consumer finds kMaxShareConsumers live ones. Preconditions: the entry
// passed ValidateEntries.
Result<ShareTaken> TakeShare(const ShareEntry& e, ShareBook& book, const CompactState* state,
                             Micros now);

// Forgets the consumers expired at `now`; true when none is left.
bool ExpireShares(ShareBook& book, Micros now);

}  // namespace caudal
