// Standalone micro-benchmark (not part of the library build): can the planned run re-read x rows
// from L2 on a uniform random graph, if every SM sweeps the source space in step?
//
//   nvcc -O3 -std=c++20 -arch=sm_90 bench/micro/sweep_gather_micro.cu -o sgm && ./sgm [E]
//
// Data: products-like sizes (N = 2,449,029, E = 61,859,140 unless E is given, F = 64, float32,
// tanh, weights in plan order), uniform src/dst drawn on the device. Lines are
// `name  median_ms  (min..max)  note`, median of 10 after one warm-up.
//
// Why: the planned run gathers one 256-byte x row per edge, 15.8 GB on products-like, and a uniform
// graph gives it ~8% L2 hits (the 627 MB of x against a 60 MB L2). Its best form, weights in plan
// order, runs 4.41-4.65 ms; issue 3 asks for <= 4.0 and aims at 3.5 through L2 reuse.
// Here a block of 1024 threads (one per SM, 227 KB of shared memory) owns D = 896 destination rows
// and keeps their sums in shared memory; each 16-lane half-warp owns the rows j with j % 64 == h,
// so each sum has one owner and a fixed order (deterministic, no atomics). The edges of a
// half-warp are sorted by src. One wave of 132 blocks then holds 132 x 896 x 25 = ~3.0M edges, and
// all of them walk the sources from 0 to N together: a source row that two blocks of the wave
// need is fetched from DRAM once if they reach it within the L2's window (~60 MB of x rows is
// ~10% of the sweep). Count: distinct sources per wave 2.45M x (1 - e^-1.2) = 1.7M against 3.0M
// reads, so x from DRAM falls to ~0.57 x 15.8 = ~9 GB; with w 0.25, the indices 0.5 and the output
// 0.63 GB, ~10.4 GB, ~2.4 ms at 4.27 TB/s if memory bound. The kernel is ~36 warp instructions
// per edge of tanh alone, ~2.6 ms of issue at one instruction per cycle per scheduler, so
// expect ~3-3.5 ms if the waves stay in step, and the unsorted control near the planned run.
//
//   S0  the same kernel, each half-warp's edges in edge order (random src): the control
//   S1  sorted by src, one launch over all blocks (waves form as blocks retire)
//   S2  sorted by src, one launch per wave of (SMs) blocks (the waves start together)
//   S3-S6 more rows in flight, w gathered through the edge id, 16 src bands, 2 blocks an SM
//   S7/S8 16 owners a block (warp pairs), so that the key fits two CUB passes: edge order / bands
//   S9    S5/S6 with the w gather software-pipelined one chunk ahead (the planned run's w order)
// S1 and S2 are compared with S0 (max|a - b| / max|b|, different summation order).
#include <cub/device/device_radix_sort.cuh>

#include "micro_harness.cuh"

using namespace micro;
constexpr int F = 64;

// Sort key: (segment = block * H + owner half-warp) << 32 | src >> shift; value: edge id. shift 32:
// segments only (edge order kept inside each), 0: segments then src, 18: 16 bands of src.
__global__ void make_keys(const i64* src, const i64* dst, std::uint64_t* key, int* id, i64 E, int D, int H, int shift) {
  for (i64 e = blockIdx.x * i64(blockDim.x) + threadIdx.x; e < E; e += i64(gridDim.x) * blockDim.x) {
    const i64 d = dst[e], b = d / D, loc = d - b * D;
    key[e] = (std::uint64_t(b * H + loc % H) << 32) | (shift >= 32 ? 0 : std::uint64_t(src[e]) >> shift);
    id[e] = int(e);
  }
}
__global__ void gather_plan(const int* id, const i64* src, const i64* dst, const float* w, int* s_src, int* s_loc,
                            float* s_w, i64 E, int D) {
  for (i64 i = blockIdx.x * i64(blockDim.x) + threadIdx.x; i < E; i += i64(gridDim.x) * blockDim.x) {
    const i64 e = id[i];
    s_src[i] = int(src[e]);
    s_loc[i] = int(dst[e] % D);
    s_w[i] = w[e];
  }
}
// seg_ptr[s] = first position whose segment is >= s.
__global__ void seg_search(const std::uint64_t* key, i64 E, i64 S, int* seg_ptr) {
  for (i64 s = blockIdx.x * i64(blockDim.x) + threadIdx.x; s <= S; s += i64(gridDim.x) * blockDim.x) {
    i64 lo = 0, hi = E;
    while (lo < hi) {
      const i64 mid = (lo + hi) / 2;
      if (i64(key[mid] >> 32) < s) lo = mid + 1;
      else hi = mid;
    }
    seg_ptr[s] = int(lo);
  }
}

// T threads (T / 16 owner half-warps), D rows a block, U x rows in flight per half-warp. WG: the
// weights gathered through the edge id (w in edge order, the protocol's planned run) instead of
// read in plan order. WP (with WG): the gather software-pipelined one 16-edge chunk ahead.
template <int T, int U, bool WG, bool WP = false>
__global__ void __launch_bounds__(T, 1024 / T) sweep_kernel(const int* __restrict__ seg_ptr, const int* __restrict__ s_src,
                                                            const int* __restrict__ s_loc, const float* __restrict__ s_w,
                                                            const int* __restrict__ s_id, const float* __restrict__ w,
                                                            const float* __restrict__ x, float* __restrict__ out, i64 N,
                                                            int D, int block0) {
  extern __shared__ float4 acc[];  // D rows x 16 float4
  constexpr int H = T / 16;
  const i64 b = block0 + blockIdx.x, row0 = b * D;
  for (int i = threadIdx.x; i < D * 16; i += T) acc[i] = make_float4(0.f, 0.f, 0.f, 0.f);
  __syncthreads();
  const int lane = threadIdx.x % 32, half = lane / 16, gl = lane % 16;
  const i64 seg = b * H + threadIdx.x / 16;
  const int beg = seg_ptr[seg], len = seg_ptr[seg + 1] - beg;
  const int n = max(len, __shfl_xor_sync(0xffffffffu, len, 16));
  // WP: the next chunk's indices are loaded before this chunk's work and its weights gathered
  // after it, so neither the id load nor the dependent w load stands in front of the x loads.
  int ns = 0, nl = -1, nid = 0;
  float nw = 0.f;
  if constexpr (WP) {
    if (gl < len) ns = s_src[beg + gl], nl = s_loc[beg + gl], nw = w[s_id[beg + gl]];
  }
  for (int i = 0; i < n; i += 16) {
    // Lane gl holds edge i + gl of its half's list; the 16 are passed round by shuffles.
    const bool ok = i + gl < len;
    int ms, ml;
    float mw;
    if constexpr (WP) {
      ms = ns, ml = nl, mw = nw;
      const bool nok = i + 16 + gl < len;
      ns = nok ? s_src[beg + i + 16 + gl] : 0, nl = nok ? s_loc[beg + i + 16 + gl] : -1;
      nid = nok ? s_id[beg + i + 16 + gl] : -1;
    } else {
      ms = ok ? s_src[beg + i + gl] : 0, ml = ok ? s_loc[beg + i + gl] : -1;
      mw = ok ? (WG ? w[s_id[beg + i + gl]] : s_w[beg + i + gl]) : 0.f;
    }
#pragma unroll
    for (int u0 = 0; u0 < 16; u0 += U) {
      float4 v[U];
      float wt[U];
      int loc[U];
#pragma unroll
      for (int u = 0; u < U; ++u) {
        const int s = __shfl_sync(0xffffffffu, ms, half * 16 + u0 + u);
        loc[u] = __shfl_sync(0xffffffffu, ml, half * 16 + u0 + u);
        wt[u] = __shfl_sync(0xffffffffu, mw, half * 16 + u0 + u);
        v[u] = ldg4(x + i64(s) * F + gl * 4);
      }
#pragma unroll
      for (int u = 0; u < U; ++u)
        if (loc[u] >= 0) {
          const float4 t = tanh4(v[u], wt[u]);
          float4& a = acc[loc[u] * 16 + gl];
          a.x += t.x;
          a.y += t.y;
          a.z += t.z;
          a.w += t.w;
        }
    }
    if constexpr (WP) nw = nid >= 0 ? w[nid] : 0.f;
  }
  __syncthreads();
  for (int i = threadIdx.x; i < D * 16; i += T)
    if (row0 + i / 16 < N) reinterpret_cast<float4*>(out + (row0 + i / 16) * F)[i % 16] = acc[i];
}

// 16 owners a block (a key of (block, owner) fits 16 bits at products-like's N: 2734 x 16 =
// 43.7K, two CUB passes): an owner is a pair of warps, each warp one float of 32 features an edge,
// one edge a step, U edges' loads in flight per warp.
template <int U>
__global__ void __launch_bounds__(1024, 1) pair_kernel(const int* __restrict__ seg_ptr, const int* __restrict__ s_src,
                                                       const int* __restrict__ s_loc, const float* __restrict__ s_w,
                                                       const int* __restrict__ s_id, const float* __restrict__ w,
                                                       const float* __restrict__ x, float* __restrict__ out, i64 N, int D,
                                                       int block0) {
  extern __shared__ float acc1[];  // D rows x 64 floats
  constexpr int H = 16;
  const i64 b = block0 + blockIdx.x, row0 = b * D;
  for (int i = threadIdx.x; i < D * F; i += 1024) acc1[i] = 0.f;
  __syncthreads();
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, f = (warp & 1) * 32 + lane;
  const i64 seg = b * H + warp / 2;
  const int beg = seg_ptr[seg], len = seg_ptr[seg + 1] - beg;
  for (int i = 0; i < len; i += 32) {
    const bool ok = i + lane < len;
    const int ms = ok ? s_src[beg + i + lane] : 0, ml = ok ? s_loc[beg + i + lane] : -1;
    const float mw = ok ? s_w[beg + i + lane] : 0.f;
    const int m = min(32, len - i);
    for (int u0 = 0; u0 < m; u0 += U) {
      float v[U], wt[U];
      int loc[U];
#pragma unroll
      for (int u = 0; u < U; ++u) {
        const int s = __shfl_sync(0xffffffffu, ms, (u0 + u) & 31);
        loc[u] = __shfl_sync(0xffffffffu, ml, (u0 + u) & 31);
        wt[u] = __shfl_sync(0xffffffffu, mw, (u0 + u) & 31);
        v[u] = u0 + u < m ? __ldg(x + i64(s) * F + f) : 0.f;
      }
#pragma unroll
      for (int u = 0; u < U; ++u)
        if (u0 + u < m) acc1[loc[u] * F + f] += tanhf(v[u] * wt[u]);
    }
  }
  __syncthreads();
  for (int i = threadIdx.x; i < D * 16; i += 1024)
    if (row0 + i / 16 < N) reinterpret_cast<float4*>(out + (row0 + i / 16) * F)[i % 16] =
        reinterpret_cast<const float4*>(acc1)[i];
}

int main(int argc, char** argv) {
  const i64 N = 2449029, E = edge_count_arg(argc, argv);
  if (E < 0) return 2;
  cudaDeviceProp prop{};
  CK(cudaGetDeviceProperties(&prop, 0));
  std::printf("device %s, %d SMs, L2 %d MB; N=%lld E=%lld F=%d\n", prop.name, prop.multiProcessorCount,
              prop.l2CacheSize >> 20, (long long)N, (long long)E, F);
  i64 *src = dalloc<i64>(E), *dst = dalloc<i64>(E);
  float *w = dalloc<float>(E), *x = dalloc<float>(N * F);
  gen_edges<<<2048, 256>>>(src, dst, w, E, N, 1);
  gen_x<<<2048, 256>>>(x, N * F, 1);
  std::uint64_t *k_in = dalloc<std::uint64_t>(E), *k_out = dalloc<std::uint64_t>(E);
  int *id_in = dalloc<int>(E), *id_out = dalloc<int>(E), *seg_ptr = dalloc<int>(N + 1);
  int *s_src = dalloc<int>(E), *s_loc = dalloc<int>(E);
  float* s_w = dalloc<float>(E);
  float *ref = dalloc<float>(N * F), *out = dalloc<float>(N * F);
  std::size_t tb = 0;
  CK(cub::DeviceRadixSort::SortPairs(nullptr, tb, k_in, k_out, id_in, id_out, E, 0, 64));
  void* temp = dalloc<char>(i64(tb));
  int D = 0, H = 0;
  i64 blocks = 0;
  auto build = [&](int d, int h, int shift) {
    D = d, H = h, blocks = (N + D - 1) / D;
    make_keys<<<2048, 256>>>(src, dst, k_in, id_in, E, D, H, shift);
    CK(cub::DeviceRadixSort::SortPairs(temp, tb, k_in, k_out, id_in, id_out, E, 0, 32 + 18));
    gather_plan<<<2048, 256>>>(id_out, src, dst, w, s_src, s_loc, s_w, E, D);
    seg_search<<<2048, 256>>>(k_out, E, blocks * H, seg_ptr);
    CK(cudaDeviceSynchronize());
  };
  // One launch over all blocks; wave > 0: one launch per `wave` blocks (the waves start together).
  auto run = [&](auto kernel, int threads, float* o, i64 wave = 0) {
    const int smem = D * 256;
    CK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    const i64 step = wave > 0 ? wave : blocks;
    for (i64 b0 = 0; b0 < blocks; b0 += step)
      kernel<<<unsigned(std::min(step, blocks - b0)), threads, smem>>>(seg_ptr, s_src, s_loc, s_w, id_out, w, x, o, N, D,
                                                                     int(b0));
  };
  char note[128];
  auto line = [&](const char* name, auto kernel, int threads, i64 wave = 0) {
    CK(cudaMemset(out, 0xff, N * F * 4));
    auto t = timed([&] { run(kernel, threads, out, wave); });
    std::snprintf(note, sizeof note, "D=%d, %lld blocks; max|a-b|/max|b| vs S0 %.2e", D, (long long)blocks,
                  max_rel_diff(out, ref, N * F));
    report(name, t, note, 56);
  };
  build(896, 64, 32);
  report("S0 control: each half-warp's edges in edge order", timed([&] { run(sweep_kernel<1024, 4, false>, 1024, ref); }),
         "1024 threads, D=896, U=4", 56);
  line("S0g control, w gathered through the edge id", sweep_kernel<1024, 4, true>, 1024);
  build(896, 64, 0);
  line("S1 sorted by src, 1024 thr U=4", sweep_kernel<1024, 4, false>, 1024);
  line("S2 sorted by src, one launch per wave", sweep_kernel<1024, 4, false>, 1024, prop.multiProcessorCount);
  line("S3 sorted by src, 1024 thr U=8", sweep_kernel<1024, 8, false>, 1024);
  line("S5 sorted by src, w gathered through the edge id", sweep_kernel<1024, 4, true>, 1024);
  line("S5b the same, U=8", sweep_kernel<1024, 8, true>, 1024);
  line("S9a S5 with the w gather one chunk ahead", sweep_kernel<1024, 4, true, true>, 1024);
  build(896, 64, 18);
  line("S6 16 src bands (key: segment, src >> 18)", sweep_kernel<1024, 4, false>, 1024);
  line("S6g the same, w gathered through the edge id", sweep_kernel<1024, 4, true>, 1024);
  line("S9 S6 with the w gather one chunk ahead", sweep_kernel<1024, 4, true, true>, 1024);
  build(896, 16, 32);
  line("S7 16 owners (warp pairs), edge order, U=8", pair_kernel<8>, 1024);
  line("S7b the same, U=16", pair_kernel<16>, 1024);
  build(896, 16, 18);
  line("S8 16 owners, 16 src bands, U=8", pair_kernel<8>, 1024);
  line("S8b the same, U=16", pair_kernel<16>, 1024);
  build(448, 32, 0);
  line("S4 512 thr x 2 blocks/SM, D=448, U=8", sweep_kernel<512, 8, false>, 512);
  line("S4g the same, w gathered through the edge id", sweep_kernel<512, 8, true>, 512);
  std::printf("done\n");
  return 0;
}
