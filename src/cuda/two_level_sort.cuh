#pragma once
// The plan build's second level (opt-in: PIPELINK_AGG_BUILD_TWO_LEVEL=1; src/cuda/aggregate.cu's
// sort_narrow). Self-contained (CUDA runtime and <cstdint> only) so that the standalone micro
// bench/micro/bucket_oneshot_micro.cu measures these same kernels.
//
// CUB sorts the key's bits [kLo, end_bit) only: two passes instead of three for 17-22 bits. Each
// bucket of kRows = 64 consecutive destinations is then contiguous, in edge order (the sort is
// stable), and these kernels order it by the destination's low 6 bits, which the build's init
// carries in src's bits 26-31 (cleared on the way out), and write the row offsets. The result is
// the one sort's plan, bitwise.
// Measured (bench/micro/bucket_oneshot_micro.cu, H200, session 11, products-like): the 16-bit sort
// with the bucket offsets 1.74 ms against 2.41 for the 22-bit sort with row offsets, and the rank
// (rank_kernel's form, "T64h" there) 0.504 ms: ~2.24 against ~2.41 ms. The same blocks only copying
// took 0.253, so the rank runs at half its byte rate.
// Buckets over kCap edges (power-law's hub rows) go through count, scan and place over kCap-edge
// chunks of the sorted pairs, all chunks in parallel.
// Session 12 (H200, bench/micro/bucket_oneshot_micro.cu): bitwise the one sort's plan on
// products-like and an R-MAT power-law, but with count and place finding each chunk's big buckets
// by binary search the four kernels took 1.42 / 1.70 ms and the build 3.17 / 3.48 against 2.41 /
// 2.42: now rank_kernel marks the chunks of the big buckets (big_part).
//
// Pair: a 4-byte-aligned struct whose first member is `int src`; its other bytes are moved as they are.
#include <cuda_runtime.h>

#include <cstdint>

namespace pipelink::cuda::two_level {

constexpr int kLo = 6, kSrcBits = 26, kRows = 1 << kLo, kCap = 2048, kThreads = 256;
constexpr std::uint32_t kSrcMask = (1u << kSrcBits) - 1u;

/// src masked to kSrcBits with the destination's low kLo bits above it (the build's init).
__host__ __device__ constexpr std::uint32_t pack_src(std::uint32_t src, std::uint32_t dst) {
  return (src & kSrcMask) | ((dst & (kRows - 1u)) << kSrcBits);
}

template <class Pair>
__device__ __forceinline__ int digit_of(const Pair& p) {
  return int(std::uint32_t(p.src) >> kSrcBits);
}
// Lane t holds the counts of digits 2t and 2t + 1: the exclusive sum of the 64 counts at digit 2t.
__device__ __forceinline__ int pair_scan(int c0, int c1, int lane) {
  int incl = c0 + c1;
#pragma unroll
  for (int o = 1; o < 32; o <<= 1) {
    const int v = __shfl_up_sync(0xffffffffu, incl, o);
    if (lane >= o) incl += v;
  }
  return incl - c0 - c1;
}
// Rows 2t and 2t + 1 of bucket b start at `first` and first + c0; the last bucket writes row_ptr[N].
__device__ __forceinline__ void write_row_ptr(std::int32_t* row_ptr, std::int64_t b, int t, int first, int c0,
                                              std::int64_t N, std::int64_t buckets, const std::int32_t* bptr) {
  const std::int64_t r = b * kRows + 2 * t;
  if (r < N) row_ptr[r] = first;
  if (r + 1 < N) row_ptr[r + 1] = first + c0;
  if (b == buckets - 1 && t == 0) row_ptr[N] = bptr[buckets];
}
// A part of n <= kCap elements is spread over the block's warps in contiguous runs: warp w holds
// elements [w * J * 32, (w + 1) * J * 32), its lane l element (w * J + j) * 32 + l in slot j. So a
// warp ranks its own run without block barriers, and a block needs two for all of it (the
// earlier form, a 256-element block step at a time, took 3 barriers a step: 0.570 ms for
// products-like's rank kernel, session 12).
template <int J>
__device__ __forceinline__ int part_index(int j) {
  return ((int(threadIdx.x) >> 5) * J + j) * 32 + (int(threadIdx.x) & 31);
}
// Thread t loads its slots of in[] (all loads issued before any use): the pair with its digit bits
// cleared in pr[j], the digit in dg[j] (-1 past n).
template <int J, class Pair>
__device__ __forceinline__ void load_part(const Pair* __restrict__ in, int n, Pair (&pr)[J], int (&dg)[J]) {
#pragma unroll
  for (int j = 0; j < J; ++j) {
    const int i = part_index<J>(j);
    dg[j] = -1;
    if (i < n) {
      pr[j] = in[i];
      dg[j] = digit_of(pr[j]);
      pr[j].src = int(std::uint32_t(pr[j].src) & kSrcMask);
    }
  }
}
// Stable ranks of a part's elements (dg as load_part leaves it). After it, and a barrier,
// wrun[w][d] is warp w's count of digit d and loc[j] the number of earlier elements of digit dg[j]
// in the same warp's run (-1 past n). wrun: shared memory, kThreads / 32 x 64 ints.
template <int J>
__device__ __forceinline__ void warp_ranks(const int (&dg)[J], int n, int (*wrun)[kRows], int (&loc)[J]) {
  const int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
  const unsigned below = (1u << lane) - 1u;
  for (int q = lane; q < kRows; q += 32) wrun[w][q] = 0;
  __syncwarp();
#pragma unroll
  for (int j = 0; j < J; ++j) {
    loc[j] = -1;
    if ((w * J + j) * 32 >= n) continue;  // warp-uniform
    const int d = dg[j];
    const unsigned peers = __match_any_sync(0xffffffffu, d);
    const int rank = __popc(peers & below);
    if (d >= 0) loc[j] = wrun[w][d] + rank;
    __syncwarp();
    if (d >= 0 && rank == 0) wrun[w][d] += __popc(peers);
    __syncwarp();
  }
}
// After warp_ranks and a barrier, thread t < 64 (digit t): wrun[v][t] becomes the count of digit t
// in the runs of warps before v; returns the part's count of digit t.
__device__ __forceinline__ int warp_offsets(int (*wrun)[kRows]) {
  const int t = threadIdx.x;
  int r = 0;
#pragma unroll
  for (int v = 0; v < kThreads / 32; ++v) {
    const int c = wrun[v][t];
    wrun[v][t] = r;
    r += c;
  }
  return r;
}

// A kCap-edge chunk c meets at most two big buckets (> kCap edges): the one holding its first edge
// (side 0) and one starting inside it (side 1), which runs past its end; any other would lie inside
// the chunk and hold fewer edges than it. The side of big bucket [bs, ...) in chunk c, its first
// chunk being cf.
__host__ __device__ constexpr int big_side(std::int64_t c, std::int64_t cf, std::int64_t bs) {
  return c == cf && bs > c * kCap ? 1 : 0;
}

// Shared memory of one small bucket's rank.
template <class Pair>
struct RankSmem {
  Pair tile[kCap];
  int start[kRows], total[kRows], wrun[kThreads / 32][kRows];
};
// Bucket b (n <= kCap edges from bs, loaded by load_part into pr / dg): ranks it stably, places it
// in shared memory and writes it coalesced to out, with its row offsets. The block's last barrier
// lets the caller reuse `sm` at once.
template <int J, class Pair>
__device__ __forceinline__ void rank_bucket(const Pair (&pr)[J], const int (&dg)[J], std::int64_t b, int bs, int n,
                                            const std::int32_t* bptr, std::int64_t N, std::int64_t buckets,
                                            Pair* __restrict__ out, std::int32_t* __restrict__ row_ptr,
                                            RankSmem<Pair>& sm) {
  const int t = threadIdx.x, lane = t & 31, w = t >> 5;
  int loc[J];
  warp_ranks<J>(dg, n, sm.wrun, loc);
  __syncthreads();
  if (t < kRows) sm.total[t] = warp_offsets(sm.wrun);
  __syncthreads();
  if (t < 32) {
    const int c0 = sm.total[2 * t], c1 = sm.total[2 * t + 1];
    const int ex = pair_scan(c0, c1, lane);
    sm.start[2 * t] = ex;
    sm.start[2 * t + 1] = ex + c0;
    write_row_ptr(row_ptr, b, t, bs + ex, c0, N, buckets, bptr);
  }
  __syncthreads();
#pragma unroll
  for (int j = 0; j < J; ++j)
    if (loc[j] >= 0) sm.tile[sm.start[dg[j]] + sm.wrun[w][dg[j]] + loc[j]] = pr[j];
  __syncthreads();
  for (int i = t; i < n; i += kThreads) out[bs + i] = sm.tile[i];
  __syncthreads();
}

// A block per bucket of at most kCap edges: loads it at once, then rank_bucket.
template <class Pair>
__global__ void __launch_bounds__(kThreads) rank_kernel(const Pair* __restrict__ in, const std::int32_t* __restrict__ bptr,
                                                        std::int64_t N, std::int64_t buckets, Pair* __restrict__ out,
                                                        std::int32_t* __restrict__ row_ptr, std::int32_t* __restrict__ big) {
  constexpr int J = kCap / kThreads;
  __shared__ RankSmem<Pair> sm;
  const std::int64_t b = blockIdx.x;
  const int bs = bptr[b], n = bptr[b + 1] - bs;
  if (n > kCap) {  // scan_kernel writes its row offsets (and row_ptr[N] if b is the last)
    const std::int64_t cf = bs / kCap, cl = (std::int64_t(bs) + n - 1) / kCap;
    for (std::int64_t c = cf + threadIdx.x; c <= cl; c += kThreads) big[c * 2 + big_side(c, cf, bs)] = int(b);
    return;
  }
  Pair pr[J];
  int dg[J];
  load_part<J>(in + bs, n, pr, dg);
  rank_bucket<J>(pr, dg, b, bs, n, bptr, N, buckets, out, row_ptr, sm);
}

// Chunk c's part [lo, hi) of its big bucket on `side`; false where there is none. big[c * 2 + side]
// is that bucket or -1: rank_kernel marks the chunks of each bucket over kCap edges (measured,
// session 12, products-like with no such bucket: count and place each finding theirs by two binary
// searches over bptr per side took ~0.9 ms of the four kernels' 1.42).
__device__ __forceinline__ bool big_part(const std::int32_t* big, const std::int32_t* bptr, std::int64_t E,
                                         std::int64_t c, int side, std::int64_t& lo, std::int64_t& hi) {
  const int b = big[c * 2 + side];
  if (b < 0) return false;
  lo = max(c * kCap, std::int64_t(bptr[b]));
  hi = min(min(E, c * kCap + kCap), std::int64_t(bptr[b + 1]));
  return true;
}
// cnt[(chunk * 2 + side) * 64 + d]: digit d's count in the chunk's part of that big bucket.
template <class Pair>
__global__ void __launch_bounds__(kThreads) count_kernel(const Pair* __restrict__ in, const std::int32_t* __restrict__ bptr,
                                                         const std::int32_t* __restrict__ big, std::int64_t E,
                                                         std::int32_t* __restrict__ cnt) {
  __shared__ int h[kRows];
  const std::int64_t c = blockIdx.x;
  const int t = threadIdx.x;
  for (int side = 0; side < 2; ++side) {
    std::int64_t lo = 0, hi = 0;
    if (!big_part(big, bptr, E, c, side, lo, hi)) continue;  // block-uniform
    if (t < kRows) h[t] = 0;
    __syncthreads();
    // One shared atomic per digit a warp: a hub bucket's chunk is mostly one row (one digit), and
    // one atomic a thread would serialize on it.
    for (std::int64_t i0 = lo; i0 < hi; i0 += kThreads) {  // block-uniform trips: every lane matches
      const std::int64_t i = i0 + t;
      const int d = i < hi ? digit_of(in[i]) : -1;
      const unsigned peers = __match_any_sync(0xffffffffu, d);
      if (d >= 0 && (peers & ((1u << (t & 31)) - 1u)) == 0) atomicAdd(&h[d], __popc(peers));
    }
    __syncthreads();
    if (t < kRows) cnt[(c * 2 + side) * kRows + t] = h[t];
    __syncthreads();
  }
}
// A block per big bucket: digit totals and row offsets, then, in place of each chunk's counts, the
// first position of each digit's edges from that chunk (four groups of 64 threads over the chunks).
__global__ void __launch_bounds__(kThreads) scan_kernel(const std::int32_t* __restrict__ bptr, std::int64_t N,
                                                        std::int64_t buckets, std::int32_t* __restrict__ cnt,
                                                        std::int32_t* __restrict__ row_ptr) {
  __shared__ int sums[4][kRows], tot[kRows], dstart[kRows];
  const std::int64_t b = blockIdx.x, bs = bptr[b], be = bptr[b + 1];
  if (be - bs <= kCap) return;
  const int t = threadIdx.x, lane = t & 31, g = t >> kLo, d = t & (kRows - 1);
  const std::int64_t cf = bs / kCap, cl = (be - 1) / kCap, q = (cl - cf + 4) / 4;
  const std::int64_t g0 = cf + g * q, g1 = min(cl + 1, g0 + q);
  // Side 1 only in the first chunk, and only where the bucket starts inside it.
  auto idx = [&](std::int64_t c) { return (c * 2 + big_side(c, cf, bs)) * kRows + d; };
  int sum = 0;
  for (std::int64_t c = g0; c < g1; ++c) sum += cnt[idx(c)];
  sums[g][d] = sum;
  __syncthreads();
  if (t < kRows) tot[t] = sums[0][t] + sums[1][t] + sums[2][t] + sums[3][t];
  __syncthreads();
  if (t < 32) {
    const int ex = pair_scan(tot[2 * t], tot[2 * t + 1], lane);
    dstart[2 * t] = ex;
    dstart[2 * t + 1] = ex + tot[2 * t];
    write_row_ptr(row_ptr, b, t, int(bs) + ex, tot[2 * t], N, buckets, bptr);
  }
  __syncthreads();
  int base = int(bs) + dstart[d];
  for (int v = 0; v < g; ++v) base += sums[v][d];
  // Eight chunks' counts loaded before any is overwritten: the loads cannot pass the stores to
  // the same array, so one at a time would leave a single load in flight per thread (a bucket of
  // 10^6 edges has ~490 chunks, ~120 a thread).
  constexpr int U = 8;
  for (std::int64_t c = g0; c < g1; c += U) {
    int v[U];
#pragma unroll
    for (int u = 0; u < U; ++u) v[u] = c + u < g1 ? cnt[idx(c + u)] : 0;
#pragma unroll
    for (int u = 0; u < U; ++u) {
      if (c + u < g1) cnt[idx(c + u)] = base;
      base += v[u];
    }
  }
}
// A block per chunk: its parts of big buckets ranked as in rank_kernel and written at the positions
// scan_kernel left (scattered inside the bucket, each digit's run contiguous).
template <class Pair>
__global__ void __launch_bounds__(kThreads) place_kernel(const Pair* __restrict__ in, const std::int32_t* __restrict__ bptr,
                                                         const std::int32_t* __restrict__ big, std::int64_t E,
                                                         const std::int32_t* __restrict__ off, Pair* __restrict__ out) {
  constexpr int J = kCap / kThreads;
  __shared__ int base[kRows], wrun[kThreads / 32][kRows];
  const std::int64_t c = blockIdx.x;
  const int t = threadIdx.x, w = t >> 5;
  for (int side = 0; side < 2; ++side) {
    std::int64_t lo = 0, hi = 0;
    if (!big_part(big, bptr, E, c, side, lo, hi)) continue;
    const int n = int(hi - lo);
    Pair pr[J];
    int dg[J], loc[J];
    load_part<J>(in + lo, n, pr, dg);
    warp_ranks<J>(dg, n, wrun, loc);
    if (t < kRows) base[t] = off[(c * 2 + side) * kRows + t];
    __syncthreads();
    if (t < kRows) (void)warp_offsets(wrun);
    __syncthreads();
#pragma unroll
    for (int j = 0; j < J; ++j)
      if (loc[j] >= 0) out[base[dg[j]] + wrun[w][dg[j]] + loc[j]] = pr[j];
    __syncthreads();
  }
}

/// Scratch ints the kernels need for E edges: each chunk's two big-bucket marks, then its two sides'
/// 64 digit counts.
constexpr std::int64_t scratch_ints(std::int64_t E) { return (E + kCap - 1) / kCap * 2 * (1 + kRows); }

/// The four kernels after CUB's top-bits sort: `in` the sorted pairs (digits packed, not `out`),
/// bptr the B + 1 bucket offsets, scratch of scratch_ints(E) ints; writes `out` (the plan's pairs)
/// and row_ptr [N + 1].
template <class Pair>
void launch(const Pair* in, const std::int32_t* bptr, std::int64_t N, std::int64_t E, std::int32_t* scratch, Pair* out,
            std::int32_t* row_ptr, cudaStream_t s) {
  const std::int64_t B = (N + kRows - 1) / kRows, C = (E + kCap - 1) / kCap;
  std::int32_t *big = scratch, *cnt = scratch + 2 * C;
  cudaMemsetAsync(big, 0xFF, std::size_t(2 * C) * sizeof(std::int32_t), s);  // -1: no big bucket
  rank_kernel<Pair><<<unsigned(B), kThreads, 0, s>>>(in, bptr, N, B, out, row_ptr, big);
  count_kernel<Pair><<<unsigned(C), kThreads, 0, s>>>(in, bptr, big, E, cnt);
  scan_kernel<<<unsigned(B), kThreads, 0, s>>>(bptr, N, B, cnt, row_ptr);
  place_kernel<Pair><<<unsigned(C), kThreads, 0, s>>>(in, bptr, big, E, cnt, out);
}

}  // namespace pipelink::cuda::two_level
