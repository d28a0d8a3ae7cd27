#include "store/siphash.h"

#include <bit>
#include <cstring>
#include <random>

namespace caudal {
namespace {

struct SipState {
  uint64_t v0, v1, v2, v3;

  void Round() {
    v0 += v1;
    v1 = std::rotl(v1, 13);
    v1 ^= v0;
    v0 = std::rotl(v0, 32);
    v2 += v3;
    v3 = std::rotl(v3, 16);
    v3 ^= v2;
    v0 += v3;
    v3 = std::rotl(v3, 21);
    v3 ^= v0;
    v2 += v1;
    v1 = std::rotl(v1, 17);
    v1 ^= v2;
    v2 = std::rotl(v2, 32);
  }

  template <int kCompression>
  void Absorb(uint64_t m) {
    v3 ^= m;
    for (int i = 0; i < kCompression; ++i) Round();
    v0 ^= m;
  }
};

uint64_t LoadLittleEndian64(const char* p) {
  uint64_t m;
  std::memcpy(&m, p, sizeof m);
  if constexpr (std::endian::native == std::endian::big) m = __builtin_bswap64(m);
  return m;
}

template <int kCompression, int kFinalization>
uint64_t SipHash(const SipKey& key, std::string_view data) {
  SipState s{.v0 = key.k0 ^ 0x736f6d6570736575ULL,
             .v1 = key.k1 ^ 0x646f72616e646f6dULL,
             .v2 = key.k0 ^ 0x6c7967656e657261ULL,
             .v3 = key.k1 ^ 0x7465646279746573ULL};
  const size_t whole = data.size() & ~size_t{7};
  for (size_t i = 0; i < whole; i += 8) {
    s.Absorb<kCompression>(LoadLittleEndian64(data.data() + i));
  }
  // The last block: the remaining bytes, little-endian, with the length's low byte on top.
  uint64_t last = static_cast<uint64_t>(data.size() & 0xff) << 56;
  for (size_t i = whole; i < data.size(); ++i) {
    last |= static_cast<uint64_t>(static_cast<unsigned char>(data[i])) << (8 * (i - whole));
  }
  s.Absorb<kCompression>(last);
  s.v2 ^= 0xff;
  for (int i = 0; i < kFinalization; ++i) s.Round();
  return s.v0 ^ s.v1 ^ s.v2 ^ s.v3;
}

}  // namespace

uint64_t SipHash24(const SipKey& key, std::string_view data) { return SipHash<2, 4>(key, data); }
uint64_t SipHash13(const SipKey& key, std::string_view data) { return SipHash<1, 3>(key, data); }

SipKey RandomSipKey() {
  std::random_device rd;
  auto word = [&rd] { return (static_cast<uint64_t>(rd()) << 32) ^ rd(); };
  return {.k0 = word(), .k1 = word()};
}

}  // namespace caudal
