// Exact integer helpers shared by the algorithms. The Redis scripts implement the same functions
// with Lua doubles (see src/redis/lua/), which is why their preconditions keep every value the
// Lua side handles below 2^53: the two must agree bit for bit.
#pragma once

#include <cassert>
#include <cstdint>

namespace caudal::exact {

// GCC and Clang provide 128-bit integers as an extension; the products below need them.
__extension__ typedef __int128 Int128;

struct QuotRem {
  int64_t quot;
  int64_t rem;
};

// a·b = quot·m + rem with 0 <= rem < m, without overflow.
// Preconditions: a, b >= 0; m > 0; the quotient fits in 53 bits.
inline QuotRem MulDiv(int64_t a, int64_t b, int64_t m) {
  assert(a >= 0 && b >= 0 && m > 0);
  // Most products fit in 64 bits; a 128-bit division costs several times a 64-bit one.
  if (int64_t p64; !__builtin_mul_overflow(a, b, &p64)) {
    const QuotRem r{p64 / m, p64 % m};
    assert(r.quot < (int64_t{1} << 53));
    return r;
  }
  const Int128 p = static_cast<Int128>(a) * b;
  const QuotRem r{static_cast<int64_t>(p / m), static_cast<int64_t>(p % m)};
  assert(r.quot < (int64_t{1} << 53));
  return r;
}

// floor(x / d) and ceil(x / d) for any sign of x. Preconditions: d > 0.
inline int64_t FloorDiv(int64_t x, int64_t d) { return x >= 0 ? x / d : -((-x + d - 1) / d); }
inline int64_t CeilDiv(int64_t x, int64_t d) { return x >= 0 ? (x + d - 1) / d : -((-x) / d); }

// The start of the window of length w that holds t (windows aligned to multiples of w).
inline int64_t WindowStart(int64_t t, int64_t w) { return FloorDiv(t, w) * w; }

}  // namespace caudal::exact
