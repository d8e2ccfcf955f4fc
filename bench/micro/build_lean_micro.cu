// Standalone micro-benchmarks (not part of the library build) for two open questions of the CUDA
// aggregate on the H200 (docs/perf-notes.md, "CUDA aggregate on the H200"):
//
//   nvcc -O3 -std=c++20 -arch=sm_90 bench/micro/build_lean_micro.cu -o blm && ./blm [E]
//
// Data: products-like sizes (N = 2,449,029, E = 61,859,140 unless E is given, F = 64), src/dst
// int64 uniform in [0, N), w uniform(-1, 1), x uniform(-2, 2), all drawn on the device. Every
// line is `name  median_ms  (min..max)  note`, median of 10 after one warm-up. ~5 GB of device
// memory at the default E.
//
// Part A: the plan build. Under ncu the plan build's three CUB onesweep passes (dst keys, 22 bits,
// 8 bits a pass) took 0.66-0.70 ms each: 2.05 ms of the ~2.9 ms build. Does the sort get faster
// with 32-bit offsets, another onesweep tile, or 11-bit digits (two passes instead of three)?
//   A0  init kernel alone (production init_pairs_kernel: keys = u32 dst, values = {src, id}
//       int32 pairs, index check folded in): subtract it from A1-A5, which re-run it every rep.
//   A1  cub::DeviceRadixSort::SortPairs with num_items as int64 (64-bit offsets): production.
//   A2  the same with num_items as uint32 (32-bit offsets: CUB's Policy900 tile differs too).
//   A3+ cub::DispatchRadixSort with our own policy hub (MyHub<THREADS, ITEMS, RADIX_BITS>), 32-bit
//       offsets. ITEMS here is the *effective* items per thread: CUB's own policies give a
//       nominal 4-byte count that AgentRadixSortOnesweepPolicy's RegBoundScaling halves for the
//       8-byte pair values (A1 runs 384 threads x 14 items, A2 384 x 15; both are printed).
//       The onesweep kernel's shared memory is static (48 KB cap): values_out[THREADS*ITEMS]
//       (8 B each) unioned with the ranker's BLOCK_WARPS x 2^RADIX_BITS counters, plus
//       2^RADIX_BITS offsets. So the brief's (256, 24), (512, 16), (384, 20) as effective items
//       (48, 64, 60 KB of values) do not fit; the nearest fitting tiles are used instead:
//       (256, 23), (512, 11), (384, 12). Taken as CUB-nominal counts they would be 256x12,
//       512x8, 384x10 (smaller tiles): 256x12 is also run.
//       11-bit digits (two passes for 22 bits): the ranker needs BLOCK_WARPS x 2048 x 4 B of
//       counters + 2048 x 4 B match masks + 2048 x 4 B offsets, so 256 threads (> 64 KB) and
//       128 threads (49,824 B > 48 KB: ptxas "uses too much shared data") cannot compile.
//       64 x 32 compiles (168 regs, 33 KB) and sorts correctly at E = 2M, but is 4.8x slower
//       than A1 there (0.61 vs 0.13 ms); it is opt-in (BLM_11BIT=1) and was never run at the
//       default E. 96 x 24 compiled (128 regs, 41 KB) but never finished (killed after 45 s at
//       E = 2M, and the first default-E run stalled where it came next); a guess, not
//       investigated: 96 threads do not divide the 2048 digits (BINS_PER_THREAD 22, FULL_BINS
//       false). It is left out.
//       Every variant's sorted keys and pairs are compared bitwise with A1's (the sort is
//       stable, so the output is unique): OK / MISMATCH, and its temp_storage bytes printed.
//   A6  production row_ptr_kernel (binary search over the sorted keys, N + 1 threads).
//   A7  MSD split: CUB sorts bits [8, 22) (two passes), a bucket search finds each bucket of 256
//       rows, and cub::DeviceSegmentedRadixSort sorts each bucket on bits [0, 8) (one pass);
//       A8 the same with cub::DeviceSegmentedSort::StableSortPairs; A7a the top-bits sort alone.
//       A9: the same top-bits sort, then our own kernel (bucket_sort_rows: a block per bucket,
//       stable digit counting straight from global memory) that also writes row_ptr; pairs
//       checked against A1, row_ptr against A6. A9b: that kernel alone.
//       All added in session 7, compiled, not yet run.
//   A12 (session 9, compiled, not yet run): A9's second level with the bucket in shared memory.
//       CUB sorts bits [7, 22) (two passes, as A7a), and a block per bucket of 128 rows loads it
//       (at most 4096 edges: 12 bytes each, coalesced), ranks it stably on the low 7 bits from
//       shared memory, and writes the sorted pairs coalesced plus the bucket's row_ptr. Why:
//       A9's kernel took ~2.5 ms (A9 4.20 against A7a 1.63) where its bytes need ~0.3. Its
//       per-chunk loop waited on global loads, and its 8-byte stores scattered over a 51 KB
//       bucket, with ~40 MB of buckets live at once against a 60 MB L2. Expected: ~0.35-0.45 ms
//       for the kernel, so A12 ~2.0-2.1 ms against A2 + A6 = 2.27. Larger buckets (hub rows)
//       take A9's global-memory path, which products-like's uniform rows (3200 +- 60 edges a
//       bucket) never do.
//
// Part B: the lean path (zero scratch, float atomics). Production atomic_edges_kernel ran
// 13.77 ms on products-like against a ~10.3 ms traffic floor. out is zeroed inside every rep
// (cudaMemsetAsync, 627 MB, ~0.16 ms: included in every B line; "B0 memset alone" is printed).
//   B1  copy of atomic_edges_kernel specialised to F = 64 float, int64 indices, tanh: 16 lanes
//       an edge, float4 per lane, atomicAdd(float4*) (atom.global.add.v4.f32 in the PTX, a RED
//       since the result is unused); grid_for(E * 16, 256) as production (capped at 65535 * 32
//       = 2,097,120 blocks, ~1.9 edges per group). B1p: the same kernel on a persistent grid.
//   B2/B3  each 16-lane group takes 2 / 4 edges per iteration: all indices, w and x rows
//       loaded before any atomic (more loads in flight); grid_for(E * 16 / U, 256).
//   B4  Hopper bulk reduction: each half warp stages its edge's 64 transformed floats (256 B) in
//       a ring of S shared-memory slots, fence.proxy.async.shared::cta, __syncwarp, and its
//       lane 0 issues cp.reduce.async.bulk.global.shared::cta.bulk_group.add.f32 (256 B) and
//       commit_group; before a slot is rewritten lane 0 waits cp.async.bulk.wait_group.read
//       (S/U - 1). U edges a half warp per iteration (loads first). Persistent grid
//       (occupancy x SMs), S x 4 KB dynamic smem per 256-thread block.
//   Each lean variant is checked against B1: max|a - b| / max|b| < 1e-5 -> OK / MISMATCH.
//
// ptxas -v (sm_90, CUDA 13.0): regs / static smem
//   CUB onesweep A1 (Policy900, 64-bit offsets, 384x14): 77 / 45,056 B; A2 (384x15): 80 / 47,104
//   hub 256x23: 128 / 48,128; 256x12: 63 / 25,600; 512x11: 64 / 46,080; 384x12: 56 / 37,888
//   (8 B stack, 4 B spill); 11-bit 64x32: 168 / 33,056 (its histogram kernel 55 / 24,576).
//   CUB histogram (8-bit) 40 / 4,096; exclusive sum 24-32 / 1,184-2,336.
//   lean_base 26; lean_multi<2> 32, <4> 48; lean_bulk<4,1> 32, <8,1> 32, <8,2> 40, <16,4> 58
//   (dynamic smem only); init_pairs 19; row_ptr_kernel 18. No spills elsewhere.
//
// First run (H200, 132 SMs, default E, one run, median of 10; the whole binary takes ~9 s):
//   A0 init 0.413; A1 2.219 (incl. init; temp 11.8 MB); A2 2.162; A3 256x23 2.193;
//   A3b 256x12 2.403; A4 512x11 2.171; A5 384x12 2.134-2.167; A6 row_ptr 0.119; all OK.
//   B0 memset 0.157; B1 13.483; B1p 13.816; B2 13.508; B3 13.503; B4a 14.129; B4b 14.535;
//   B4c 14.253; B4d 14.211; all OK (rel. diff ~3.7e-7).
#include <cub/block/block_scan.cuh>
#include <cub/device/device_radix_sort.cuh>
#include <cub/device/device_segmented_radix_sort.cuh>
#include <cub/device/device_segmented_sort.cuh>
#include <cub/device/dispatch/dispatch_radix_sort.cuh>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <vector>

#include "micro_harness.cuh"

using micro::dalloc;
using micro::report;
using micro::timed;
using micro::bucket_search;

constexpr int F = 64;
using i64 = std::int64_t;
using u32 = std::uint32_t;

struct alignas(8) Pair {
  std::int32_t src, id;
};

// ---- data --------------------------------------------------------------------------------------
using micro::gen_edges;
using micro::lean_rows;
using micro::mix;
using micro::unit;

// production grid_for (src/cuda/aggregate.cu)
static int grid_for(i64 work, int block) {
  const i64 g = (work + block - 1) / block;
  return int(g < 1 ? 1 : (g > 65535LL * 32 ? 65535LL * 32 : g));
}

// ---- Part A: plan build pieces (copies of production) -------------------------------------------
__global__ void init_pairs(const i64* src, const i64* dst, u32* keys, Pair* pairs, i64 E, std::uint64_t N,
                           unsigned long long* first_bad) {
  for (i64 e = blockIdx.x * i64(blockDim.x) + threadIdx.x; e < E; e += i64(gridDim.x) * blockDim.x) {
    const i64 s = src[e], d = dst[e];
    if (std::uint64_t(s) >= N || std::uint64_t(d) >= N) atomicMin(first_bad, (unsigned long long)e);
    keys[e] = u32(d);
    pairs[e] = Pair{std::int32_t(s), std::int32_t(e)};
  }
}
using micro::row_ptr_search;
__global__ void count_diff(const u32* ka, const u32* kb, const Pair* pa, const Pair* pb, i64 E,
                           unsigned long long* bad) {
  unsigned long long n = 0;
  for (i64 e = blockIdx.x * i64(blockDim.x) + threadIdx.x; e < E; e += i64(gridDim.x) * blockDim.x)
    n += (ka[e] != kb[e]) + (pa[e].src != pb[e].src || pa[e].id != pb[e].id);
  if (n) atomicAdd(bad, n);
}

// A custom policy hub: CUB's Policy900 members (Scan/Downsweep/Upsweep/SingleTile/Segmented,
// never run on sm_90 but needed to compile) with our own onesweep, histogram and exclusive-sum
// policies and digit width.
template <int THREADS, int ITEMS>
struct ExactScaling {  // effective sizes, no RegBoundScaling by the value size
  static constexpr int ITEMS_PER_THREAD = ITEMS;
  static constexpr int BLOCK_THREADS = THREADS;
};
template <int THREADS, int ITEMS, int RADIX_BITS>
struct MyHub {
  using Base = typename cub::detail::radix::policy_hub<u32, Pair, u32>::template OnesweepSmallKeyTunedPolicy<
      cub::detail::radix::sm90_small_key_tuning<4, 8, sizeof(u32)>>;
  struct Policy : cub::ChainedPolicy<900, Policy, Policy>, Base {
    static constexpr bool ONESWEEP = true;
    static constexpr int ONESWEEP_RADIX_BITS = RADIX_BITS;
    using HistogramPolicy = cub::AgentRadixSortHistogramPolicy<128, 16, 1, u32, RADIX_BITS>;
    using ExclusiveSumPolicy = cub::AgentRadixSortExclusiveSumPolicy<256, RADIX_BITS>;
    using OnesweepPolicy =
        cub::AgentRadixSortOnesweepPolicy<THREADS, ITEMS, Pair, 1, cub::RADIX_RANK_MATCH_EARLY_COUNTS_ANY,
                                          cub::BLOCK_SCAN_RAKING_MEMOIZE, cub::RADIX_SORT_STORE_DIRECT, RADIX_BITS,
                                          ExactScaling<THREADS, ITEMS>>;
  };
  using MaxPolicy = Policy;
};
template <class Hub>
using MyDispatch = cub::DispatchRadixSort<cub::SortOrder::Ascending, u32, Pair, u32, cub::detail::identity_decomposer_t, Hub>;

// A7/A8: micro::bucket_search (micro_harness.cuh) finds the buckets of 2^shift rows.

// A9: the second level as one kernel of our own: a block per bucket of 256 rows sorts it on the
// low 8 bits, stably, straight from global memory (two passes over the bucket, which L2 holds
// between them), and writes the bucket's rows' offsets (row_ptr) on the way, so neither the
// sorted keys nor a row_ptr pass are needed. Warp w takes the w-th eighth of the bucket; pass 1
// counts digits per warp (shared atomics), a block scan turns the counts into each warp's
// offsets per digit, pass 2 ranks each 32-edge chunk with __match_any_sync and scatters.
// Stable: earlier warps' and earlier chunks' edges of a digit get lower positions.
__global__ void __launch_bounds__(256) bucket_sort_rows(const u32* __restrict__ keys, const Pair* __restrict__ pairs,
                                                        const int* __restrict__ bucket_ptr, i64 N, Pair* __restrict__ out,
                                                        int* __restrict__ row_ptr) {
  constexpr int W = 8;
  __shared__ int cnt[W][256];
  using Scan = cub::BlockScan<int, 256>;
  __shared__ typename Scan::TempStorage scan_tmp;
  const i64 b = blockIdx.x;
  const int t = threadIdx.x, lane = t & 31, w = t >> 5;
  const int bs = bucket_ptr[b], be = bucket_ptr[b + 1], n = be - bs;
  for (int d = t; d < W * 256; d += 256) (&cnt[0][0])[d] = 0;
  __syncthreads();
  const int per = (n + W - 1) / W, ws = bs + min(n, w * per), we = bs + min(n, (w + 1) * per);
  for (int i = ws + lane; i < we; i += 32) atomicAdd(&cnt[w][keys[i] & 255u], 1);
  __syncthreads();
  int total = 0;
  for (int v = 0; v < W; ++v) total += cnt[v][t];  // thread t: digit t
  int digit_base = 0;
  Scan(scan_tmp).ExclusiveSum(total, digit_base);
  {
    int run = digit_base;
    for (int v = 0; v < W; ++v) {
      const int c = cnt[v][t];
      cnt[v][t] = run;  // now warp v's next position for digit t, relative to bs
      run += c;
    }
  }
  const i64 row = b * 256 + t;
  if (row < N) row_ptr[row] = bs + digit_base;
  if (b == 0 && t == 0) row_ptr[N] = bucket_ptr[gridDim.x];
  __syncthreads();
  const unsigned below = (1u << lane) - 1u;
  for (int i0 = ws; i0 < we; i0 += 32) {  // warp-uniform: the same chunks for every lane
    const int i = i0 + lane;
    const bool valid = i < we;
    const int d = valid ? int(keys[i] & 255u) : 256 + lane;  // invalid lanes: a digit of their own
    const unsigned peers = __match_any_sync(0xffffffffu, d);
    const int rank = __popc(peers & below);
    const int base = valid ? cnt[w][d] : 0;
    __syncwarp();
    if (valid) {
      out[bs + base + rank] = pairs[i];
      if (rank == 0) cnt[w][d] = base + __popc(peers);
    }
    __syncwarp();
  }
}

// A12: see the header. kTileCap edges a bucket in shared memory: pairs (8 B), their digit (1 B)
// and the inverse permutation (2 B), 45 KB of dynamic shared memory, 4 blocks an SM.
constexpr int kTileLo = 7, kTileCap = 4096;
constexpr std::size_t kTileSmem = std::size_t(kTileCap) * (sizeof(Pair) + 2 + 1);
__global__ void __launch_bounds__(256) tile_sort_rows(const u32* __restrict__ keys, const Pair* __restrict__ pairs,
                                                      const int* __restrict__ bucket_ptr, i64 N, Pair* __restrict__ out,
                                                      int* __restrict__ row_ptr) {
  constexpr int W = 8, D = 1 << kTileLo;
  __shared__ int cnt[W][D];
  using Scan = cub::BlockScan<int, 256>;
  __shared__ typename Scan::TempStorage scan_tmp;
  extern __shared__ __align__(16) unsigned char smem[];
  Pair* tile = reinterpret_cast<Pair*>(smem);
  unsigned short* inv = reinterpret_cast<unsigned short*>(smem + kTileCap * sizeof(Pair));
  unsigned char* dig = smem + kTileCap * (sizeof(Pair) + 2);
  const i64 b = blockIdx.x;
  const int t = threadIdx.x, lane = t & 31, w = t >> 5;
  const int bs = bucket_ptr[b], n = bucket_ptr[b + 1] - bs;
  const bool fits = n <= kTileCap;
  for (int d = t; d < W * D; d += 256) (&cnt[0][0])[d] = 0;
  __syncthreads();
  // Pass 1: warp w counts the digits of the w-th eighth of the bucket (and loads it if it fits).
  const int per = (n + W - 1) / W, ws = min(n, w * per), we = min(n, (w + 1) * per);
  for (int i = ws + lane; i < we; i += 32) {
    const int d = int(keys[bs + i] & u32(D - 1));
    atomicAdd(&cnt[w][d], 1);
    if (fits) {
      dig[i] = (unsigned char)d;
      tile[i] = pairs[bs + i];
    }
  }
  __syncthreads();
  int total = 0;
  if (t < D)
    for (int v = 0; v < W; ++v) total += cnt[v][t];  // thread t: digit t
  int digit_base = 0;
  Scan(scan_tmp).ExclusiveSum(total, digit_base);
  if (t < D) {
    int run = digit_base;
    for (int v = 0; v < W; ++v) {
      const int c = cnt[v][t];
      cnt[v][t] = run;  // warp v's next position for digit t, relative to bs
      run += c;
    }
    const i64 row = b * D + t;
    if (row < N) row_ptr[row] = bs + digit_base;
  }
  if (b == 0 && t == 0) row_ptr[N] = bucket_ptr[gridDim.x];
  __syncthreads();
  // Pass 2: each warp ranks its eighth 32 edges at a time, in order (stable), from shared memory
  // when the bucket fits (positions into `inv`), else from global memory (scattered stores, as A9).
  const unsigned below = (1u << lane) - 1u;
  for (int i0 = ws; i0 < we; i0 += 32) {
    const int i = i0 + lane;
    const bool valid = i < we;
    const int d = valid ? (fits ? int(dig[i]) : int(keys[bs + i] & u32(D - 1))) : D + lane;
    const unsigned peers = __match_any_sync(0xffffffffu, d);
    const int rank = __popc(peers & below);
    const int base = valid ? cnt[w][d] : 0;
    __syncwarp();
    if (valid) {
      if (fits) inv[base + rank] = (unsigned short)i;
      else out[bs + base + rank] = pairs[bs + i];
      if (rank == 0) cnt[w][d] = base + __popc(peers);
    }
    __syncwarp();
  }
  if (!fits) return;
  __syncthreads();
  for (int j = t; j < n; j += 256) out[bs + j] = tile[inv[j]];  // coalesced
}

// ---- Part B: lean path kernels -------------------------------------------------------------------
// B1: micro::lean_base<i64> (micro_harness.cuh), the production kernel's copy.
using micro::ldg4;
using micro::tanh4;
using micro::lean_base;

// B2/B3: U edges a 16-lane group per iteration, every load issued before any atomic.
template <int U>
__global__ void __launch_bounds__(256) lean_multi(const i64* __restrict__ src, const i64* __restrict__ dst,
                                                  const float* __restrict__ x, const float* __restrict__ w,
                                                  float* __restrict__ out, i64 E) {
  const int lane = threadIdx.x % 32, group = lane / 16, gl = lane % 16;
  const i64 step = i64(gridDim.x) * blockDim.x / 32 * 2;  // groups in the grid
  for (i64 e0 = (blockIdx.x * i64(blockDim.x) + threadIdx.x) / 32 * 2 + group; e0 < E; e0 += step * U) {
    i64 s[U], d[U];
    float wt[U];
    float4 v[U];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const i64 e = e0 + u * step;
      const bool ok = e < E;
      s[u] = ok ? src[e] : 0;
      d[u] = ok ? dst[e] : -1;
      wt[u] = ok ? __ldg(w + e) : 0.f;
    }
#pragma unroll
    for (int u = 0; u < U; ++u) v[u] = d[u] >= 0 ? ldg4(x + s[u] * F + gl * 4) : make_float4(0, 0, 0, 0);
#pragma unroll
    for (int u = 0; u < U; ++u)
      if (d[u] >= 0) atomicAdd(reinterpret_cast<float4*>(out + d[u] * F + gl * 4), tanh4(v[u], wt[u]));
  }
}

// B4: bulk reductions from shared memory (sm_90 async proxy).
__device__ __forceinline__ void bulk_reduce_add_f32(float* gdst, u32 ssrc, u32 bytes) {
  asm volatile("cp.reduce.async.bulk.global.shared::cta.bulk_group.add.f32 [%0], [%1], %2;"
               :
               : "l"(std::uint64_t(__cvta_generic_to_global(gdst))), "r"(ssrc), "r"(bytes)
               : "memory");
}
__device__ __forceinline__ void bulk_commit() { asm volatile("cp.async.bulk.commit_group;" ::: "memory"); }
template <int N>
__device__ __forceinline__ void bulk_wait_read() {
  asm volatile("cp.async.bulk.wait_group.read %0;" ::"n"(N) : "memory");
}
__device__ __forceinline__ void bulk_wait_all() { asm volatile("cp.async.bulk.wait_group 0;" ::: "memory"); }
__device__ __forceinline__ void fence_proxy_async_smem() {
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
}

// Each half warp owns a ring of S slots of 256 B (16 float4) in dynamic shared memory; it stages
// U edges per iteration, and its lane 0 issues U bulk reductions as one bulk group. The loop is
// warp-uniform (both halves iterate together; a half whose edge is past E stages nothing).
template <int S, int U>
__global__ void __launch_bounds__(256) lean_bulk(const i64* __restrict__ src, const i64* __restrict__ dst,
                                                 const float* __restrict__ x, const float* __restrict__ w,
                                                 float* __restrict__ out, i64 E) {
  static_assert(S % U == 0, "ring holds whole iterations");
  constexpr int DEPTH = S / U;  // iterations whose bulk groups may still be reading the ring
  extern __shared__ float4 stage[];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, half = lane / 16, gl = lane % 16;
  float4* ring = stage + (warp * 2 + half) * S * 16;
  const u32 ring_s = u32(__cvta_generic_to_shared(ring));
  const i64 HW = i64(gridDim.x) * blockDim.x / 16;  // half warps in the grid
  const i64 wbase = (blockIdx.x * i64(blockDim.x) + threadIdx.x) / 32 * 2;
  int slot = 0;
  for (i64 e0 = wbase; e0 < E; e0 += HW * U) {
    i64 s[U], d[U];
    float wt[U];
    float4 v[U];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const i64 e = e0 + half + u * HW;
      const bool ok = e < E;
      s[u] = ok ? src[e] : 0;
      d[u] = ok ? dst[e] : -1;
      wt[u] = ok ? __ldg(w + e) : 0.f;
    }
#pragma unroll
    for (int u = 0; u < U; ++u) v[u] = d[u] >= 0 ? ldg4(x + s[u] * F + gl * 4) : make_float4(0, 0, 0, 0);
    if (gl == 0) bulk_wait_read<DEPTH - 1>();  // the groups that last read these U slots are done
    __syncwarp();
#pragma unroll
    for (int u = 0; u < U; ++u) ring[(slot + u) * 16 + gl] = tanh4(v[u], wt[u]);
    fence_proxy_async_smem();  // generic-proxy smem writes -> visible to the async proxy
    __syncwarp();
    if (gl == 0) {
#pragma unroll
      for (int u = 0; u < U; ++u)
        if (d[u] >= 0) bulk_reduce_add_f32(out + d[u] * F, ring_s + u32((slot + u) * 256), 256u);
      bulk_commit();
    }
    slot += U;
    if (slot == S) slot = 0;
  }
  if (gl == 0) bulk_wait_all();
}

// ---- harness: micro_harness.cuh, plus the comparisons ------------------------------------------
using micro::max_rel_diff;

int main(int argc, char** argv) {
  const i64 N = 2449029, E = micro::edge_count_arg(argc, argv);
  if (E < 0) return 1;
  cudaDeviceProp prop{};
  CK(cudaGetDeviceProperties(&prop, 0));
  const int SM = prop.multiProcessorCount;
  std::printf("device %s, %d SMs, L2 %d MB; N=%lld E=%lld F=%d\n", prop.name, SM, prop.l2CacheSize >> 20,
              (long long)N, (long long)E, F);
  int bits = 1;
  while ((i64(1) << bits) < N) ++bits;  // production bits_for(N): 22 at products-like N

  i64 *src = dalloc<i64>(E), *dst = dalloc<i64>(E);
  float* w = dalloc<float>(E);
  gen_edges<<<SM * 16, 256>>>(src, dst, w, E, N, 1);
  CK(cudaGetLastError());
  CK(cudaDeviceSynchronize());

  // ================= Part A: plan build sort =================
  {
    u32 *ka = dalloc<u32>(E), *kb = dalloc<u32>(E), *ref_k = dalloc<u32>(E);
    Pair *pa = dalloc<Pair>(E), *pb = dalloc<Pair>(E), *ref_p = dalloc<Pair>(E);
    int* row_ptr = dalloc<int>(N + 1);
    unsigned long long *flag = dalloc<unsigned long long>(1), *ndiff = dalloc<unsigned long long>(1);
    const unsigned long long none = ~0ull;
    CK(cudaMemcpy(flag, &none, sizeof none, cudaMemcpyHostToDevice));
    auto init = [&] {
      init_pairs<<<grid_for(E, 256), 256>>>(src, dst, ka, pa, E, std::uint64_t(N), flag);
      CK(cudaGetLastError());
    };
    report("A0 init keys+pairs (+index check)", timed(init), "subtract from A1..A5");
    {
      unsigned long long fb = 0;
      CK(cudaMemcpy(&fb, flag, sizeof fb, cudaMemcpyDeviceToHost));
      if (fb != none) std::printf("init: bad index at edge %llu (unexpected)\n", fb);
    }
    char note[160];

    // compares the sorted output (keys, pairs) with A1's; prints the verdict
    auto verify = [&](const char* name, const u32* k, const Pair* p) {
      CK(cudaMemset(ndiff, 0, sizeof(unsigned long long)));
      count_diff<<<SM * 8, 256>>>(k, ref_k, p, ref_p, E, ndiff);
      CK(cudaGetLastError());
      unsigned long long n = 0;
      CK(cudaMemcpy(&n, ndiff, sizeof n, cudaMemcpyDeviceToHost));
      if (n == 0) std::printf("  %s: OK (keys and pairs bitwise equal to A1)\n", name);
      else std::printf("  %s: MISMATCH (%llu differing keys/pairs vs A1)\n", name, n);
    };

    // ---- A1: production, int64 num_items ----
    {
      std::size_t tb = 0;
      cub::DoubleBuffer<u32> k(ka, kb);
      cub::DoubleBuffer<Pair> v(pa, pb);
      CK(cub::DeviceRadixSort::SortPairs(nullptr, tb, k, v, std::int64_t(E), 0, bits));
      void* temp = nullptr;
      CK(cudaMalloc(&temp, tb ? tb : 1));
      const u32* kout = nullptr;
      const Pair* pout = nullptr;
      auto t = timed([&] {
        init();
        cub::DoubleBuffer<u32> kk(ka, kb);
        cub::DoubleBuffer<Pair> vv(pa, pb);
        CK(cub::DeviceRadixSort::SortPairs(temp, tb, kk, vv, std::int64_t(E), 0, bits));
        kout = kk.Current();
        pout = vv.Current();
      });
      using P = cub::detail::radix::policy_hub<u32, Pair, unsigned long long>::Policy900::OnesweepPolicy;
      std::snprintf(note, sizeof note, "incl. init; 64-bit offsets, onesweep %dx%d, %d bits/pass; temp %zu B",
                    int(P::BLOCK_THREADS), int(P::ITEMS_PER_THREAD), int(P::RADIX_BITS), tb);
      report("A1 SortPairs num_items int64 (production)", t, note);
      CK(cudaMemcpy(ref_k, kout, E * sizeof(u32), cudaMemcpyDeviceToDevice));
      CK(cudaMemcpy(ref_p, pout, E * sizeof(Pair), cudaMemcpyDeviceToDevice));
      CK(cudaFree(temp));

      // ---- A6: row_ptr over A1's sorted keys ----
      report("A6 row_ptr by binary search (N+1 threads)",
             timed([&] {
               row_ptr_search<<<grid_for(N + 1, 256), 256>>>(ref_k, E, N, row_ptr);
               CK(cudaGetLastError());
             }),
             "production row_ptr_kernel");
      {  // spot check: row_ptr[0] = 0, row_ptr[N] = E
        int r0 = -1, rn = -1;
        CK(cudaMemcpy(&r0, row_ptr, 4, cudaMemcpyDeviceToHost));
        CK(cudaMemcpy(&rn, row_ptr + N, 4, cudaMemcpyDeviceToHost));
        std::printf("  A6: %s (row_ptr[0]=%d row_ptr[N]=%d)\n", r0 == 0 && rn == E ? "OK" : "MISMATCH", r0, rn);
      }
    }

    // ---- A2: uint32 num_items ----
    {
      std::size_t tb = 0;
      cub::DoubleBuffer<u32> k(ka, kb);
      cub::DoubleBuffer<Pair> v(pa, pb);
      CK(cub::DeviceRadixSort::SortPairs(nullptr, tb, k, v, u32(E), 0, bits));
      void* temp = nullptr;
      CK(cudaMalloc(&temp, tb ? tb : 1));
      const u32* kout = nullptr;
      const Pair* pout = nullptr;
      auto t = timed([&] {
        init();
        cub::DoubleBuffer<u32> kk(ka, kb);
        cub::DoubleBuffer<Pair> vv(pa, pb);
        CK(cub::DeviceRadixSort::SortPairs(temp, tb, kk, vv, u32(E), 0, bits));
        kout = kk.Current();
        pout = vv.Current();
      });
      using P = cub::detail::radix::policy_hub<u32, Pair, u32>::Policy900::OnesweepPolicy;
      std::snprintf(note, sizeof note, "incl. init; 32-bit offsets, onesweep %dx%d, %d bits/pass; temp %zu B",
                    int(P::BLOCK_THREADS), int(P::ITEMS_PER_THREAD), int(P::RADIX_BITS), tb);
      report("A2 SortPairs num_items uint32", t, note);
      verify("A2", kout, pout);
      CK(cudaFree(temp));
    }

    // ---- A3..A5: custom policy hubs, 32-bit offsets ----
    // nbits < bits: the sort of a shorter key (time only: the low bits of dst stay unsorted).
    auto custom = [&](const char* name, auto hub_tag, int nbits = -1) {
      if (nbits < 0) nbits = bits;
      using Hub = decltype(hub_tag);
      using D = MyDispatch<Hub>;
      using P = typename Hub::Policy::OnesweepPolicy;
      std::size_t tb = 0;
      {
        cub::DoubleBuffer<u32> k(ka, kb);
        cub::DoubleBuffer<Pair> v(pa, pb);
        CK(D::Dispatch(nullptr, tb, k, v, u32(E), bits - nbits, bits, true, nullptr));
      }
      void* temp = nullptr;
      CK(cudaMalloc(&temp, tb ? tb : 1));
      const u32* kout = nullptr;
      const Pair* pout = nullptr;
      auto t = timed([&] {
        init();
        cub::DoubleBuffer<u32> kk(ka, kb);
        cub::DoubleBuffer<Pair> vv(pa, pb);
        CK(D::Dispatch(temp, tb, kk, vv, u32(E), bits - nbits, bits, true, nullptr));
        kout = kk.Current();
        pout = vv.Current();
      });
      const int passes = (nbits + int(P::RADIX_BITS) - 1) / int(P::RADIX_BITS);
      std::snprintf(note, sizeof note, "incl. init; 32-bit offsets, onesweep %dx%d, %d bits x %d passes; temp %zu B",
                    int(P::BLOCK_THREADS), int(P::ITEMS_PER_THREAD), int(P::RADIX_BITS), passes, tb);
      report(name, t, note);
      if (nbits == bits) verify(name, kout, pout);
      CK(cudaFree(temp));
    };
    custom("A3 hub 8-bit 256x23", MyHub<256, 23, 8>{});
    custom("A3b hub 8-bit 256x12", MyHub<256, 12, 8>{});
    custom("A4 hub 8-bit 512x11", MyHub<512, 11, 8>{});
    custom("A5 hub 8-bit 384x12", MyHub<384, 12, 8>{});
    // A10/A11: a key of 16 or 18 bits in two passes, as a plan keyed by (block of rows, owner
    // warp) rather than by row would have (sweep_gather_micro.cu): what would its build cost?
    custom("A10 16-bit key, 8-bit 384x12 (2 passes)", MyHub<384, 12, 8>{}, 16);
    custom("A11 18-bit key, 9-bit 384x12 (2 passes)", MyHub<384, 12, 9>{}, 18);
    // 11-bit digits: opt-in (BLM_11BIT=1), see the note at the top. 96x24 (11-bit) compiled but
    // never finished (E = 2M, killed after 45 s), so it is not instantiated.
    if (const char* b11 = std::getenv("BLM_11BIT"); b11 && b11[0] == '1') {
      custom("A5b hub 11-bit 64x32 (2 passes)", MyHub<64, 32, 11>{});
    } else {
      std::printf("A5b 11-bit hub skipped (set BLM_11BIT=1 to run it)\n");
    }

    // ---- A7/A8: MSD split. CUB sorts the top bits - 8 bits of dst (two onesweep passes at 22
    // bits instead of three), then each bucket of 256 consecutive rows is sorted on its low 8 bits
    // by a segmented sort (stable, so edge order within a row is kept: the same plan as A1).
    // Question: is a segmented pass cheaper than the onesweep pass it replaces (0.66-0.70 ms
    // under ncu)? Production would also write row_ptr in the segmented step.
    {
      const int lo_bits = std::min(8, bits);
      const i64 B = (N + (i64(1) << lo_bits) - 1) >> lo_bits;
      int* bucket_ptr = dalloc<int>(B + 1);
      std::size_t tb_top = 0, tb_seg = 0, tb_stable = 0;
      {
        cub::DoubleBuffer<u32> k(ka, kb);
        cub::DoubleBuffer<Pair> v(pa, pb);
        CK(cub::DeviceRadixSort::SortPairs(nullptr, tb_top, k, v, std::int64_t(E), lo_bits, bits));
        CK(cub::DeviceSegmentedRadixSort::SortPairs(nullptr, tb_seg, k, v, int(E), int(B), bucket_ptr, bucket_ptr + 1, 0,
                                                    lo_bits));
        CK(cub::DeviceSegmentedSort::StableSortPairs(nullptr, tb_stable, k, v, E, B, bucket_ptr, bucket_ptr + 1));
      }
      const std::size_t tbm = std::max({tb_top, tb_seg, tb_stable, std::size_t(1)});
      void* temp = nullptr;
      CK(cudaMalloc(&temp, tbm));
      // The first level, shared by A7-A9 and timed alone as A7a: init, CUB on the top bits, and
      // (search) the buckets' starts.
      auto top_sort = [&](cub::DoubleBuffer<u32>& kk, cub::DoubleBuffer<Pair>& vv, bool search) {
        init();
        std::size_t b1 = tbm;
        CK(cub::DeviceRadixSort::SortPairs(temp, b1, kk, vv, std::int64_t(E), lo_bits, bits));
        if (search) bucket_search<<<grid_for(B + 1, 256), 256>>>(kk.Current(), E, B, lo_bits, bucket_ptr);
        CK(cudaGetLastError());
      };
      // A second level that writes pairs and row_ptr itself: pairs against A1's, row_ptr against
      // A6's (row_ptr holds A6's result).
      auto check_pairs_rows = [&](const char* name, const Pair* pout, const int* rp) {
        CK(cudaMemset(ndiff, 0, sizeof(unsigned long long)));
        count_diff<<<SM * 8, 256>>>(ref_k, ref_k, pout, ref_p, E, ndiff);
        CK(cudaGetLastError());
        unsigned long long nd = 0;
        CK(cudaMemcpy(&nd, ndiff, sizeof nd, cudaMemcpyDeviceToHost));
        std::vector<int> a(std::size_t(N + 1)), b(std::size_t(N + 1));
        CK(cudaMemcpy(a.data(), row_ptr, (N + 1) * sizeof(int), cudaMemcpyDeviceToHost));
        CK(cudaMemcpy(b.data(), rp, (N + 1) * sizeof(int), cudaMemcpyDeviceToHost));
        std::printf("  %s: pairs %s (%llu differ vs A1), row_ptr %s vs A6\n", name, nd == 0 ? "OK" : "MISMATCH", nd,
                    a == b ? "OK" : "MISMATCH");
      };
      for (int variant = 0; variant < 2; ++variant) {
        const u32* kout = nullptr;
        const Pair* pout = nullptr;
        auto t = timed([&] {
          cub::DoubleBuffer<u32> kk(ka, kb);
          cub::DoubleBuffer<Pair> vv(pa, pb);
          top_sort(kk, vv, true);
          std::size_t b2 = tbm;
          if (variant == 0)
            CK(cub::DeviceSegmentedRadixSort::SortPairs(temp, b2, kk, vv, int(E), int(B), bucket_ptr, bucket_ptr + 1, 0,
                                                        lo_bits));
          else
            CK(cub::DeviceSegmentedSort::StableSortPairs(temp, b2, kk, vv, E, B, bucket_ptr, bucket_ptr + 1));
          kout = kk.Current();
          pout = vv.Current();
        });
        const char* name = variant == 0 ? "A7 top bits sort + segmented radix sort (low 8 bits)"
                                        : "A8 top bits sort + DeviceSegmentedSort::StableSortPairs";
        std::snprintf(note, sizeof note, "incl. init and the bucket search; %lld buckets; temp %zu B", (long long)B, tbm);
        report(name, t, note);
        verify(variant == 0 ? "A7" : "A8", kout, pout);
      }
      {  // A9: our bucket sort with row_ptr, after the same top-bits sort
        Pair* pout = nullptr;
        int* rp9 = dalloc<int>(N + 1);
        auto t = timed([&] {
          cub::DoubleBuffer<u32> kk(ka, kb);
          cub::DoubleBuffer<Pair> vv(pa, pb);
          top_sort(kk, vv, true);
          bucket_sort_rows<<<unsigned(B), 256>>>(kk.Current(), vv.Current(), bucket_ptr, N, vv.Alternate(), rp9);
          CK(cudaGetLastError());
          pout = vv.Alternate();
        });
        std::snprintf(note, sizeof note, "incl. init, bucket search and row_ptr (A1 + A6 do the same work)");
        report("A9 top bits sort + own bucket sort writing row_ptr", t, note);
        check_pairs_rows("A9", pout, rp9);
        report("A9b own bucket sort alone", timed([&] {
                 bucket_sort_rows<<<unsigned(B), 256>>>(ka, pa, bucket_ptr, N, pb, rp9);  // timing only
                 CK(cudaGetLastError());
               }),
               "on whatever ka/pa hold: time only");
        CK(cudaFree(rp9));
      }
      {  // A12: top bits [7, 22) by CUB, then tile_sort_rows (shared-memory buckets of 128 rows)
        const i64 B12 = (N + (i64(1) << kTileLo) - 1) >> kTileLo;
        int* bp12 = dalloc<int>(B12 + 1);
        int* rp12 = dalloc<int>(N + 1);
        CK(cudaFuncSetAttribute(tile_sort_rows, cudaFuncAttributeMaxDynamicSharedMemorySize, int(kTileSmem)));
        std::size_t tb12 = 0;
        {
          cub::DoubleBuffer<u32> k(ka, kb);
          cub::DoubleBuffer<Pair> v(pa, pb);
          CK(cub::DeviceRadixSort::SortPairs(nullptr, tb12, k, v, u32(E), kTileLo, bits));
        }
        void* temp12 = nullptr;
        CK(cudaMalloc(&temp12, tb12 ? tb12 : 1));
        Pair* pout = nullptr;
        i64 big = 0;
        auto t = timed([&] {
          init();
          cub::DoubleBuffer<u32> kk(ka, kb);
          cub::DoubleBuffer<Pair> vv(pa, pb);
          std::size_t b1 = tb12;
          CK(cub::DeviceRadixSort::SortPairs(temp12, b1, kk, vv, u32(E), kTileLo, bits));
          bucket_search<<<grid_for(B12 + 1, 256), 256>>>(kk.Current(), E, B12, kTileLo, bp12);
          tile_sort_rows<<<unsigned(B12), 256, kTileSmem>>>(kk.Current(), vv.Current(), bp12, N, vv.Alternate(), rp12);
          CK(cudaGetLastError());
          pout = vv.Alternate();
        });
        {
          std::vector<int> bp(std::size_t(B12 + 1));
          CK(cudaMemcpy(bp.data(), bp12, bp.size() * sizeof(int), cudaMemcpyDeviceToHost));
          for (i64 q = 0; q < B12; ++q) big += bp[std::size_t(q + 1)] - bp[std::size_t(q)] > kTileCap;
        }
        std::snprintf(note, sizeof note, "incl. init, bucket search and row_ptr (A2 + A6: 2 passes + 1 instead of 3 + 1); %lld buckets, %lld over %d edges; temp %zu B",
                      (long long)B12, (long long)big, kTileCap, tb12);
        report("A12 top bits sort + shared-memory bucket sort", t, note);
        check_pairs_rows("A12", pout, rp12);
        CK(cudaFree(temp12));
        CK(cudaFree(bp12));
        CK(cudaFree(rp12));
      }
      report("A7a top bits sort alone (incl. init)", timed([&] {
               cub::DoubleBuffer<u32> kk(ka, kb);
               cub::DoubleBuffer<Pair> vv(pa, pb);
               top_sort(kk, vv, false);
             }),
             "subtract from A7/A8 for the segmented step");
      CK(cudaFree(temp));
      CK(cudaFree(bucket_ptr));
    }

    CK(cudaFree(ka));
    CK(cudaFree(kb));
    CK(cudaFree(ref_k));
    CK(cudaFree(pa));
    CK(cudaFree(pb));
    CK(cudaFree(ref_p));
    CK(cudaFree(row_ptr));
    CK(cudaFree(flag));
    CK(cudaFree(ndiff));
  }

  // ================= Part B: lean path =================
  {
    const auto [x, out, ref, out_bytes] = lean_rows(N, F, SM * 16);
    char note[160];
    report("B0 memset out alone", timed([&] { CK(cudaMemsetAsync(out, 0, out_bytes)); }), "included in every B line");

    const int g_prod = grid_for(E * 16, 256);
    int occ = 0;
    CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&occ, lean_base<i64>, 256, 0));
    std::snprintf(note, sizeof note, "production grid %d x 256 (grid_for(E*16, 256))", g_prod);
    report("B1 lean baseline (atomic_edges_kernel copy)", timed([&] {
             CK(cudaMemsetAsync(out, 0, out_bytes));
             lean_base<i64><<<g_prod, 256>>>(src, dst, x, w, out, E);
             CK(cudaGetLastError());
           }),
           note);
    CK(cudaMemcpy(ref, out, out_bytes, cudaMemcpyDeviceToDevice));
    auto check = [&](const char* name) {
      const double r = max_rel_diff(out, ref, N * F);
      std::printf("  %s: %s (max|a-b|/max|b| = %.3g vs B1)\n", name, r < 1e-5 ? "OK" : "MISMATCH", r);
    };
    {
      const int g = SM * occ;
      std::snprintf(note, sizeof note, "persistent grid %d x 256 (%d blocks/SM)", g, occ);
      report("B1p lean baseline, persistent grid", timed([&] {
               CK(cudaMemsetAsync(out, 0, out_bytes));
               lean_base<i64><<<g, 256>>>(src, dst, x, w, out, E);
               CK(cudaGetLastError());
             }),
             note);
      check("B1p");
    }
    auto multi = [&](const char* tag, const char* name, auto kernel, int per_group) {
      const int g = grid_for(E * 16 / per_group, 256);
      std::snprintf(note, sizeof note, "grid %d x 256", g);
      report(name, timed([&] {
               CK(cudaMemsetAsync(out, 0, out_bytes));
               kernel<<<g, 256>>>(src, dst, x, w, out, E);
               CK(cudaGetLastError());
             }),
             note);
      check(tag);
    };
    multi("B2", "B2 lean, 2 edges per group per iteration", lean_multi<2>, 2);
    multi("B3", "B3 lean, 4 edges per group per iteration", lean_multi<4>, 4);
    auto bulk = [&](const char* name, auto kernel, int S) {
      const int smem = 8 * 2 * S * 256;  // 8 warps x 2 half warps x S slots x 256 B
      CK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
      int ob = 0;
      CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&ob, kernel, 256, smem));
      if (ob < 1) ob = 1;
      const int g = SM * ob;
      std::snprintf(note, sizeof note, "persistent grid %d x 256 (%d blocks/SM), %d B smem/block", g, ob, smem);
      report(name, timed([&] {
               CK(cudaMemsetAsync(out, 0, out_bytes));
               kernel<<<g, 256, smem>>>(src, dst, x, w, out, E);
               CK(cudaGetLastError());
             }),
             note);
      check(name);
    };
    bulk("B4a bulk reduce, ring 4 slots, 1 edge/iter", lean_bulk<4, 1>, 4);
    bulk("B4b bulk reduce, ring 8 slots, 1 edge/iter", lean_bulk<8, 1>, 8);
    bulk("B4c bulk reduce, ring 8 slots, 2 edges/iter", lean_bulk<8, 2>, 8);
    bulk("B4d bulk reduce, ring 16 slots, 4 edges/iter", lean_bulk<16, 4>, 16);

    CK(cudaFree(x));
    CK(cudaFree(out));
    CK(cudaFree(ref));
  }
  CK(cudaFree(src));
  CK(cudaFree(dst));
  CK(cudaFree(w));
  std::printf("done\n");
  return 0;
}
