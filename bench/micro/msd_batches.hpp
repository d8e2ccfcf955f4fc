#pragma once
// The batches of the MSD sort micro (bench/micro/msd_smem_sort_micro.cu; perf-notes v31) and the
// digit its second pass scatters by. Host C++ (the digit also on the device), so that the test
// suite checks the index arithmetic without CUDA (tests/test_msd_batches.cpp): a host emulation
// of the three passes on these batches must give std::stable_sort's order.
#include <algorithm>
#include <cstdint>
#include <vector>

#ifdef __CUDACC__
#define MSD_HD __host__ __device__
#else
#define MSD_HD
#endif

namespace msd {

using i64 = std::int64_t;
using u16 = std::uint16_t;
using u32 = std::uint32_t;

constexpr int kTopShift = 16;                     // pass 1's digit: dst >> 16 (6 bits while N <= 2^22)
constexpr int kTopDigits = 64;
constexpr int kBatchTops = 4;                     // top buckets a batch at most
constexpr int kSubBits = 8, kRowBits = 8;         // pass 2's digit in a top bucket; pass 3's rows
constexpr int kDigits2 = kBatchTops << kSubBits;  // pass 2's digits a batch: 1024
constexpr int kRows = 1 << kRowBits;
static_assert(kSubBits + kRowBits == kTopShift, "the u16 key is the sub-bucket, then the row");

// Top buckets [top0, top0 + nb), edges [ea, ea + n) of A; starts[k] is bucket top0 + k's first
// position relative to ea (starts[k] = n for k >= nb).
struct Batch {
  i64 ea = 0, n = 0;
  int top0 = 0, nb = 0;
  i64 starts[kBatchTops + 1] = {};
};

// Pass 2's digit of the edge at batch position p with key (dst's low 16 bits): its top bucket
// within the batch, then the key's high kSubBits.
MSD_HD inline u32 digit2(const Batch& b, i64 p, u16 key) {
  int j = 0;
#ifdef __CUDACC__
#pragma unroll
#endif
  for (int k = 1; k < kBatchTops; ++k) j += k < b.nb && p >= b.starts[k];
  return (u32(j) << kSubBits) | (u32(key) >> kRowBits);
}

// The row a pass-3 block writes for sub-bucket d (pass 2's digit) of batch b, row r in it.
MSD_HD inline i64 row_of(const Batch& b, int d, int r) {
  return (i64(b.top0 + (d >> kSubBits)) << kTopShift) | (i64(d & ((1 << kSubBits) - 1)) << kRowBits) | r;
}

// Batches of at most kBatchTops consecutive top buckets and at most scratch_edges edges each (a
// bucket larger than that goes alone: the caller sizes the scratch for the largest bucket). Every
// top bucket with rows below N is in one, empty ones included (their rows need row offsets).
// first[d]: top bucket d's first position (pass 1's scanned offsets), d < kTopDigits.
inline std::vector<Batch> plan_batches(const std::vector<u32>& first, i64 E, i64 N, i64 scratch_edges) {
  auto start = [&](int d) { return d < kTopDigits ? i64(first[std::size_t(d)]) : E; };
  const int tops = N > 0 ? int((N - 1) >> kTopShift) + 1 : 0;
  std::vector<Batch> out;
  for (int t = 0; t < tops;) {
    Batch b;
    b.top0 = t;
    b.ea = start(t);
    int nb = 1;
    while (nb < kBatchTops && t + nb < tops && start(t + nb + 1) - b.ea <= scratch_edges) ++nb;
    b.nb = nb;
    b.n = start(t + nb) - b.ea;
    for (int k = 0; k <= kBatchTops; ++k) b.starts[k] = k <= nb ? start(t + k) - b.ea : b.n;
    out.push_back(b);
    t += nb;
  }
  return out;
}

// The scratch a batch may use: an eighth of E or the largest top bucket, whichever is more (an
// eighth holds 4 of products-like's buckets, 10.7% of E: ten batches, ~1.25 B/edge of scratch).
inline i64 scratch_edges_for(const std::vector<u32>& first, i64 E) {
  i64 largest = 0;
  for (int d = 0; d < kTopDigits; ++d)
    largest = std::max(largest, (d + 1 < kTopDigits ? i64(first[std::size_t(d + 1)]) : E) - i64(first[std::size_t(d)]));
  return std::max(largest, (E + 7) / 8);
}

}  // namespace msd
