// CUDA backend of the message-passing ops: the fused aggregate (one-shot and planned: CSR by
// destination, a warp per row, deterministic; lean: atomic accumulation, no scratch), and the
// three-op reference (gather_scale, map, index_add).
//
// Bytes that must move for products-like (E = 61.9M, F = 64, float32): one gathered 256-byte x
// row per edge (15.8 GB) + the plan's src and edge-id columns (0.5 GB) + w gathered through the
// edge ids (one 32-byte sector per edge: 2.0 GB) + the output (0.63 GB): ~19 GB, 4.5 ms at the
// 4.26 TB/s copy bandwidth PROTOCOL.md measured. Rows of x re-read from L2 are the only way below.
#include <cub/device/device_radix_sort.cuh>
#include <cub/device/device_scan.cuh>
#include <cuda_runtime.h>

#include <climits>
#include <cstdint>
#include <string>

#include "core/aggregate_plan_impl.hpp"
#include "cuda/check.cuh"
#include "cuda/memory.cuh"
#include "pipelink/ops/reference.hpp"
#include "pipelink/registry.hpp"

namespace pipelink::cuda {
namespace {

using detail::DeviceBuffer;

cudaStream_t as_stream(void* s) { return static_cast<cudaStream_t>(s); }

int grid_for(std::int64_t work, int block) {
  const std::int64_t g = (work + block - 1) / block;
  return int(g < 1 ? 1 : (g > 65535LL * 32 ? 65535LL * 32 : g));
}

void check_launch() { PIPELINK_CUDA_CHECK(cudaGetLastError()); }

// ---- elementwise phi -------------------------------------------------------------------------
// tanhf / tanh from the CUDA math library: 2 ulp (float), never tanh.approx (PROTOCOL.md).
template <class T>
__device__ __forceinline__ T phi(T v, int transform) {
  switch (transform) {
    case 0: return v;
    case 1: return tanh(v);
    case 2: return v > T(0) ? v : T(0);
    default: return T(1) / (T(1) + exp(-v));
  }
}
__device__ __forceinline__ float phi(float v, int transform) {
  switch (transform) {
    case 0: return v;
    case 1: return tanhf(v);
    case 2: return v > 0.f ? v : 0.f;
    default: return 1.f / (1.f + expf(-v));
  }
}

// ---- index validation ------------------------------------------------------------------------

template <class I>
__global__ void first_bad_edge_kernel(const I* src, const I* dst, std::int64_t E, std::uint64_t N,
                                      unsigned long long* first_bad) {
  for (std::int64_t e = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; e < E;
       e += std::int64_t(gridDim.x) * blockDim.x) {
    const bool bad_src = src && std::uint64_t(std::int64_t(src[e])) >= N;
    const bool bad_dst = dst && std::uint64_t(std::int64_t(dst[e])) >= N;
    if (bad_src || bad_dst) atomicMin(first_bad, (unsigned long long)e);
  }
}

std::int64_t read_index(const TensorView& v, std::int64_t e) {
  std::int64_t value = 0;
  if (v.dtype() == DType::i32) {
    std::int32_t x = 0;
    PIPELINK_CUDA_CHECK(cudaMemcpy(&x, v.data_as<const std::int32_t>() + e, 4, cudaMemcpyDeviceToHost));
    value = x;
  } else {
    PIPELINK_CUDA_CHECK(cudaMemcpy(&value, v.data_as<const std::int64_t>() + e, 8, cudaMemcpyDeviceToHost));
  }
  return value;
}

/// One pass over the index arrays (either may be null) on the device; throws IndexOutOfRangeError
/// naming the first bad edge (src before dst) before anything else is written. Synchronizes.
void validate_indices(const char* op, const TensorView* src, const TensorView* dst, std::int64_t N, cudaStream_t s) {
  const TensorView& any = src ? *src : *dst;
  const std::int64_t E = any.numel();
  if (E == 0) return;
  DeviceBuffer flag(sizeof(unsigned long long), s);
  PIPELINK_CUDA_CHECK(cudaMemsetAsync(flag.get(), 0xFF, sizeof(unsigned long long), s));
  if (any.dtype() == DType::i32)
    first_bad_edge_kernel<<<grid_for(E, 256), 256, 0, s>>>(src ? src->data_as<const std::int32_t>() : nullptr,
                                                           dst ? dst->data_as<const std::int32_t>() : nullptr, E,
                                                           std::uint64_t(N), flag.as<unsigned long long>());
  else
    first_bad_edge_kernel<<<grid_for(E, 256), 256, 0, s>>>(src ? src->data_as<const std::int64_t>() : nullptr,
                                                           dst ? dst->data_as<const std::int64_t>() : nullptr, E,
                                                           std::uint64_t(N), flag.as<unsigned long long>());
  check_launch();
  unsigned long long bad = ULLONG_MAX;
  PIPELINK_CUDA_CHECK(cudaMemcpyAsync(&bad, flag.get(), sizeof bad, cudaMemcpyDeviceToHost, s));
  PIPELINK_CUDA_CHECK(cudaStreamSynchronize(s));
  if (bad == ULLONG_MAX) return;
  const auto e = std::int64_t(bad);
  if (src) {
    const std::int64_t v = read_index(*src, e);
    if (v < 0 || v >= N) throw IndexOutOfRangeError(op, "src", e, v, N);
  }
  throw IndexOutOfRangeError(op, "dst", e, read_index(*dst, e), N);
}

// ---- plan build: stable radix sort of (dst, edge id) ----------------------------------------

template <class I, class K>
__global__ void init_keys_kernel(const I* dst, K* keys, std::uint32_t* ids32, std::uint64_t* ids64, std::int64_t E) {
  for (std::int64_t e = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; e < E;
       e += std::int64_t(gridDim.x) * blockDim.x) {
    keys[e] = K(dst[e]);
    if (ids32) ids32[e] = std::uint32_t(e);
    else ids64[e] = std::uint64_t(e);
  }
}

// row_ptr[i] = first position whose key is >= i (keys sorted ascending), for i in [0, N].
template <class K, class P>
__global__ void row_ptr_kernel(const K* keys, std::int64_t E, std::int64_t N, P* row_ptr) {
  for (std::int64_t i = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; i <= N;
       i += std::int64_t(gridDim.x) * blockDim.x) {
    std::int64_t lo = 0, hi = E;
    while (lo < hi) {
      const std::int64_t mid = (lo + hi) / 2;
      if (std::int64_t(keys[mid]) < i) lo = mid + 1;
      else hi = mid;
    }
    row_ptr[i] = P(lo);
  }
}

template <class I, class P>
__global__ void gather_src_kernel(const I* src, const P* perm, P* src_sorted, std::int64_t E) {
  for (std::int64_t k = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; k < E;
       k += std::int64_t(gridDim.x) * blockDim.x)
    src_sorted[k] = P(src[perm[k]]);
}

// Rows longer than kSegment edges (power-law hubs reach ~198k) are split into segments of
// kSegment edges, each a warp's work item; their double partial sums are combined per row in
// segment order (deterministic). v2 without splitting: power-law planned 32.9 ms, lean 13.3 ms.
constexpr std::int64_t kSegment = 2048;

template <class P>
__global__ void count_segments_kernel(const P* row_ptr, std::int64_t N, P* segs) {
  for (std::int64_t r = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; r <= N;
       r += std::int64_t(gridDim.x) * blockDim.x) {
    if (r == N) {
      segs[r] = 0;
      continue;
    }
    const std::int64_t d = std::int64_t(row_ptr[r + 1]) - std::int64_t(row_ptr[r]);
    segs[r] = P(d > kSegment ? (d + kSegment - 1) / kSegment : 0);
  }
}

template <class P>
__global__ void fill_segment_rows_kernel(const P* seg_first, std::int64_t N, P* seg_row) {
  for (std::int64_t r = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; r < N;
       r += std::int64_t(gridDim.x) * blockDim.x)
    for (std::int64_t i = std::int64_t(seg_first[r]); i < std::int64_t(seg_first[r + 1]); ++i) seg_row[i] = P(r);
}

int bits_for(std::int64_t n) {  // bits needed for values in [0, n)
  int b = 1;
  while (b < 63 && (std::int64_t(1) << b) < n) ++b;
  return b;
}

struct CudaPlan final : AggregatePlan::Impl {
  bool wide = false;      // 64-bit row_ptr / src / edge ids (N or E >= 2^31)
  DeviceBuffer row_ptr;   // P [N + 1]
  DeviceBuffer src_sorted;  // P [E]
  DeviceBuffer perm;      // P [E] edge ids in destination order
  std::int64_t num_segments = 0;  // segments of split rows
  DeviceBuffer seg_first;  // P [N + 1]: first segment of each row (rows not split have none)
  DeviceBuffer seg_row;    // P [num_segments]: the row of each segment
  std::size_t build_peak = 0;
  void run(const TensorView& x, const TensorView* w, const TensorView& out, const AggregateOptions& opts) override;
};

template <class P, class I>
void build_plan_typed(CudaPlan& plan, const TensorView& src, const TensorView& dst, std::int64_t N, cudaStream_t s) {
  using K = P;  // keys fit in the plan's index type: dst < N
  using U = std::conditional_t<sizeof(P) == 4, std::uint32_t, std::uint64_t>;
  const std::int64_t E = plan.num_edges;
  DeviceBuffer keys_a(E * sizeof(K), s), keys_b(E * sizeof(K), s), ids_a(E * sizeof(P), s), ids_b(E * sizeof(P), s);
  init_keys_kernel<I, U><<<grid_for(E, 256), 256, 0, s>>>(dst.data_as<const I>(), keys_a.as<U>(),
                                                          sizeof(P) == 4 ? ids_a.as<std::uint32_t>() : nullptr,
                                                          sizeof(P) == 8 ? ids_a.as<std::uint64_t>() : nullptr, E);
  check_launch();
  cub::DoubleBuffer<U> keys(keys_a.as<U>(), keys_b.as<U>());
  cub::DoubleBuffer<U> ids(ids_a.as<U>(), ids_b.as<U>());
  const int end_bit = bits_for(N);
  std::size_t temp_bytes = 0;
  PIPELINK_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(nullptr, temp_bytes, keys, ids, E, 0, end_bit, s));
  {
    DeviceBuffer temp(temp_bytes, s);
    PIPELINK_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(temp.get(), temp_bytes, keys, ids, E, 0, end_bit, s));
  }
  plan.row_ptr = DeviceBuffer((N + 1) * sizeof(P), s);
  row_ptr_kernel<U, P><<<grid_for(N + 1, 256), 256, 0, s>>>(keys.Current(), E, N, plan.row_ptr.as<P>());
  check_launch();
  // Keep the sorted ids; the sorted src goes into the keys' spare buffer, the rest is freed.
  const bool ids_in_a = ids.Current() == ids_a.as<U>();
  plan.perm = std::move(ids_in_a ? ids_a : ids_b);
  const bool keys_in_a = keys.Current() == keys_a.as<U>();
  DeviceBuffer& spare = keys_in_a ? keys_b : keys_a;
  gather_src_kernel<I, P><<<grid_for(E, 256), 256, 0, s>>>(src.data_as<const I>(), plan.perm.as<const P>(),
                                                           spare.as<P>(), E);
  check_launch();
  plan.src_sorted = std::move(spare);

  // Segments of the rows longer than kSegment edges.
  DeviceBuffer segs((N + 1) * sizeof(P), s);
  count_segments_kernel<P><<<grid_for(N + 1, 256), 256, 0, s>>>(plan.row_ptr.as<const P>(), N, segs.as<P>());
  check_launch();
  plan.seg_first = DeviceBuffer((N + 1) * sizeof(P), s);
  std::size_t scan_bytes = 0;
  PIPELINK_CUDA_CHECK(cub::DeviceScan::ExclusiveSum(nullptr, scan_bytes, segs.as<P>(), plan.seg_first.as<P>(), N + 1, s));
  {
    DeviceBuffer scan_temp(scan_bytes, s);
    PIPELINK_CUDA_CHECK(
        cub::DeviceScan::ExclusiveSum(scan_temp.get(), scan_bytes, segs.as<P>(), plan.seg_first.as<P>(), N + 1, s));
  }
  P total = 0;
  PIPELINK_CUDA_CHECK(cudaMemcpyAsync(&total, plan.seg_first.as<P>() + N, sizeof(P), cudaMemcpyDeviceToHost, s));
  PIPELINK_CUDA_CHECK(cudaStreamSynchronize(s));
  plan.num_segments = std::int64_t(total);
  if (plan.num_segments > 0) {
    plan.seg_row = DeviceBuffer(plan.num_segments * sizeof(P), s);
    fill_segment_rows_kernel<P><<<grid_for(N, 256), 256, 0, s>>>(plan.seg_first.as<const P>(), N, plan.seg_row.as<P>());
    check_launch();
  }
}

std::shared_ptr<AggregatePlan::Impl> build_plan(const TensorView& src, const TensorView& dst, std::int64_t N,
                                               void* stream) {
  const cudaStream_t s = as_stream(stream);
  PIPELINK_CUDA_CHECK(cudaSetDevice(src.device().index));
  validate_indices("aggregate", &src, &dst, N, s);
  auto plan = std::make_shared<CudaPlan>();
  plan->device = src.device();
  plan->num_nodes = N;
  plan->num_edges = src.numel();
  plan->wide = N >= INT32_MAX || plan->num_edges >= INT32_MAX;
  if (plan->num_edges > 0) {
    const bool i32 = src.dtype() == DType::i32;
    if (plan->wide) {
      if (i32) build_plan_typed<std::int64_t, std::int32_t>(*plan, src, dst, N, s);
      else build_plan_typed<std::int64_t, std::int64_t>(*plan, src, dst, N, s);
    } else {
      if (i32) build_plan_typed<std::int32_t, std::int32_t>(*plan, src, dst, N, s);
      else build_plan_typed<std::int32_t, std::int64_t>(*plan, src, dst, N, s);
    }
  } else {
    plan->row_ptr = DeviceBuffer((N + 1) * (plan->wide ? 8 : 4), s);
    PIPELINK_CUDA_CHECK(cudaMemsetAsync(plan->row_ptr.get(), 0, plan->row_ptr.bytes(), s));
  }
  plan->bytes = plan->row_ptr.bytes() + plan->src_sorted.bytes() + plan->perm.bytes() + plan->seg_first.bytes() +
                plan->seg_row.bytes();
  return plan;
}

// ---- planned run: a warp per destination row -------------------------------------------------

template <class T, int VEC> struct Vec;
template <> struct Vec<float, 4> { using type = float4; };
template <> struct Vec<float, 1> { using type = float; };
template <> struct Vec<double, 2> { using type = double2; };
template <> struct Vec<double, 1> { using type = double; };

template <class T, int VEC>
__device__ __forceinline__ void load_vec(const T* p, T (&v)[VEC]) {
  if constexpr (VEC == 1) {
    v[0] = __ldg(p);
  } else {
    using V = typename Vec<T, VEC>::type;
    const V q = __ldg(reinterpret_cast<const V*>(p));
    if constexpr (VEC == 4) { v[0] = q.x; v[1] = q.y; v[2] = q.z; v[3] = q.w; }
    else { v[0] = q.x; v[1] = q.y; }
  }
}

// A warp per destination row. The warp is split into G = 32 / LPE groups of LPE lanes; each
// group handles one edge at a time, each lane VEC x CH features of it (F = 64 float32: 16 lanes x
// one float4, so two edges per step). The row's edges are read 32 at a time (one index and weight
// per lane) and broadcast with shuffles; each group keeps U edges' rows in flight before using
// them. v1 (one edge per warp, loads issued one after another) reached 199 GB/s on products-like;
// see docs/perf-notes.md.
//
// Order of the sum, fixed for a given F: group g sums the batch's edges g, g+G, g+2G, ... in order;
// at the end of each 32-edge batch the groups combine in a fixed shuffle tree; batches add in
// double when the row has more than one (hub rows keep ~32 u S of error). Deterministic.
// Work items: rows that are not split (segments == nullptr pass: one item per row, split rows
// skipped) or segments of split rows (seg_row != nullptr: item = segment, its double sum goes to
// `partial`, combined later by combine_segments_kernel).
template <class T, class P, int VEC, int CH>
__global__ void __launch_bounds__(256) csr_warp_per_row_kernel(const P* __restrict__ row_ptr, const P* __restrict__ src_sorted,
                                                               const P* __restrict__ perm, const T* __restrict__ x,
                                                               std::int64_t xs, const T* __restrict__ w, T* __restrict__ out,
                                                               std::int64_t os, std::int64_t items, std::int64_t F, int lpe,
                                                               int transform, bool accumulate, const P* __restrict__ seg_first,
                                                               const P* __restrict__ seg_row, double* __restrict__ partial) {
  constexpr int U = 4;
  const std::int64_t item = (blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x) / 32;
  const int lane = threadIdx.x % 32;
  if (item >= items) return;
  const int groups = 32 / lpe, group = lane / lpe, gl = lane % lpe;
  const bool segment = seg_row != nullptr;
  const std::int64_t row = segment ? std::int64_t(seg_row[item]) : item;
  std::int64_t begin = std::int64_t(row_ptr[row]), end = std::int64_t(row_ptr[row + 1]);
  if (segment) {
    begin += (item - std::int64_t(seg_first[row])) * kSegment;
    end = begin + kSegment < end ? begin + kSegment : end;
  } else if (seg_first && seg_first[row + 1] != seg_first[row]) {
    return;  // split row: its segments run in the second pass
  }
  const bool blocked = segment || end - begin > 32;
  const std::int64_t tile = std::int64_t(lpe) * VEC * CH;
  for (std::int64_t f0 = 0; f0 < F; f0 += tile) {
    T part[CH][VEC];
    double acc[CH][VEC];
#pragma unroll
    for (int j = 0; j < CH; ++j)
#pragma unroll
      for (int q = 0; q < VEC; ++q) {
        part[j][q] = T(0);
        acc[j][q] = 0.0;
      }
    for (std::int64_t k0 = begin; k0 < end; k0 += 32) {
      const std::int64_t k = k0 + lane;
      std::int64_t my_src = 0;
      T my_w = T(1);
      if (k < end) {
        my_src = std::int64_t(src_sorted[k]);
        if (w) my_w = __ldg(w + std::int64_t(perm[k]));
      }
      const int n = int(end - k0 < 32 ? end - k0 : 32);
      T batch[CH][VEC];
#pragma unroll
      for (int j = 0; j < CH; ++j)
#pragma unroll
        for (int q = 0; q < VEC; ++q) batch[j][q] = T(0);
      for (int t0 = 0; t0 < n; t0 += groups * U) {
        T v[U][CH][VEC];
        T wt[U];
        bool live[U];
#pragma unroll
        for (int u = 0; u < U; ++u) {  // issue U rows' loads before using any of them
          const int t = t0 + u * groups + group;
          const std::int64_t s = __shfl_sync(0xffffffffu, my_src, t & 31);
          wt[u] = __shfl_sync(0xffffffffu, my_w, t & 31);
          live[u] = t < n;
#pragma unroll
          for (int j = 0; j < CH; ++j) {
            const std::int64_t f = f0 + (std::int64_t(j) * lpe + gl) * VEC;
            if (live[u] && f < F) load_vec<T, VEC>(x + s * xs + f, v[u][j]);
            else
#pragma unroll
              for (int q = 0; q < VEC; ++q) v[u][j][q] = T(0);
          }
        }
#pragma unroll
        for (int u = 0; u < U; ++u)
          if (live[u])
#pragma unroll
            for (int j = 0; j < CH; ++j)
#pragma unroll
              for (int q = 0; q < VEC; ++q) batch[j][q] += phi(v[u][j][q] * wt[u], transform);
      }
      // Combine the groups (fixed tree: deterministic); group 0 holds the batch sum.
      for (int off = 16; off >= lpe; off /= 2)
#pragma unroll
        for (int j = 0; j < CH; ++j)
#pragma unroll
          for (int q = 0; q < VEC; ++q) batch[j][q] += __shfl_down_sync(0xffffffffu, batch[j][q], off);
#pragma unroll
      for (int j = 0; j < CH; ++j)
#pragma unroll
        for (int q = 0; q < VEC; ++q) {
          if (blocked) acc[j][q] += double(batch[j][q]);
          else part[j][q] = batch[j][q];
        }
    }
    if (segment && group == 0) {
      double* pr = partial + item * F;
#pragma unroll
      for (int j = 0; j < CH; ++j) {
        const std::int64_t f = f0 + (std::int64_t(j) * lpe + gl) * VEC;
#pragma unroll
        for (int q = 0; q < VEC; ++q)
          if (f + q < F) pr[f + q] = acc[j][q];
      }
    } else if (group == 0) {
      T* o = out + row * os;
#pragma unroll
      for (int j = 0; j < CH; ++j) {
        const std::int64_t f = f0 + (std::int64_t(j) * lpe + gl) * VEC;
        if (f < F)
#pragma unroll
          for (int q = 0; q < VEC; ++q) {
            if (f + q >= F) break;
            const T sum = blocked ? T(accumulate ? double(o[f + q]) + acc[j][q] : acc[j][q])
                                  : (accumulate ? o[f + q] + part[j][q] : part[j][q]);
            o[f + q] = sum;
          }
      }
    }
  }
}

// One warp per split row: its segments' partial sums, added in segment order (deterministic).
template <class T, class P>
__global__ void combine_segments_kernel(const P* __restrict__ seg_first, std::int64_t N, const double* __restrict__ partial,
                                        T* __restrict__ out, std::int64_t os, std::int64_t F, bool accumulate) {
  const std::int64_t row = (blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x) / 32;
  const int lane = threadIdx.x % 32;
  if (row >= N) return;
  const std::int64_t s0 = std::int64_t(seg_first[row]), s1 = std::int64_t(seg_first[row + 1]);
  if (s0 == s1) return;
  for (std::int64_t f = lane; f < F; f += 32) {
    double sum = accumulate ? double(out[row * os + f]) : 0.0;
    for (std::int64_t i = s0; i < s1; ++i) sum += partial[i * F + f];
    out[row * os + f] = T(sum);
  }
}

bool aligned16(const void* p) { return (reinterpret_cast<std::uintptr_t>(p) & 15u) == 0; }

// Lanes per edge: enough to cover F with one vector each, a power of two, at most 32.
int lanes_per_edge(std::int64_t F, int vec) {
  const std::int64_t per_lane = (F + vec - 1) / vec;
  int lpe = 1;
  while (lpe < 32 && lpe < per_lane) lpe *= 2;
  return lpe;
}


template <class T, class P>
void launch_rows(const CudaPlan& plan, const TensorView& x, const TensorView* w, const TensorView& out,
                 const AggregateOptions& opts, cudaStream_t s) {
  const std::int64_t N = plan.num_nodes, F = x.dim(1);
  if (N == 0 || F == 0) return;
  constexpr int kVec = sizeof(T) == 4 ? 4 : 2;
  const bool vec_ok = F % kVec == 0 && x.stride(0) % kVec == 0 && aligned16(x.data());
  const int vec = vec_ok ? kVec : 1;
  const int lpe = lanes_per_edge(F, vec);
  const bool two_chunks = (F + vec - 1) / vec > 32;  // F > 128 float32 with float4: two vectors per lane per tile
  const auto* rp = plan.row_ptr.as<const P>();
  const auto* ss = plan.src_sorted.as<const P>();
  const auto* pm = plan.perm.as<const P>();
  const T* wp = w ? w->data_as<const T>() : nullptr;
  const T* xp = x.data_as<const T>();
  T* op = out.data_as<T>();
  const int tr = int(opts.transform);
  const P* sf = plan.num_segments ? plan.seg_first.as<const P>() : nullptr;
  DeviceBuffer partial(plan.num_segments ? std::size_t(plan.num_segments * F) * sizeof(double) : 0, s);
  auto launch = [&](std::int64_t items, const P* seg_row) {
    const int grid = int((items * 32 + 255) / 256);
    double* pa = partial.as<double>();
    if (vec_ok && two_chunks)
      csr_warp_per_row_kernel<T, P, kVec, 2><<<grid, 256, 0, s>>>(rp, ss, pm, xp, x.stride(0), wp, op, out.stride(0), items, F, lpe, tr, opts.accumulate, sf, seg_row, pa);
    else if (vec_ok)
      csr_warp_per_row_kernel<T, P, kVec, 1><<<grid, 256, 0, s>>>(rp, ss, pm, xp, x.stride(0), wp, op, out.stride(0), items, F, lpe, tr, opts.accumulate, sf, seg_row, pa);
    else if (two_chunks)
      csr_warp_per_row_kernel<T, P, 1, 2><<<grid, 256, 0, s>>>(rp, ss, pm, xp, x.stride(0), wp, op, out.stride(0), items, F, lpe, tr, opts.accumulate, sf, seg_row, pa);
    else
      csr_warp_per_row_kernel<T, P, 1, 1><<<grid, 256, 0, s>>>(rp, ss, pm, xp, x.stride(0), wp, op, out.stride(0), items, F, lpe, tr, opts.accumulate, sf, seg_row, pa);
    check_launch();
  };
  launch(N, nullptr);  // rows that are not split
  if (plan.num_segments > 0) {
    launch(plan.num_segments, plan.seg_row.as<const P>());
    combine_segments_kernel<T, P><<<int((N * 32 + 255) / 256), 256, 0, s>>>(sf, N, partial.as<const double>(), op,
                                                                           out.stride(0), F, opts.accumulate);
    check_launch();
  }
}

void CudaPlan::run(const TensorView& x, const TensorView* w, const TensorView& out, const AggregateOptions& opts) {
  const cudaStream_t s = as_stream(opts.stream);
  PIPELINK_CUDA_CHECK(cudaSetDevice(device.index));
  const bool f64 = x.dtype() == DType::f64;
  if (wide) {
    if (f64) launch_rows<double, std::int64_t>(*this, x, w, out, opts, s);
    else launch_rows<float, std::int64_t>(*this, x, w, out, opts, s);
  } else {
    if (f64) launch_rows<double, std::int32_t>(*this, x, w, out, opts, s);
    else launch_rows<float, std::int32_t>(*this, x, w, out, opts, s);
  }
}

AggregateOptions options_of(const OpContext& ctx) {
  AggregateOptions o;
  o.transform = parse_transform(ctx.attr<std::string>("transform"));
  o.accumulate = ctx.attr<bool>("accumulate");
  o.stream = ctx.stream;
  return o;
}

// One-shot: build the plan, run it, release it (stream-ordered, so no extra sync for the frees).
void aggregate_one_shot(OpContext& ctx) {
  const auto plan = build_plan(ctx.port("src"), ctx.port("dst"), ctx.dim("N"), ctx.stream);
  const TensorView* w = ctx.has("w") ? &ctx.port("w") : nullptr;
  plan->run(ctx.port("x"), w, ctx.port("out"), options_of(ctx));
}

// ---- lean: atomic accumulation, zero scratch -------------------------------------------------

template <class T, class I, int VEC>
__global__ void __launch_bounds__(256) atomic_edges_kernel(const I* __restrict__ src, const I* __restrict__ dst,
                                                           const T* __restrict__ x, std::int64_t xs,
                                                           const T* __restrict__ w, T* __restrict__ out, std::int64_t os,
                                                           std::int64_t E, std::int64_t F, int lpe, int transform) {
  // Groups of `lpe` lanes per edge (F = 64 float32: 16 lanes x float4, two edges per warp step;
  // v1 used a whole warp per edge and left lanes 16-31 idle: 15.1 ms on products-like).
  const int lane = threadIdx.x % 32, groups = 32 / lpe, group = lane / lpe, gl = lane % lpe;
  const std::int64_t step = std::int64_t(gridDim.x) * blockDim.x / 32 * groups;
  for (std::int64_t e = (blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x) / 32 * groups + group; e < E; e += step) {
    const std::int64_t s = std::int64_t(src[e]), d = std::int64_t(dst[e]);
    const T wt = w ? __ldg(w + e) : T(1);
    for (std::int64_t f = std::int64_t(gl) * VEC; f < F; f += std::int64_t(lpe) * VEC) {
      T v[VEC];
      load_vec<T, VEC>(x + s * xs + f, v);
      T* o = out + d * os + f;
      if constexpr (VEC == 4 && sizeof(T) == 4) {
        // sm_90's vector reduction (red.global.add.v4.f32): one atomic per 16 bytes.
        atomicAdd(reinterpret_cast<float4*>(o), make_float4(phi(v[0] * wt, transform), phi(v[1] * wt, transform),
                                                             phi(v[2] * wt, transform), phi(v[3] * wt, transform)));
      } else {
#pragma unroll
        for (int q = 0; q < VEC; ++q) atomicAdd(o + q, phi(v[q] * wt, transform));
      }
    }
  }
}

void zero_rows(const TensorView& out, cudaStream_t s) {
  const std::size_t item = out.itemsize();
  PIPELINK_CUDA_CHECK(cudaMemset2DAsync(out.data(), std::size_t(out.stride(0)) * item, 0, std::size_t(out.dim(1)) * item,
                                        std::size_t(out.dim(0)), s));
}

template <class T, class I>
void launch_atomic(const OpContext& ctx, bool vec4) {
  const TensorView &x = ctx.port("x"), &src = ctx.port("src"), &dst = ctx.port("dst"), &out = ctx.port("out");
  const cudaStream_t s = as_stream(ctx.stream);
  const std::int64_t E = ctx.dim("E"), F = ctx.dim("F");
  const T* w = ctx.has("w") ? ctx.port("w").data_as<const T>() : nullptr;
  const int tr = int(parse_transform(ctx.attr<std::string>("transform")));
  if (E == 0 || F == 0) return;
  if constexpr (sizeof(T) == 4) {
    if (vec4) {
      const int lpe = lanes_per_edge(F, 4);
      atomic_edges_kernel<T, I, 4><<<grid_for(E * lpe, 256), 256, 0, s>>>(src.data_as<const I>(), dst.data_as<const I>(),
                                                                          x.data_as<const T>(), x.stride(0), w,
                                                                          out.data_as<T>(), out.stride(0), E, F, lpe, tr);
      check_launch();
      return;
    }
  }
  const int lpe = lanes_per_edge(F, 1);
  atomic_edges_kernel<T, I, 1><<<grid_for(E * lpe, 256), 256, 0, s>>>(src.data_as<const I>(), dst.data_as<const I>(),
                                                                      x.data_as<const T>(), x.stride(0), w,
                                                                      out.data_as<T>(), out.stride(0), E, F, lpe, tr);
  check_launch();
}

void aggregate_lean(OpContext& ctx, bool allow_vec4) {
  const TensorView &x = ctx.port("x"), &src = ctx.port("src"), &dst = ctx.port("dst"), &out = ctx.port("out");
  const cudaStream_t s = as_stream(ctx.stream);
  PIPELINK_CUDA_CHECK(cudaSetDevice(x.device().index));
  validate_indices("aggregate", &src, &dst, ctx.dim("N"), s);
  if (!ctx.attr<bool>("accumulate") && out.numel() > 0) zero_rows(out, s);
  const bool f32 = x.dtype() == DType::f32;
  const bool vec4 = allow_vec4 && f32 && ctx.dim("F") % 4 == 0 && x.stride(0) % 4 == 0 && out.stride(0) % 4 == 0 &&
                    aligned16(x.data()) && aligned16(out.data());
  const bool i32 = src.dtype() == DType::i32;
  if (f32) i32 ? launch_atomic<float, std::int32_t>(ctx, vec4) : launch_atomic<float, std::int64_t>(ctx, vec4);
  else i32 ? launch_atomic<double, std::int32_t>(ctx, false) : launch_atomic<double, std::int64_t>(ctx, false);
}

// ---- three-op reference on CUDA --------------------------------------------------------------

template <class T, class I>
__global__ void gather_scale_kernel(const T* x, std::int64_t xs, const I* src, const T* w, T* m, std::int64_t ms,
                                    std::int64_t E, std::int64_t F) {
  const std::int64_t total = E * F;
  for (std::int64_t i = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; i < total;
       i += std::int64_t(gridDim.x) * blockDim.x) {
    const std::int64_t e = i / F, f = i % F;
    m[e * ms + f] = x[std::int64_t(src[e]) * xs + f] * (w ? w[e] : T(1));
  }
}

template <class T>
__global__ void map_kernel(const T* in, std::int64_t is, T* out, std::int64_t os, std::int64_t R, std::int64_t C,
                           int transform) {
  const std::int64_t total = R * C;
  for (std::int64_t i = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; i < total;
       i += std::int64_t(gridDim.x) * blockDim.x) {
    const std::int64_t r = i / C, c = i % C;
    out[r * os + c] = phi(in[r * is + c], transform);
  }
}

template <class T, class I>
__global__ void index_add_kernel(T* out, std::int64_t os, const I* dst, const T* v, std::int64_t vs, std::int64_t E,
                                 std::int64_t F) {
  const std::int64_t total = E * F;
  for (std::int64_t i = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; i < total;
       i += std::int64_t(gridDim.x) * blockDim.x) {
    const std::int64_t e = i / F, f = i % F;
    atomicAdd(out + std::int64_t(dst[e]) * os + f, v[e * vs + f]);
  }
}

template <class F32, class F64>
void by_dtype_index(DType t, DType idx, F32&& f32, F64&& f64) {
  if (t == DType::f32) idx == DType::i32 ? f32(float{}, std::int32_t{}) : f32(float{}, std::int64_t{});
  else idx == DType::i32 ? f64(double{}, std::int32_t{}) : f64(double{}, std::int64_t{});
}

void gather_scale_cuda(OpContext& ctx) {
  const TensorView &x = ctx.port("x"), &src = ctx.port("src"), &m = ctx.port("m");
  const cudaStream_t s = as_stream(ctx.stream);
  PIPELINK_CUDA_CHECK(cudaSetDevice(x.device().index));
  validate_indices("gather_scale", &src, nullptr, ctx.dim("N"), s);
  const std::int64_t E = ctx.dim("E"), F = ctx.dim("F");
  if (E * F == 0) return;
  auto go = [&](auto tv, auto iv) {
    using T = decltype(tv);
    using I = decltype(iv);
    const T* w = ctx.has("w") ? ctx.port("w").data_as<const T>() : nullptr;
    gather_scale_kernel<T, I><<<grid_for(E * F, 256), 256, 0, s>>>(x.data_as<const T>(), x.stride(0),
                                                                   src.data_as<const I>(), w, m.data_as<T>(),
                                                                   m.stride(0), E, F);
  };
  by_dtype_index(x.dtype(), src.dtype(), go, go);
  check_launch();
}

void map_cuda(OpContext& ctx) {
  const TensorView &in = ctx.port("in"), &out = ctx.port("out");
  const cudaStream_t s = as_stream(ctx.stream);
  PIPELINK_CUDA_CHECK(cudaSetDevice(in.device().index));
  const std::int64_t R = ctx.dim("R"), C = ctx.dim("C");
  if (R * C == 0) return;
  const int tr = int(parse_transform(ctx.attr<std::string>("transform"), "map"));
  if (in.dtype() == DType::f32)
    map_kernel<float><<<grid_for(R * C, 256), 256, 0, s>>>(in.data_as<const float>(), in.stride(0), out.data_as<float>(),
                                                          out.stride(0), R, C, tr);
  else
    map_kernel<double><<<grid_for(R * C, 256), 256, 0, s>>>(in.data_as<const double>(), in.stride(0),
                                                           out.data_as<double>(), out.stride(0), R, C, tr);
  check_launch();
}

void index_add_cuda(OpContext& ctx) {
  const TensorView &out = ctx.port("out"), &dst = ctx.port("dst"), &v = ctx.port("values");
  const cudaStream_t s = as_stream(ctx.stream);
  PIPELINK_CUDA_CHECK(cudaSetDevice(out.device().index));
  validate_indices("index_add", nullptr, &dst, ctx.dim("N"), s);
  const std::int64_t E = ctx.dim("E"), F = ctx.dim("F");
  if (E * F == 0) return;
  auto go = [&](auto tv, auto iv) {
    using T = decltype(tv);
    using I = decltype(iv);
    index_add_kernel<T, I><<<grid_for(E * F, 256), 256, 0, s>>>(out.data_as<T>(), out.stride(0), dst.data_as<const I>(),
                                                                v.data_as<const T>(), v.stride(0), E, F);
  };
  by_dtype_index(out.dtype(), dst.dtype(), go, go);
  check_launch();
}

Variant cuda_variant(const char* op, const char* name, int priority, bool deterministic, KernelFn fn, const char* doc) {
  return make_variant(op, name, DeviceKind::cuda, priority, deterministic, std::move(fn), doc);
}

const bool g_cuda_plan_builder = [] {
  pipelink::detail::set_plan_builder(DeviceKind::cuda, &build_plan);
  return true;
}();

}  // namespace
}  // namespace pipelink::cuda

namespace pipelink {

PIPELINK_REGISTER_VARIANT(aggregate_cuda_csr) {
  return cuda::cuda_variant("aggregate", "csr_warp_per_row", 10, true, cuda::aggregate_one_shot,
                            "one-shot: stable radix sort of (dst, edge id), a warp per destination row");
}
PIPELINK_REGISTER_VARIANT(aggregate_cuda_atomic_vec4) {
  Variant v = cuda::cuda_variant("aggregate", "atomic_vec4", 5, false,
                                 [](OpContext& c) { cuda::aggregate_lean(c, true); },
                                 "lean: no scratch, red.global.add.v4.f32 per 16 bytes (sm_90)");
  v.requires_.min_sm = 90;
  v.requires_.features = {"vector_atomics"};
  return v;
}
PIPELINK_REGISTER_VARIANT(aggregate_cuda_atomic_scalar) {
  return cuda::cuda_variant("aggregate", "atomic_scalar", 1, false, [](OpContext& c) { cuda::aggregate_lean(c, false); },
                            "lean: no scratch, one float atomic per element");
}
PIPELINK_REGISTER_VARIANT(gather_scale_cuda) {
  return cuda::cuda_variant("gather_scale", "row_copy", 10, true, cuda::gather_scale_cuda, "thread per element");
}
PIPELINK_REGISTER_VARIANT(map_cuda) {
  return cuda::cuda_variant("map", "elementwise", 10, true, cuda::map_cuda, "thread per element, tanhf (2 ulp)");
}
PIPELINK_REGISTER_VARIANT(index_add_cuda) {
  return cuda::cuda_variant("index_add", "atomic_scalar", 10, false, cuda::index_add_cuda,
                            "one float atomic per element, as torch's index_add_ on CUDA (not deterministic)");
}

}  // namespace pipelink
