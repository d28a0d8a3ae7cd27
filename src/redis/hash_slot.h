// Redis Cluster's hash slots: CRC16 (XMODEM) of a key, or of its hash tag, modulo 16384.
//
// The hash tag is what lies between the first '{' and the first '}' after it, when that is not
// empty; keys with the same tag share a slot, which is how one script call may touch several.
// Pure; thread-safe.
#pragma once

#include <cstdint>
#include <string_view>

namespace caudal::redis {

inline constexpr int kHashSlots = 16384;

// CRC16-CCITT (XMODEM: polynomial 0x1021, initial value 0), as Redis Cluster uses.
uint16_t Crc16(std::string_view data);
// The slot of `key`, by the hash-tag rule above.
int HashSlot(std::string_view key);

}  // namespace caudal::redis
