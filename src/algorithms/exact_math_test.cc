#include "algorithms/exact_math.h"

#include <gtest/gtest.h>

#include <random>

namespace caudal::exact {
namespace {

TEST(ExactMath, MulDivMatchesA128BitReference) {
  std::mt19937_64 rng(7);
  for (int i = 0; i < 100'000; ++i) {
    const int64_t a = static_cast<int64_t>(rng() >> (24 + rng() % 40));  // up to 2^40
    const int64_t b = static_cast<int64_t>(rng() >> (19 + rng() % 45));  // up to 2^45
    const int64_t m = 1 + static_cast<int64_t>(rng() >> (19 + rng() % 45));
    const Int128 p = static_cast<Int128>(a) * b;
    if (p / m >= (Int128{1} << 53)) continue;  // outside MulDiv's precondition
    const QuotRem r = MulDiv(a, b, m);
    ASSERT_EQ(static_cast<Int128>(r.quot) * m + r.rem, p) << a << "*" << b << "/" << m;
    ASSERT_GE(r.rem, 0);
    ASSERT_LT(r.rem, m);
  }
  // The largest products the algorithms form: 2^40 tokens times a year in µs, over 2^40.
  const int64_t year_us = int64_t{31'536'000} * 1'000'000;
  const QuotRem big = MulDiv(int64_t{1} << 40, year_us, int64_t{1} << 40);
  EXPECT_EQ(big.quot, year_us);
  EXPECT_EQ(big.rem, 0);
}

TEST(ExactMath, FloorAndCeilDivisionRoundTheRightWayForEitherSign) {
  for (int64_t x = -50; x <= 50; ++x) {
    for (int64_t d : {1, 2, 3, 7, 50}) {
      const int64_t f = FloorDiv(x, d);
      const int64_t c = CeilDiv(x, d);
      ASSERT_LE(f * d, x) << x << "/" << d;
      ASSERT_GT((f + 1) * d, x) << x << "/" << d;
      ASSERT_GE(c * d, x) << x << "/" << d;
      ASSERT_LT((c - 1) * d, x) << x << "/" << d;
    }
  }
}

TEST(ExactMath, WindowStartAlignsToMultiplesOfTheWindow) {
  EXPECT_EQ(WindowStart(0, 60), 0);
  EXPECT_EQ(WindowStart(59, 60), 0);
  EXPECT_EQ(WindowStart(60, 60), 60);
  EXPECT_EQ(WindowStart(-1, 60), -60);
  EXPECT_EQ(WindowStart(-60, 60), -60);
  const int64_t t = int64_t{1'700'000'000'123'456};
  EXPECT_EQ(WindowStart(t, 1'000), t - 456);
}

}  // namespace
}  // namespace caudal::exact
