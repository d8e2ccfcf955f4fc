// Standalone micro-benchmark (not part of the library build): a plan's destination sort as two
// MSD scatters and a last level sorted inside each block, against CUB's double-buffered sort.
//
//   nvcc -O3 -std=c++20 -arch=sm_90 bench/micro/msd_smem_sort_micro.cu -o msd && ./msd [E]
//   (gpu-check: MICRO=msd_smem_sort_micro.cu)
//
// Why (docs/perf-notes.md v31): three of the open targets sit on the build's sort. The one-shot
// peaks at 24.4 B/edge (issue 4 asks <= 12) because CUB's onesweep passes double-buffer
// (u32 key, 8-byte pair) elements; the plan build is 2.03-2.06 ms (issue 3 asks <= 2.0), of which
// CUB's two passes are ~1.1 ms and the column's compaction 0.26; the one-shot is 6.03-6.05 (asks
// <= 6.0). perf-notes v8 named "an MSD split whose second level sorts in shared memory" as a
// candidate; it was never built. This micro builds the sort that way:
//   pass 1: a stable scatter of every edge by dst's top bits (64 buckets) into A: a u16 key (dst's
//     low 16 bits) and the 8-byte pair (src, edge id): 10 bytes an edge, the only full-size buffer;
//   then batches of at most 4 consecutive top buckets (~1/9 of E each on products-like), one at a
//     time, each in two kernels:
//   pass 2: the batch's range of A, stably scattered by (bucket in batch, the key's high 8 bits)
//     into a scratch of the batch's size (sub-buckets of 256 rows, ~6.5K edges);
//   pass 3: a block per sub-bucket ranks its edges by row (the key's low 8 bits; counts a warp a
//     row in shared memory, so stable), writes the rows' offsets, and writes the pairs back into
//     A's range of the batch in row order, staged in shared memory so that the stores are whole
//     lines (direct stores when a sub-bucket exceeds the stage: hubs).
// A's range of a batch is exactly where its edges end in the sorted order, so pass 3 writes in
// place and the peak is A (10 B/edge) + one batch's scratch (E/8: 1.25) + counts + row_ptr: ~11.6 B/edge
// against CUB's 24 (keys and pairs twice).
//
// Bytes (products-like, E = 61.86M, int64 indices): pass 1 counts read dst (8), the scatter reads
// src and dst (16) and writes 10: 34 B/edge, 2.1 GB; pass 2 reads 10 (twice for its counts' keys:
// +2) and writes 10: 22; pass 3 reads 10 (+2) and writes 8: 20. In all ~76 B/edge, 4.7 GB: ~1.1
// ms at 4.2 TB/s. Today's build sort: the fused first pass (~0.70, 20 B read + 12 written + its
// counts' 8) and CUB's two passes over bits [6, 22) (1.1-1.2 ms, 24 B/edge read and written
// each): ~1.8-1.9 ms. Predicted here: pass 1 ~0.6-0.7 ms (the first pass's work at 10 bytes
// written instead of 12), passes 2 + 3 ~0.6-0.8 over ten batches (4 buckets each, the last 2;
// each a few waves; launch and tail gaps ~10-20 us a kernel): ~1.2-1.5 ms, and ~11.6 B/edge. If so, the one-shot would go from
// ~6.0 to ~5.5-5.7 ms at under 12 B/edge, and the plan build below 2 ms.
//
// Earlier block-level last levels (perf-notes v11-v13): A9 (a block per 256-row bucket ranking
// straight from global memory after CUB's top-bit passes) took 2.57 ms for ~0.3 ms of bytes,
// waiting on one round of loads at a time; A12 (the same level through shared memory) 2.40
// against CUB's 2.28. This one differs in three ways: no CUB pass at all (both upper levels are
// scatters of 64 and 1024 digits), every ranking loop keeps 4 rounds of loads in flight, and the
// batches bound the memory. The memory bound is the point; the time only has to stay near
// today's (one-shot <= ~6.2 ms keeps issue 4's 2.8x), so the prediction above is held loosely:
// if the sort lands at ~1.9 ms or less with the peak at ~11.6 B/edge, the library's one-shot
// takes it.
//
// Two graphs, each checked and timed: products-like's uniform edges, then the same with 10% of
// the edges moved into 16 hub rows (pass 3's unstaged path and its one-block tail).
//
// The result is checked bitwise against CUB's stable SortPairs of (u32 dst, (src, id)) over all
// 22 bits, and the row offsets against a binary search of CUB's sorted keys.
#include <cub/block/block_scan.cuh>
#include <cub/device/device_radix_sort.cuh>
#include <cub/device/device_scan.cuh>

#include <algorithm>
#include <cstring>
#include <vector>

#include "micro_harness.cuh"
#include "msd_batches.hpp"

namespace {

using micro::dalloc;

struct alignas(8) Pair {  // one 8-byte access a pair (without alignas, two 4-byte ones)
  int src, id;
};

using namespace msd;

constexpr int kThreads = 256, kWarps = kThreads / 32;
constexpr int kTile = 8192, kSeg = kTile / kWarps;  // a warp ranks kSeg consecutive edges of its tile
constexpr int kStage = 8192;  // pairs a pass-3 block stages (64 KB): ~6.5K edges a sub-bucket here

// The lanes of `active` whose low BITS bits of d equal this lane's: one ballot a bit.
template <int BITS>
__device__ __forceinline__ unsigned match_bits(u32 d, unsigned active) {
  unsigned m = active;
#pragma unroll
  for (int b = 0; b < BITS; ++b) {
    const unsigned v = __ballot_sync(~0u, (d >> b) & 1u);
    m &= (d >> b) & 1u ? v : ~v;
  }
  return m;
}

// A warp ranks its `lim` consecutive items in order (stable) from its first places my[digit],
// and hands each its place: store(place, item). load(i, in) gives item i (its .d the digit).
// U rounds of 32 are loaded before the first is ranked, so that U loads a lane are in flight (one
// round at a time holds ~8 KB of reads in flight an SM against the ~25 KB that the H200's
// bandwidth times its latency asks for; the library's first pass loads its rounds the same way).
template <int BITS, int U, class Load, class Store>
__device__ __forceinline__ void rank_warp(u32* my, int lim, Load load, Store store) {
  const int lane = threadIdx.x % 32;
  const unsigned lt = (1u << lane) - 1;
  using Item = decltype(load(0, false));
  for (int g = 0; g < lim; g += 32 * U) {
    Item it[U];
#pragma unroll
    for (int u = 0; u < U; ++u) it[u] = load(g + 32 * u + lane, g + 32 * u + lane < lim);
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const bool in = g + 32 * u + lane < lim;
      const unsigned active = __ballot_sync(~0u, in);
      if (!active) break;  // warp-uniform
      const u32 d = in ? it[u].d : 0u;
      const unsigned peers = match_bits<BITS>(d, active);
      const u32 base = in ? my[d] : 0u;
      __syncwarp();
      if (in && lane == __ffs(peers) - 1) my[d] = base + __popc(peers);
      __syncwarp();
      if (in) store(base + __popc(peers & lt), it[u]);
    }
  }
}

// Pass 1's counts: digit dst >> 16 per tile, stored digit-major (counts[d * tiles + t]) so that
// one exclusive scan gives every (digit, tile)'s first place.
__global__ void __launch_bounds__(kThreads) top_counts(const i64* __restrict__ dst, i64 E, u32* __restrict__ counts) {
  __shared__ u32 h[kTopDigits];
  for (int i = threadIdx.x; i < kTopDigits; i += kThreads) h[i] = 0;
  __syncthreads();
  const i64 t0 = i64(blockIdx.x) * kTile;
  const int n = int(E - t0 < kTile ? E - t0 : kTile);
#pragma unroll 4
  for (int i = threadIdx.x; i < n; i += kThreads) atomicAdd(&h[u32(dst[t0 + i]) >> kTopShift], 1u);
  __syncthreads();
  for (int d = threadIdx.x; d < kTopDigits; d += kThreads) counts[i64(d) * gridDim.x + blockIdx.x] = h[d];
}

// Pass 1's scatter: each warp counts its segment per digit, the block turns the counts into each
// warp's first place (the tile's scanned start plus the warps before it), and the warp ranks its
// edges in edge order: stable. Stores go straight to A (runs of ~16 edges a warp and digit; the
// tile's ~128 a digit are adjacent, so L2 sees whole lines).
__global__ void __launch_bounds__(kThreads) top_scatter(const i64* __restrict__ src, const i64* __restrict__ dst, i64 E,
                                                        const u32* __restrict__ offs, u16* __restrict__ akey,
                                                        Pair* __restrict__ apair) {
  __shared__ u32 wc[kWarps][kTopDigits];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  for (int i = threadIdx.x; i < kWarps * kTopDigits; i += kThreads) (&wc[0][0])[i] = 0;
  __syncthreads();
  const i64 s0 = i64(blockIdx.x) * kTile + i64(warp) * kSeg;
  const int lim = int(E - s0 < kSeg ? (E - s0 > 0 ? E - s0 : 0) : kSeg);
#pragma unroll 4
  for (int i = lane; i < lim; i += 32) atomicAdd(&wc[warp][u32(dst[s0 + i]) >> kTopShift], 1u);
  __syncthreads();
  if (threadIdx.x < kTopDigits) {
    u32 run = offs[i64(threadIdx.x) * gridDim.x + blockIdx.x];
    for (int w = 0; w < kWarps; ++w) {
      const u32 c = wc[w][threadIdx.x];
      wc[w][threadIdx.x] = run;
      run += c;
    }
  }
  __syncthreads();
  struct Item {
    u32 d, dv;
    int sv;
    i64 e;
  };
  rank_warp<6, 4>(
      wc[warp], lim,
      [&](int i, bool in) {
        const i64 e = s0 + i;
        const u32 dv = in ? u32(dst[e]) : 0u;
        return Item{dv >> kTopShift, dv, in ? int(src[e]) : 0, e};
      },
      [&](u32 p, const Item& it) {
        akey[p] = u16(it.dv & 0xFFFFu);
        apair[p] = Pair{it.sv, int(it.e)};
      });
}

// Pass 2 (a batch at a time; Batch, digit2 and the batches' plan in msd_batches.hpp).
__global__ void __launch_bounds__(kThreads) sub_counts(const u16* __restrict__ akey, Batch b, u32* __restrict__ counts) {
  __shared__ u32 h[kDigits2];
  for (int i = threadIdx.x; i < kDigits2; i += kThreads) h[i] = 0;
  __syncthreads();
  const i64 t0 = i64(blockIdx.x) * kTile;
  const int n = int(b.n - t0 < kTile ? b.n - t0 : kTile);
#pragma unroll 4
  for (int i = threadIdx.x; i < n; i += kThreads) atomicAdd(&h[digit2(b, t0 + i, akey[b.ea + t0 + i])], 1u);
  __syncthreads();
  for (int d = threadIdx.x; d < kDigits2; d += kThreads) counts[i64(d) * gridDim.x + blockIdx.x] = h[d];
}

// Pass 2's scatter: as top_scatter, over the batch's range of A into the scratch.
__global__ void __launch_bounds__(kThreads) sub_scatter(const u16* __restrict__ akey, const Pair* __restrict__ apair, Batch b,
                                                        const u32* __restrict__ offs, u16* __restrict__ skey,
                                                        Pair* __restrict__ spair) {
  __shared__ u32 wc[kWarps][kDigits2];  // 32 KB
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  for (int i = threadIdx.x; i < kWarps * kDigits2; i += kThreads) (&wc[0][0])[i] = 0;
  __syncthreads();
  const i64 s0 = i64(blockIdx.x) * kTile + i64(warp) * kSeg;  // batch positions
  const int lim = int(b.n - s0 < kSeg ? (b.n - s0 > 0 ? b.n - s0 : 0) : kSeg);
#pragma unroll 4
  for (int i = lane; i < lim; i += 32) atomicAdd(&wc[warp][digit2(b, s0 + i, akey[b.ea + s0 + i])], 1u);
  __syncthreads();
  for (int d = threadIdx.x; d < kDigits2; d += kThreads) {
    u32 run = offs[i64(d) * gridDim.x + blockIdx.x];
    for (int w = 0; w < kWarps; ++w) {
      const u32 c = wc[w][d];
      wc[w][d] = run;
      run += c;
    }
  }
  __syncthreads();
  struct Item {
    u32 d;
    u16 k;
    Pair v;
  };
  rank_warp<10, 4>(
      wc[warp], lim,
      [&](int i, bool in) {
        const i64 p = s0 + i;
        const u16 k = in ? akey[b.ea + p] : u16(0);
        return Item{in ? digit2(b, p, k) : 0u, k, in ? apair[b.ea + p] : Pair{0, 0}};
      },
      [&](u32 q, const Item& it) {
        skey[q] = it.k;
        spair[q] = it.v;
      });
}

// Pass 3: a block per sub-bucket (pass 2's digit d: top bucket top0 + d / 256, rows (d % 256) *
// 256 onwards in it). Warp w takes a contiguous segment of the sub-bucket; counts a warp a row,
// scanned row-major then warp, give every warp its first place a row: stable. The rows' starts
// become row_ptr; the pairs go back to A at the batch's range, through a shared-memory stage
// (whole-line stores) when the sub-bucket fits it.
__global__ void __launch_bounds__(kThreads) rows_sort(const u16* __restrict__ skey, const Pair* __restrict__ spair,
                                                      const u32* __restrict__ offs, int tiles2, Batch b, i64 N,
                                                      Pair* __restrict__ apair, int* __restrict__ row_ptr) {
  extern __shared__ __align__(16) unsigned char rows_smem[];
  Pair* const stage = reinterpret_cast<Pair*>(rows_smem);
  __shared__ u32 wc[kWarps][kRows];
  using Scan = cub::BlockScan<u32, kThreads>;
  __shared__ typename Scan::TempStorage scan_temp;
  const int d = blockIdx.x;
  const i64 lo = offs[i64(d) * tiles2];
  const i64 hi = d + 1 < b.nb * (1 << kSubBits) ? i64(offs[i64(d + 1) * tiles2]) : b.n;
  const int n = int(hi - lo);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  for (int i = threadIdx.x; i < kWarps * kRows; i += kThreads) (&wc[0][0])[i] = 0;
  __syncthreads();
  const int seg = (n + kThreads - 1) / kThreads * 32;  // a multiple of 32, kWarps of them cover n
  const int w0 = warp * seg;
  const int lim = n - w0 < seg ? (n - w0 > 0 ? n - w0 : 0) : seg;
#pragma unroll 4
  for (int i = lane; i < lim; i += 32) atomicAdd(&wc[warp][skey[lo + w0 + i] & (kRows - 1)], 1u);
  __syncthreads();
  static_assert(kRows == kThreads, "a thread a row");
  const int r = threadIdx.x;
  u32 total = 0;
  for (int w = 0; w < kWarps; ++w) total += wc[w][r];
  u32 start = 0;
  Scan(scan_temp).ExclusiveSum(total, start);
  {
    u32 run = start;
    for (int w = 0; w < kWarps; ++w) {
      const u32 c = wc[w][r];
      wc[w][r] = run;
      run += c;
    }
    const i64 row = row_of(b, d, r);
    if (row < N) row_ptr[row] = int(b.ea + lo + start);
  }
  __syncthreads();
  const bool staged = n <= kStage;
  Pair* const out = apair + b.ea + lo;
  struct Item {
    u32 d;
    Pair v;
  };
  rank_warp<kRowBits, 4>(
      wc[warp], lim,
      [&](int i, bool in) {
        return Item{in ? u32(skey[lo + w0 + i]) & (kRows - 1) : 0u, in ? spair[lo + w0 + i] : Pair{0, 0}};
      },
      [&](u32 q, const Item& it) {
        if (staged) stage[q] = it.v;
        else out[q] = it.v;
      });
  if (staged) {
    __syncthreads();
    for (int i = threadIdx.x; i < n; i += kThreads) out[i] = stage[i];
  }
}

__global__ void init_ref(const i64* src, const i64* dst, u32* keys, Pair* pairs, i64 E) {
  for (i64 e = blockIdx.x * i64(blockDim.x) + threadIdx.x; e < E; e += i64(gridDim.x) * blockDim.x) {
    keys[e] = u32(dst[e]);
    pairs[e] = Pair{int(src[e]), int(e)};
  }
}
__global__ void set_last(int* row_ptr, i64 N, i64 E) { row_ptr[N] = int(E); }

// The whole build's sort: pass 1, then the batches. The batches' bounds need pass 1's bucket
// starts on the host (one copy of 65 numbers and a sync, as a one-shot's index verdict already
// takes).
struct Msd {
  i64 E, N;
  int tiles1;
  u32 *counts1, *offs1, *counts2, *offs2;
  u16 *akey, *skey;
  Pair *apair, *spair;
  int* row_ptr;
  void* temp;
  std::size_t temp_bytes;
  i64 scratch_edges;
  std::vector<Batch> batches;  // from the last pass 1
};

void pass1(Msd& m, const i64* src, const i64* dst) {
  top_counts<<<m.tiles1, kThreads>>>(dst, m.E, m.counts1);
  CK(cub::DeviceScan::ExclusiveSum(m.temp, m.temp_bytes, m.counts1, m.offs1, i64(kTopDigits) * m.tiles1));
  top_scatter<<<m.tiles1, kThreads>>>(src, dst, m.E, m.offs1, m.akey, m.apair);
}

// Each top bucket's first place (the scanned offset of its first tile): one strided copy.
std::vector<u32> top_starts(const Msd& m) {
  std::vector<u32> first(kTopDigits);
  CK(cudaMemcpy2D(first.data(), sizeof(u32), m.offs1, sizeof(u32) * m.tiles1, sizeof(u32), kTopDigits,
                  cudaMemcpyDeviceToHost));
  return first;
}

void plan_batches(Msd& m) { m.batches = msd::plan_batches(top_starts(m), m.E, m.N, m.scratch_edges); }

void passes23(Msd& m) {
  for (const Batch& b : m.batches) {
    const int tiles2 = int((b.n + kTile - 1) / kTile);
    if (tiles2 > 0) {
      sub_counts<<<tiles2, kThreads>>>(m.akey, b, m.counts2);
      CK(cub::DeviceScan::ExclusiveSum(m.temp, m.temp_bytes, m.counts2, m.offs2, i64(kDigits2) * tiles2));
      sub_scatter<<<tiles2, kThreads>>>(m.akey, m.apair, b, m.offs2, m.skey, m.spair);
    } else {
      CK(cudaMemsetAsync(m.offs2, 0, sizeof(u32) * kDigits2));  // no edges: every sub-bucket empty
    }
    rows_sort<<<b.nb << kSubBits, kThreads, kStage * sizeof(Pair)>>>(m.skey, m.spair, m.offs2, tiles2 > 0 ? tiles2 : 1, b,
                                                                     m.N, m.apair, m.row_ptr);
  }
  set_last<<<1, 1>>>(m.row_ptr, m.N, m.E);
}

// Power-law-like hubs on top of the uniform edges: 10% of the edges go to 16 hub rows (~390K
// edges each on products-like), each then a sub-bucket far past the stage: one block's serial
// work in pass 3, the tail the library would have to split.
__global__ void add_hubs(i64* dst, i64 E, i64 N) {
  for (i64 e = blockIdx.x * i64(blockDim.x) + threadIdx.x; e < E; e += i64(gridDim.x) * blockDim.x) {
    const std::uint64_t h = micro::mix(977 + std::uint64_t(e) * 0x100000007ull);
    if (h % 1000 < 100) dst[e] = i64((((h >> 20) % 16) * 152917 + 12345) % std::uint64_t(N));
  }
}

// Everything on one graph: the reference, the check, the timings. Returns the process's exit code.
int run_graph(const char* name, const i64* src, const i64* dst, i64 E, i64 N, int blocks) {
  using namespace micro;
  // The reference: CUB's stable sort of (u32 dst, (src, id)) over all 22 bits, and row_ptr by
  // binary search of its keys.
  u32 *k0 = dalloc<u32>(E), *ka = dalloc<u32>(E), *kb = dalloc<u32>(E);
  Pair *p0 = dalloc<Pair>(E), *pa = dalloc<Pair>(E), *pb = dalloc<Pair>(E);
  int* rp_ref = dalloc<int>(N + 1);
  init_ref<<<blocks, 256>>>(src, dst, k0, p0, E);
  std::size_t cub_bytes = 0;
  {
    cub::DoubleBuffer<u32> k(ka, kb);
    cub::DoubleBuffer<Pair> p(pa, pb);
    CK(cub::DeviceRadixSort::SortPairs(nullptr, cub_bytes, k, p, u32(E), 0, 22));
  }
  void* cub_temp = dalloc<char>(i64(cub_bytes));
  std::vector<float> tr;
  const Pair* ref_pairs = nullptr;
  for (int r = 0; r < 11; ++r) {  // the first a warm-up; inputs restored before each sample
    CK(cudaMemcpy(ka, k0, E * 4, cudaMemcpyDeviceToDevice));
    CK(cudaMemcpy(pa, p0, E * 8, cudaMemcpyDeviceToDevice));
    cub::DoubleBuffer<u32> k(ka, kb);
    cub::DoubleBuffer<Pair> p(pa, pb);
    const float ms = once_ms([&] { CK(cub::DeviceRadixSort::SortPairs(cub_temp, cub_bytes, k, p, u32(E), 0, 22)); });
    if (r > 0) tr.push_back(ms);
    ref_pairs = p.Current();
    row_ptr_search<<<blocks, 256>>>(k.Current(), E, N, rp_ref);
  }
  CK(cudaDeviceSynchronize());
  std::printf("\n== %s: E=%lld N=%lld\n", name, (long long)E, (long long)N);
  report("R  CUB SortPairs (u32 dst, 8 B pair), bits [0,22)", tr,
         "the reference; 3 onesweep passes + histogram; keys and pairs double-buffered: 24 B/edge");

  Msd m{};
  m.E = E;
  m.N = N;
  m.tiles1 = int((E + kTile - 1) / kTile);
  m.counts1 = dalloc<u32>(i64(kTopDigits) * m.tiles1);
  m.offs1 = dalloc<u32>(i64(kTopDigits) * m.tiles1);
  m.akey = dalloc<u16>(E);
  m.apair = dalloc<Pair>(E);
  m.row_ptr = dalloc<int>(N + 1);
  // The scans' temp before the first pass 1 (a null temp only asks CUB for its size): sized for
  // both scans, pass 2's at most tiles1 tiles (a batch holds at most E edges).
  {
    std::size_t t1 = 0, t2 = 0;
    CK(cub::DeviceScan::ExclusiveSum(nullptr, t1, m.counts1, m.offs1, i64(kTopDigits) * m.tiles1));
    CK(cub::DeviceScan::ExclusiveSum(nullptr, t2, m.counts1, m.offs1, i64(kDigits2) * m.tiles1));
    m.temp_bytes = std::max(t1, t2);
    m.temp = dalloc<char>(i64(m.temp_bytes));
  }
  // Scratch for one batch (msd_batches.hpp): an eighth of E (products-like's 4 buckets of ~1.65M
  // edges are 6.6M, 10.7% of E), or the largest bucket if that is more.
  pass1(m, src, dst);
  CK(cudaGetLastError());
  CK(cudaDeviceSynchronize());
  m.scratch_edges = scratch_edges_for(top_starts(m), E);
  const i64 tiles2_max = (m.scratch_edges + kTile - 1) / kTile;
  m.counts2 = dalloc<u32>(i64(kDigits2) * tiles2_max);
  m.offs2 = dalloc<u32>(i64(kDigits2) * tiles2_max);
  m.skey = dalloc<u16>(m.scratch_edges);
  m.spair = dalloc<Pair>(m.scratch_edges);
  plan_batches(m);
  const double scratch_b = double(m.scratch_edges) * 10 + double(kDigits2) * tiles2_max * 8 + double(kTopDigits) * m.tiles1 * 8 +
                           double(m.temp_bytes);
  std::printf("MSD: %zu batches, scratch %lld edges; peak %.2f B/edge (A 10 + scratch and counts %.2f + row_ptr %.2f)\n",
              m.batches.size(), (long long)m.scratch_edges, 10 + scratch_b / E + 4.0 * (N + 1) / E, scratch_b / E,
              4.0 * (N + 1) / E);

  // Correctness first: the full pipeline once, against the reference, bitwise.
  passes23(m);
  CK(cudaGetLastError());
  CK(cudaDeviceSynchronize());
  {
    std::vector<Pair> got(E), want(E);
    std::vector<int> rg(N + 1), rw(N + 1);
    CK(cudaMemcpy(got.data(), m.apair, E * 8, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(want.data(), ref_pairs, E * 8, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(rg.data(), m.row_ptr, (N + 1) * 4, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(rw.data(), rp_ref, (N + 1) * 4, cudaMemcpyDeviceToHost));
    i64 bad_p = 0, bad_r = 0, first_p = -1, first_r = -1;
    for (i64 i = 0; i < E; ++i)
      if (got[i].src != want[i].src || got[i].id != want[i].id) {
        if (!bad_p) first_p = i;
        ++bad_p;
      }
    for (i64 i = 0; i <= N; ++i)
      if (rg[i] != rw[i]) {
        if (!bad_r) first_r = i;
        ++bad_r;
      }
    std::printf("check: pairs %s (%lld differ, first at %lld), row_ptr %s (%lld differ, first at %lld)\n",
                bad_p ? "WRONG" : "bitwise CUB's", (long long)bad_p, (long long)first_p, bad_r ? "WRONG" : "as CUB's keys give",
                (long long)bad_r, (long long)first_r);
    if (bad_p || bad_r) {  // what the one run can tell: the batches and the first differences
      for (const Batch& b : m.batches)
        std::printf("  batch top0 %d nb %d ea %lld n %lld\n", b.top0, b.nb, (long long)b.ea, (long long)b.n);
      for (i64 i = std::max<i64>(first_p, 0), k = 0; bad_p && i < E && k < 8; ++i)
        if (got[i].src != want[i].src || got[i].id != want[i].id) {
          std::printf("  pairs[%lld] got (%d, %d) want (%d, %d)\n", (long long)i, got[i].src, got[i].id, want[i].src, want[i].id);
          ++k;
        }
      for (i64 i = std::max<i64>(first_r, 0), k = 0; bad_r && i <= N && k < 8; ++i)
        if (rg[i] != rw[i]) {
          std::printf("  row_ptr[%lld] got %d want %d\n", (long long)i, rg[i], rw[i]);
          ++k;
        }
      return 2;
    }
  }

  report("M1 pass 1: counts, scan, scatter by dst >> 16 (u16 key + pair)", timed([&] { pass1(m, src, dst); }));
  // Passes 2 and 3 need pass 1's A: each sample restores it by running pass 1 untimed first.
  std::vector<float> t23;
  for (int r = 0; r < 11; ++r) {
    pass1(m, src, dst);
    const float ms = once_ms([&] { passes23(m); });
    if (r > 0) t23.push_back(ms);
  }
  char note[96];
  std::snprintf(note, sizeof note, "%zu batches, 3 kernels + a scan each", m.batches.size());
  report("M23 passes 2 + 3 over the batches", t23, note);
  report("M  the whole sort (pass 1, batches' bounds to the host, passes 2 + 3)", timed([&] {
           pass1(m, src, dst);
           plan_batches(m);
           passes23(m);
         }));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace micro;
  const i64 E = edge_count_arg(argc, argv), N = 2449029;
  if (E < 0) return 1;
  if (N > (i64(1) << 22)) return 1;  // pass 1 takes dst >> 16 as a 6-bit digit
  int sms = 0;
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  cudaDeviceProp prop{};
  CK(cudaGetDeviceProperties(&prop, 0));
  std::printf("device %s, %d SMs\n", prop.name, sms);
  const int blocks = sms * 8;
  i64 *src = dalloc<i64>(E), *dst = dalloc<i64>(E);
  {
    float* w = dalloc<float>(E);
    gen_edges<<<blocks, 256>>>(src, dst, w, E, N, 1);
    CK(cudaDeviceSynchronize());
    CK(cudaFree(w));
  }
  CK(cudaFuncSetAttribute(rows_sort, cudaFuncAttributeMaxDynamicSharedMemorySize, int(kStage * sizeof(Pair))));
  if (const int rc = run_graph("products-like (uniform random, seed 1)", src, dst, E, N, blocks)) return rc;
  add_hubs<<<blocks, 256>>>(dst, E, N);
  CK(cudaDeviceSynchronize());
  return run_graph("the same with 10% of the edges into 16 hub rows", src, dst, E, N, blocks);
}
