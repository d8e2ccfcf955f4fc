// Standalone micro-benchmark (not part of the library build): weights in edge order brought into a
// plan's order per call in two cache-friendly passes, against the planned run's random gather.
//
//   nvcc -O3 -std=c++20 -arch=sm_90 bench/micro/w_permute_micro.cu -o wpm && ./wpm [E]
//   (gpu-check: MICRO=w_permute_micro.cu)
//
// Why (docs/perf-notes.md v17): the planned run with w in edge order (products-like, H200) takes
// 5.24-5.29 ms; given w already in plan order it takes 4.06. The difference, ~1.2 ms, is the
// w[edge id] gather: one random 4-byte read per edge, which DRAM serves as 64 bytes (ncu, v11:
// 3.9 GB). A permutation done as two passes whose every access is coalesced or stays in shared
// memory moves ~20 bytes per edge instead:
//   pass 1 (a block per tile of T consecutive edges): w of the tile into shared memory at its
//     tile-local place (edges grouped by destination bucket, tl[e], 2 bytes an edge), then each
//     warp copies whole runs (one bucket's edges of this tile) to the bucket's region of `inter`
//     (4 + 2 read, 4 written; per tile a table of each run's start in the tile and in `inter`).
//   pass 2 (a block per bucket of B consecutive plan positions): the bucket's region of `inter`
//     into shared memory (coalesced), then out[p] = region[lidx[p]] for the bucket's positions
//     (4 + 2 read, 4 written; may write `inter` in place, so the call needs E x 4 bytes of scratch).
// Count: ~20.4 bytes an edge, 1.26 GB on products-like: ~0.3 ms at 4.2 TB/s, against the gather's
// ~72 bytes an edge (4 B of id, 64 B DRAM per weight, 4 B written: 4.5 GB, ~1.0-1.2 ms).
// Expected: P (both passes) 0.3-0.45 ms against G0 (the gather alone, as a separate kernel)
// 1.0-1.2 ms. If so, planned with w in edge order ~4.06 + P = ~4.4-4.5 ms against 5.24-5.29.
// The plan would keep tl and lidx (2 + 2 bytes an edge) in place of the 4-byte edge id, plus the
// run tables (0.15 / 0.35 / 0.62 bytes an edge at T = B = 49152 / 32768 / 24576, the three
// configurations run), so ~8.5-9 B/edge as now, plus E x 4 bytes of scratch per call.
// Pass 1 comes in two copy modes (a warp a run; a thread a slot); P, Ps and Pi combine them.
// A review before any run (session 14) found the checks evaluated before the samples they were
// to check (argument order) and pass 1 waiting on a global load per run; both mended. Building those structures (S, printed once; not optimised) would add to the
// plan build: a cost to weigh against the runs a plan serves.
//
// Every variant's output is compared bitwise with the gather's (a permutation is exact).
#include <cub/device/device_radix_sort.cuh>
#include <cub/device/device_scan.cuh>
#include <cooperative_groups.h>

#include <algorithm>
#include <cstring>
#include <functional>
#include <utility>
#include <vector>

#include "bank_spread.hpp"
#include "micro_harness.cuh"

namespace {

namespace cg = cooperative_groups;
using micro::dalloc;
using micro::i64;
using u16 = std::uint16_t;
using u32 = std::uint32_t;

constexpr int kThreads = 1024;

__global__ void iota_u32(u32* v, i64 n) {
  for (i64 i = blockIdx.x * i64(blockDim.x) + threadIdx.x; i < n; i += i64(gridDim.x) * blockDim.x) v[i] = u32(i);
}
__global__ void keys_from_dst(const i64* dst, u32* k, i64 n) {
  for (i64 i = blockIdx.x * i64(blockDim.x) + threadIdx.x; i < n; i += i64(gridDim.x) * blockDim.x) k[i] = u32(dst[i]);
}
// G0: the production run's access, as its own kernel: out[p] = w[perm[p]].
__global__ void gather_w(const u32* __restrict__ perm, const float* __restrict__ w, float* __restrict__ out, i64 E) {
  for (i64 p = blockIdx.x * i64(blockDim.x) + threadIdx.x; p < E; p += i64(gridDim.x) * blockDim.x)
    out[p] = __ldg(w + perm[p]);
}
__global__ void scatter_pos(const u32* perm, u32* pos, i64 E) {
  for (i64 p = blockIdx.x * i64(blockDim.x) + threadIdx.x; p < E; p += i64(gridDim.x) * blockDim.x) pos[perm[p]] = u32(p);
}
// key of edge e for the tile-local grouping: (tile, bucket of its plan position).
__global__ void tile_bucket_keys(const u32* pos, u32* key, u32* bkt, i64 E, int T, int B, i64 nb) {
  for (i64 e = blockIdx.x * i64(blockDim.x) + threadIdx.x; e < E; e += i64(gridDim.x) * blockDim.x) {
    const u32 b = pos[e] / u32(B);
    bkt[e] = b;
    key[e] = u32((e / T) * nb + b);
  }
}
__global__ void count_runs(const u32* key, u32* cnt, i64 E) {
  for (i64 e = blockIdx.x * i64(blockDim.x) + threadIdx.x; e < E; e += i64(gridDim.x) * blockDim.x) atomicAdd(cnt + key[e], 1u);
}
// s[k]: the edge at place k of the tile-grouped order; tiles stay whole, so its tile-local place is k mod T.
__global__ void tile_local_places(const u32* s, u16* tl, i64 E, int T) {
  for (i64 k = blockIdx.x * i64(blockDim.x) + threadIdx.x; k < E; k += i64(gridDim.x) * blockDim.x) tl[s[k]] = u16(k % T);
}
// r[k]: the edge at place k of `inter` (edges stably grouped by bucket).
__global__ void inter_places(const u32* r, u32* q, i64 E) {
  for (i64 k = blockIdx.x * i64(blockDim.x) + threadIdx.x; k < E; k += i64(gridDim.x) * blockDim.x) q[r[k]] = u32(k);
}
__global__ void bucket_local(const u32* perm, const u32* q, u16* lidx, i64 E, int B) {
  for (i64 p = blockIdx.x * i64(blockDim.x) + threadIdx.x; p < E; p += i64(gridDim.x) * blockDim.x)
    lidx[p] = u16(q[perm[p]] - u32(p / B) * u32(B));
}
// Per tile t and bucket b: the run's start in the tile (u16; nb + 1 entries a tile, the last the
// tile's length) and in inter (i32; any value for an empty run).
__global__ void run_tables(const u32* start, const u32* cnt, const u32* s, const u32* q, u16* rs, u32* ds, i64 tiles,
                           i64 nb, i64 E, int T) {
  const i64 n = tiles * (nb + 1);
  for (i64 i = blockIdx.x * i64(blockDim.x) + threadIdx.x; i < n; i += i64(gridDim.x) * blockDim.x) {
    const i64 t = i / (nb + 1), b = i % (nb + 1);
    const i64 len = E - t * T < T ? E - t * T : i64(T);
    if (b == nb) {
      rs[i] = u16(len);
      continue;
    }
    const i64 g = start[t * nb + b];
    rs[i] = u16(g - t * T);
    ds[t * nb + b] = cnt[t * nb + b] ? q[s[g]] : 0u;
  }
}

// Pass 1: a block per tile. The tile's run tables are staged in shared memory beside its w (read
// from global memory run by run, each warp would wait on a dependent load per run: ~59 runs a warp
// at T = 32768). SEARCH = false: a warp copies whole runs (~17-39 floats: half its lanes or more
// busy); true: a thread per shared-memory slot finds its run by binary search over the tile's run
// starts (every lane busy, ~11 shared loads per edge).
template <bool SEARCH>
__global__ void __launch_bounds__(kThreads) pass1(const float* __restrict__ w, const u16* __restrict__ tl,
                                                  const u16* __restrict__ rs, const u32* __restrict__ ds,
                                                  float* __restrict__ inter, i64 E, int T, i64 nb) {
  extern __shared__ float smem[];
  u32* dsm = reinterpret_cast<u32*>(smem + T);
  u16* rsm = reinterpret_cast<u16*>(dsm + nb);
  const i64 t = blockIdx.x, t0 = t * T;
  const int len = int(E - t0 < T ? E - t0 : i64(T));
  for (int i = threadIdx.x; i < len; i += kThreads) smem[tl[t0 + i]] = __ldg(w + t0 + i);
  for (i64 i = threadIdx.x; i < nb; i += kThreads) dsm[i] = ds[t * nb + i];
  for (i64 i = threadIdx.x; i <= nb; i += kThreads) rsm[i] = rs[t * (nb + 1) + i];
  __syncthreads();
  if constexpr (SEARCH) {
    for (int i = threadIdx.x; i < len; i += kThreads) {
      i64 lo = 0, hi = nb - 1;  // the last run b with rsm[b] <= i (empty runs share their start: take the last)
      while (lo < hi) {
        const i64 mid = (lo + hi + 1) / 2;
        if (rsm[mid] <= i) lo = mid;
        else hi = mid - 1;
      }
      inter[dsm[lo] + (i - rsm[lo])] = smem[i];
    }
  } else {
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    for (i64 b = warp; b < nb; b += kThreads / 32) {
      const int a = rsm[b], n = rsm[b + 1] - a;
      const u32 o = dsm[b];
      for (int j = lane; j < n; j += 32) inter[o + j] = smem[a + j];
    }
  }
}

// Pass 2: a block per bucket; out may be inter (in place: the whole region is read first).
__global__ void __launch_bounds__(kThreads) pass2(const float* inter, const u16* __restrict__ lidx, float* out, i64 E,
                                                  int B) {
  extern __shared__ float smem[];
  const i64 p0 = i64(blockIdx.x) * B;
  const int len = int(E - p0 < B ? E - p0 : i64(B));
  for (int i = threadIdx.x; i < len; i += kThreads) smem[i] = inter[p0 + i];
  __syncthreads();
  for (int i = threadIdx.x; i < len; i += kThreads) out[p0 + i] = smem[lidx[p0 + i]];
}

// Session 17: the two passes with 16-byte loads, four edges a thread and four loads in flight.
// Why: pass 2 alone runs at 0.180 ms and pass 1 at 0.270 (T = B = 49152), against ~0.155 for
// their 10 bytes an edge at the copy rate (0.124 ms for E floats read and written). Each block
// is alone on its SM (192 KB of shared memory), and its load phase issues one 4-byte load (and a
// 2-byte one) per thread before the barrier: ~6 KB in flight per SM, where ~26 KB would cover
// the DRAM latency (4.3 TB/s x ~0.8 us / 132 SMs). Expected: pass 1 0.27 -> ~0.20, pass 2 0.18
// -> ~0.16, both ~0.45 -> ~0.36 ms. Needs w, tl, lidx and the tile starts 16-byte aligned (T a
// multiple of 4); the last tile's remainder goes one edge a thread.
// The load phase of pass1v and pass1r: tile t's w into shared memory at its tl places, four edges a
// thread through 16-byte loads, and the tile's run tables beside it; ends at the block's barrier.
__device__ __forceinline__ void load_tile_vec(const float* __restrict__ w, const u16* __restrict__ tl,
                                              const u16* __restrict__ rs, const u32* __restrict__ ds, float* smem,
                                              u32* dsm, u16* rsm, i64 E, int T, i64 nb) {
  const i64 t = blockIdx.x, t0 = t * T;
  const int len = int(E - t0 < T ? E - t0 : i64(T)), len4 = len & ~3;
#pragma unroll 4
  for (int i = threadIdx.x * 4; i < len4; i += kThreads * 4) {
    const float4 v = __ldg(reinterpret_cast<const float4*>(w + t0 + i));
    const uint2 k = __ldg(reinterpret_cast<const uint2*>(tl + t0 + i));
    smem[k.x & 0xFFFFu] = v.x;
    smem[k.x >> 16] = v.y;
    smem[k.y & 0xFFFFu] = v.z;
    smem[k.y >> 16] = v.w;
  }
  for (int i = len4 + threadIdx.x; i < len; i += kThreads) smem[tl[t0 + i]] = __ldg(w + t0 + i);
  for (i64 i = threadIdx.x; i < nb; i += kThreads) dsm[i] = ds[t * nb + i];
  for (i64 i = threadIdx.x; i <= nb; i += kThreads) rsm[i] = rs[t * (nb + 1) + i];
  __syncthreads();
}
__global__ void __launch_bounds__(kThreads) pass1v(const float* __restrict__ w, const u16* __restrict__ tl,
                                                   const u16* __restrict__ rs, const u32* __restrict__ ds,
                                                   float* __restrict__ inter, i64 E, int T, i64 nb) {
  extern __shared__ float smem[];
  u32* dsm = reinterpret_cast<u32*>(smem + T);
  u16* rsm = reinterpret_cast<u16*>(dsm + nb);
  load_tile_vec(w, tl, rs, ds, smem, dsm, rsm, E, T, nb);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  for (i64 b = warp; b < nb; b += kThreads / 32) {
    const int a = rsm[b], n = rsm[b + 1] - a;
    const u32 o = dsm[b];
    for (int j = lane; j < n; j += 32) inter[o + j] = smem[a + j];
  }
}
// P1r (session 17; measured in session 18, removed): a warp storing a span of 32 runs a step,
// every lane busy, instead of one run at a time. 0.254 ms against P1v's 0.257 at T = 49152,
// slower at 32768 and 24576: the warp steps are not pass 1's cost. Kernel in git at 1bae47d.
// P1c (session 18, not yet run): pass 1 with a tile held by a cluster of two blocks, each block
// the half of the tile's places [rank H, rank H + H), H = T / 2, in its own shared memory, the
// other half reached through distributed shared memory (Hopper). So T = 65528 fits (the 16-bit
// places and run starts need T <= 65535; one block holds at most ~49152 floats). Each block
// loads half of the tile's edges (16-byte loads) and writes each w to whichever block holds its
// place; after the cluster barrier each block stores half of the tile's runs, reading a run's
// places from either half. Why and what to expect: the T != B lines above (by the tile-size fit
// ~0.225 ms at T = 65528, B = 49152; by the per-run fit ~0.245; P1v at 49152: 0.255).
__global__ void __cluster_dims__(2, 1, 1) __launch_bounds__(kThreads)
    pass1c(const float* __restrict__ w, const u16* __restrict__ tl, const u16* __restrict__ rs,
           const u32* __restrict__ ds, float* __restrict__ inter, i64 E, int T, i64 nb) {
  extern __shared__ float smem[];
  cg::cluster_group cluster = cg::this_cluster();
  const int rank = int(cluster.block_rank()), H = T / 2;  // H a multiple of 4: both halves' edges 16-byte aligned
  // The other block's half through its cluster address (generic loads and stores); this block's
  // own half as plain shared memory (a review: through mapa for both, every access was generic).
  float* const other = cluster.map_shared_rank(smem, rank ^ 1);
  u32* dsm = reinterpret_cast<u32*>(smem + H);
  u16* rsm = reinterpret_cast<u16*>(dsm + nb);
  const i64 t = blockIdx.x / 2, t0 = t * T;
  const int len = int(E - t0 < T ? E - t0 : i64(T));
  const int lo = rank * H, hi = rank == 0 ? (len < H ? len : H) : len;  // this block's edges of the tile
  const int n4 = lo + ((hi - lo > 0 ? hi - lo : 0) & ~3);
  auto put = [&](unsigned place, float v) {
    const int owner = place >= unsigned(H);
    const unsigned off = place - (owner ? H : 0);
    if (owner == rank) smem[off] = v;
    else other[off] = v;
  };
  cluster.sync();  // both blocks running before either writes the other's shared memory
#pragma unroll 4
  for (int i = lo + threadIdx.x * 4; i < n4; i += kThreads * 4) {
    const float4 v = __ldg(reinterpret_cast<const float4*>(w + t0 + i));
    const uint2 k = __ldg(reinterpret_cast<const uint2*>(tl + t0 + i));
    put(k.x & 0xFFFFu, v.x);
    put(k.x >> 16, v.y);
    put(k.y & 0xFFFFu, v.z);
    put(k.y >> 16, v.w);
  }
  for (int i = n4 + threadIdx.x; i < hi; i += kThreads) put(tl[t0 + i], __ldg(w + t0 + i));
  for (i64 i = threadIdx.x; i < nb; i += kThreads) dsm[i] = ds[t * nb + i];
  for (i64 i = threadIdx.x; i <= nb; i += kThreads) rsm[i] = rs[t * (nb + 1) + i];
  cluster.sync();  // every w of the tile placed, in both halves
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  for (i64 b = i64(rank) * (kThreads / 32) + warp; b < nb; b += 2 * (kThreads / 32)) {
    const int a = rsm[b], n = rsm[b + 1] - a;
    const u32 o = dsm[b];
    for (int j = lane; j < n; j += 32) {
      const int place = a + j;
      const int owner = place >= H;
      const int off = place - (owner ? H : 0);
      inter[o + j] = owner == rank ? smem[off] : other[off];
    }
  }
  cluster.sync();  // neither block leaves while the other may still read its half
}
__global__ void __launch_bounds__(kThreads) pass2v(const float* inter, const u16* __restrict__ lidx, float* out, i64 E,
                                                   int B) {
  extern __shared__ float smem[];
  const i64 p0 = i64(blockIdx.x) * B;
  const int len = int(E - p0 < B ? E - p0 : i64(B)), len4 = len & ~3;
#pragma unroll 4
  for (int i = threadIdx.x * 4; i < len4; i += kThreads * 4)
    *reinterpret_cast<float4*>(smem + i) = *reinterpret_cast<const float4*>(inter + p0 + i);
  for (int i = len4 + threadIdx.x; i < len; i += kThreads) smem[i] = inter[p0 + i];
  __syncthreads();
#pragma unroll 4
  for (int i = threadIdx.x * 4; i < len4; i += kThreads * 4) {
    const uint2 k = __ldg(reinterpret_cast<const uint2*>(lidx + p0 + i));
    *reinterpret_cast<float4*>(out + p0 + i) =
        make_float4(smem[k.x & 0xFFFFu], smem[k.x >> 16], smem[k.y & 0xFFFFu], smem[k.y >> 16]);
  }
  for (int i = len4 + threadIdx.x; i < len; i += kThreads) out[p0 + i] = smem[lidx[p0 + i]];
}

template <class K, class V>
void sort_pairs(const K* kin, K* kout, const V* vin, V* vout, i64 n, int bits) {
  std::size_t temp = 0;
  CK(cub::DeviceRadixSort::SortPairs(nullptr, temp, kin, kout, vin, vout, int(n), 0, bits));
  void* tmp = nullptr;
  CK(cudaMalloc(&tmp, temp));
  CK(cub::DeviceRadixSort::SortPairs(tmp, temp, kin, kout, vin, vout, int(n), 0, bits));
  CK(cudaFree(tmp));
}
int bits_for(i64 v) {
  int b = 1;
  while ((i64(1) << b) < v) ++b;
  return b;
}

// P1b / P1b2: bank-spread places (bank_spread.hpp, where the why is).
using micro::Spread;
using micro::bank_spread_places;

// Where each edge lands in `inter` under places `tl`: its run's start there plus its offset in the run.
__global__ void inter_from_places(const u16* tl, const u32* bkt, const u16* rs, const u32* ds, u32* q, i64 E, int T,
                                  i64 nb) {
  for (i64 e = blockIdx.x * i64(blockDim.x) + threadIdx.x; e < E; e += i64(gridDim.x) * blockDim.x) {
    const i64 t = e / T, b = bkt[e];
    q[e] = ds[t * nb + b] + u32(tl[e] - rs[t * (nb + 1) + b]);
  }
}

bool same_bits(const float* a, const float* b, i64 n) {
  std::vector<float> ha(n), hb(n);
  CK(cudaMemcpy(ha.data(), a, n * 4, cudaMemcpyDeviceToHost));
  CK(cudaMemcpy(hb.data(), b, n * 4, cudaMemcpyDeviceToHost));
  return std::memcmp(ha.data(), hb.data(), std::size_t(n) * 4) == 0;
}

}  // namespace

int main(int argc, char** argv) {
  const i64 E = micro::edge_count_arg(argc, argv), N = 2449029;
  if (E < 0) return 2;
  cudaDeviceProp prop{};
  CK(cudaGetDeviceProperties(&prop, 0));
  std::printf("device %s, %d SMs, L2 %d MB; N=%lld E=%lld\n", prop.name, prop.multiProcessorCount,
              prop.l2CacheSize >> 20, (long long)N, (long long)E);
  const int blocks = prop.multiProcessorCount * 8;
  i64 *src = dalloc<i64>(E), *dst = dalloc<i64>(E);
  float* w = dalloc<float>(E);
  micro::gen_edges<<<blocks, 256>>>(src, dst, w, E, N, 1);
  CK(cudaGetLastError());
  // The plan's order: a stable sort of the edge ids by destination (the production plan's order).
  u32 *keys = dalloc<u32>(E), *keys_s = dalloc<u32>(E), *ids = dalloc<u32>(E), *perm = dalloc<u32>(E);
  keys_from_dst<<<blocks, 256>>>(dst, keys, E);
  iota_u32<<<blocks, 256>>>(ids, E);
  CK(cudaGetLastError());
  sort_pairs(keys, keys_s, ids, perm, E, bits_for(N));
  CK(cudaFree(src));
  CK(cudaFree(dst));
  float *ref = dalloc<float>(E), *inter = dalloc<float>(E), *out = dalloc<float>(E);
  micro::report("G0 gather w[perm[p]] (the planned run's access)",
                micro::timed([&] { gather_w<<<blocks, 256>>>(perm, w, ref, E); }));

  u32 *pos = dalloc<u32>(E), *bkt = dalloc<u32>(E), *key1 = dalloc<u32>(E), *s = dalloc<u32>(E), *r = dalloc<u32>(E),
      *q = dalloc<u32>(E);
  u16 *tl = dalloc<u16>(E), *lidx = dalloc<u16>(E);
  // T = B: 49152 (192 KB of w a block, runs of ~39 floats), 32768 (128 KB, ~17), 24576 (96 KB: two
  // blocks an SM, runs of ~10). u16 places and run starts need T, B <= 65535.
  // T != B (session 18): pass 1 measured 0.255 / 0.307 / 0.375 ms at T = B = 49152 / 32768 /
  // 24576. Two models fit those three: a cost per tile size, t = 0.135 + 5898 / T, or a cost per
  // run (tiles x buckets runs: 1.59M, 3.56M, 6.34M), t = 0.215 + 0.025 per million runs. With
  // T and B apart they disagree: (T, B) = (49152, 24576), 3.17M runs: 0.255 by the first, ~0.29
  // by the second; (24576, 49152), 3.17M runs: 0.375 against ~0.29. The first says larger tiles
  // (two-block clusters, DSMEM) are worth building; the second says only fewer runs are.
  // (65528, 49152): the tile held by a two-block cluster (P1c), 1.19M runs; P1v cannot hold it.
  const std::pair<int, int> configs[] = {{49152, 49152}, {32768, 32768}, {24576, 24576},
                                         {49152, 24576}, {24576, 49152}, {65528, 49152}};
  for (const auto& [T, B] : configs) {
    const i64 tiles = (E + T - 1) / T, nb = (E + B - 1) / B;
    u32 *cnt = dalloc<u32>(tiles * nb), *start = dalloc<u32>(tiles * nb), *ds = dalloc<u32>(tiles * nb);
    u16* rs = dalloc<u16>(tiles * (nb + 1));
    cudaEvent_t ev0, ev1;
    CK(cudaEventCreate(&ev0));
    CK(cudaEventCreate(&ev1));
    CK(cudaEventRecord(ev0));
    scatter_pos<<<blocks, 256>>>(perm, pos, E);
    tile_bucket_keys<<<blocks, 256>>>(pos, key1, bkt, E, T, B, nb);
    CK(cudaGetLastError());
    sort_pairs(key1, keys_s, ids, s, E, bits_for(tiles * nb));  // tile-grouped order (ids: 0, 1, 2, ...)
    tile_local_places<<<blocks, 256>>>(s, tl, E, T);
    sort_pairs(bkt, keys_s, ids, r, E, bits_for(nb));  // inter: edges stably grouped by bucket
    inter_places<<<blocks, 256>>>(r, q, E);
    bucket_local<<<blocks, 256>>>(perm, q, lidx, E, B);
    CK(cudaMemset(cnt, 0, tiles * nb * 4));
    count_runs<<<blocks, 256>>>(key1, cnt, E);
    {
      std::size_t temp = 0;
      CK(cub::DeviceScan::ExclusiveSum(nullptr, temp, cnt, start, int(tiles * nb)));
      void* tmp = nullptr;
      CK(cudaMalloc(&tmp, temp));
      CK(cub::DeviceScan::ExclusiveSum(tmp, temp, cnt, start, int(tiles * nb)));
      CK(cudaFree(tmp));
    }
    run_tables<<<blocks, 256>>>(start, cnt, s, q, rs, ds, tiles, nb, E, T);
    CK(cudaEventRecord(ev1));
    CK(cudaEventSynchronize(ev1));
    float build_ms = 0;
    CK(cudaEventElapsedTime(&build_ms, ev0, ev1));
    CK(cudaGetLastError());
    char name[96], note[160];
    std::snprintf(note, sizeof note, "tiles %lld, buckets %lld, run tables %.2f B/edge", (long long)tiles, (long long)nb,
                  double(tiles * nb * 4 + tiles * (nb + 1) * 2) / double(E));
    std::printf("T = %d, B = %d: S structures built in %.2f ms (one run, unoptimised; CUB scratch allocations and "
                "first launches included)  %s\n",
                T, B, double(build_ms), note);
    const bool cluster = T > 49152;  // one block cannot hold the tile: P1c only
    const int smem1 = int(T * 4 + nb * 4 + (nb + 1) * 2), smem2 = B * 4;
    const int smem1c = int(T / 2 * 4 + nb * 4 + (nb + 1) * 2);
    if (!cluster) {
      CK(cudaFuncSetAttribute(pass1<false>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem1));
      CK(cudaFuncSetAttribute(pass1<true>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem1));
      CK(cudaFuncSetAttribute(pass1v, cudaFuncAttributeMaxDynamicSharedMemorySize, smem1));
    }
    CK(cudaFuncSetAttribute(pass1c, cudaFuncAttributeMaxDynamicSharedMemorySize, smem1c));
    CK(cudaFuncSetAttribute(pass2, cudaFuncAttributeMaxDynamicSharedMemorySize, smem2));
    CK(cudaFuncSetAttribute(pass2v, cudaFuncAttributeMaxDynamicSharedMemorySize, smem2));
    auto p1 = [&](bool search) {
      if (search) pass1<true><<<int(tiles), kThreads, smem1>>>(w, tl, rs, ds, inter, E, T, nb);
      else pass1<false><<<int(tiles), kThreads, smem1>>>(w, tl, rs, ds, inter, E, T, nb);
    };
    auto p2 = [&](float* o) { pass2<<<int(nb), kThreads, smem2>>>(inter, lidx, o, E, B); };
    auto p1v = [&] { pass1v<<<int(tiles), kThreads, smem1>>>(w, tl, rs, ds, inter, E, T, nb); };
    auto p1c = [&] { pass1c<<<int(2 * tiles), kThreads, smem1c>>>(w, tl, rs, ds, inter, E, T, nb); };
    auto p2v = [&](float* o) { pass2v<<<int(nb), kThreads, smem2>>>(inter, lidx, o, E, B); };
    // Each line: the samples first, then the check of what the last sample left (a NaN poison
    // first, so that a slot never written shows).
    auto line = [&](const char* label, const std::function<void()>& f, const float* result) {
      CK(cudaMemset(out, 0xFF, E * 4));
      CK(cudaMemset(inter, 0xFF, E * 4));
      const std::vector<float> t = micro::timed(f);
      const bool ok = result == nullptr || same_bits(result, ref, E);
      std::snprintf(name, sizeof name, "%s (T=%d B=%d)", label, T, B);
      micro::report(name, t, result == nullptr ? "" : ok ? "OK (bitwise the gather's)" : "MISMATCH");
    };
    if (T == B) {  // the session 14-17 lines, measured at these three sizes
      line("P1 pass 1, a warp a run", [&] { p1(false); }, nullptr);
      line("P1s pass 1, a thread a slot", [&] { p1(true); }, nullptr);
      line("P2 pass 2 alone, to its own buffer", [&] { p2(out); }, nullptr);
      line("P  pass 1 (warp a run) + pass 2", [&] { p1(false); p2(out); }, out);
      line("Ps pass 1 (thread a slot) + pass 2", [&] { p1(true); p2(out); }, out);
      line("Pi pass 1 (warp a run) + pass 2 in place", [&] { p1(false); p2(inter); }, inter);
      line("P1v + P2 (pass 2 one edge a thread)", [&] { p1v(); p2(out); }, out);
    }
    if (!cluster) {
      line("P1v pass 1, 16-byte loads, 4 in flight", [&] { p1v(); }, nullptr);
      line("P2v pass 2 alone, 16-byte loads and stores", [&] { p2v(out); }, nullptr);
      line("Pv  P1v + P2v", [&] { p1v(); p2v(out); }, out);
      line("Pvi P1v + P2v in place", [&] { p1v(); p2v(inter); }, inter);
    }
    if (T == 49152 && B == 49152) {  // P1b: the same passes on bank-spread places (see bank_spread_places)
      std::vector<u16> tl_h(static_cast<std::size_t>(E)), rs_h(static_cast<std::size_t>(tiles * (nb + 1)));
      std::vector<u32> bkt_h(static_cast<std::size_t>(E)), pos_h(static_cast<std::size_t>(E)),
          ds_h(static_cast<std::size_t>(tiles * nb));
      CK(cudaMemcpy(tl_h.data(), tl, E * 2, cudaMemcpyDeviceToHost));
      CK(cudaMemcpy(bkt_h.data(), bkt, E * 4, cudaMemcpyDeviceToHost));
      CK(cudaMemcpy(pos_h.data(), pos, E * 4, cudaMemcpyDeviceToHost));
      CK(cudaMemcpy(rs_h.data(), rs, tiles * (nb + 1) * 2, cudaMemcpyDeviceToHost));
      CK(cudaMemcpy(ds_h.data(), ds, tiles * nb * 4, cudaMemcpyDeviceToHost));
      u16 *tlb = dalloc<u16>(E), *lidxb = dalloc<u16>(E);
      u32* qb = dalloc<u32>(E);
      line("P1v again, next to P1b", [&] { p1v(); }, nullptr);
      line("P2v again, next to P2b", [&] { p2v(out); }, nullptr);
      for (const bool both : {false, true}) {
        std::vector<u16> tlb_h;
        const Spread sp = bank_spread_places(tl_h, bkt_h, E, T, nb, B, both ? &pos_h : nullptr, both ? &rs_h : nullptr,
                                             both ? &ds_h : nullptr, tlb_h);
        std::printf("P1b%s places (host greedy): wavefronts per warp access, pass 1 %.2f -> %.2f%s\n", both ? "2" : "",
                    sp.p1_before, sp.p1_after, both ? "" : " (pass 2 not spread)");
        if (both) std::printf("  pass 2 %.2f -> %.2f\n", sp.p2_before, sp.p2_after);
        CK(cudaMemcpy(tlb, tlb_h.data(), E * 2, cudaMemcpyHostToDevice));
        inter_from_places<<<blocks, 256>>>(tlb, bkt, rs, ds, qb, E, T, nb);
        bucket_local<<<blocks, 256>>>(perm, qb, lidxb, E, B);
        CK(cudaGetLastError());
        auto p1b = [&] { pass1v<<<int(tiles), kThreads, smem1>>>(w, tlb, rs, ds, inter, E, T, nb); };
        auto p2b = [&](float* o) { pass2v<<<int(nb), kThreads, smem2>>>(inter, lidxb, o, E, B); };
        line(both ? "P1b2 pass 1 (P1v) on places spread for both passes" : "P1b pass 1 (P1v) on bank-spread places",
             [&] { p1b(); }, nullptr);
        line(both ? "P2b2 pass 2 (P2v) on those places' lidx" : "P2b pass 2 (P2v) on those places' lidx",
             [&] { p2b(out); }, nullptr);
        line(both ? "Pb2 P1b2 + P2b2" : "Pb P1b + P2b", [&] { p1b(); p2b(out); }, out);
      }
      CK(cudaFree(tlb));
      CK(cudaFree(lidxb));
      CK(cudaFree(qb));
    }
    if (T % 8 == 0 && (T == 49152 || cluster)) {  // P1c at one single-block size too, against P1v
      line("P1c pass 1, the tile in a two-block cluster", [&] { p1c(); }, nullptr);
      line("Pc  P1c + P2v", [&] { p1c(); p2v(out); }, out);
    }
    CK(cudaFree(cnt));
    CK(cudaFree(start));
    CK(cudaFree(ds));
    CK(cudaFree(rs));
  }
  micro::report("copy of E floats (read + write, for scale)",
                micro::timed([&] { CK(cudaMemcpyAsync(out, w, E * 4, cudaMemcpyDeviceToDevice)); }));
  return 0;
}
