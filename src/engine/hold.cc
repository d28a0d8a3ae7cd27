#include "engine/hold.h"

#include <algorithm>
#include <random>

namespace caudal::engine_internal {
namespace {

constexpr char kHex[] = "0123456789abcdef";
constexpr char kBase64Url[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
constexpr size_t kWordDigits = 13;  // 52 bits

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

int Base64Value(char c) {
  const char* at = std::find(kBase64Url, kBase64Url + 64, c);
  return at == kBase64Url + 64 ? -1 : static_cast<int>(at - kBase64Url);
}

void AppendWord(int64_t w, std::string& out) {
  for (size_t i = kWordDigits; i-- > 0;) out += kHex[(w >> (4 * i)) & 0xf];
}

std::string Base64Url(std::string_view bytes) {
  std::string out;
  uint32_t acc = 0;
  int bits = 0;
  for (const char c : bytes) {
    acc = (acc << 8) | static_cast<unsigned char>(c);
    bits += 8;
    while (bits >= 6) {
      bits -= 6;
      out += kBase64Url[(acc >> bits) & 0x3f];
    }
  }
  if (bits > 0) out += kBase64Url[(acc << (6 - bits)) & 0x3f];
  return out;
}

// False when `text` is not base64url without padding, or has bits set past its last byte.
bool FromBase64Url(std::string_view text, std::string& out) {
  uint32_t acc = 0;
  int bits = 0;
  for (const char c : text) {
    const int v = Base64Value(c);
    if (v < 0) return false;
    acc = (acc << 6) | static_cast<uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out += static_cast<char>((acc >> bits) & 0xff);
    }
  }
  return bits < 6 && (acc & ((1u << bits) - 1)) == 0;
}

Status BadHoldId(std::string_view why) {
  return Status::InvalidArgument(std::string("hold: not a hold id (") + std::string(why) + ")");
}

}  // namespace

HoldId NewHoldId() {
  std::random_device rd;  // the operating system's generator (getrandom on Linux)
  const auto word = [&rd] {
    const uint64_t v = (static_cast<uint64_t>(rd()) << 32) | rd();
    return static_cast<int64_t>(v & (kHoldIdWordLimit - 1));
  };
  const int64_t hi = word();
  return {.hi = hi, .lo = word()};
}

std::string EncodeHold(const HoldId& id, const std::vector<std::string_view>& keys) {
  std::string out;
  AppendWord(id.hi, out);
  AppendWord(id.lo, out);
  out += '.';
  std::string bytes;
  for (const std::string_view k : keys) {
    bytes += static_cast<char>(k.size() >> 8);
    bytes += static_cast<char>(k.size() & 0xff);
    bytes += k;
  }
  out += Base64Url(bytes);
  return out;
}

Result<DecodedHold> DecodeHold(std::string_view text) {
  if (text.size() > kMaxHoldIdLength) return BadHoldId("too long");
  if (text.size() < 2 * kWordDigits + 2 || text[2 * kWordDigits] != '.')
    return BadHoldId("malformed");
  DecodedHold out;
  for (size_t w = 0; w < 2; ++w) {
    int64_t v = 0;
    for (size_t i = 0; i < kWordDigits; ++i) {
      const int d = HexValue(text[w * kWordDigits + i]);
      if (d < 0) return BadHoldId("malformed");
      v = (v << 4) | d;
    }
    (w == 0 ? out.id.hi : out.id.lo) = v;
  }
  std::string bytes;
  if (!FromBase64Url(text.substr(2 * kWordDigits + 1), bytes)) return BadHoldId("malformed");
  for (size_t at = 0; at < bytes.size();) {
    if (bytes.size() - at < 2) return BadHoldId("malformed");
    const size_t n = (static_cast<size_t>(static_cast<unsigned char>(bytes[at])) << 8) |
                     static_cast<unsigned char>(bytes[at + 1]);
    at += 2;
    if (n == 0 || n > kMaxKeyLength || bytes.size() - at < n) return BadHoldId("malformed");
    std::string key = bytes.substr(at, n);
    at += n;
    if (std::find(out.keys.begin(), out.keys.end(), key) != out.keys.end()) {
      return BadHoldId("a key twice");
    }
    if (out.keys.size() == kMaxHeldSlots) return BadHoldId("too many keys");
    out.keys.push_back(std::move(key));
  }
  if (out.keys.empty()) return BadHoldId("no keys");
  return out;
}

}  // namespace caudal::engine_internal
