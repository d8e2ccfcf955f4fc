// core/spread_order.hpp: the lean CUDA path's spread order of edge chunks must visit every chunk
// exactly once (a chunk missed or doubled would drop or double-count edges); checked here on the
// CPU for every count the GPU tests use and many more.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <vector>

#include "core/spread_order.hpp"

using pipelink::detail::spread_multiplier;

namespace {

// Whether i -> (i * a) mod q visits each of [0, q) once.
bool visits_each_once(std::uint64_t q, std::uint64_t a) {
  std::vector<char> seen(q, 0);
  for (std::uint64_t i = 0; i < q; ++i) {
    const std::uint64_t c = i * a % q;
    if (seen[c]) return false;
    seen[c] = 1;
  }
  return true;
}

}  // namespace

TEST(SpreadOrder, EveryChunkOnceForAllSmallCounts) {
  for (std::uint64_t q = 1; q <= 5000; ++q) {
    const std::uint64_t a = spread_multiplier(q);
    ASSERT_LT(a, std::max<std::uint64_t>(q, 2)) << "q=" << q;
    ASSERT_EQ(std::gcd(a, q), 1u) << "q=" << q;
    ASSERT_TRUE(visits_each_once(q, a)) << "q=" << q << " a=" << a;
  }
}

TEST(SpreadOrder, LargeCountsAndTheEdgeOrderFallback) {
  // Products-like at F = 64 (64-edge chunks), power-law, powers of two and their neighbours.
  for (std::uint64_t q : {966549ull, 984375ull, 1048576ull, 1048575ull, 1048577ull, 3000000ull}) {
    const std::uint64_t a = spread_multiplier(q);
    EXPECT_EQ(std::gcd(a, q), 1u) << "q=" << q;
    EXPECT_TRUE(visits_each_once(q, a)) << "q=" << q;
    // Consecutive chunks land far apart: the step is near q / golden ratio.
    EXPECT_GT(a, q / 2) << "q=" << q;
    EXPECT_LT(a, q * 3 / 4) << "q=" << q;
  }
  // Where i * a could pass 64 bits, and for fewer than 3 chunks: edge order (a = 1).
  EXPECT_EQ(spread_multiplier(std::uint64_t(1) << 32), 1u);
  const std::uint64_t q32 = (std::uint64_t(1) << 32) - 1;  // the largest spread count: i * a < q^2 < 2^64
  EXPECT_LT(spread_multiplier(q32), q32);
  EXPECT_EQ(std::gcd(spread_multiplier(q32), q32), 1u);
  EXPECT_EQ(spread_multiplier(0), 1u);
  EXPECT_EQ(spread_multiplier(2), 1u);
}
