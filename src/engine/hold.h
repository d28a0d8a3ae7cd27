// Hold ids: what a check admitted with concurrency slots answers ("hold"), and what a release
// names. Pure: no store, no clock.
//
// A hold id carries its random part (HoldId, 104 bits from the operating system's generator,
// which makes it unguessable: whoever knows it can release the slots) and the store keys of the
// slots it took, so that any instance can release them without remembering anything:
//   "<26 hex digits>.<base64url of the keys, each as a 2-byte big-endian length and its bytes>"
// A key carries no secret (it is the policy, the limit and the identity the caller sent). A
// release looks each key's limit up in the policies in force (LookUpHeld in engine.cc): a key
// of no current concurrency limit is skipped, and its slot frees itself at its expiry.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "caudal/common/status.h"
#include "caudal/store/store.h"

namespace caudal::engine_internal {

// At most this many concurrency slots per request (kInvalidArgument past it, before any store
// call), so that a hold id stays short and a release is one store request.
inline constexpr size_t kMaxHeldSlots = 16;
// The longest hold id DecodeHold reads (kMaxHeldSlots keys of kMaxKeyLength bytes).
inline constexpr size_t kMaxHoldIdLength = 27 + (kMaxHeldSlots * (2 + kMaxKeyLength) + 2) / 3 * 4;

// A fresh random hold id (the operating system's generator).
HoldId NewHoldId();

std::string EncodeHold(const HoldId& id, const std::vector<std::string_view>& keys);

struct DecodedHold {
  HoldId id;
  std::vector<std::string> keys;  // 1..kMaxHeldSlots, distinct, each 1..kMaxKeyLength bytes
};
// kInvalidArgument, saying what is wrong, for anything EncodeHold could not have written.
Result<DecodedHold> DecodeHold(std::string_view text);

}  // namespace caudal::engine_internal
