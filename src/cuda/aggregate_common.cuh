// The CUDA aggregate's shared internals: what both of its translation units use.
//   src/cuda/aggregate.cu       index validation, plan builds, the w permutation, one-shot, lean,
//                               the three-op reference, the op registrations;
//   src/cuda/aggregate_walk.cu  the planned run's walk (the register, staged and segment kernels
//                               and their launches), handed a plan's fields as a WalkPlan.
// The walk is ~65% of the aggregate's SASS (perf-notes v52), so in a unit of its own it compiles
// beside the rest (and a mutant of either rebuilds only its own unit: perf-notes v53).
// Device code here is inline, in a named namespace: each unit compiles its own copy of what it
// uses (no relocatable device code), and nvcc warns of nothing unused.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "cuda/check.cuh"
#include "cuda/tanh_f32.cuh"
#include "pipelink/ops/aggregate.hpp"
#include "pipelink/tensor.hpp"

namespace pipelink::cuda::agg {

inline int grid_for(std::int64_t work, int block) {
  const std::int64_t g = (work + block - 1) / block;
  return int(g < 1 ? 1 : (g > 65535LL * 32 ? 65535LL * 32 : g));
}

inline void check_launch() { PIPELINK_CUDA_CHECK(cudaGetLastError()); }

inline bool aligned16(const void* p) { return (reinterpret_cast<std::uintptr_t>(p) & 15u) == 0; }

// Lanes per edge: enough to cover F with one vector each, a power of two, at most 32.
inline int lanes_per_edge(std::int64_t F, int vec) {
  const std::int64_t per_lane = (F + vec - 1) / vec;
  int lpe = 1;
  while (lpe < 32 && lpe < per_lane) lpe *= 2;
  return lpe;
}

// ---- elementwise phi -------------------------------------------------------------------------
using cuda_detail::tanh_f32;  // cuda/tanh_f32.cuh

// tanh (double) from the CUDA math library; float through tanh_f32. Never tanh.approx (PROTOCOL.md).
// exp(-|v|) cannot overflow: 1/(1+expf(-v)) gave 0 below v = -88.7, where the answer is a
// subnormal (5.5e-42 near -95; the CPU kernels' review, session 46). e/(1+e) for v < 0.
__device__ __forceinline__ float sigmoid_f32(float v) {
  const float e = expf(-fabsf(v));
  return (v < 0.f ? e : 1.f) / (1.f + e);
}

template <class T>
__device__ __forceinline__ T phi(T v, int transform) {
  switch (transform) {
    case 0: return v;
    case 1: return tanh(v);
    case 2:
      return v < T(0) ? T(0) : v;  // NaN stays NaN, as on the CPU
    default: {  // exp(-|v|) cannot overflow: 1/(1+exp(-v)) gave 0 where the answer is subnormal
      const T e = exp(-fabs(v));
      return (v < T(0) ? e : T(1)) / (T(1) + e);
    }
  }
}
__device__ __forceinline__ float phi(float v, int transform) {
  switch (transform) {
    case 0: return v;
    case 1: return tanh_f32(v);
    case 2:
      return v < 0.f ? 0.f : v;
    default: return sigmoid_f32(v);
  }
}

// ---- plan entries and where a run finds its weights ------------------------------------------

/// A plan entry: the source row and the edge id (for w), loaded together in 8 bytes. Narrow
/// plans (N, E < 2^31) hold two int32; wide plans pack (id << src_bits | src) into a uint64, so
/// they need bits(N) + bits(E) <= 64 (N = 2.4M leaves 42 bits for E) and keep 8 bytes per edge.
template <class P>
struct alignas(2 * sizeof(P)) EdgePair {
  P src, id;
};
template <class P>
using PlanPair = std::conditional_t<sizeof(P) == 4, EdgePair<std::int32_t>, std::uint64_t>;
__device__ __forceinline__ std::int64_t pair_src(EdgePair<std::int32_t> p, int) { return p.src; }
__device__ __forceinline__ std::int64_t pair_id(EdgePair<std::int32_t> p, int) { return p.id; }
__device__ __forceinline__ std::int64_t pair_src(std::uint64_t p, int src_bits) {
  return std::int64_t(p & ((std::uint64_t(1) << src_bits) - 1));
}
__device__ __forceinline__ std::int64_t pair_id(std::uint64_t p, int src_bits) { return std::int64_t(p >> src_bits); }

// Where a run finds an edge's weight (the run kernels' `wmode`):
//   kWById      w[edge id], through the pair's id (the planned run: w per call, in edge order);
//   kWPlanOrder w[k] at the plan position k (weights from AggregatePlan::permute_weights);
//   kWInPairs   the pair's id field holds w's float32 bits (one-shot plans: the build put w in
//               the sorted pairs in place of the ids, so the run reads no w of its own).
//   kWCompact   as kWPlanOrder, on a compact plan: `pairs` points to its int32 src array (the
//               ids are gone; PIPELINK_AGG_W_PERMUTE_COMPACT, see "w permutation" below).
//   kWCompact24 as kWCompact, the src column in 24 bits (N <= 2^24): `pairs` points to the low
//               16 bits of each entry (uint16 [E]); the high 8 lie before it, in reverse order
//               (entry k's at byte -1 - k), so that no kernel needs E to find them.
//   kWCompactLidx as kWCompact, the column's top 8 bits holding the low byte of the w
//               permutation's lidx (N <= 2^24: src is the low 24 bits; "packed lidx" below).
// The same weights in the same order, so the same bits in all of them.
enum : int { kWById = 0, kWPlanOrder = 1, kWInPairs = 2, kWCompact = 3, kWCompact24 = 4, kWCompactLidx = 5 };
__host__ __device__ __forceinline__ bool w_plan_order(int wmode) {
  return wmode == kWPlanOrder || wmode == kWCompact || wmode == kWCompact24 || wmode == kWCompactLidx;
}
// kWCompactLidx: src in the low 24 bits of the 32-bit column, lidx's low byte above it.
constexpr int kLidxColumnShift = 24;
constexpr std::uint32_t kLidxColumnSrcMask = (1u << kLidxColumnShift) - 1;
// The 24-bit src column (kWCompact24): a buffer of compact24_bytes(E), the high bytes (reversed)
// then, from compact24_low(E), the low halves. Entry k is two plain loads and a byte permute:
// session 19's first form (96-byte chunks of 32 entries, found by k / 32 * 96) ran the planned
// call 4.68 ms against 4.48 with 32-bit srcs (products-like, `bench --ab`, same rounds): the
// staged run issues ~55 instructions an edge and the chunk's index arithmetic added to them.
__host__ __device__ constexpr std::int64_t compact24_low(std::int64_t E) { return (E + 15) / 16 * 16; }
__host__ __device__ constexpr std::int64_t compact24_bytes(std::int64_t E) { return compact24_low(E) + 2 * E; }
// Entry k's two parts as loaded (src: the low half, id: the high byte), and the src they make:
// the staged walk holds the parts across its one-stage prefetch and joins them where it uses them
// (see entry() there).
__device__ __forceinline__ EdgePair<std::int32_t> compact24_parts(const void* col, std::int64_t k) {
  const auto* lo = static_cast<const std::uint16_t*>(col);
  const auto* hi_end = static_cast<const unsigned char*>(col) - 1;
  return EdgePair<std::int32_t>{std::int32_t(lo[k]), std::int32_t(hi_end[-k])};
}
__device__ __forceinline__ std::int32_t compact24_join(EdgePair<std::int32_t> parts) {
  return std::int32_t(__byte_perm(unsigned(parts.src), unsigned(parts.id), 0x3410));  // lo's bytes 0, 1, then hi's byte 0
}
__device__ __forceinline__ std::int32_t compact24_src(const void* col, std::int64_t k) {
  return compact24_join(compact24_parts(col, k));
}
// Plan entry k: the pair, or on a compact plan (narrow only) its src with a zero id.
template <class Pair>
__device__ __forceinline__ Pair load_pair(const Pair* pairs, std::int64_t k, int wmode) {
  if constexpr (std::is_same_v<Pair, EdgePair<std::int32_t>>) {
    if (wmode == kWCompact) return Pair{reinterpret_cast<const std::int32_t*>(pairs)[k], 0};
    if (wmode == kWCompact24) return Pair{compact24_src(pairs, k), 0};
    if (wmode == kWCompactLidx) return Pair{std::int32_t(reinterpret_cast<const std::uint32_t*>(pairs)[k] & kLidxColumnSrcMask), 0};
  }
  return pairs[k];
}
template <class T, class Pair>
__device__ __forceinline__ T edge_weight(const T* w, int wmode, std::int64_t k, Pair e, int src_bits) {
  // Plans with w in their pairs (one-shot) are narrow and float32 only (build_plan_for), so the
  // other instantiations never see kWInPairs.
  if constexpr (std::is_same_v<T, float> && std::is_same_v<Pair, EdgePair<std::int32_t>>) {
    if (wmode == kWInPairs) return __int_as_float(e.id);
  }
  return __ldg(w + (w_plan_order(wmode) ? k : pair_id(e, src_bits)));
}

// ---- vector loads ------------------------------------------------------------------------------

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

// ---- the planned run's walk (src/cuda/aggregate_walk.cu) ---------------------------------------

/// What the walk reads of a CudaPlan (aggregate.cu), as plain fields: row_ptr, first_row,
/// seg_first, seg_row and long_rows hold P (the plan's index type), order int32; `entries` is the
/// pairs, or a compact plan's src column. The walk checks the plan against w as before.
struct WalkPlan {
  std::int64_t num_nodes = 0, num_edges = 0, groups = 0, long_row = 0, seg_len = 0;
  std::int64_t num_segments = 0, num_long = 0;
  int src_bits = 0;
  bool wide = false, compact = false, compact24 = false, lidx_in_column = false, w_in_pairs = false;
  const void* row_ptr = nullptr;
  const void* first_row = nullptr;
  const void* entries = nullptr;
  const void* seg_first = nullptr;
  const void* seg_row = nullptr;
  const void* long_rows = nullptr;
  const void* order = nullptr;
};

/// The planned run on s: out's rows (accumulated or overwritten, opts) from x and w (nullptr: no
/// weights; `wplan`: w already in plan order). Instantiated for T = float, double and
/// P = int32_t, int64_t in aggregate_walk.cu.
template <class T, class P>
void walk_rows(const WalkPlan& plan, const TensorView& x, const TensorView* w, bool wplan, const TensorView& out,
               const AggregateOptions& opts, cudaStream_t s);

/// Zeroes out's rows on s (a 2-D memset where rows are evenly pitched).
void zero_rows(const TensorView& out, cudaStream_t s);

}  // namespace pipelink::cuda::agg
