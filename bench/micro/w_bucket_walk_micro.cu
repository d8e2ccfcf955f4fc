// Standalone micro-benchmark (not part of the library build): can the planned walk read its
// weights from the w permutation's pass-1 layout (each bucket's region of T = 49152 plan
// positions, in tile order inside it) instead of pass 2's plan-order copy?
//
//   nvcc -O3 -std=c++20 -arch=sm_90 bench/micro/w_bucket_walk_micro.cu -o wbw && ./wbw [E]
//   (gpu-check: MICRO=w_bucket_walk_micro.cu)
//
// Why (docs/perf-notes.md v38 Next 4, v43): on products-like the planned call is the permutation's
// two passes (~0.42-0.46 ms) plus the plan-order walk (3.90 ms); the walk moves the protocol's
// bytes at ~104-106% of copy bandwidth, and 9% fewer instructions a stage bought nothing (v43), so
// the ≤ 4.0 ms target needs fewer bytes. Pass 2 reads each bucket's region (4 B an edge), the
// packed lidx (column 4 + high byte 1) and writes plan order (4): ~13 B an edge, ~0.8 GB. Fused,
// the walk would read w at scratch[bucket + lidx(p)] (lidx's bytes: the column it reads anyway,
// plus the high byte, 1 B an edge): pass 2 gone, if the bucket-local reads hit L2. The risk: a
// bucket's 192 KB is read by ~48 warps of 1024-edge groups over each one's ~0.28 ms life while x
// streams ~4 MB/us through the 60 MB L2, so a 32-byte sector's 8 weights, read ~35 us apart, may
// come from DRAM again each time (the gather's cost: ~1.2 GB more than plan order).
//
// The walk here is the library's staged walk reduced to its memory traffic: a warp a group of C
// consecutive plan positions, x rows copied into a 3-stage shared-memory ring with 16-byte
// cp.async (8 edges a stage), the weight of each edge by a 4-byte cp.async, rows of 25 edges
// (products-like's mean degree) written as one 256-byte store each. Sources are uniform random,
// as products-like's are (PROTOCOL.md), over its N; the sum a plain FMA (the library's tanh
// makes its walk costlier, not its bytes). Groups launch in plan order, as the library's do on
// products-like (its plans have no split or long rows, so they build no item order: v41).
// Lines (median of 10 after a warm-up):
//   walk, no w                          x and the rows only: the floor of the walk's bytes
//   walk, w in plan order               w[p]: the walk after pass 2 (today's planned call)
//   walk, w bucket-local                w[b0 + lidx(p)], lidx a fixed scatter inside the bucket,
//                                       plus the 1-byte high-lidx read: the fused walk
//   walk, w gathered                    w[random id]: the gather (the floor without a permutation)
//   ... w evict_last                    bucket-local, the weights' copies with an L2 evict_last policy
//   ... w last, x first                 and the x copies evict_first (gives up x's L2 reuse)
//     (the hinted lines last, each with persisting lines reset first; once with no L2 set-aside
//      for persisting accesses, the default, and once with the device's maximum)
//   pass 2 (emulated)                   a block per bucket: region into shared memory, out through
//                                       lidx (column + high byte): what the fusion saves
// Each walk line for C = 1024 (products-like's chunk) and C = 256 (groups that finish a bucket
// sooner). The fusion pays if (bucket-local - plan order) < pass 2.
#include "micro_harness.cuh"

namespace {

using micro::i64;
using u32 = std::uint32_t;
using u8 = std::uint8_t;

constexpr int F = 64, SE = 8, S = 3, W = 2, kT = 49152, kRow = 25;
constexpr u32 kScatter = 40507;  // odd and not a multiple of 3: a permutation of [0, 49152)

enum WMode { kNone, kPlan, kBucket, kBucketLast, kBucketLastXFirst, kGather };

__device__ __forceinline__ void cp16(unsigned s, const void* g) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(s), "l"(g) : "memory");
}
__device__ __forceinline__ void cp16_hint(unsigned s, const void* g, std::uint64_t pol) {
  asm volatile("cp.async.cg.shared.global.L2::cache_hint [%0], [%1], 16, %2;" ::"r"(s), "l"(g), "l"(pol) : "memory");
}
__device__ __forceinline__ void cp4(unsigned s, const void* g) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4;" ::"r"(s), "l"(g) : "memory");
}
__device__ __forceinline__ void cp4_hint(unsigned s, const void* g, std::uint64_t pol) {
  asm volatile("cp.async.ca.shared.global.L2::cache_hint [%0], [%1], 4, %2;" ::"r"(s), "l"(g), "l"(pol) : "memory");
}
__device__ __forceinline__ void commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
template <int N>
__device__ __forceinline__ void wait_group() {
  asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory");
}

// Plan position p's place in its bucket's region: a fixed scatter inside a full bucket (the last,
// shorter bucket reads in order), moved by the high byte as lidx's would move it (so not quite a
// permutation: some places are read twice; the same bytes a sector either way).
__device__ __forceinline__ i64 bucket_index(i64 p, u32 hi, i64 E) {
  const i64 b0 = p / kT * kT;
  if (E - b0 < kT) return p;
  return b0 + i64((u32(p - b0) * kScatter + (hi << 8)) % u32(kT));
}

template <int WM>
__global__ void __launch_bounds__(W * 32, 32 / W)
    walk(const u32* __restrict__ src, const u8* __restrict__ hi, const float* __restrict__ x,
         const float* __restrict__ w, float* __restrict__ out, i64 E, i64 C) {
  __shared__ __align__(16) float rows[W][S * SE * F];
  __shared__ float wts[W][S * SE];
  const int lane = threadIdx.x & 31, wib = threadIdx.x >> 5;
  const i64 g = blockIdx.x * i64(W) + wib, k0 = g * C;
  if (k0 >= E) return;
  const int n = int(E - k0 < C ? E - k0 : C);
  std::uint64_t pol_w = 0, pol_x = 0;
  if constexpr (WM == kBucketLast || WM == kBucketLastXFirst) pol_w = micro::policy_evict_last();
  if constexpr (WM == kBucketLastXFirst) pol_x = micro::policy_evict_first();
  const unsigned rows_s = static_cast<unsigned>(__cvta_generic_to_shared(&rows[wib][0]));
  const unsigned wts_s = static_cast<unsigned>(__cvta_generic_to_shared(&wts[wib][0]));
  auto issue = [&](int j) {  // stage j: edges k0 + j*SE ...
    const int e0 = j * SE, slot = j % S;
    if (e0 < n) {
      const int e = e0 + (lane < SE ? lane : 0);
      const u32 my_src = e < n ? __ldg(src + k0 + e) : 0u;
#pragma unroll
      for (int c = 0; c < SE / 2; ++c) {
        const int ee = c * 2 + (lane >> 4);
        const u32 sr = __shfl_sync(0xffffffffu, my_src, ee);
        if (e0 + ee < n) {
          const unsigned d = rows_s + unsigned(((slot * SE + ee) * F + (lane & 15) * 4) * 4);
          const float* g = x + i64(sr) * F + (lane & 15) * 4;
          if constexpr (WM == kBucketLastXFirst) cp16_hint(d, g, pol_x);
          else cp16(d, g);
        }
      }
      if (WM != kNone && lane < SE && e0 + lane < n) {
        const i64 p = k0 + e0 + lane;
        i64 at = p;
        if constexpr (WM == kBucket || WM == kBucketLast || WM == kBucketLastXFirst)
          at = bucket_index(p, __ldg(hi + p), E);
        if constexpr (WM == kGather) at = i64(micro::mix(std::uint64_t(p)) % std::uint64_t(E));
        const unsigned d = wts_s + unsigned((slot * SE + lane) * 4);
        if constexpr (WM == kBucketLast || WM == kBucketLastXFirst) cp4_hint(d, w + at, pol_w);
        else cp4(d, w + at);
      }
    }
    commit();
  };
  for (int j = 0; j < S - 1; ++j) issue(j);
  float2 acc = make_float2(0.f, 0.f);
  for (int j = 0; j * SE < n; ++j) {
    issue(j + S - 1);
    wait_group<S - 1>();
    __syncwarp();
    const int slot = j % S;
    for (int u = 0; u < SE && j * SE + u < n; ++u) {
      const float2 v = reinterpret_cast<const float2*>(&rows[wib][(slot * SE + u) * F])[lane];
      const float wt = WM == kNone ? 1.f : wts[wib][slot * SE + u];
      acc.x = fmaf(v.x, wt, acc.x);
      acc.y = fmaf(v.y, wt, acc.y);
      const i64 p = k0 + j * SE + u;
      if (p % kRow == kRow - 1 || j * SE + u == n - 1) {  // a row ends (or the group): one store
        reinterpret_cast<float2*>(out + p / kRow * F)[lane] = acc;
        acc = make_float2(0.f, 0.f);
      }
    }
    __syncwarp();
  }
  wait_group<0>();
}

// Pass 2 as the library runs it (wperm_pass2_kernel<1, true>: a block per bucket, in place,
// 16-byte copies of the region, 16 bytes of the column and 4 of the high bytes per 4 positions),
// with lidx from bucket_index: the bucket's region into shared memory, then plan order written
// through lidx.
__global__ void __launch_bounds__(1024) pass2(float* scratch, const u32* __restrict__ col, const u8* __restrict__ hi,
                                              i64 E) {
  extern __shared__ __align__(16) float sw[];
  const i64 b0 = i64(blockIdx.x) * kT;
  const int len = int(E - b0 < kT ? E - b0 : kT), done = len & ~3;
#pragma unroll 4
  for (int i = threadIdx.x * 4; i < done; i += 1024 * 4)
    *reinterpret_cast<float4*>(sw + i) = *reinterpret_cast<const float4*>(scratch + b0 + i);
  for (int i = done + threadIdx.x; i < len; i += 1024) sw[i] = scratch[b0 + i];
  __syncthreads();
  // c's top bit and the high byte feed the index, so neither read is dropped.
  auto at = [&](i64 p, u32 c, u32 h) { return bucket_index(p, (h ^ (c >> 31)) & 0xFFu, E) - b0; };
#pragma unroll 4
  for (int i = threadIdx.x * 4; i < done; i += 1024 * 4) {
    const i64 p = b0 + i;
    const uint4 c = __ldg(reinterpret_cast<const uint4*>(col + p));
    const u32 h = __ldg(reinterpret_cast<const u32*>(hi + p));
    *reinterpret_cast<float4*>(scratch + p) = make_float4(sw[at(p, c.x, h)], sw[at(p + 1, c.y, h >> 8)],
                                                          sw[at(p + 2, c.z, h >> 16)], sw[at(p + 3, c.w, h >> 24)]);
  }
  for (int i = done + threadIdx.x; i < len; i += 1024) {
    const i64 p = b0 + i;
    scratch[p] = sw[at(p, __ldg(col + p), __ldg(hi + p))];
  }
}

__global__ void make_inputs(u32* src, u8* hi, float* w, i64 E, i64 N) {
  for (i64 p = blockIdx.x * i64(blockDim.x) + threadIdx.x; p < E; p += i64(gridDim.x) * blockDim.x) {
    const std::uint64_t h = micro::mix(0x5157u ^ std::uint64_t(p));
    src[p] = u32(h % std::uint64_t(N));
    hi[p] = u8(h >> 56);
    w[p] = 2.f * micro::unit(h >> 8) - 1.f;
  }
}

}  // namespace

int main(int argc, char** argv) {
  const i64 E = micro::edge_count_arg(argc, argv);
  if (E < 0) return 2;
  const i64 N = 2449029;
  u32* src = micro::dalloc<u32>(E);
  u8* hi = micro::dalloc<u8>(E);
  float* w = micro::dalloc<float>(E);
  float* x = micro::dalloc<float>(N * F);
  float* out = micro::dalloc<float>((E / kRow + 1) * F);
  make_inputs<<<1024, 256>>>(src, hi, w, E, N);
  micro::gen_x<<<1024, 256>>>(x, N * F, 1);
  CK(cudaDeviceSynchronize());
  std::printf("w bucket walk micro: E=%lld N=%lld F=%d, T=%d, rows of %d edges, uniform sources\n", (long long)E,
              (long long)N, F, kT, kRow);
  const double x_gb = double(E) * F * 4 / 1e9;
  // L2 lines marked evict_last may outlive their line and slow the next: each line starts with
  // the persisting lines reset. The hinted lines run last, then again with the L2 set-aside for
  // persisting accesses at the device's maximum (the default set-aside is 0, and evict_last may
  // act only inside it).
  int max_persist = 0;
  CK(cudaDeviceGetAttribute(&max_persist, cudaDevAttrMaxPersistingL2CacheSize, 0));
  char name[128];
  auto line = [&](i64 C, const char* what, auto kernel) {
    const unsigned grid = unsigned(((E + C - 1) / C + W - 1) / W);
    std::snprintf(name, sizeof name, "walk C=%lld, %s", (long long)C, what);
    CK(cudaCtxResetPersistingL2Cache());
    micro::report(name, micro::timed([&] { kernel<<<grid, W * 32>>>(src, hi, x, w, out, E, C); }));
  };
  for (const i64 C : {i64(1024), i64(256)}) {
    line(C, "no w", walk<kNone>);
    line(C, "w in plan order", walk<kPlan>);
    line(C, "w bucket-local (+1 B hi)", walk<kBucket>);
    line(C, "w gathered (random id)", walk<kGather>);
  }
  for (const std::size_t set_aside : {std::size_t(0), std::size_t(max_persist)}) {
    CK(cudaDeviceSetLimit(cudaLimitPersistingL2CacheSize, set_aside));
    std::printf("L2 set-aside for persisting accesses: %.1f MB\n", double(set_aside) / 1e6);
    for (const i64 C : {i64(1024), i64(256)}) {
      line(C, "w bucket-local, w evict_last", walk<kBucketLast>);
      line(C, "w bucket-local, w last, x first", walk<kBucketLastXFirst>);
    }
  }
  CK(cudaDeviceSetLimit(cudaLimitPersistingL2CacheSize, 0));
  CK(cudaCtxResetPersistingL2Cache());
  const int smem = kT * 4;
  CK(cudaFuncSetAttribute(pass2, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  float* scratch = micro::dalloc<float>(E);
  CK(cudaMemcpy(scratch, w, E * 4, cudaMemcpyDeviceToDevice));  // 256-byte aligned: the 16-byte copies
  micro::report("pass 2 (emulated, packed lidx)", micro::timed([&] {
                  pass2<<<unsigned((E + kT - 1) / kT), 1024, smem>>>(scratch, src, hi, E);
                }));
  std::printf("x rows gathered: %.2f GB a walk (%.3f ms at 4.29 TB/s)\n", x_gb, x_gb / 4.29);
  return 0;
}
