// Standalone micro-benchmark (not part of the library build): can a one-shot call sort on 16 key
// bits instead of 22 and sum each bucket of 64 destination rows in shared memory? And the
// library's two-level build (a 16-bit sort, then each bucket ordered in shared memory) against
// its one sort.
//
//   nvcc -O3 -std=c++20 -arch=sm_90 bench/micro/bucket_oneshot_micro.cu -o bom && ./bom [E]
//
// Data: products-like sizes (N = 2,449,029, E = 61,859,140 unless E is given, F = 64, float32,
// tanh, w per edge), uniform src/dst drawn on the device. Lines are `name  median_ms  (min..max)
// note`, median of 10 after one warm-up.
//
// Why (session 11): the one-shot call is 6.46 ms against issue 3's 6.0: its build 2.45 (init 0.45,
// CUB's three onesweep passes of 12-byte elements for the 22-bit key 1.8, row offsets 0.12) and its
// run ~4.0. Every 22-bit sort measured so far is >= 2.13 ms with the init; a 16-bit key takes two
// passes (build micro A10: 1.58 ms with the init). Sorting dst >> 6 leaves each bucket of 64
// destination rows contiguous, its edges in edge order (the sort is stable), but not the rows
// inside it. Here a warp owns one bucket, keeps its 64 rows' sums in 16 KB of shared memory, and
// walks the bucket's edges in order through a cp.async ring as the staged kernel does (a lane owns
// features 2l and 2l + 1, so an edge is one warp step and two edges never race for a row). No row
// events, no 32-edge blocks: each sum is one float chain in edge order (deterministic).
// Count: the run moves what the staged run moves (x rows 15.8 GB, pairs 0.5, output 0.63), ~4.0
// ms now. Per edge a warp issues the copies (~13 instructions, LI form), two tanh (~36), and a
// shared-memory read-add-write of its float2 (~4) in place of the staged walk's per-stage row
// checks: about the staged kernel's 66 per edge or fewer. Shared memory: 16 KB of sums + the ring
// (S stages x 8 edges x 264 B) a warp, so 8-10 warps an SM against the staged kernel's 32, with
// (S - 1) x 8 rows in flight each. Expect: sort 16 bits ~1.1-1.2 + init ~0.45 + bucket offsets
// ~0.05 + run ~4.0-4.4 = ~5.6-6.1 ms, against 6.46.
// Not here: hub buckets (power-law's rows of 10^5 edges would hold one warp); a production form
// would split a bucket past ~2048 edges into items with partial sums, as the plan splits rows.
//
//   B22  init + CUB SortPairs on 22 bits (the production one-shot's sort), for the same machine
//   K16  init + CUB SortPairs on bits [6, 22) (two passes); K16p + bucket offsets
//   R3w1 the bucket run: a warp a bucket, sums in shared memory, a 3-stage ring
//   P22/P21, TL, TLr, TLk (products-like, then an R-MAT power-law): the production build against
//        the library's two-level build (src/cuda/two_level_sort.cuh), checked bitwise, its four
//        kernels alone, and its rank kernel alone
//   Removed after session 11 (the code is in git at 30128fe): T64 and its variants, the earlier
//   shared-memory ranks whose numbers are below.
// Each run is checked against a float atomic reference (max |a - b| / max |b|).
//
// Measured on the H200 (session 11, 2026-12-01; docs/results/h200-v14-bucket-oneshot-micro.txt):
//   B22 2.28-2.31, B22r 2.41-2.42, K16 1.72-1.74, K16p 1.74-1.76 ms: the 16-bit key saves 0.56.
//   Bucket runs (earlier versions, same file's history): R3 4.71, R3w1 4.66-4.68, R5 5.31, R8
//   6.27, R12w1 6.99; 8 distinct rows' read-add-writes together (D3w1 5.08, D4w1 4.94) and two
//   warps a bucket of 32 features each (H3 5.28, HD3-HD6 5.86-6.31) are slower. The more warps an
//   SM the faster (10 warps: 4.71; 6: 6.27), and 16 KB of sums a warp caps them at 9-10: the run
//   loses 0.6-0.7 ms against the staged run's ~4.0 (6.46 one-shot - 2.45 build), more than the
//   sort saves. The bucket run is dead.
//   The second level instead (full sort, production's run unchanged): T64 2.26-2.28 against B22r
//   2.41-2.42, bitwise the same pairs and row offsets: -0.14 ms. T64a 0.526-0.528 ms for ~1.25
//   GB (~0.29 at 4.27 TB/s); T64c (3 barriers a bucket, warp ranges) 0.68-0.70, T64d 0.60, T64e
//   0.78: fewer threads a bucket do better, the chunked rank with 8 x 3 barriers is not the cost.
//   Later lines (same session): T64f/g 128 / 64 threads 0.544 / 0.577; T64h, the digit taken from
//   the pair instead of a key read, 0.504; T64i, cub::BlockRadixSort for the rank, 0.779 (512
//   threads: 0.899); C64, the same blocks copying their pairs without any rank, 0.253, and a
//   cudaMemcpyAsync of the pairs 0.238. So the block structure reaches copy speed and the rank
//   costs ~0.25 ms: with T64h the build would be ~1.74 + 0.50 = ~2.24 against 2.40 (-0.16).
//   The hub path those numbers lacked is now in the library (src/cuda/two_level_sort.cuh: count,
//   scan and place over 2048-edge chunks of big buckets), and the TL lines here run those kernels
//   on products-like and power-law. Not yet run on a GPU.
#include <cub/device/device_radix_sort.cuh>

#include <type_traits>

#include "../../src/cuda/two_level_sort.cuh"
#include "micro_harness.cuh"

using namespace micro;
constexpr int F = 64, kBucketBits = 6, kRows = 1 << kBucketBits, SE = 8;
int grid_for(i64 n) { return int(std::min<i64>((n + 255) / 256, 65535LL * 32)); }

struct Pair {
  int src;  // src | (dst & 63) << 26 (N < 2^26 here)
  int w;    // float bits
};

__global__ void init_pairs(const i64* src, const i64* dst, const float* w, unsigned* keys, Pair* pairs, i64 E) {
  for (i64 e = blockIdx.x * i64(blockDim.x) + threadIdx.x; e < E; e += i64(gridDim.x) * blockDim.x) {
    const unsigned d = unsigned(dst[e]);
    keys[e] = d;
    pairs[e] = Pair{int(pipelink::cuda::two_level::pack_src(unsigned(src[e]), d)), __float_as_int(w[e])};
  }
}
// Bucket offsets: micro::bucket_search (micro_harness.cuh).
__global__ void atomic_ref(const i64* src, const i64* dst, const float* w, const float* x, float* out, i64 E) {
  const i64 t = blockIdx.x * i64(blockDim.x) + threadIdx.x;
  const i64 e = t / F;
  if (e >= E) return;
  const int f = int(t % F);
  atomicAdd(out + dst[e] * F + f, tanhf(x[src[e] * F + f] * w[e]));
}

__device__ __forceinline__ void cp16(unsigned s, const void* g) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(s), "l"(g) : "memory");
}
__device__ __forceinline__ void commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
template <int N>
__device__ __forceinline__ void wait_groups() {
  asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory");
}

// A bucket of 64 rows is summed by 64 / FW warps, each owning FW of the 64 features (FW = 64: a
// lane owns features 2l, 2l + 1; FW = 32: feature l). Shared memory a warp: sums [64][FW] floats,
// then the ring: S stages of SE rows [SE][FW] floats and SE (local row, w) pairs.
// D (distinct): when a stage's 8 edges hit 8 different rows (p = 0.63 for 64 rows, uniform), the
// 8 read-add-writes issue together; otherwise they go one by one in edge order. Same adds, same
// order per row, so the same bits. R3 measured 4.71 ms without it: 10 warps an SM each waiting
// on a chain of 8 dependent shared-memory read-add-writes a stage.
template <int S, int FW>
__host__ __device__ constexpr int warp_smem() {
  return (kRows * FW + S * SE * FW) * 4 + S * SE * 8;
}
template <int S, int W, int FW, bool D>
__global__ void __launch_bounds__(W * 32) bucket_run(const int* __restrict__ bptr, const Pair* __restrict__ pairs,
                                                     const float* __restrict__ x, float* __restrict__ out, i64 N,
                                                     i64 buckets) {
  constexpr int VL = FW / 32, PE = FW / 4, EPC = 32 / PE, WPB = F / FW;  // floats a lane, pieces an edge, edges a copy step, warps a bucket
  using V = std::conditional_t<VL == 2, float2, float>;
  extern __shared__ __align__(16) unsigned char smem[];
  const int lane = threadIdx.x & 31, wib = threadIdx.x >> 5;
  const i64 b = (blockIdx.x * i64(W) + wib) / WPB;
  const int half = (blockIdx.x * W + wib) % WPB;  // which FW features of the row
  if (b >= buckets) return;
  float* const acc = reinterpret_cast<float*>(smem + wib * warp_smem<S, FW>());
  float* const ring = acc + kRows * FW;
  int2* const meta = reinterpret_cast<int2*>(ring + S * SE * FW);
  for (int i = lane; i < kRows * FW / 4; i += 32) reinterpret_cast<float4*>(acc)[i] = make_float4(0.f, 0.f, 0.f, 0.f);
  const int k0 = bptr[b], n = bptr[b + 1] - k0;
  const Pair* gp = pairs + k0;
  // LI copies: lane copies 16-byte piece (lane % PE) of edge EPC * c + lane / PE.
  const unsigned ring_s = static_cast<unsigned>(__cvta_generic_to_shared(ring)) +
                          unsigned(((lane / PE) * FW + (lane % PE) * 4) * 4);
  const char* const xq = reinterpret_cast<const char*>(x + half * FW + (lane % PE) * 4);
  Pair pnext{0, 0};
  if (lane < SE && lane < n) pnext = gp[lane];
  auto issue = [&](int j) {
    const int kb = j * SE;
    const Pair p = pnext;
    if (lane < SE && kb + SE + lane < n) pnext = gp[kb + SE + lane];
    if (kb < n) {
      const unsigned slot = ring_s + unsigned((j % S) * SE * FW * 4);
#pragma unroll
      for (int c = 0; c < SE / EPC; ++c) {
        const int e = c * EPC + lane / PE;
        const int sr = __shfl_sync(0xffffffffu, p.src, e) & ((1 << 26) - 1);
        if (kb + e < n) cp16(slot + unsigned(c * EPC * FW * 4), xq + i64(sr) * (F * 4));
      }
      if (lane < SE && kb + lane < n) meta[(j % S) * SE + lane] = make_int2(int(unsigned(p.src) >> 26), p.w);
    }
    commit();
  };
  auto tf = [](V v, float wt) {
    if constexpr (VL == 2) return make_float2(tanhf(v.x * wt), tanhf(v.y * wt));
    else return tanhf(v * wt);
  };
  auto add = [](V& a, V t) {
    if constexpr (VL == 2) {
      a.x += t.x;
      a.y += t.y;
    } else {
      a += t;
    }
  };
#pragma unroll
  for (int j = 0; j < S - 1; ++j) issue(j);
  __syncwarp();
  const int steps = (n + SE - 1) / SE;
  for (int j = 0; j < steps; ++j) {
    issue(j + S - 1);
    wait_groups<S - 1>();
    __syncwarp();
    const float* srow = ring + (j % S) * SE * FW;
    const int2* sm = meta + (j % S) * SE;
    const int m = min(SE, n - j * SE);
    if (m == SE) {
      V t[SE];
      int loc[SE];
      unsigned long long rows = 0;
#pragma unroll
      for (int q = 0; q < SE; ++q) {
        const int2 md = sm[q];
        t[q] = tf(reinterpret_cast<const V*>(srow + q * FW)[lane], __int_as_float(md.y));
        loc[q] = md.x;
        rows |= 1ull << md.x;
      }
      if (D && __popcll(rows) == SE) {  // warp-uniform: the rows come from shared memory
        V a[SE];
#pragma unroll
        for (int q = 0; q < SE; ++q) a[q] = reinterpret_cast<V*>(acc + loc[q] * FW)[lane];
#pragma unroll
        for (int q = 0; q < SE; ++q) {
          add(a[q], t[q]);
          reinterpret_cast<V*>(acc + loc[q] * FW)[lane] = a[q];
        }
      } else {
#pragma unroll
        for (int q = 0; q < SE; ++q) {  // in edge order: a row hit twice adds in that order
          V* a = reinterpret_cast<V*>(acc + loc[q] * FW) + lane;
          V s = *a;
          add(s, t[q]);
          *a = s;
        }
      }
    } else {
      for (int u = 0; u < m; ++u) {
        const int2 md = sm[u];
        V* a = reinterpret_cast<V*>(acc + md.x * FW) + lane;
        V s = *a;
        add(s, tf(reinterpret_cast<const V*>(srow + u * FW)[lane], __int_as_float(md.y)));
        *a = s;
      }
    }
    __syncwarp();
  }
  wait_groups<0>();
  __syncwarp();
  const i64 r0 = b * kRows;
  const int rows = int(min(i64(kRows), N - r0));
  for (int i = lane; i < rows * FW / 4; i += 32) {
    const int r = i / (FW / 4), c = i % (FW / 4);
    reinterpret_cast<float4*>(out + (r0 + r) * F + half * FW)[c] = reinterpret_cast<const float4*>(acc)[i];
  }
}

// ---- The library's two-level build (src/cuda/two_level_sort.cuh), hub buckets included ---------
// TL = init (dst & 63 in src's bits 26-31) + CUB on bits [6, end_bit) + bucket offsets, then the
// header's rank, count, scan and place kernels (see there). power-law (R-MAT, scale 21): its rows
// of > 2048 edges hold 22.8% of the edges; their buckets take ~2.3 extra passes over their own edges
// (count, then read and write), in parallel over chunks. Expected: products-like as T64h (no big
// buckets), ~2.24 against ~2.40 ms; power-law (21 key bits, 15 for CUB: two passes instead of
// three) ~0.1-0.2 ms under its production build. Not yet run (session 11).
namespace tl = pipelink::cuda::two_level;
constexpr int kCap = tl::kCap;
constexpr unsigned kSrcMask = tl::kSrcMask;

// One workload: production's build (init + one CUB sort on [0, end_bit) + row offsets) against TL,
// bitwise (pairs with src's digit bits cleared, and row offsets), then both timed.
void two_level_lines(const char* label, const i64* src, const i64* dst, const float* w, i64 N, i64 E, int end_bit) {
  const i64 B = (N + kRows - 1) / kRows;
  unsigned *ka, *kb;
  Pair *pa, *pb, *out;
  int *bptr, *rp_ref, *rp, *cnt;
  CK(cudaMalloc(&ka, E * 4));
  CK(cudaMalloc(&kb, E * 4));
  CK(cudaMalloc(&pa, E * 8));
  CK(cudaMalloc(&pb, E * 8));
  CK(cudaMalloc(&out, E * 8));
  CK(cudaMalloc(&bptr, (B + 1) * 4));
  CK(cudaMalloc(&rp_ref, (N + 1) * 4));
  CK(cudaMalloc(&rp, (N + 1) * 4));
  CK(cudaMalloc(&cnt, tl::scratch_ints(E) * 4));
  size_t tb_full = 0, tb_top = 0;
  {
    cub::DoubleBuffer<unsigned> k(ka, kb);
    cub::DoubleBuffer<Pair> p(pa, pb);
    CK(cub::DeviceRadixSort::SortPairs(nullptr, tb_full, k, p, std::uint32_t(E), 0, end_bit));
    CK(cub::DeviceRadixSort::SortPairs(nullptr, tb_top, k, p, std::uint32_t(E), kBucketBits, end_bit));
  }
  void* temp;
  CK(cudaMalloc(&temp, std::max(tb_full, tb_top)));
  cub::DoubleBuffer<unsigned> k(ka, kb);
  cub::DoubleBuffer<Pair> p(pa, pb);
  auto sort = [&](int lo, size_t tb) {
    init_pairs<<<grid_for(E), 256>>>(src, dst, w, ka, pa, E);
    k = cub::DoubleBuffer<unsigned>(ka, kb);
    p = cub::DoubleBuffer<Pair>(pa, pb);
    CK(cub::DeviceRadixSort::SortPairs(temp, tb, k, p, std::uint32_t(E), lo, end_bit));
  };
  auto production = [&] {
    sort(0, tb_full);
    bucket_search<<<grid_for(N + 1), 256>>>(k.Current(), E, N, 0, rp_ref);
  };
  auto rest = [&] {  // after the top-bits sort: the library's four kernels
    tl::launch<Pair>(p.Current(), bptr, N, E, cnt, out, rp, nullptr);
  };
  auto two_level = [&] {
    sort(kBucketBits, tb_top);
    bucket_search<<<grid_for(B + 1), 256>>>(k.Current(), E, B, kBucketBits, bptr);
    rest();
  };
  // The reference, then the check.
  production();
  CK(cudaDeviceSynchronize());
  std::vector<Pair> ref(E), got(E);
  std::vector<int> ref_rp(N + 1), got_rp(N + 1), hb(B + 1);
  CK(cudaMemcpy(ref.data(), p.Current(), E * 8, cudaMemcpyDeviceToHost));
  CK(cudaMemcpy(ref_rp.data(), rp_ref, (N + 1) * 4, cudaMemcpyDeviceToHost));
  CK(cudaMemset(out, 0xFF, E * 8));
  CK(cudaMemset(rp, 0xFF, (N + 1) * 4));
  two_level();
  CK(cudaDeviceSynchronize());
  CK(cudaGetLastError());
  CK(cudaMemcpy(got.data(), out, E * 8, cudaMemcpyDeviceToHost));
  CK(cudaMemcpy(got_rp.data(), rp, (N + 1) * 4, cudaMemcpyDeviceToHost));
  CK(cudaMemcpy(hb.data(), bptr, (B + 1) * 4, cudaMemcpyDeviceToHost));
  i64 bad = 0, bad_rp = 0, big = 0, big_edges = 0, largest = 0;
  for (i64 e = 0; e < E; ++e)
    bad += got[e].src != int(unsigned(ref[e].src) & kSrcMask) || got[e].w != ref[e].w;
  for (i64 r = 0; r <= N; ++r) bad_rp += got_rp[r] != ref_rp[r];
  for (i64 b = 0; b < B; ++b) {
    const i64 n = hb[b + 1] - hb[b];
    largest = std::max(largest, n);
    if (n > kCap) {
      ++big;
      big_edges += n;
    }
  }
  std::printf("%s: N=%lld E=%lld end_bit=%d, %lld buckets, %lld over %d edges holding %.1f%% of the edges (largest %lld); "
              "two-level against production: %lld pairs and %lld row offsets differ%s\n",
              label, (long long)N, (long long)E, end_bit, (long long)B, (long long)big, kCap,
              100.0 * double(big_edges) / double(E), (long long)largest, (long long)bad, (long long)bad_rp,
              bad || bad_rp ? "  ** MISMATCH **" : "");
  char name[96];
  std::snprintf(name, sizeof name, "P%d  %s: production build (init, %d-bit sort, row offsets)", end_bit, label, end_bit);
  report(name, timed(production));
  std::snprintf(name, sizeof name, "TL   %s: two-level build, hub buckets included", label);
  report(name, timed(two_level));
  std::snprintf(name, sizeof name, "TLr  %s: its four kernels after the sort", label);
  report(name, timed(rest));
  std::snprintf(name, sizeof name, "TLk  %s: rank_kernel alone (buckets of <= 2048 edges)", label);
  report(name, timed([&] { tl::rank_kernel<Pair><<<unsigned(B), tl::kThreads>>>(p.Current(), bptr, N, B, out, rp, cnt); }));
  CK(cudaFree(ka));
  CK(cudaFree(kb));
  CK(cudaFree(pa));
  CK(cudaFree(pb));
  CK(cudaFree(out));
  CK(cudaFree(bptr));
  CK(cudaFree(rp_ref));
  CK(cudaFree(rp));
  CK(cudaFree(cnt));
  CK(cudaFree(temp));
}

// R-MAT edges as src/core/graph.cpp's rmat_graph draws them (quadrants a, b, c, d; row = src,
// column = dst; no relabelling), from splitmix64 hashes instead of its generator.
__global__ void gen_rmat(i64* src, i64* dst, float* w, i64 E, int scale, double a, double b, double c,
                         std::uint64_t seed) {
  const auto th = [](double p) { return std::uint64_t(p * 4294967296.0); };
  const std::uint64_t ta = th(a), tab = th(a + b), tabc = th(a + b + c);
  for (i64 e = blockIdx.x * i64(blockDim.x) + threadIdx.x; e < E; e += i64(gridDim.x) * blockDim.x) {
    std::uint64_t row = 0, col = 0;
    for (int level = 0; level < scale; ++level) {
      const std::uint64_t r = mix(seed * 13 + std::uint64_t(e) * 64 + level) & 0xffffffffu;
      const bool pa = r >= ta, pb = r >= tab, pc = r >= tabc;
      row = (row << 1) | std::uint64_t(pb);
      col = (col << 1) | std::uint64_t(pa ^ pb ^ pc);
    }
    src[e] = i64(row);
    dst[e] = i64(col);
    w[e] = 2.f * unit(mix(seed * 7 + 2 + std::uint64_t(e))) - 1.f;
  }
}

template <int S, int W, int FW, bool D>
void run_line(const char* name, const int* bptr, const Pair* pairs, const float* x, float* out, i64 N, i64 B,
              std::vector<float>& host_a, const std::vector<float>& host_ref) {
  auto kernel = bucket_run<S, W, FW, D>;
  const int smem = W * warp_smem<S, FW>();
  CK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  int per_sm = 0;
  CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, W * 32, smem));
  const i64 warps = B * (F / FW);
  const int grid = int((warps + W - 1) / W);
  CK(cudaMemset(out, 0xFF, size_t(N) * F * 4));  // poison
  auto t = timed([&] { kernel<<<grid, W * 32, smem>>>(bptr, pairs, x, out, N, B); });
  CK(cudaMemcpy(host_a.data(), out, host_a.size() * 4, cudaMemcpyDeviceToHost));
  double md = 0, mr = 0;
  for (size_t i = 0; i < host_a.size(); ++i) {
    const double d = std::fabs(double(host_a[i]) - double(host_ref[i]));
    md = d > md || d != d ? d : md;  // NaN (an unwritten poisoned row) counts
    mr = std::max(mr, double(std::fabs(host_ref[i])));
  }
  char note[160];
  std::snprintf(note, sizeof note, "%d warps an SM, %d rows in flight a warp; max|d|/max|ref| %.2e%s", per_sm * W,
                (S - 1) * SE, md / mr, md / mr < 1e-5 ? "" : "  ** MISMATCH **");
  report(name, t, note);
}

int main(int argc, char** argv) {
  const i64 N = 2449029, E = argc > 1 ? std::atoll(argv[1]) : 61859140;
  const i64 B = (N + kRows - 1) / kRows;
  i64 *src, *dst;
  float *w, *x, *out, *ref;
  unsigned *ka, *kb;
  Pair *pa, *pb;
  int* bptr;
  CK(cudaMalloc(&src, E * 8));
  CK(cudaMalloc(&dst, E * 8));
  CK(cudaMalloc(&w, E * 4));
  CK(cudaMalloc(&x, N * F * 4));
  CK(cudaMalloc(&out, N * F * 4));
  CK(cudaMalloc(&ref, N * F * 4));
  CK(cudaMalloc(&ka, E * 4));
  CK(cudaMalloc(&kb, E * 4));
  CK(cudaMalloc(&pa, E * 8));
  CK(cudaMalloc(&pb, E * 8));
  CK(cudaMalloc(&bptr, (B + 1) * 4));
  gen_edges<<<2048, 256>>>(src, dst, w, E, N, 1);
  gen_x<<<2048, 256>>>(x, N * F, 1);
  CK(cudaMemset(ref, 0, N * F * 4));
  atomic_ref<<<int((E * F + 255) / 256), 256>>>(src, dst, w, x, ref, E);
  CK(cudaDeviceSynchronize());
  std::vector<float> host_ref(size_t(N) * F), host_a(size_t(N) * F);
  CK(cudaMemcpy(host_ref.data(), ref, host_ref.size() * 4, cudaMemcpyDeviceToHost));
  std::printf("N=%lld E=%lld F=%d buckets of %d rows: %lld\n", (long long)N, (long long)E, F, kRows, (long long)B);

  size_t temp_bytes = 0;
  {
    cub::DoubleBuffer<unsigned> k(ka, kb);
    cub::DoubleBuffer<Pair> p(pa, pb);
    CK(cub::DeviceRadixSort::SortPairs(nullptr, temp_bytes, k, p, std::uint32_t(E), 0, 22));
  }
  void* temp;
  CK(cudaMalloc(&temp, temp_bytes));
  auto sort = [&](int lo, int hi, cub::DoubleBuffer<unsigned>& k, cub::DoubleBuffer<Pair>& p) {
    init_pairs<<<grid_for(E), 256>>>(src, dst, w, ka, pa, E);
    k = cub::DoubleBuffer<unsigned>(ka, kb);
    p = cub::DoubleBuffer<Pair>(pa, pb);
    size_t tb = temp_bytes;
    CK(cub::DeviceRadixSort::SortPairs(temp, tb, k, p, std::uint32_t(E), lo, hi));
  };
  cub::DoubleBuffer<unsigned> k(ka, kb);
  cub::DoubleBuffer<Pair> p(pa, pb);
  report("B22  init + sort on 22 bits (production's)", timed([&] { sort(0, 22, k, p); }));
  report("K16  init + sort on bits [6, 22)", timed([&] { sort(kBucketBits, 22, k, p); }));
  report("K16p init + sort + bucket offsets", timed([&] {
           sort(kBucketBits, 22, k, p);
           bucket_search<<<grid_for(B + 1), 256>>>(k.Current(), E, B, kBucketBits, bptr);
         }));
  sort(kBucketBits, 22, k, p);
  bucket_search<<<grid_for(B + 1), 256>>>(k.Current(), E, B, kBucketBits, bptr);
  CK(cudaDeviceSynchronize());
  const Pair* sp = p.Current();
  // name, then <stages, warps a block, features a warp, distinct-row fast path>
  run_line<3, 1, 64, false>("R3w1  bucket run, 3 stages, 1 warp a block", bptr, sp, x, out, N, B, host_a, host_ref);

  // The two-level build with its hub path: products-like (these arrays), then power-law.
  CK(cudaFree(ka));
  CK(cudaFree(kb));
  CK(cudaFree(pa));
  CK(cudaFree(pb));
  CK(cudaFree(temp));
  CK(cudaFree(x));
  CK(cudaFree(out));
  CK(cudaFree(ref));
  two_level_lines("products-like", src, dst, w, N, E, 22);
  CK(cudaFree(src));
  CK(cudaFree(dst));
  CK(cudaFree(w));
  const i64 Np = i64(1) << 21, Ep = 63000000;
  CK(cudaMalloc(&src, Ep * 8));
  CK(cudaMalloc(&dst, Ep * 8));
  CK(cudaMalloc(&w, Ep * 4));
  gen_rmat<<<2048, 256>>>(src, dst, w, Ep, 21, 0.57, 0.19, 0.19, 1);
  CK(cudaDeviceSynchronize());
  two_level_lines("power-law", src, dst, w, Np, Ep, 21);
  return 0;
}
