// Standalone micro-benchmark (not part of the library build): can the lean path (zero scratch,
// float atomics) keep the output rows it adds into in L2 by sweeping destination ranges?
//
//   nvcc -O3 -std=c++20 -arch=sm_90 bench/micro/lean_passes_micro.cu -o lpm && ./lpm [E]
//
// Data: products-like sizes (N = 2,449,029, E = 61,859,140 unless E is given, F = 64, float32,
// tanh, weights), src/dst int32 uniform in [0, N) (the C++ bench's index type), drawn on the
// device. Every line is `name  median_ms  (min..max)  note`, median of 10 after one warm-up;
// out is zeroed inside every rep (cudaMemsetAsync, 627 MB, ~0.16 ms).
//
// Why: the production lean kernel (one pass over the edges, 16 lanes an edge, one float4
// atomicAdd per lane) ran 13.83 ms on products-like. Its traffic: x rows 15.8 GB, and each
// edge's 256-byte output row read and written back from DRAM (the 627 MB output does not fit
// the 50 MB L2: ~90% misses), ~47 GB in all, 11.1 ms at the 4.27 TB/s copy bandwidth.
// With P passes, pass p adds only the edges whose destination lies in rows [N p / P, N (p+1) / P):
// the touched output (627 / P MB) can stay in L2, at the cost of reading dst P times (0.25 GB
// each) and src/w sectors once per pass that has an edge in them. At P = 16: dst 4 GB + src/w
// ~3.2 GB + x 15.8 GB + out 1.3 GB = ~24 GB, ~5.7 ms at copy bandwidth.
//
// Session 3 measured passes and found them worse at every count (1 / 2 / 4 / 8 / 16 passes:
// 13.8 / 14.2 / 15.1 / 19.8 / 32.1 ms), with a kernel whose 16-lane groups each read their own
// U destinations and skipped the misses: at P = 16 a group did its full index loop for one
// edge in 16, so the x gathers had little in flight. Here a warp reads 256 destinations per
// step, coalesced (one per lane, 8 steps), compacts the hits into a shared-memory queue
// (ballot + popc, edge order kept), and sums the queue 32 edges at a time with 4 x rows in
// flight per 16-lane group, as the one-pass kernel does.
//
//   L0   one pass, the production kernel's shape (int32 indices)
//   Q1   the queued kernel, one pass (what the compaction costs)
//   QP   the queued kernel, P passes (one launch each)
//   QPh  the same, x loads with an L2 evict_first hint (the x rows stream; the output stays)
// Each line is checked against L0: max|a - b| / max|b| < 1e-5 -> OK / MISMATCH (float atomics
// add in any order).
#include "micro_harness.cuh"

#include <cmath>
#include <vector>

using namespace micro;
using i32 = std::int32_t;
constexpr int F = 64;

__global__ void narrow(const i64* a, i32* b, i64 n) {
  for (i64 i = blockIdx.x * i64(blockDim.x) + threadIdx.x; i < n; i += i64(gridDim.x) * blockDim.x) b[i] = i32(a[i]);
}

// sm_90's vector reduction with an L2 eviction-priority hint (PTX ISA: red.add.level::cache_hint.v4.f32).
__device__ __forceinline__ void red4_hint(float* p, float4 v, std::uint64_t pol) {
  asm volatile("red.global.add.L2::cache_hint.v4.f32 [%0], {%1,%2,%3,%4}, %5;" ::"l"(p), "f"(v.x), "f"(v.y), "f"(v.z),
               "f"(v.w), "l"(pol)
               : "memory");
}

// L0: micro::lean_base<i32> (micro_harness.cuh), the production one-pass kernel's shape.

// The queued kernel: a persistent warp reads tiles of 256 destinations (8 coalesced steps),
// queues the edges whose destination is in [lo, hi), and sums the queue 32 at a time.
constexpr int kTile = 256, kWarps = 8;
// HINT 1: x loads evict_first; HINT 2: and the reductions evict_last.
template <int HINT>
__global__ void __launch_bounds__(kWarps * 32) lean_queued(const i32* __restrict__ src, const i32* __restrict__ dst,
                                                           const float* __restrict__ x, const float* __restrict__ w,
                                                           float* __restrict__ out, i64 E, i32 lo, i32 hi) {
  __shared__ i32 qe[kWarps][64], qd[kWarps][64];
  const int lane = threadIdx.x % 32, wib = threadIdx.x / 32, group = lane / 16, gl = lane % 16;
  const std::uint64_t pol = HINT ? policy_evict_first() : 0, keep = HINT == 2 ? policy_evict_last() : 0;
  i32* const e_q = qe[wib];
  i32* const d_q = qd[wib];
  int cnt = 0;
  auto sum = [&](int n) {  // the first n <= 32 queued edges
    i32 s = 0, d = 0;
    float wt = 0.f;
    if (lane < n) {
      const i32 e = e_q[lane];
      d = d_q[lane];
      s = __ldg(src + e);
      wt = __ldg(w + e);
    }
    for (int t0 = 0; t0 < n; t0 += 8) {
      float4 v[4];
      i32 dr[4];
      float ww[4];
      bool live[4];
#pragma unroll
      for (int u = 0; u < 4; ++u) {
        const int t = t0 + u * 2 + group;
        const i32 sr = __shfl_sync(0xffffffffu, s, t & 31);
        dr[u] = __shfl_sync(0xffffffffu, d, t & 31);
        ww[u] = __shfl_sync(0xffffffffu, wt, t & 31);
        live[u] = t < n;
        const float* p = x + i64(sr) * F + gl * 4;
        v[u] = live[u] ? (HINT ? ldg4_hint(p, pol) : ldg4(p)) : make_float4(0.f, 0.f, 0.f, 0.f);
      }
#pragma unroll
      for (int u = 0; u < 4; ++u)
        if (live[u]) {
          float* o = out + i64(dr[u]) * F + gl * 4;
          if (HINT == 2) red4_hint(o, tanh4(v[u], ww[u]), keep);
          else atomicAdd(reinterpret_cast<float4*>(o), tanh4(v[u], ww[u]));
        }
    }
  };
  const i64 warp = blockIdx.x * i64(kWarps) + wib, warps = i64(gridDim.x) * kWarps;
  for (i64 base = warp * kTile; base < E; base += warps * kTile) {
#pragma unroll
    for (int i = 0; i < kTile / 32; ++i) {
      const i64 e = base + i * 32 + lane;
      const i32 d = e < E ? dst[e] : -1;
      const bool in = d >= lo && d < hi;
      const unsigned m = __ballot_sync(0xffffffffu, in);
      if (in) {
        const int pos = cnt + __popc(m & ((1u << lane) - 1u));
        e_q[pos] = i32(e);
        d_q[pos] = d;
      }
      cnt += __popc(m);
      if (cnt >= 32) {
        __syncwarp();
        sum(32);
        __syncwarp();
        const int rest = cnt - 32;  // < 32: move it to the front
        i32 re = 0, rd = 0;
        if (lane < rest) {
          re = e_q[32 + lane];
          rd = d_q[32 + lane];
        }
        __syncwarp();
        if (lane < rest) {
          e_q[lane] = re;
          d_q[lane] = rd;
        }
        cnt = rest;
        __syncwarp();
      }
    }
  }
  __syncwarp();
  if (cnt > 0) sum(cnt);
}

int main(int argc, char** argv) {
  const i64 N = 2449029, E = micro::edge_count_arg(argc, argv);
  if (E < 0) return 1;
  cudaDeviceProp prop{};
  CK(cudaGetDeviceProperties(&prop, 0));
  const int SM = prop.multiProcessorCount;
  std::printf("device %s, %d SMs, L2 %d MB (persisting max %d MB); N=%lld E=%lld F=%d\n", prop.name, SM,
              prop.l2CacheSize >> 20, prop.persistingL2CacheMaxSize >> 20, (long long)N, (long long)E, F);
  i64 *s64 = dalloc<i64>(E), *d64 = dalloc<i64>(E);
  float* w = dalloc<float>(E);
  gen_edges<<<SM * 16, 256>>>(s64, d64, w, E, N, 1);
  i32 *src = dalloc<i32>(E), *dst = dalloc<i32>(E);
  narrow<<<SM * 16, 256>>>(s64, src, E);
  narrow<<<SM * 16, 256>>>(d64, dst, E);
  CK(cudaDeviceSynchronize());
  CK(cudaFree(s64));
  CK(cudaFree(d64));
  const auto [x, out, ref, out_bytes] = lean_rows(N, F, SM * 16);
  auto check = [&](const char* name) {
    const double r = max_rel_diff(out, ref, N * F);
    std::printf("  %s: %s (max|a-b|/max|b| = %.3g vs L0)\n", name, r < 1e-5 ? "OK" : "MISMATCH", r);
  };
  report("memset out alone", timed([&] { CK(cudaMemsetAsync(out, 0, out_bytes)); }), "included in every line");
  const unsigned grid0 = unsigned(std::min<i64>((E * 16 + 255) / 256, i64(65535) * 32));
  report("L0 one pass, production shape", timed([&] {
           CK(cudaMemsetAsync(out, 0, out_bytes));
           lean_base<i32><<<grid0, 256>>>(src, dst, x, w, out, E);
         }));
  CK(cudaMemcpy(ref, out, out_bytes, cudaMemcpyDeviceToDevice));
  int occ = 0;
  CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&occ, lean_queued<0>, kWarps * 32, 0));
  const int grid = SM * occ;
  std::printf("queued kernel: %d blocks/SM of %d threads, grid %d\n", occ, kWarps * 32, grid);
  char name[96];
  // mode 0: no hints, 1: x evict_first, 2: and reductions evict_last, 3: mode 1 plus a persisting
  // L2 access-policy window on the pass's output rows (launch attribute; limit set to the max).
  const char* mode_name[] = {"", ", x evict_first", ", x evict_first, red evict_last", ", x evict_first, out window persisting"};
  // Phase 0: the L2 as the process finds it (no persisting carve-out): modes 0-2. Phase 1: the
  // persisting carve-out set to its maximum (cudaLimitPersistingL2CacheSize, device-wide), modes
  // 2-3, then L0 again to show what the carve-out does to a kernel that does not ask for it.
  for (int phase = 0; phase < 2; ++phase) {
    if (phase == 1) CK(cudaDeviceSetLimit(cudaLimitPersistingL2CacheSize, std::size_t(prop.persistingL2CacheMaxSize)));
    const int Ps[] = {1, 8, 12, 16, 24, 32};
    for (int P : Ps) {
      for (int mode = phase ? 2 : 0; mode < (phase ? 4 : 3); ++mode) {
        if ((mode && P == 1) || (phase && (P < 12 || P > 16))) continue;
        std::snprintf(name, sizeof name, "%sQ%d, %d pass%s%s", phase ? "[carve-out] " : "", P, P, P > 1 ? "es" : "",
                      mode_name[mode]);
      report(name, timed([&] {
                 CK(cudaMemsetAsync(out, 0, out_bytes));
                 for (int p = 0; p < P; ++p) {
                   const i32 lo = i32(N * p / P), hi = i32(N * (p + 1) / P);
                   if (mode == 3) {
                     cudaLaunchConfig_t cfg{};
                     cfg.gridDim = dim3(grid);
                     cfg.blockDim = dim3(kWarps * 32);
                     cudaLaunchAttribute at{};
                     at.id = cudaLaunchAttributeAccessPolicyWindow;
                     at.val.accessPolicyWindow.base_ptr = out + i64(lo) * F;
                     at.val.accessPolicyWindow.num_bytes =
                         std::min<std::size_t>(std::size_t(hi - lo) * F * sizeof(float), std::size_t(prop.accessPolicyMaxWindowSize));
                     at.val.accessPolicyWindow.hitRatio = std::min(1.f, float(prop.persistingL2CacheMaxSize) /
                                                                        float(at.val.accessPolicyWindow.num_bytes));
                     at.val.accessPolicyWindow.hitProp = cudaAccessPropertyPersisting;
                     at.val.accessPolicyWindow.missProp = cudaAccessPropertyStreaming;
                     cfg.attrs = &at;
                     cfg.numAttrs = 1;
                     CK(cudaLaunchKernelEx(&cfg, lean_queued<1>, src, dst, x, w, out, E, lo, hi));
                   } else if (mode == 2) {
                     lean_queued<2><<<grid, kWarps * 32>>>(src, dst, x, w, out, E, lo, hi);
                   } else if (mode == 1) {
                     lean_queued<1><<<grid, kWarps * 32>>>(src, dst, x, w, out, E, lo, hi);
                   } else {
                     lean_queued<0><<<grid, kWarps * 32>>>(src, dst, x, w, out, E, lo, hi);
                   }
                 }
               }),
               "");
        check(name);
      }
    }
  }
  report("[carve-out] L0 one pass, production shape", timed([&] {
           CK(cudaMemsetAsync(out, 0, out_bytes));
           lean_base<i32><<<grid0, 256>>>(src, dst, x, w, out, E);
         }));
  CK(cudaDeviceSetLimit(cudaLimitPersistingL2CacheSize, 0));
  CK(cudaCtxResetPersistingL2Cache());
  return 0;
}
