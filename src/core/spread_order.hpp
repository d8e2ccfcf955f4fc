#pragma once
// A spread visiting order of [0, q): c_i = (i * a) mod q, a coprime with q near q / golden ratio,
// so that consecutive i land far apart and every c comes once. The lean CUDA path (by default;
// PIPELINK_AGG_LEAN_ORDER in src/cuda/aggregate.cu) hands chunks of edges to warps in this order:
// a hub row whose edges are contiguous (dst-sorted input) is then worked on by a few warps at a
// time, not by all of them at once (power-law dst-sorted lean, H200, session 13: 7.07 ms against
// 50.32 in edge order).
#include <cstdint>
#include <numeric>

namespace pipelink::detail {

/// The multiplier for q items; 1 (edge order) where q < 3 or where i * a could pass 64 bits
/// (q >= 2^32).
constexpr std::uint64_t spread_multiplier(std::uint64_t q) {
  if (q < 3 || q >= (std::uint64_t(1) << 32)) return 1;
  std::uint64_t a = std::uint64_t(double(q) * 0.6180339887498949) | 1u;
  while (std::gcd(a, q) != 1) a += 2;  // ends by q + 2 at the latest (coprime with odd q; q + 1 with even q)
  return a % q;
}

}  // namespace pipelink::detail
