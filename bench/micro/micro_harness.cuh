#pragma once
// Shared by the standalone micro-benchmarks in bench/micro (not part of the library build): a
// CUDA-call check, device-event timing (one warm-up, then the samples) and a one-line report of
// median, min and max.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <vector>

#define CK(call)                                                                                  \
  do {                                                                                            \
    cudaError_t e_ = (call);                                                                      \
    if (e_ != cudaSuccess) {                                                                      \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(e_)); \
      std::exit(1);                                                                               \
    }                                                                                             \
  } while (0)

namespace micro {

using i64 = std::int64_t;

/// `name  median ms  (min..max)  note`, the name padded to `width`.
inline void report(const char* name, std::vector<float> t, const char* note = "", int width = 52) {
  std::sort(t.begin(), t.end());
  std::printf("%-*s %8.3f ms  (%.3f..%.3f)  %s\n", width, name, t[t.size() / 2], t.front(), t.back(), note);
  std::fflush(stdout);
}

/// One sample of f between device events (ms), no warm-up: for work whose inputs the caller
/// restores before each sample (a sort that would otherwise sort sorted data).
inline float once_ms(const std::function<void()>& f) {
  static cudaEvent_t a = nullptr, b = nullptr;
  if (!a) {
    CK(cudaEventCreate(&a));
    CK(cudaEventCreate(&b));
  }
  CK(cudaEventRecord(a));
  f();
  CK(cudaEventRecord(b));
  CK(cudaEventSynchronize(b));
  float ms = 0;
  CK(cudaEventElapsedTime(&ms, a, b));
  CK(cudaGetLastError());
  return ms;
}

/// f once as warm-up, then `reps` samples of f between device events (ms).
inline std::vector<float> timed(const std::function<void()>& f, int reps = 10) {
  f();
  CK(cudaGetLastError());
  CK(cudaDeviceSynchronize());
  std::vector<float> t;
  for (int i = 0; i < reps; ++i) t.push_back(once_ms(f));
  return t;
}

// Synthetic inputs (splitmix64 hashes of the index): uniform random edges over N nodes, w in
// [-1, 1), x in [-2, 2); the same data in every micro for the same seed.
__device__ __forceinline__ std::uint64_t mix(std::uint64_t z) {
  z += 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}
__device__ __forceinline__ float unit(std::uint64_t h) { return float(h >> 40) * (1.0f / 16777216.0f); }

__global__ void gen_edges(i64* src, i64* dst, float* w, i64 E, i64 N, std::uint64_t seed) {
  for (i64 e = blockIdx.x * i64(blockDim.x) + threadIdx.x; e < E; e += i64(gridDim.x) * blockDim.x) {
    src[e] = i64(mix(seed * 3 + std::uint64_t(e) * 0x100000001ull) % std::uint64_t(N));
    dst[e] = i64(mix(seed * 5 + 1 + std::uint64_t(e) * 0x100000003ull) % std::uint64_t(N));
    w[e] = 2.f * unit(mix(seed * 7 + 2 + std::uint64_t(e))) - 1.f;
  }
}
__global__ void gen_x(float* x, i64 n, std::uint64_t seed) {
  for (i64 i = blockIdx.x * i64(blockDim.x) + threadIdx.x; i < n; i += i64(gridDim.x) * blockDim.x)
    x[i] = 4.f * unit(mix(seed * 11 + std::uint64_t(i))) - 2.f;
}

// The first position whose key >> shift is >= v (keys sorted ascending on those bits).
__device__ __forceinline__ i64 first_key_at_least(const unsigned* keys, i64 E, i64 v, int shift) {
  i64 lo = 0, hi = E;
  while (lo < hi) {
    const i64 mid = (lo + hi) / 2;
    if (i64(keys[mid] >> shift) < v) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}
// row_ptr[i] = first position whose key is >= i, i in [0, N]: the production row_ptr_kernel's
// binary search, one thread per row.
__global__ void row_ptr_search(const unsigned* keys, i64 E, i64 N, int* row_ptr) {
  for (i64 i = blockIdx.x * i64(blockDim.x) + threadIdx.x; i <= N; i += i64(gridDim.x) * blockDim.x)
    row_ptr[i] = int(first_key_at_least(keys, E, i, 0));
}
// ptr[b] = first position whose key >> shift is >= b, b in [0, B]: the buckets of 2^shift
// consecutive rows that a second-level sort takes (build and bucket micros).
__global__ void bucket_search(const unsigned* keys, i64 E, i64 B, int shift, int* ptr) {
  for (i64 b = blockIdx.x * i64(blockDim.x) + threadIdx.x; b <= B; b += i64(gridDim.x) * blockDim.x)
    ptr[b] = int(first_key_at_least(keys, E, b, shift));
}

// Loads and the transform the lean and gather micros share.
__device__ __forceinline__ float4 ldg4(const float* p) { return __ldg(reinterpret_cast<const float4*>(p)); }
__device__ __forceinline__ float4 tanh4(float4 v, float w) {
  return make_float4(tanhf(v.x * w), tanhf(v.y * w), tanhf(v.z * w), tanhf(v.w * w));
}

// L2 eviction-priority hints (PTX createpolicy + .L2::cache_hint, sm_80+).
__device__ __forceinline__ std::uint64_t policy_evict_first() {
  std::uint64_t p;
  asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(p));
  return p;
}
__device__ __forceinline__ std::uint64_t policy_evict_last() {
  std::uint64_t p;
  asm volatile("createpolicy.fractional.L2::evict_last.b64 %0, 1.0;" : "=l"(p));
  return p;
}
__device__ __forceinline__ float4 ldg4_hint(const float* ptr, std::uint64_t pol) {
  float4 v;
  asm volatile("ld.global.nc.L2::cache_hint.v4.f32 {%0,%1,%2,%3}, [%4], %5;"
               : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w)
               : "l"(ptr), "l"(pol));
  return v;
}

// The production lean kernel (atomic_edges_kernel<float, I, 4>) at F = 64 with weights and tanh:
// 16 lanes an edge, one float4 atomicAdd per lane (red.global.add.v4.f32).
template <class I>
__global__ void __launch_bounds__(256) lean_base(const I* __restrict__ src, const I* __restrict__ dst,
                                                 const float* __restrict__ x, const float* __restrict__ w,
                                                 float* __restrict__ out, i64 E) {
  constexpr int F = 64;
  const int lane = threadIdx.x % 32, group = lane / 16, gl = lane % 16;
  const i64 step = i64(gridDim.x) * blockDim.x / 32 * 2;
  for (i64 e = (blockIdx.x * i64(blockDim.x) + threadIdx.x) / 32 * 2 + group; e < E; e += step) {
    const i64 s = src[e], d = dst[e];
    const float wt = __ldg(w + e);
    const float4 v = ldg4(x + s * F + gl * 4);
    atomicAdd(reinterpret_cast<float4*>(out + d * F + gl * 4), tanh4(v, wt));
  }
}

/// max |a - ref| / max |ref| over n device floats (infinite where a difference is NaN).
inline double max_rel_diff(const float* a, const float* ref, i64 n) {
  std::vector<float> ha(n), hb(n);
  CK(cudaMemcpy(ha.data(), a, n * 4, cudaMemcpyDeviceToHost));
  CK(cudaMemcpy(hb.data(), ref, n * 4, cudaMemcpyDeviceToHost));
  double m = 0, scale = 0;
  for (i64 i = 0; i < n; ++i) {
    scale = std::max(scale, double(std::fabs(hb[i])));
    const double d = std::fabs(double(ha[i]) - double(hb[i]));
    m = std::isnan(d) ? INFINITY : std::max(m, d);
  }
  return m / (scale > 0 ? scale : 1);
}

/// The edge count: argv[1] if given, else products-like's; -1 (with a message) outside [1, 2^31).
inline i64 edge_count_arg(int argc, char** argv) {
  const i64 E = argc > 1 ? std::atoll(argv[1]) : 61859140;
  if (E <= 0 || E >= (i64(1) << 31)) {
    std::fprintf(stderr, "E must be in [1, 2^31)\n");
    return -1;
  }
  return E;
}

template <class T>
T* dalloc(i64 n) {
  T* p = nullptr;
  CK(cudaMalloc(&p, std::size_t(n) * sizeof(T)));
  return p;
}

/// The lean micros' rows: x drawn (seed 2), out and a reference output left for the caller;
/// out_bytes is one [N, F] float32 buffer.
struct LeanRows {
  float *x, *out, *ref;
  std::size_t out_bytes;
};
inline LeanRows lean_rows(i64 N, i64 F, int blocks) {
  LeanRows r{dalloc<float>(N * F), dalloc<float>(N * F), dalloc<float>(N * F), std::size_t(N) * std::size_t(F) * sizeof(float)};
  gen_x<<<blocks, 256>>>(r.x, N * F, 2);
  CK(cudaGetLastError());
  CK(cudaDeviceSynchronize());
  return r;
}

}  // namespace micro
