// SipHash (Aumasson & Bernstein): a keyed 64-bit pseudorandom function of a byte string, in
// its SipHash-2-4 form (the paper's: two compression rounds per 8-byte block, four to finalize)
// and SipHash-1-3 (one and three), which Python, Rust's standard library and Redis's dictionaries
// use to key hash tables: collisions stay unpredictable without the key, at a little over half
// the rounds per block.
//
// The memory store keeps a 64-bit keyed fingerprint (SipHash-1-3) of each rate-limit key instead
// of the key itself. With a secret random SipKey, the fingerprints of distinct keys behave as
// independent random 64-bit values: two of a million keys share one with probability about 2^-25,
// and a client who chooses keys cannot steer them into collisions (or into one shard or one probe
// run) without knowing the SipKey.
//
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <string_view>

namespace caudal {

struct SipKey {
  uint64_t k0 = 0;
  uint64_t k1 = 0;
};

uint64_t SipHash24(const SipKey& key, std::string_view data);
uint64_t SipHash13(const SipKey& key, std::string_view data);

// A key drawn from std::random_device.
SipKey RandomSipKey();

}  // namespace caudal
